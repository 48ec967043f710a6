"""Predicates on a symbolic state: the interpreter's three-valued verdicts, per branch.

``pieces(pred, state)`` is ``predicate.evaluator(pred)(state)`` for a state whose fields may
be unknown: a list of ``(state', verdict)`` whose states together stand for exactly the
packets of ``state``, each with the verdict the interpreter would give every one of them
(``True``, ``False``, a probability, or ``Unknown``). The connectives keep the interpreter's
order of evaluation (``All`` stops at the first false part, ``AnyOf`` at the first true one),
which matters for the one predicate with an effect, ``recent``.

A leaf whose fields are all concrete is evaluated by the predicate's own evaluator, so its
meaning is never restated here. A leaf on a packet variable becomes a test
(``state.In`` on the variable's interval set, or a Z3 formula for a term), encoded as the
predicate language's docstring says:

* ``AddrIn(f, nets)``: ``f`` in the union of the CIDRs of the family (a Z3 term: ``Or(f &
  mask == net)``);
* ``PortIn(f, ranges)``: ``f`` in the union of the ranges (``Or(lo <= f <= hi)``, unsigned);
* ``MarkMasked(f, value, mask)``: ``f & mask == value`` (32 bits);
* ``Recent``: the lists are the initial lists plus the walk's own operations; whether an
  address is on a list is decided by comparing it with each address the walk added or
  removed, newest first, then with the initial entries (``recent_hits``).

* ``ProtoIs(n)``: the ``proto`` variable (protocol numbers) is ``n``.

``IfaceIs`` and ``CtStateIn`` read fields the walk always knows (interface names and
conntrack flags are concrete on every branch).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import z3

from nat_verify.netfilter.predicate import (
    AddrIn,
    All,
    AnyOf,
    Chance,
    Const,
    Evaluator,
    MarkMasked,
    Not,
    PortIn,
    Pred,
    ProtoIs,
    Recent,
    Unknown,
    Verdict,
    describe,
    evaluator,
    reads,
)
from nat_verify.symbolic import domain
from nat_verify.symbolic.state import (
    In,
    SymState,
    Test,
    Unencoded,
    Var,
    equal,
    is_concrete,
    kind_of,
    split,
)

Piece = tuple[SymState, Verdict]

_EVALUATORS: dict[Pred, Evaluator] = {}


def _evaluate(p: Pred, st: SymState) -> Verdict:
    ev = _EVALUATORS.get(p)
    if ev is None:
        ev = _EVALUATORS[p] = evaluator(p)
        if len(_EVALUATORS) > 1 << 16:
            _EVALUATORS.clear()
    return ev(st)  # type: ignore[arg-type]


def leaf_test(p: Pred, st: SymState) -> Verdict | Test:
    """A leaf's verdict when its fields are concrete, else the test it makes."""
    if isinstance(p, AddrIn | PortIn | MarkMasked):
        value = getattr(st, p.field)
        if is_concrete(value):
            return _evaluate(p, st)
        if isinstance(p, AddrIn):
            if isinstance(value, Var):
                return In(value.name, domain.of_nets(p.nets, st.space.family))
            return addr_formula(st.space.term(value, "addr"), p, st.space.family)
        if isinstance(p, PortIn):
            if isinstance(value, Var):
                return In(value.name, domain.of_ranges(p.ranges))
            t = st.space.term(value, "port")
            return _any([z3.And(z3.ULE(lo, t), z3.ULE(t, hi)) for lo, hi in p.ranges])
        t = st.space.term(value, "mark")
        return (t & p.mask) == p.value
    if isinstance(p, ProtoIs) and isinstance(st.proto, Var):
        return In("proto", domain.point(p.number))
    for f in reads(p):
        if not is_concrete(getattr(st, f, None)):
            raise Unencoded(f"{describe(p)} on a field that depends on the packet ({f})")
    return _evaluate(p, st)


def addr_formula(t: z3.BitVecRef, p: AddrIn, family: int) -> z3.BoolRef:
    bits = t.size()
    parts = []
    for n in p.nets:
        if n.version != family:
            continue
        mask = ((1 << bits) - 1) ^ ((1 << (bits - n.prefixlen)) - 1)
        parts.append((t & mask) == int(n.network_address))
    return _any(parts)


def _any(parts: list[z3.BoolRef]) -> z3.BoolRef:
    if not parts:
        return z3.BoolVal(False)
    return parts[0] if len(parts) == 1 else z3.Or(parts)


