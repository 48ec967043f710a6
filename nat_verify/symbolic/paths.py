"""From paths to outcomes: a packet, its paths, and the interpreter's outcome of each.

A path (``walk.Path``) is a final symbolic state and a verdict. For one concrete packet (an
*assignment* of the packet variables) the paths whose constraint holds are its outcomes: each
state is made concrete (``concrete_state``: a ``netfilter.state.PacketState``) and handed to the
interpreter's own outcome builder, so a predicted outcome is built by the same code as a traced
one and the two compare with ``==``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

import z3

from nat_verify.model.outcome import Outcome, Trace
from nat_verify.model.packet import Packet
from nat_verify.netfilter.interpreter import _collect
from nat_verify.netfilter.predicate import PROTO_NUMBERS
from nat_verify.netfilter.state import PacketState
from nat_verify.symbolic import domain
from nat_verify.symbolic.state import VALUE_FIELDS, Space, SymState, Var, address, kind_of
from nat_verify.symbolic.walk import Path

Assignment = Mapping[str, int]


def assignment_of(packet: Packet) -> dict[str, int]:
    """The packet variables' values for a packet."""
    return {
        "src": int(packet.src), "sport": packet.sport, "dst": int(packet.dst), "dport": packet.dport, "mark": packet.mark,
        "proto": PROTO_NUMBERS.get(packet.proto, 0),
    }  # fmt: skip


def _substitution(space: Space, a: Assignment) -> list[tuple[z3.ExprRef, z3.ExprRef]]:
    return [(v, z3.BitVecVal(a[name], v.size())) for name, v in space.vars.items() if name in a]


def holds(st: SymState, a: Assignment) -> bool:
    """Whether the packet ``a`` is one of the state's packets."""
    for var, span in st.doms.items():
        if not domain.contains(span, a[var]):
            return False
    if not st.extras:
        return True
    sub = _substitution(st.space, a)
    return all(z3.is_true(z3.simplify(z3.substitute(f, *sub))) for f in st.extras)


def value(space: Space, v: object, kind: str, a: Assignment) -> object:
    """A field value for the packet ``a``."""
    if isinstance(v, Var):
        return space.concrete(v.name, a[v.name])
    if isinstance(v, z3.ExprRef):
        n = z3.simplify(z3.substitute(v, *_substitution(space, a))).as_long()
        return address(n, space.family) if kind == "addr" else n
    return v


def concrete_state(st: SymState, a: Assignment) -> PacketState:
    """The interpreter's walk state for the packet ``a`` at the end of this path."""
    ps = PacketState.__new__(PacketState)
    sp = st.space
    for f in VALUE_FIELDS:
        setattr(ps, f, value(sp, getattr(st, f), kind_of(f), a))
    ps.in_iface, ps.out_iface = st.in_iface, st.out_iface
    ps.prob, ps.path = st.prob, st.path
    ps.dnat, ps.snat_done, ps.masq, ps.untracked = st.dnat, st.snat_done, st.masq, st.untracked
    ps.reject_with, ps.reason = st.reject_with, st.reason
    ps.recent = {}
    keys: list[tuple[str, str]] = []
    for name, addr in st.recent_set:
        key = (name, str(value(sp, addr, "addr", a)))
        if key not in keys:
            keys.append(key)
    ps.recent_set = tuple(keys)
    ps.wlog = ()
    return ps


def outcomes(packet: Packet, paths: Iterable[Path], a: Assignment | None = None) -> tuple[Outcome, ...]:
    """The outcomes of ``packet`` (default assignment: its own fields) by these paths."""
    a = assignment_of(packet) if a is None else a
    results = [(concrete_state(st, a), v) for st, v in paths if holds(st, a)]
    return tuple(o for o, _ in _collect(packet, results))


def same_outcomes(x: Iterable[Outcome], y: Iterable[Outcome]) -> bool:
    """Equal as multisets (the order of outcomes is the walk's, not part of the meaning)."""
    return Counter(x) == Counter(y)


def predicted_trace(packet: Packet, paths: Iterable[Path]) -> Trace:
    return Trace(packet, outcomes(packet, paths))

