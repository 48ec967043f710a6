"""The symbolic walk state: ``netfilter.state.PacketState`` with packet variables in it.

A field holds a concrete value (as in the interpreter), ``Var(name)`` (the packet's own,
unknown value of one of the packet variables ``src``, ``sport``, ``dst``, ``dport``, ``mark``)
or a Z3 term computed from them (a mark after ``MARK --xor-mark`` on an unknown mark). Which
packets a state stands for is its constraint: per variable, the set of values still possible
(``domain.Span``), and a tuple of further Z3 formulas (``extras``) for what is not a test of
one variable against constants (two variables compared, a masked mark). Targets' effects from
the registry run on this state unchanged: they read fields and ``write`` new ones.

A variable whose set shrinks to one value becomes that value in every field that holds it, so
the rest of the walk is concrete there (kube-proxy's ``-s ENDPOINT/32`` hairpin test leaves
the source known on the branch that matches).
"""

from __future__ import annotations

import ipaddress
from fractions import Fraction
from typing import TypeAlias

import attrs
import z3

from nat_verify.model.cluster import IPAddress
from nat_verify.model.outcome import Step
from nat_verify.netfilter.context import NodeContext, Route
from nat_verify.netfilter.predicate import PROTO_NAMES
from nat_verify.netfilter.state import PacketState
from nat_verify.symbolic import domain
from nat_verify.symbolic.domain import Span

ADDR_VARS = ("src", "dst")
PORT_VARS = ("sport", "dport")
VARS = ("src", "sport", "dst", "dport", "mark", "proto")
ADDR_FIELDS = frozenset({"src", "dst", "orig_src", "orig_dst"})
PORT_FIELDS = frozenset({"sport", "dport", "orig_sport", "orig_dport"})
MARK_FIELDS = frozenset({"mark", "ctmark"})
# the fields that may hold a packet variable (or a term of one)
VALUE_FIELDS = ("src", "sport", "dst", "dport", "orig_src", "orig_dst", "orig_sport", "orig_dport", "mark", "ctmark", "proto")


UNENCODED = "no symbolic encoding: "  # the reason of a path this package cannot follow


class Unencoded(Exception):
    """A construct the symbolic walk has no encoding for (the path ends inconclusive, naming
    it: an answer resting on it is never proved, and its replay is no bug)."""


@attrs.frozen
class Var:
    """The packet's own value of variable ``name`` (constrained only by the state)."""

    name: str


class Space:
    """The packet variables of one family as Z3 constants, and the solver that decides what
    the interval sets cannot (shared by every state of a walk)."""

    def __init__(self, family: int) -> None:
        self.family = family
        self.addr_bits = 32 if family == 4 else 128
        w = self.addr_bits
        self.vars: dict[str, z3.BitVecRef] = {
            "src": z3.BitVec("src", w), "dst": z3.BitVec("dst", w),
            "sport": z3.BitVec("sport", 16), "dport": z3.BitVec("dport", 16), "mark": z3.BitVec("mark", 32),
            "proto": z3.BitVec("proto", 8),
        }  # fmt: skip
        self.solver = z3.Solver()
        self.checks = 0
        # xt_recent lists before the packet: name -> (address, age in seconds)
        self.recent_lists: dict[str, tuple[tuple[IPAddress, float], ...]] = {}
        self._members: dict[tuple[str, Span], z3.BoolRef] = {}

    def member(self, var: str, span: Span) -> z3.BoolRef:
        """``var`` lies in ``span`` (formulas are remembered: walks repeat their sets)."""
        key = (var, span)
        f = self._members.get(key)
        if f is None:
            f = domain.to_z3(self.vars[var], span)
            if len(self._members) < 1 << 16:
                self._members[key] = f
        return f

    def bits(self, var: str) -> int:
        return self.addr_bits if var in ADDR_VARS else {"mark": 32, "proto": 8}.get(var, 16)

    def full(self, var: str) -> Span:
        return domain.full(self.bits(var))

    def term(self, value: object, kind: str) -> z3.BitVecRef:
        """A field value as a Z3 bit vector (``kind``: addr, port or mark)."""
        if isinstance(value, Var):
            return self.vars[value.name]
        if isinstance(value, z3.BitVecRef):
            return value
        bits = self.addr_bits if kind == "addr" else 16 if kind == "port" else 32
        return z3.BitVecVal(int(value), bits)  # type: ignore[call-overload]

    def concrete(self, var: str, value: int) -> object:
        if var == "proto":
            return PROTO_NAMES[value]  # a walk's protocols are named ones (PROTOCOLS)
        return address(value, self.family) if var in ADDR_VARS else value

    def sat(self, formulas: list[z3.BoolRef]) -> bool:
        self.checks += 1
        return self.solver.check(*formulas) != z3.unsat


