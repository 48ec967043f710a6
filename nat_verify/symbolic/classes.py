"""Semantic packet classes: Z3 finds one packet per set of paths the packets take.

For a set of packets (a *region*: per packet variable, an interval set) and the paths of a
symbolic walk, every packet takes some subset of the paths (their constraints hold for it):
that subset decides its outcome distribution, the rules that fired included. Two packets of
the region with the same subset get the same outcomes, up to the fields each path copies from
the packet itself. ``classes`` asks Z3 for a packet of the region, reads which paths it
takes, forbids that subset and asks again, until the solver answers that no packet of the
region takes a subset not yet seen (unsat): the packets found then stand for every packet of
the region, which is what makes a verdict on them a proof.

A path is a boolean ``b_i`` defined equal to its constraint, so the blocking clauses are over
a handful of booleans however large the constraints are, and the solver keeps what it learnt
from one query to the next (one solver per region, queries under assumptions).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import attrs
import z3

from nat_verify.symbolic import domain
from nat_verify.symbolic.domain import Span
from nat_verify.symbolic.state import Constrained, Space

TIMEOUT_MS = 20_000


class Undecided(Exception):
    """The solver gave no answer (timeout, resource limit): the region stays inconclusive."""


@attrs.frozen
class Found:
    """One packet of a class: the variables' values and the sets it lies in."""

    values: Mapping[str, int]
    taken: tuple[int, ...]


def classes(
    space: Space, sets: Sequence[Constrained], region: Mapping[str, Span], prefer: Mapping[str, int] | None = None,
    *, limit: int = 10_000, timeout_ms: int = TIMEOUT_MS, solve: bool = False,
) -> Iterator[Found]:  # fmt: skip
    """One packet per subset of ``sets`` (the paths' states, or any packet sets) that packets of
    ``region`` lie in (see the module).
    ``prefer``: values to try first (a readable counterexample). Raises ``Undecided``.

    A region that every path either covers or misses by its interval sets alone is one class
    (exact set inclusion, no query); ``solve`` asks the solver all the same (tests)."""
    live = [i for i, c in enumerate(sets) if _meets(c.doms, region)]
    # a set that covers the region is taken by all its packets: only the others need a flag
    always = [] if solve else [i for i in live if not sets[i].extras and _covers(sets[i].doms, region)]
    partial = [i for i in live if i not in set(always)]
    if not partial:
        values = {v: domain.pick(region[v], [x]) if v in region else x for v, x in (prefer or {}).items()}
        values.update({v: domain.pick(span) for v, span in region.items() if v not in values})
        yield Found(values, tuple(always))
        return
    vs = space.vars
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    for var, span in region.items():
        s.add(space.member(var, span))
    # one flag per distinct set (the branches of a random choice share theirs, and so do two
    # walks of rulesets that agree)
    by_key: dict[tuple[object, ...], list[int]] = {}
    for i in partial:
        by_key.setdefault(_key(sets[i]), []).append(i)
    groups = list(by_key.values())
    flags = [z3.Bool(f"set_{g[0]}") for g in groups]
    for b, g in zip(flags, groups, strict=True):
        s.add(b == _within(space, sets[g[0]], region))
    assumptions = [vs[v] == x for v, x in (prefer or {}).items() if v not in region or domain.contains(region[v], x)]
    for _ in range(limit):
        r = s.check(*assumptions)
        if r == z3.unsat and assumptions:
            assumptions = []  # the preferred values are not in any new class
            continue
        if r == z3.unsat:
            return
        if r != z3.sat:
            raise Undecided(f"z3: {s.reason_unknown()}")
        assumptions = []
        m = s.model()
        values = {v: m.eval(t, model_completion=True).as_long() for v, t in vs.items()}
        inside = [z3.is_true(m.eval(b, model_completion=True)) for b in flags]
        taken = [*always, *(i for g, x in zip(groups, inside, strict=True) if x for i in g)]
        yield Found(values, tuple(sorted(taken)))
        s.add(domain.any_of([_not(b) if x else b for b, x in zip(flags, inside, strict=True)]))
    raise Undecided(f"more than {limit} classes")


def _key(c: Constrained) -> tuple[object, ...]:
    return (tuple(sorted(c.doms.items())), tuple(e.get_id() for e in c.extras))


def _not(b: z3.BoolRef) -> z3.BoolRef:
    return z3.BoolRef(z3.Z3_mk_not(b.ctx.ref(), b.as_ast()), b.ctx)


def _within(space: Space, c: Constrained, region: Mapping[str, Span]) -> z3.BoolRef:
    """``c``'s formula where the region holds: only the variables it narrows further."""
    # (the region is asserted beside it: a set's own, usually short, interval list is enough)
    parts = [space.member(v, d) for v, d in sorted(c.doms.items()) if v not in region or not domain.subset(region[v], d)]
    parts += c.extras
    if not parts:
        return z3.BoolVal(True)
    return parts[0] if len(parts) == 1 else z3.And(parts)


def _meets(doms: Mapping[str, Span], region: Mapping[str, Span]) -> bool:
    return all(domain.intersect(d, region[v]) for v, d in doms.items() if v in region)


def _covers(doms: Mapping[str, Span], region: Mapping[str, Span]) -> bool:
    # variables outside the region are fixed by the caller: a path constraining one is partial
    return all(v in region and domain.subset(region[v], d) for v, d in doms.items())
