"""Are two rulesets equivalent on a node for every packet? Decided with Z3, slice by slice.

Design
------
For each slice of packets (``whole.sliced_walks``: destinations, protocol, origin; every
source address and port, and every destination port), both rulesets are walked symbolically.
Two packets are told apart by neither ruleset when they take the same paths in both *and* the
outcomes of those paths coincide the same way for both (an outcome copies fields from the
packet, so whether the outcome of a path of ``a`` equals one of ``b``, or one of ``a``'s own
other outcomes, may depend on the packet: a DNAT to ``X`` against a packet left alone equals
it exactly when the destination was ``X``). So the sets handed to ``classes.classes`` are
every path of both walks plus, for every two outcomes that may or may not be equal, the set
of packets for which they are. One packet per class is then traced through both rulesets by
the interpreter and their distributions compared as ``check.equivalence`` compares them
(verdict, translated destination and source, masquerade, REJECT type); inside a class the
comparison cannot change, so the first class that differs is a difference for real (replayed
on both dumps), and none differing is a proof over all packets. Every predicted outcome is
checked against the interpreter's trace, as in the engine: a mismatch is a nat-verify bug.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs
import z3

from nat_verify.check.equivalence import Difference, _signature
from nat_verify.model.packet import Packet
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.ruleset import Ruleset
from nat_verify.symbolic.classes import Undecided, classes
from nat_verify.symbolic.paths import outcomes, same_outcomes
from nat_verify.symbolic.state import UNENCODED, Constrained, SymState, conjoin, equal
from nat_verify.symbolic.walk import Path, Walker
from nat_verify.symbolic.whole import Walked, sliced_walks

Progress = Callable[[str], None]


@attrs.frozen
class SymbolicEquivalence:
    difference: Difference | None
    classes: int  # packet classes compared
    inconclusive: int  # classes (or slices) that could not be decided
    reasons: tuple[str, ...] = ()  # why (the first few)
    bugs: tuple[str, ...] = ()  # predicted outcomes the interpreter did not reproduce


def _key(st: SymState, verdict: str) -> tuple[object, ...]:
    # the concrete parts of an outcome (check.equivalence._signature's fields)
    return (verdict, st.masq, st.reject_with, st.reason if verdict == "INCONCLUSIVE" else "")


def _template(st: SymState, verdict: str) -> tuple[object, ...]:
    # an outcome as a value: concrete fields, packet variables, or a term's id
    def v(x: object) -> object:
        return ("term", x.get_id()) if isinstance(x, z3.ExprRef) else x

    return (_key(st, verdict), v(st.dst), v(st.dport), v(st.src), v(st.sport))


def coincidences(paths: list[Path]) -> list[Constrained]:
    """For every two outcomes that may be equal or not depending on the packet, the packets
    for which they are (outcomes written alike are compared once)."""
    distinct: dict[tuple[object, ...], SymState] = {}
    for st, verdict in paths:
        distinct.setdefault(_template(st, verdict), st)
    out: list[Constrained] = []
    items = list(distinct.items())
    for i, (ka, a) in enumerate(items):
        for kb, b in items[i + 1 :]:
            if ka[0] != kb[0]:
                continue
            tests = [equal(a, getattr(a, f), getattr(b, f), "addr" if f in ("src", "dst") else "port")
                     for f in ("dst", "dport", "src", "sport")]  # fmt: skip
            if any(t is False for t in tests):
                continue
            c = conjoin(Constrained(a.space, {}), tests)
            if c is not None:
                out.append(c)
    return out


def equivalent(
    a: Ruleset, b: Ruleset, ctx: NodeContext, *, progress: Progress | None = None, solve: bool = False,
) -> SymbolicEquivalence:  # fmt: skip
    """The first packet on which ``a`` and ``b`` differ, or None when no packet does."""
    # each class is traced once: no chain summaries
    ia, ib = Interpreter(a, ctx, memo=False), Interpreter(b, ctx, memo=False)
    wa, wb = Walker(ia.program, ia.hooks), Walker(ib.program, ib.hooks)
    wb.space = wa.space  # one set of variables for both walks
    n = undecided = 0
    reasons: list[str] = []
    bugs: list[str] = []
    for w in sliced_walks([wa, wb]):
        if w.undecided:
            undecided += 1
            reasons.append(w.undecided)
            continue
        if progress:
            progress(f"{w.origin}")
        found, diff = _compare(w, ia, ib, solve, bugs)
        n += found[0]
        undecided += found[1]
        reasons += found[2]
        if diff is not None:
            return SymbolicEquivalence(diff, n, undecided, tuple(reasons[:5]), tuple(bugs))
    return SymbolicEquivalence(None, n, undecided, tuple(reasons[:5]), tuple(bugs))


def _compare(
    w: Walked, ia: Interpreter, ib: Interpreter, solve: bool, bugs: list[str]
) -> tuple[tuple[int, int, list[str]], Difference | None]:
    pa, pb = w.paths
    both = pa + pb
    sets: list[Constrained] = [st for st, _ in both] + coincidences(both)
    space = pa[0][0].space if pa else pb[0][0].space
    n = undecided = 0
    why: list[str] = []
    try:
        for f in classes(space, sets, w.region, solve=solve):
            n += 1
            src = space.concrete("src", f.values["src"])
            dst = space.concrete("dst", f.values["dst"])
            proto = space.concrete("proto", f.values["proto"])
            pkt = Packet(src=src, dst=dst, dport=f.values["dport"], sport=f.values["sport"], proto=proto, origin=w.origin)  # type: ignore[arg-type]
            ta, tb = ia.trace(pkt), ib.trace(pkt)
            for side, paths, tr in (("a", pa, ta), ("b", pb, tb)):
                predicted = outcomes(pkt, paths, f.values)
                if any(o.reason.startswith(UNENCODED) for o in predicted):
                    undecided += 1
                    why.append(next(o.reason for o in predicted if o.reason.startswith(UNENCODED)))
                elif not same_outcomes(predicted, tr.outcomes):
                    bugs.append(f"dump {side}: the symbolic paths of {pkt} predict other outcomes than the interpreter's")
            if ta.inconclusive or tb.inconclusive:
                undecided += 1
            if _signature(ta.outcomes) != _signature(tb.outcomes):
                return (n, undecided, why), Difference(pkt, ta.outcomes, tb.outcomes)
    except Undecided as e:
        undecided += 1
        why.append(str(e))
    return (n, undecided, why), None