def kind_of(field: str) -> str:
    if field in ADDR_FIELDS:
        return "addr"
    if field in PORT_FIELDS:
        return "port"
    return "mark"


def is_concrete(value: object) -> bool:
    return not isinstance(value, Var | z3.ExprRef)


def holds(value: object, var: Var) -> bool:
    """Whether a field value is the variable itself (never compares Z3 terms with ``==``)."""
    return isinstance(value, Var) and value.name == var.name


class Constrained:
    """A set of packets: per constrained variable its values (``doms``), and further Z3
    formulas (``extras``)."""

    __slots__ = ("space", "doms", "extras")

    space: Space
    doms: dict[str, Span]  # per constrained variable, the values still possible
    extras: tuple[z3.BoolRef, ...]  # further constraints

    def __init__(self, space: Space, doms: dict[str, Span], extras: tuple[z3.BoolRef, ...] = ()) -> None:
        self.space, self.doms, self.extras = space, doms, extras

    def dom(self, var: str) -> Span:
        d = self.doms.get(var)
        return self.space.full(var) if d is None else d

    def formulas(self) -> list[z3.BoolRef]:
        return [self.space.member(v, d) for v, d in sorted(self.doms.items())] + list(self.extras)

    def feasible(self) -> bool:
        if not self.extras:
            return all(self.doms.values())
        return self.space.sat(self.formulas())

    def guard(self) -> z3.BoolRef:
        """The packets of the set, as one formula."""
        fs = self.formulas()
        if not fs:
            return z3.BoolVal(True)
        return fs[0] if len(fs) == 1 else z3.And(fs)


class SymState(Constrained):
    """One branch of a symbolic walk (copied when it forks)."""

    # the interpreter's walk state (its write log aside: nothing here replays summaries), and
    # the route of a destination that is a variable
    __slots__ = (*(f for f in PacketState.__slots__ if f != "wlog"), "route")

    src: object
    sport: object
    dst: object
    dport: object
    proto: object  # a name, or Var("proto") (values: protocol numbers)
    mark: object
    ctmark: object
    in_iface: str
    out_iface: str
    prob: Fraction
    path: tuple[Step, ...]
    dnat: bool
    snat_done: bool
    masq: bool
    untracked: bool
    # xt_recent: the initial lists (name, address text) -> age, then the walk's operations in
    # order: ("add" | "remove", list name, address value)
    recent: tuple[tuple[str, str, object], ...]
    recent_set: tuple[tuple[str, object], ...]
    orig_src: object
    orig_dst: object
    orig_sport: object
    orig_dport: object
    reject_with: str
    reason: str
    route: Route | None  # the route of a destination that is not concrete (see walk)

    def copy(self) -> SymState:
        n = SymState.__new__(SymState)
        for k in _SLOTS:
            setattr(n, k, getattr(self, k))
        return n

    def scaled(self, p: Fraction) -> SymState:
        n = self.copy()
        n.prob = self.prob * p
        return n

    def write(self, field: str, value: object) -> None:
        """What a target's effect calls (``PacketState.write``)."""
        setattr(self, field, value)

    def refined(self, var: str, span: Span) -> SymState | None:
        """This state with ``var`` in ``span`` too (None when no value is left)."""
        d = domain.intersect(self.dom(var), span)
        if not d:
            return None
        n = self.copy()
        n.doms = {**self.doms, var: d}
        value = domain.single(d)
        if value is not None:
            concrete = self.space.concrete(var, value)
            v = Var(var)
            for f in VALUE_FIELDS:
                if holds(getattr(n, f), v):
                    setattr(n, f, concrete)
        if n.extras and not n.feasible():
            return None
        return n

    def constrained(self, formula: z3.BoolRef) -> SymState | None:
        """This state with ``formula`` too (None when no packet is left)."""
        n = self.copy()
        n.extras = (*self.extras, formula)
        return n if n.feasible() else None

    def value_term(self, field: str) -> z3.BitVecRef:
        return self.space.term(getattr(self, field), kind_of(field))