def pieces(p: Pred, st: SymState) -> list[Piece]:
    if isinstance(p, Const):
        return [(st, p.value)]
    if isinstance(p, Chance):
        return [(st, p.p)]
    if isinstance(p, Unknown):
        return [(st, p)]
    if isinstance(p, Recent):
        return _recent(p, st)
    if isinstance(p, Not):
        return [(s, _negated(v)) for s, v in pieces(p.inner, st)]
    if isinstance(p, All):
        return conjunction(p.parts, st)
    if isinstance(p, AnyOf):
        return _disjunction(p.parts, st)
    t = leaf_test(p, st)
    if isinstance(t, bool | Fraction | Unknown):
        return [(st, t)]
    yes, no = split(st, t)
    out: list[Piece] = []
    if yes is not None:
        out.append((yes, True))
    if no is not None:
        out.append((no, False))
    return out


def _negated(v: Verdict) -> Verdict:
    if v is True:
        return False
    if v is False:
        return True
    if isinstance(v, Fraction):
        return 1 - v
    return v


def conjunction(parts: tuple[Pred, ...], st: SymState) -> list[Piece]:
    """``All(parts)`` (also a rule's predicates): false wins over unknown, probabilities
    multiply, evaluation stops at the first false part."""
    done: list[Piece] = []
    live: list[tuple[SymState, Fraction | None, Unknown | None]] = [(st, None, None)]
    for part in parts:
        nxt: list[tuple[SymState, Fraction | None, Unknown | None]] = []
        for s, prob, unknown in live:
            for s2, v in pieces(part, s):
                if v is False:
                    done.append((s2, False))
                elif v is True:
                    nxt.append((s2, prob, unknown))
                elif isinstance(v, Unknown):
                    nxt.append((s2, prob, unknown or v))
                else:
                    nxt.append((s2, v if prob is None else prob * v, unknown))
        live = nxt
        if not live:
            break
    for s, prob, unknown in live:
        done.append((s, unknown if unknown is not None else True if prob is None else prob))
    return done


def _disjunction(parts: tuple[Pred, ...], st: SymState) -> list[Piece]:
    done: list[Piece] = []
    live: list[tuple[SymState, Fraction, Unknown | None]] = [(st, Fraction(1), None)]
    for part in parts:
        nxt: list[tuple[SymState, Fraction, Unknown | None]] = []
        for s, miss, unknown in live:
            for s2, v in pieces(part, s):
                if v is True:
                    done.append((s2, True))
                elif v is False:
                    nxt.append((s2, miss, unknown))
                elif isinstance(v, Unknown):
                    nxt.append((s2, miss, unknown or v))
                else:
                    nxt.append((s2, miss * (1 - v), unknown))
        live = nxt
        if not live:
            break
    for s, miss, unknown in live:
        done.append((s, unknown if unknown is not None else False if miss == 1 else 1 - miss))
    return done


# -- recent ------------------------------------------------------------------------------------


def recent_hits(st: SymState, name: str, addr: object, seconds: int | None) -> list[tuple[SymState, bool]]:
    """Whether ``addr`` is on list ``name`` (younger than ``seconds``), per branch."""
    out: list[tuple[SymState, bool]] = []
    todo: list[tuple[SymState, int]] = [(st, len(st.recent) - 1)]
    while todo:
        s, i = todo.pop()
        while i >= 0 and st.recent[i][1] != name:
            i -= 1
        if i < 0:
            young = [a for a, age in st.space.recent_lists.get(name, ()) if seconds is None or age < seconds]
            t = _member(s, addr, young)
            yes, no = split(s, t)
            if yes is not None:
                out.append((yes, True))
            if no is not None:
                out.append((no, False))
            continue
        kind, _, other = st.recent[i]
        yes, no = split(s, equal(s, addr, other, "addr"))
        if yes is not None:
            # an entry the walk added is 0 seconds old
            out.append((yes, kind == "add" and (seconds is None or seconds > 0)))
        if no is not None:
            todo.append((no, i - 1))
    return out


def _member(st: SymState, addr: object, members: Sequence[object]) -> Test:
    if not members:
        return False
    if is_concrete(addr):
        return addr in members
    fam = st.space.family
    vals = [int(m) for m in members if getattr(m, "version", 0) == fam]  # type: ignore[call-overload]
    if isinstance(addr, Var):
        return In(addr.name, domain.normalise((v, v) for v in vals))
    t = st.space.term(addr, kind_of("src"))
    return _any([t == v for v in vals])


def _recent(p: Recent, st: SymState) -> list[Piece]:
    addr = getattr(st, p.field)
    if p.verb == "set":
        s = st.copy()
        _add(s, p.name, addr)
        return [(s, True)]
    out: list[Piece] = []
    for s, hit in recent_hits(st, p.name, addr, p.seconds):
        if hit and p.verb in ("update", "remove"):
            s = s.copy()
            if p.verb == "update":
                _add(s, p.name, addr)
            else:
                s.recent = (*s.recent, ("remove", p.name, addr))
        out.append((s, hit))
    return out


def _add(s: SymState, name: str, addr: object) -> None:
    s.recent = (*s.recent, ("add", name, addr))
    s.recent_set = (*s.recent_set, (name, addr))
