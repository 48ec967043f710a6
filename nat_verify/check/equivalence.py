"""Are two rulesets equivalent on a node? Every packet class, or one packet that differs.

The packet space is cut into classes exactly as the exhaustive checker does (``atoms``), only
over both rulesets' constants at once: destination addresses by their signature over every
``-d`` CIDR, the node's addresses, routes, loopback and the pod networks, and destination ports
by the ``--dport`` constants of the rules a packet to that address can reach (``destspace``);
protocols by every ``-p``; sources by the source constants of both. Inside a class neither ruleset can tell two packets apart, so comparing one
representative per class compares all packets. Outcomes are compared as distributions over
(verdict, translated destination and source, masquerade, REJECT type): which rules fired does
not matter, what happens to the packet does.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from fractions import Fraction

import attrs

from nat_verify.check.atoms import SourceSpace
from nat_verify.check.destspace import destination_classes
from nat_verify.model.cluster import IPAddress, IPNetwork
from nat_verify.model.outcome import Outcome
from nat_verify.model.packet import Packet
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.ruleset import Rule, Ruleset

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


def _rules(rs: Ruleset) -> Iterator[Rule]:
    for t in rs.tables:
        for c in t.chains:
            yield from c.rules


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
    ia, ib = Interpreter(a, ctx), Interpreter(b, ctx)
    sa, sb = SourceSpace(ia), SourceSpace(ib)
    classes = inconclusive = 0
    # destinations by signature, ports only from rules that can see the destination (destspace)
    for dst, dport, proto in destination_classes([a, b], ctx):
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