_SLOTS = (*Constrained.__slots__, *SymState.__slots__)


def conjoin(c: Constrained, tests: list[Test]) -> Constrained | None:
    """The packets of ``c`` for which every test holds (None: certainly none); not checked
    for feasibility beyond the interval sets."""
    doms = dict(c.doms)
    extras = list(c.extras)
    for t in tests:
        if t is True:
            continue
        if t is False:
            return None
        if isinstance(t, In):
            d = domain.intersect(doms.get(t.var, c.space.full(t.var)), t.span)
            if not d:
                return None
            doms[t.var] = d
        else:
            extras.append(t)
    return Constrained(c.space, doms, tuple(extras))


@attrs.frozen
class In:
    """A test of one packet variable against constants: ``var`` lies in ``span``."""

    var: str
    span: Span


Test: TypeAlias = bool | In | z3.BoolRef


def split(st: SymState, test: Test) -> tuple[SymState | None, SymState | None]:
    """The states where ``test`` holds and where it does not (None: no packet left)."""
    if test is True:
        return st, None
    if test is False:
        return None, st
    if isinstance(test, In):
        d = st.dom(test.var)
        inside = domain.intersect(d, test.span)
        if not inside:
            return None, st
        if inside == d:
            return st, None
        return st.refined(test.var, test.span), st.refined(test.var, domain.subtract(d, test.span))
    simple = z3.simplify(test)
    if z3.is_true(simple):
        return st, None
    if z3.is_false(simple):
        return None, st
    return st.constrained(simple), st.constrained(z3.Not(simple))


def equal(st: Constrained, a: object, b: object, kind: str) -> Test:
    """The test ``a == b`` for two field values."""
    if is_concrete(a) and is_concrete(b):
        return a == b
    if isinstance(a, Var) and isinstance(b, Var) and a == b:
        return True
    if isinstance(a, Var) and is_concrete(b):
        return In(a.name, domain.point(int(b)))  # type: ignore[call-overload]
    if isinstance(b, Var) and is_concrete(a):
        return In(b.name, domain.point(int(a)))  # type: ignore[call-overload]
    return st.space.term(a, kind) == st.space.term(b, kind)


def initial(
    space: Space, ctx: NodeContext, origin: str, *, src: object, sport: object, dst: object, dport: object,
    proto: object, mark: object = 0, in_iface: str = "", recent: tuple[tuple[str, str, object], ...] = (),
) -> SymState:  # fmt: skip
    """The state of a first packet entering at ``origin`` (fields: values or ``Var``)."""
    st = SymState.__new__(SymState)
    st.space = space
    st.doms = {}
    st.extras = ()
    st.src, st.sport, st.dst, st.dport, st.proto = src, sport, dst, dport, proto
    st.mark, st.ctmark = mark, 0
    st.in_iface = in_iface or ctx.in_iface(origin)  # as far as the node's facts tell it
    st.out_iface = ""
    st.prob = Fraction(1)
    st.path = ()
    st.dnat = st.snat_done = st.masq = st.untracked = False
    st.recent = recent
    st.recent_set = ()
    st.orig_src, st.orig_dst, st.orig_sport, st.orig_dport = src, dst, sport, dport
    st.reject_with = st.reason = ""
    st.route = None
    return st


def address(value: int, family: int) -> IPAddress:
    return ipaddress.IPv4Address(value) if family == 4 else ipaddress.IPv6Address(value)
