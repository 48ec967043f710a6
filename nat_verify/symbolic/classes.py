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
    if not solve and all(not sets[i].extras and _covers(sets[i].doms, region) for i in live):
        # every path that meets the region covers it: its packets all take the same paths
        values = {v: domain.pick(region[v], [x]) if v in region else x for v, x in (prefer or {}).items()}
        values.update({v: domain.pick(span) for v, span in region.items() if v not in values})
        yield Found(values, tuple(live))
        return
    vs = space.vars
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    for var, span in region.items():
        s.add(domain.to_z3(vs[var], span))
    flags = [z3.Bool(f"path_{i}") for i in live]
    for b, i in zip(flags, live, strict=True):
        s.add(b == sets[i].guard())
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
        taken = tuple(i for b, i in zip(flags, live, strict=True) if z3.is_true(m.eval(b, model_completion=True)))
        yield Found(values, taken)
        chosen = set(taken)
        s.add(z3.Or([b != (i in chosen) for b, i in zip(flags, live, strict=True)]) if flags else z3.BoolVal(False))
    raise Undecided(f"more than {limit} classes")


def _meets(doms: Mapping[str, Span], region: Mapping[str, Span]) -> bool:
    return all(domain.intersect(d, region[v]) for v, d in doms.items() if v in region)


def _covers(doms: Mapping[str, Span], region: Mapping[str, Span]) -> bool:
    # variables outside the region are fixed by the caller: a path constraining one is partial
    return all(v in region and domain.subset(region[v], d) for v, d in doms.items())
