"""Intent vs rules for one packet: which invariant each difference breaks.

The intent says what Kubernetes allows (``Expectation``); the interpreter says what the rules do
(a ``Trace``: outcomes with exact probabilities). Every difference is attributed to exactly one
invariant, the most specific one that names it:

* the packet should be rejected (no usable endpoint) but is not: NV003;
* it should be dropped: by loadBalancerSourceRanges NV012, by internalTrafficPolicy=Local NV006,
  by externalTrafficPolicy=Local NV005;
* it should reach an endpoint but does not (dropped, rejected, left un-NATed): NV006 for an
  iTP=Local ClusterIP, NV005 for an eTP=Local external address, else NV001 (ClusterIP) or NV002;
* it reaches an endpoint it must not: a terminating one while ready ones exist NV013; one on
  another node under a Local policy NV006/NV005; anything else (not ready, another Service's pod,
  a wrong port) NV001/NV002;
* the allowed endpoints are all reached but not each with 1/n (beyond the kernel's 2^-31
  quantisation): NV007;
* masquerade differs: hairpin NV008, external address NV004 (Cluster) / NV005 (Local), ClusterIP
  NV009; and the reply cannot come back through this node: NV010.
"""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction

import attrs

from nat_verify.intent import Destination, Expectation
from nat_verify.intent.endpoints import EndpointInfo
from nat_verify.model.outcome import Outcome, Trace
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.interpreter import returns_through_node
from nat_verify.netfilter.saveform import P31


@attrs.frozen
class Violation:
    invariant: str
    message: str
    expected: str
    actual: str
    outcome: Outcome | None = None
    severity: str = "error"


def describe(o: Outcome) -> str:
    if o.verdict == "inconclusive":
        return f"inconclusive ({o.reason})"
    head = {"reject": f"REJECT ({o.reject_with})", "drop": "DROP"}.get(o.verdict, "")
    if not head:
        head = f"DNAT {o.destination}" if o.dnat else f"{o.verdict} un-NATed to {o.destination}"
        head += ", masqueraded" if o.masquerade else ", client IP kept"
    p = "" if o.probability == 1 else f" (p={o.probability})"
    return head + p


def describe_expectation(exp: Expectation) -> str:
    if exp.kind == "dnat":
        eps = ", ".join(f"{ip}:{port}" if ":" not in ip else f"[{ip}]:{port}" for ip, port in sorted(exp.endpoints))
        m = {True: "masqueraded", False: "client IP kept", None: "masquerade either way"}[exp.masquerade]
        return f"DNAT to one of {{{eps}}} (each 1/{len(exp.endpoints)}), {m}"
    return {"reject": "REJECT (icmp port unreachable)", "drop": "DROP", "unmanaged": "no promise"}[exp.kind]


def _no_endpoint_invariant(dest: Destination, exp: Expectation) -> str:
    if "NV006" in exp.invariants:
        return "NV006"
    if dest.external and "NV005" in exp.invariants:
        return "NV005"
    return "NV002" if dest.external else "NV001"


def compare(
    dest: Destination,
    src: str,
    origin: str,
    exp: Expectation,
    trace: Trace,
    endpoints: tuple[EndpointInfo, ...],
    ctx: NodeContext,
) -> list[Violation]:
    """Every way the trace breaks the expectation (empty when it keeps it)."""
    out: list[Violation] = []
    want = describe_expectation(exp)
    outcomes = [o for o in trace.outcomes if o.verdict != "inconclusive"]
    if exp.kind == "unmanaged":
        return out
    if exp.kind in ("reject", "drop"):
        inv = "NV003" if exp.kind == "reject" else next(
            (i for i in ("NV012", "NV006", "NV005") if i in exp.invariants), "NV003"
        )
        for o in outcomes:
            if o.verdict != exp.kind:
                why = "has no usable endpoint" if exp.kind == "reject" else "must be dropped"
                out.append(Violation(inv, f"{dest} {why}, but the packet is {describe(o)}", want, describe(o), o))
                break
        return out

    # kind == "dnat"
    by_key = {(e.ip, e.port): e for e in endpoints}
    shares: dict[tuple[str, int], Fraction] = defaultdict(Fraction)
    bad = False
    for o in outcomes:
        if not o.dnat or o.verdict not in ("forward", "accept"):
            inv = _no_endpoint_invariant(dest, exp)
            out.append(Violation(inv, f"{dest} should reach an endpoint, but the packet is {describe(o)}", want, describe(o), o))
            bad = True
            continue
        key = (str(o.dst), o.dport)
        if key not in exp.endpoints:
            info = by_key.get(key)
            if info is not None and info.terminating and info.serving:
                inv = "NV013"
                why = "a terminating endpoint while ready endpoints exist"
            elif info is not None and info.ready and not info.local and "NV006" in exp.invariants:
                inv, why = "NV006", "an endpoint on another node (internalTrafficPolicy=Local)"
            elif info is not None and info.ready and not info.local and dest.external and "NV005" in exp.invariants and origin == "external":
                inv, why = "NV005", "an endpoint on another node (externalTrafficPolicy=Local)"
            elif info is not None and not info.serving:
                inv, why = ("NV002" if dest.external else "NV001"), "an endpoint that is not ready"
            else:
                inv, why = ("NV002" if dest.external else "NV001"), "an address that is no usable endpoint of this Service port"
            out.append(Violation(inv, f"{dest} is DNATed to {key[0]}:{key[1]}, {why}", want, describe(o), o))
            bad = True
            continue
        shares[key] += o.probability
        need = exp.masquerade_required(key)
        hairpin = key[0] == src
        if need is not None and o.masquerade != need:
            if hairpin:
                inv = "NV008"
            elif dest.external:
                inv = "NV005" if "NV005" in exp.invariants else "NV004"
            else:
                inv = "NV009"
            word = "must be masqueraded" if need else "must keep the client IP"
            out.append(Violation(inv, f"{dest} from {origin} {src} to endpoint {key[0]} {word}, but is {describe(o)}", want, describe(o), o))
            continue
        if not returns_through_node(trace.packet, o, ctx):
            warn = any("NV010" in w for w in exp.warnings)
            out.append(
                Violation(
                    "NV010",
                    f"{dest}: the reply from {key[0]} to off-node client {src} bypasses this node's conntrack "
                    "(DNAT to another node without masquerade)",
                    "masqueraded, or an endpoint on this node",
                    describe(o),
                    o,
                    "warning" if warn else "error",
                )
            )
    if not bad and outcomes and len(outcomes) == len(trace.outcomes):
        n = len(exp.endpoints)
        tol = Fraction(n, P31)  # each cascade rule rounds p to a multiple of 2^-31
        missing = [k for k in exp.endpoints if k not in shares]
        skew = [(k, p) for k, p in shares.items() if abs(p - exp.share) > tol]
        if missing or skew:
            parts = [f"{k[0]}:{k[1]} never chosen" for k in sorted(missing)]
            parts += [f"{k[0]}:{k[1]} gets {float(p):.6f}" for k, p in sorted(skew)]
            actual = "; ".join(f"{k[0]}:{k[1]} p={v}" for k, v in sorted(shares.items()))
            out.append(Violation("NV007", f"{dest}: endpoints are not chosen uniformly (1/{n} each): " + ", ".join(parts), want, actual or "none"))
    return out
