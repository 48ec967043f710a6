"""Interval sets (``symbolic.domain``) are sets: every operation agrees with Python's sets on
small universes, and the Z3 formula of a set holds exactly for its members."""

from __future__ import annotations

import z3
from hypothesis import given
from hypothesis import strategies as st

from nat_verify.symbolic import domain

BITS = 6
UNIVERSE = range(1 << BITS)
sets = st.frozensets(st.integers(0, (1 << BITS) - 1), max_size=20)


def span(s: frozenset[int]) -> domain.Span:
    return domain.normalise((x, x) for x in s)


def members(a: domain.Span) -> frozenset[int]:
    return frozenset(x for lo, hi in a for x in range(lo, hi + 1))


@given(sets, sets)
def test_set_operations(a: frozenset[int], b: frozenset[int]) -> None:
    x, y = span(a), span(b)
    assert members(x) == a
    assert members(domain.intersect(x, y)) == a & b
    assert members(domain.subtract(x, y)) == a - b
    assert members(domain.union(x, y)) == a | b
    assert domain.subset(x, y) == (a <= b)
    assert all(domain.contains(x, v) == (v in a) for v in UNIVERSE)
    assert domain.size(x) == len(a)
    assert domain.single(x) == (next(iter(a)) if len(a) == 1 else None)
    if a:
        assert domain.pick(x) in a
    # normal form: equal sets are equal tuples
    assert domain.union(x, y) == span(a | b)


@given(sets)
def test_formula_holds_for_members_only(a: frozenset[int]) -> None:
    v = z3.BitVec("v", BITS)
    f = domain.to_z3(v, span(a))
    for x in UNIVERSE:
        assert z3.is_true(z3.simplify(z3.substitute(f, (v, z3.BitVecVal(x, BITS))))) == (x in a)
