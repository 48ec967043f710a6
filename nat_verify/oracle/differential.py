"""Model vs kernel: is what the kernel did one of the outcomes the model allows?

One kernel probe shows one draw of the rules' randomness, so a probe *agrees* with the model
when it matches any one of the model's outcomes (``compare``); whether the draws follow the
model's probabilities is a separate, statistical question (``fits_distribution``, a
chi-square goodness-of-fit test with the model's exact probabilities as the expectation).

A match means: the same verdict; for accept/forward, the same destination after DNAT; the
same answer to "was the source rewritten?" and, where the model's context mirrors the
sandbox (``topology_for``), the same new source address (MASQUERADE's port is random under
``--random-fully`` and never compared); for reject, the same ICMP type (or TCP reset).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Literal

import attrs

from nat_verify.model.outcome import Outcome, Trace
from nat_verify.model.packet import Packet
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.interpreter import Interpreter, RecentState
from nat_verify.netfilter.ruleset import Ruleset
from nat_verify.oracle.bridge import load_ruleset, mirror_packet, probe_packet, topology_for
from nat_verify.oracle.netns import TopologySpec
from nat_verify.oracle.oracle import KernelOracle, KernelResult
from nat_verify.oracle.probe import ProbeError

__all__ = [
    "Disagreement",
    "OracleSession",
    "chi2_sf",
    "compare",
    "fits_distribution",
    "run_oracle",
]

# iptables accepts aliases; iptables-save prints the first spelling.
_REJECT_ALIASES = {
    "tcp-rst": "tcp-reset",
    "icmp-net-unreach": "icmp-net-unreachable",
    "icmp-host-unreach": "icmp-host-unreachable",
    "icmp-port-unreach": "icmp-port-unreachable",
    "icmp-proto-unreach": "icmp-proto-unreachable",
}


def _reject_name(text: str) -> str:
    return _REJECT_ALIASES.get(text, text) or "icmp-port-unreachable"


def _describe_kernel(packet: Packet, k: KernelResult) -> str:
    if k.verdict in ("accept", "forward"):
        dst = (
            f"{k.dnat[0]}:{k.dnat[1]}"
            if k.dnat
            else f"{packet.dst}:{packet.dport} (not translated)"
        )
        src = f", source rewritten to {k.snat_ip}" if k.snat_ip else ", source kept"
        return f"{k.verdict} to {dst}{src}"
    if k.verdict == "reject":
        return f"reject with {k.reject_with}"
    if k.verdict == "lost":
        return "never reached the node (local to the sending namespace)"
    return k.verdict


def _describe_model(packet: Packet, o: Outcome) -> str:
    if o.verdict in ("accept", "forward"):
        src = f", source rewritten to {o.src}" if o.src != packet.src else ", source kept"
        return f"{o.probability} {o.verdict} to {o.destination}{src}"
    if o.verdict == "reject":
        return f"{o.probability} reject with {_reject_name(o.reject_with)}"
    if o.verdict == "inconclusive":
        return f"{o.probability} inconclusive ({o.reason})"
    return f"{o.probability} {o.verdict}"


def _matches(packet: Packet, o: Outcome, k: KernelResult, exact_source: bool) -> bool:
    if k.verdict == "lost":
        # e.g. a pod's packet to 127.0.0.1: the model accepts it untouched where it was sent
        return o.verdict == "accept" and not o.dnat and o.dst == packet.dst
    if o.verdict != k.verdict:
        return False
    if k.verdict == "reject":
        return _reject_name(o.reject_with) == _reject_name(k.reject_with)
    if k.verdict == "drop":
        return True
    # accept / forward: where it went, and whether (and to what) the source was rewritten
    kdst, kport = k.dnat if k.dnat is not None else (str(packet.dst), packet.dport)
    if (str(o.dst), o.dport) != (kdst, kport):
        return False
    # A rewrite to the packet's own address is invisible in conntrack's tuples: compare the
    # visible change only.
    model_rewrote = o.src != packet.src
    if model_rewrote != (k.snat_ip is not None):
        return False
    return not (exact_source and model_rewrote and str(o.src) != k.snat_ip)


def compare(model: Trace, kernel: KernelResult, *, exact_source: bool = True) -> str | None:
    """None when the kernel's outcome is one the model allows, else what differs.

    ``exact_source``: compare the new source address too (only meaningful when the model ran
    with the context ``topology_for`` returned; otherwise only "rewritten or not" is compared).
    An inconclusive model outcome allows nothing: the model made no claim to agree with.
    """
    packet = model.packet
    if any(_matches(packet, o, kernel, exact_source) for o in model.outcomes):
        return None
    allowed = "; ".join(_describe_model(packet, o) for o in model.outcomes) or "nothing"
    return f"{packet}: kernel: {_describe_kernel(packet, kernel)}; model allows: {allowed}"


@attrs.frozen
class Disagreement:
    """One packet on which the kernel did something the model does not allow.

    ``kind``: ``disagree`` (the kernel's outcome is not among the model's), ``inconclusive``
    (the model could not decide, so nothing could be compared) or ``unprobed`` (the oracle
    cannot send this packet; ``kernel`` is None).
    """

    packet: Packet
    model: tuple[Outcome, ...]
    kernel: KernelResult | None
    message: str
    kind: Literal["disagree", "inconclusive", "unprobed"] = "disagree"

    def to_json(self) -> dict[str, object]:
        k = self.kernel
        return {
            "kind": self.kind,
            "packet": self.packet.to_json(),
            "model": [o.to_json() for o in self.model],
            "kernel": None
            if k is None
            else {
                "verdict": k.verdict,
                "destination": f"{k.dnat[0]}:{k.dnat[1]}" if k.dnat else f"{k.dst}:{k.dport}",
                "source": k.snat_ip or k.src,
                "masquerade": k.snat_ip is not None,
                "reject_with": k.reject_with,
            },
            "message": self.message,
        }


class OracleSession:
    """One ruleset loaded into one sandbox, next to the model of the same sandbox.

    Build with ``OracleSession.open(ruleset, ctx, packets)`` inside a ``with`` block; probe
    as many packets as needed (their pod sources must be among the ``packets`` given at
    open, which decide the sandbox's pods).
    """

    def __init__(
        self, ruleset: Ruleset, spec: TopologySpec, ctx: NodeContext, *, backend: str = "nft"
    ) -> None:
        self.ruleset = ruleset
        self.spec = spec
        self.ctx = ctx  # the mirrored context (topology_for's second value)
        self.interpreter = Interpreter(ruleset, ctx)
        self.oracle = KernelOracle(spec, backend=backend)

    @classmethod
    def open(
        cls,
        ruleset: Ruleset,
        ctx: NodeContext,
        packets: Iterable[Packet] = (),
        *,
        backend: str = "nft",
    ) -> OracleSession:
        spec, mirrored = topology_for(ruleset, ctx, packets=packets)
        return cls(ruleset, spec, mirrored, backend=backend)

    def __enter__(self) -> OracleSession:
        self.oracle.__enter__()
        try:
            load_ruleset(self.oracle, self.ruleset)
        except BaseException:
            self.oracle.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.oracle.close()

    def model(self, packet: Packet, recent: RecentState | None = None) -> Trace:
        """The model's distribution for ``packet`` as it arrives in the sandbox."""
        tr = self.interpreter.trace(mirror_packet(packet, self.spec), recent)
        return Trace(packet, tr.outcomes)

    def kernel(self, packet: Packet, *, reset: bool = True) -> KernelResult:
        """One kernel probe (from a fresh source port); ``reset`` first forgets conntrack
        entries and affinity state, so that it is a first connection."""
        if reset:
            self.oracle.reset()
        return probe_packet(self.oracle, packet)

    def check(self, packet: Packet, probes: int = 1) -> list[Disagreement]:
        """Probe ``packet`` ``probes`` times (each a first connection) against the model."""
        tr = self.model(packet)
        if tr.inconclusive:
            why = "; ".join(o.reason for o in tr.outcomes if o.verdict == "inconclusive")
            return [
                Disagreement(
                    packet,
                    tr.outcomes,
                    None,
                    f"{packet}: model inconclusive: {why}",
                    "inconclusive",
                )
            ]
        out: list[Disagreement] = []
        for _ in range(probes):
            try:
                k = self.kernel(packet)
            except ProbeError as e:
                return [
                    Disagreement(
                        packet, tr.outcomes, None, f"{packet}: not probed: {e}", "unprobed"
                    )
                ]
            msg = compare(tr, k)
            if msg is not None:
                out.append(Disagreement(packet, tr.outcomes, k, msg))
        return out

    def sample(self, packet: Packet, n: int) -> Counter[tuple[str, int]]:
        """Where ``n`` first connections of ``packet`` went: (ip, port) after DNAT -> count
        (the packet's own destination when not translated)."""
        counts: Counter[tuple[str, int]] = Counter()
        for _ in range(n):
            k = self.kernel(packet)
            counts[k.dnat if k.dnat is not None else (str(packet.dst), packet.dport)] += 1
        return counts


def run_oracle(
    ruleset: Ruleset,
    ctx: NodeContext,
    packets: Iterable[Packet],
    *,
    probes: int = 1,
    backend: str = "nft",
) -> list[Disagreement]:
    """Every disagreement between the model and the kernel over ``packets``, each probed
    ``probes`` times as a first connection (``nat-verify oracle``). Empty: they agree."""
    pkts = list(packets)
    out: list[Disagreement] = []
    with OracleSession.open(ruleset, ctx, pkts, backend=backend) as s:
        for p in pkts:
            out.extend(s.check(p, probes))
    return out


# -- statistics -------------------------------------------------------------------------------


def _gamma_q(a: float, x: float) -> float:
    """The regularized upper incomplete gamma function Q(a, x) = Gamma(a, x) / Gamma(a).

    Series for P = 1 - Q when x < a + 1 (it converges fast there), else the continued
    fraction for Q evaluated with the modified Lentz method.
    """
    if x <= 0:
        return 1.0
    log_front = -x + a * math.log(x) - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        n = a
        for _ in range(10000):
            n += 1
            term *= x / n
            total += term
            if abs(term) < abs(total) * 1e-16:
                break
        return max(0.0, 1.0 - total * math.exp(log_front))
    tiny = 1e-300
    b = x + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    for i in range(1, 10000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-16:
            break
    return min(1.0, math.exp(log_front) * h)


def chi2_sf(x: float, df: int) -> float:
    """P(X >= x) for a chi-square variable with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, received {df}")
    if math.isinf(x):
        return 0.0
    return _gamma_q(df / 2, x / 2)


def fits_distribution(
    model_outcomes: Sequence[Outcome],
    counts: Mapping[tuple[str, int], int],
    alpha: float = 0.001,
) -> tuple[bool, float]:
    """Do the kernel's destination counts fit the model's exact probabilities?

    ``counts``: (ip, port) after DNAT -> probes (``OracleSession.sample``). The model's
    outcomes are grouped by destination the same way. Returns (p-value >= alpha, the
    chi-square statistic); a destination the model gives probability 0 makes the statistic
    infinite. With a single destination there is nothing random: it fits iff every probe
    went there.
    """
    probs: dict[tuple[str, int], Fraction] = {}
    for o in model_outcomes:
        key = (str(o.dst), o.dport)
        probs[key] = probs.get(key, Fraction(0)) + o.probability
    n = sum(counts.values())
    if n == 0:
        raise ValueError("no probes to test")
    if any(c and not probs.get(k) for k, c in counts.items()):
        return False, math.inf
    cells = [k for k, p in probs.items() if p > 0]
    stat = 0.0
    for k in cells:
        expected = float(probs[k]) * n
        stat += (counts.get(k, 0) - expected) ** 2 / expected
    if len(cells) < 2:
        return stat == 0.0, stat
    return chi2_sf(stat, len(cells) - 1) >= alpha, stat
