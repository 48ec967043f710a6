"""Are two rulesets equivalent on a node? Every packet class, or one packet that differs.

The packet space is cut into classes exactly as the exhaustive checker does (``atoms``), only
over both rulesets' constants at once, read off their compiled predicates: destination
addresses by every destination constant (``-d``, ``iprange``, ipset members, ...), the node's
addresses, loopback and the pod networks; destination ports by every destination-port constant
of the rules that can see that destination; protocols by every protocol a rule tests; sources
by the source constants of both. Inside a class neither ruleset can tell two packets apart, so comparing one
representative per class compares all packets. Outcomes are compared as distributions over
(verdict, translated destination and source, masquerade, REJECT type): which rules fired does
not matter, what happens to the packet does.
"""

from __future__ import annotations

import ipaddress
from collections import defaultdict
from collections.abc import Iterable, Iterator
from fractions import Fraction

import attrs

from nat_verify.check.atoms import SourceSpace
from nat_verify.model.cluster import IPAddress, IPNetwork
from nat_verify.model.outcome import Outcome
from nat_verify.model.packet import Packet
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.predicate import PROTO_NAMES, ProtoIs, decide, walk
from nat_verify.netfilter.program import CompiledRule, Program
from nat_verify.netfilter.ruleset import Ruleset

PROTOS = ("tcp", "udp", "sctp")


@attrs.frozen
class Difference:
    packet: Packet
    a: tuple[Outcome, ...]
    b: tuple[Outcome, ...]

    def to_json(self) -> dict[str, object]:
        return {"packet": self.packet.to_json(), "a": [o.to_json() for o in self.a], "b": [o.to_json() for o in self.b]}


@attrs.frozen
class Equivalence:
    difference: Difference | None
    classes: int  # packet classes compared
    inconclusive: int  # classes where either side could not be decided


def _rules(p: Program) -> Iterator[CompiledRule]:
    for ch in p.chains.values():
        yield from ch.rules


def _signature(outcomes: tuple[Outcome, ...]) -> dict[tuple[object, ...], Fraction]:
    sig: dict[tuple[object, ...], Fraction] = defaultdict(Fraction)
    for o in outcomes:
        sig[(o.verdict, o.dst, o.dport, o.src, o.sport, o.masquerade, o.reject_with, o.reason if o.verdict == "inconclusive" else "")] += o.probability
    return dict(sig)


def _representatives(bounds: list[int], top: int) -> list[int]:
    edges = sorted({0, top, *[b for b in bounds if 0 <= b <= top]})
    return [lo if hi - lo <= 2 else lo + 1 for lo, hi in zip(edges, edges[1:], strict=False)]


def equivalent(a: Ruleset, b: Ruleset, ctx: NodeContext) -> Equivalence:
    """The first packet class on which ``a`` and ``b`` differ, or None when they never do."""
    fam = ctx.family
    ia, ib = Interpreter(a, ctx), Interpreter(b, ctx)
    sa, sb = SourceSpace(ia), SourceSpace(ib)
    rules = [*_rules(ia.program), *_rules(ib.program)]
    dst_nets: set[IPNetwork] = {*ctx.pod_cidrs, *ctx.local_pod_cidrs, ctx.loopback}
    dst_nets.update(ipaddress.ip_network(x) for x in ctx.addresses)
    protos = {"tcp"}
    for cr in rules:
        dst_nets.update(n for n in cr.address_constants(("dst", "orig_dst")) if n.version == fam)
        for p in cr.preds:
            protos.update(PROTO_NAMES[q.number] for q in walk(p) if isinstance(q, ProtoIs) and PROTO_NAMES.get(q.number) in PROTOS)
    by_rule = [(cr, d) for cr in rules if (d := list(cr.port_constants(("dport", "orig_dport"))))]
    bounds = []
    for n in dst_nets:
        if n.version == fam:
            bounds += [int(n.network_address), int(n.broadcast_address) + 1]
    top = 1 << (32 if fam == 4 else 128)
    to_ip = ipaddress.IPv4Address if fam == 4 else ipaddress.IPv6Address
    classes = inconclusive = 0
    for rep in _representatives(bounds, top):
        dst: IPAddress = to_ip(rep)
        if dst.is_multicast or dst.is_unspecified or (fam == 4 and rep >> 24 == 0):
            continue
        ports: list[int] = []
        for cr, dports in by_rule:
            if all(decide(p, {"dst": dst}) is not False for p in cr.preds):
                ports += dports
        for dport in _representatives(ports, 65536):
            if dport == 0:
                continue
            for proto in sorted(protos):
                extra = sb.constants(dst, dport, proto)[0] | sa.constants(dst, dport, proto)[0]
                for src, sport, origin in sa.classes(ctx, dst, dport, proto, extra):
                    pkt = Packet(src=src, dst=dst, dport=dport, sport=sport, proto=proto, origin=origin)  # type: ignore[arg-type]
                    ta, tb = ia.trace(pkt), ib.trace(pkt)
                    classes += 1
                    if ta.inconclusive or tb.inconclusive:
                        inconclusive += 1
                    if _signature(ta.outcomes) != _signature(tb.outcomes):
                        return Equivalence(Difference(pkt, ta.outcomes, tb.outcomes), classes, inconclusive)
    return Equivalence(None, classes, inconclusive)


def first_difference(
    ia: Interpreter,
    ib: Interpreter,
    ctx: NodeContext,
    targets: Iterable[tuple[IPAddress, int, str]],
    extra: Iterable[IPNetwork] = (),
) -> Equivalence:
    """``equivalent`` restricted to the packets sent to ``targets`` (address, port, protocol).

    Every source class of either ruleset is tried for each target (``atoms``), so when no
    packet to the targets differs, none does; ``extra`` adds source constants the caller knows
    of (a Service's endpoints, loadBalancerSourceRanges). A class that either side cannot
    decide is counted in ``inconclusive`` and is not a difference: only two definite outcomes
    that differ are (``inconclusive`` counts the undecided classes where the two differ).
    """
    sa, sb = SourceSpace(ia), SourceSpace(ib)
    more = list(extra)
    classes = inconclusive = 0
    for dst, dport, proto in targets:
        consts = sb.constants(dst, dport, proto)[0] | sa.constants(dst, dport, proto)[0]
        for src, sport, origin in sa.classes(ctx, dst, dport, proto, [*consts, *more]):
            pkt = Packet(src=src, dst=dst, dport=dport, sport=sport, proto=proto, origin=origin)  # type: ignore[arg-type]
            ta, tb = ia.trace(pkt), ib.trace(pkt)
            classes += 1
            if ta.inconclusive or tb.inconclusive:
                inconclusive += _signature(ta.outcomes) != _signature(tb.outcomes)
            elif _signature(ta.outcomes) != _signature(tb.outcomes):
                return Equivalence(Difference(pkt, ta.outcomes, tb.outcomes), classes, inconclusive)
    return Equivalence(None, classes, inconclusive)
