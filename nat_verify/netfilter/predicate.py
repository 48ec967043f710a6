"""The predicate language: what a rule's matches test, held as frozen values.

Design
------
Every match of a rule (``-s``, ``-p``, ``-m tcp --dport``, ``-m set --match-set``, ...) is
compiled once, by its registry entry (``registry``, ``modules``), into a *predicate*: a small
tree of the values below. A rule matches when all its predicates hold. Everything that needs
to know what a match means reads these values and nothing else:

* the interpreter turns each predicate into a Python closure (``evaluator``) and runs packets;
* chain summaries and the exhaustive packet classes read which packet fields a predicate
  tests (``reads``) and the constants it compares them with (``address_constants``,
  ``port_constants``): two packets on the same side of every constant are told apart by no
  predicate;
* the partial evaluation ``decide`` answers "can this rule match a packet to this
  destination?" without a packet (the classes of one destination, the reachable chains);
* the Z3 encoding (``nat_verify.symbolic``) gives each value a bit-vector formula (below).

So the facts a proof rests on are stated once, per value, and a new match module is a registry
entry that builds these values: it inherits the interpreter, the summaries, the classes and
the encoding without touching them.

Values
------
Leaves test one field of the walk state (``state.PacketState``):

``AddrIn(field, nets)``
    the address ``field`` (``src``, ``dst``, ``orig_src``, ``orig_dst``) lies in one of the
    CIDRs ``nets`` (``-s``/``-d``, ``iprange``, ``--ctorigdst``, ipset members, the node's own
    addresses for ``addrtype LOCAL``). Bit vectors: ``Or(f & mask(n) == net(n) for n in nets)``
    over 32- or 128-bit ``f``.
``PortIn(field, ranges)``
    the port ``field`` lies in one of the inclusive ``ranges``. ``Or(ULE(lo, f), ULE(f, hi))``
    over 16 bits.
``ProtoIs(number)``
    the IP protocol is ``number`` (6 tcp, 17 udp, 132 sctp, ...). ``proto == number`` (8 bits).
``MarkMasked(field, value, mask)``
    ``(field & mask) == value`` for the packet mark or the connection mark (32 bits).
``IfaceIs(field, name, prefix)``
    the input or output interface is ``name`` (``prefix``: starts with it, iptables' ``+``).
    The walk state holds the interface as far as the node's facts tell it: a name, a prefix
    (``cali+``: some Calico veth) or ``?<fact>`` (not known); the verdict on the last two is
    decided where interface roles allow it and ``Unknown`` otherwise (``context.iface_verdict``).
    Interface names form a finite universe in an encoding: every name the ruleset and the node
    mention, plus one fresh name per prefix (a name no rule spells out but the prefix matches)
    and one that nothing matches; a field is an index into that universe.
``CtStateIn(states)``
    the conntrack state of the connection's first packet is one of ``states``: ``NEW`` (or
    ``UNTRACKED`` after ``NOTRACK``), plus the virtual ``DNAT``/``SNAT`` once the
    connection's NAT was decided. Booleans ``untracked``, ``dnat``, ``snat_done``.
``Chance(p)``
    a random draw that succeeds with exact probability ``p`` (0 < p < 1), independently of
    everything else (``statistic --mode random``, quantised as the kernel stores it). The
    interpreter forks the walk; an encoding makes it a free boolean per occurrence on the
    walk, whose probabilities are checked apart.
``Recent(name, field, verb, seconds)``
    ``xt_recent``: whether the address ``field`` is on list ``name`` (and younger than
    ``seconds``); ``set``/``update``/``remove`` also change the list, so this is the one
    predicate with an effect. State: a map from (list, address) to an age.
``Unknown(reason)``
    something the model cannot decide (a module it does not evaluate, a node fact nobody
    gave). It is never read as true or false: a walk that needs it ends ``inconclusive``
    with ``reason``; an encoding marks every answer that depends on it inconclusive.

Connectives: ``Not(p)``, ``All(parts)``, ``AnyOf(parts)``, and the constants ``TRUE``/``FALSE``.

Evaluation is three-valued with probabilities: a predicate gives ``True``, ``False``, a
``Fraction`` (the probability that it holds, from ``Chance``) or an ``Unknown``. ``All`` is
false as soon as one part is false, even next to an unknown part (the kernel stops at the
first match that fails, and the outcome does not depend on the unknown one); otherwise
unknown if a part is; otherwise the product of its parts' probabilities (independent draws).
``Not`` maps ``p`` to ``1 - p`` and keeps ``Unknown``.

Invariants every value keeps (the registry tests check them per entry): a predicate reads
only the fields ``reads`` names; for addresses and ports its verdict is constant between
consecutive constants it names; its verdict never depends on anything else of the walk state.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable, Iterator, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Literal, Union

import attrs

from nat_verify.model.cluster import IPNetwork
from nat_verify.netfilter.context import UNKNOWN as UNKNOWN_IFACE
from nat_verify.netfilter.context import iface_verdict

if TYPE_CHECKING:
    from nat_verify.netfilter.state import PacketState

PROTO_NUMBERS: dict[str, int] = {
    "icmp": 1, "tcp": 6, "udp": 17, "dccp": 33, "esp": 50, "ah": 51, "icmpv6": 58, "ipv6-icmp": 58,
    "sctp": 132, "udplite": 136, "gre": 47, "ipip": 4, "ipv6": 41, "igmp": 2, "mh": 135, "ipencap": 4,
}  # fmt: skip
# the name a walk state carries for a protocol number (packets are tcp, udp, sctp or icmp)
PROTO_NAMES: dict[int, str] = {6: "tcp", 17: "udp", 132: "sctp", 1: "icmp", 58: "icmpv6", 136: "udplite", 33: "dccp"}


@attrs.frozen
class Unknown:
    """Undecidable here, with the reason (also the verdict of such a predicate)."""

    reason: str


@attrs.frozen
class Const:
    value: bool


TRUE = Const(True)
FALSE = Const(False)


@attrs.frozen
class AddrIn:
    field: str
    nets: tuple[IPNetwork, ...]


@attrs.frozen
class PortIn:
    field: str
    ranges: tuple[tuple[int, int], ...]


@attrs.frozen
class ProtoIs:
    number: int


@attrs.frozen
class MarkMasked:
    field: str
    value: int
    mask: int


@attrs.frozen
class IfaceIs:
    field: str
    name: str
    prefix: bool = False


@attrs.frozen
class CtStateIn:
    states: frozenset[str]


@attrs.frozen
class Chance:
    p: Fraction


@attrs.frozen
class Recent:
    name: str
    field: str  # src or dst (--rsource / --rdest)
    verb: Literal["set", "rcheck", "update", "remove"]
    seconds: int | None = None


@attrs.frozen
class Not:
    inner: Pred


@attrs.frozen
class All:
    parts: tuple[Pred, ...]


@attrs.frozen
class AnyOf:
    parts: tuple[Pred, ...]


Pred = Union[Const, AddrIn, PortIn, ProtoIs, MarkMasked, IfaceIs, CtStateIn, Chance, Recent, Unknown, Not, All, AnyOf]  # noqa: UP007
Verdict = bool | Fraction | Unknown
Evaluator = Callable[["PacketState"], Verdict]

CT_READS = frozenset({"untracked", "dnat", "snat_done"})


# -- building ---------------------------------------------------------------------------------


def negate(p: Pred, negated: bool = True) -> Pred:
    """``! p`` (when ``negated``), simplified where that is exact."""
    if not negated:
        return p
    if isinstance(p, Const):
        return Const(not p.value)
    if isinstance(p, Not):
        return p.inner
    if isinstance(p, Chance):
        return Chance(1 - p.p)
    if isinstance(p, Unknown):
        return p
    return Not(p)


def chance(p: Fraction) -> Pred:
    """A random match with probability ``p``; certainty is a constant."""
    if p >= 1:
        return TRUE
    if p <= 0:
        return FALSE
    return Chance(p)


def all_of(parts: Iterable[Pred]) -> Pred:
    ps = tuple(p for p in parts if p != TRUE)
    if any(p == FALSE for p in ps):
        return FALSE
    if not ps:
        return TRUE
    return ps[0] if len(ps) == 1 else All(ps)


def any_of(parts: Iterable[Pred]) -> Pred:
    ps = tuple(p for p in parts if p != FALSE)
    if any(p == TRUE for p in ps):
        return TRUE
    if not ps:
        return FALSE
    return ps[0] if len(ps) == 1 else AnyOf(ps)


# -- what a predicate looks at ----------------------------------------------------------------


def children(p: Pred) -> tuple[Pred, ...]:
    if isinstance(p, Not):
        return (p.inner,)
    if isinstance(p, All | AnyOf):
        return p.parts
    return ()


def walk(p: Pred) -> Iterator[Pred]:
    """``p`` and every predicate inside it (iteratively: depth does not depend on input)."""
    todo = [p]
    while todo:
        q = todo.pop()
        yield q
        todo.extend(children(q))


def reads(p: Pred) -> frozenset[str]:
    """The walk-state fields the predicate's verdict depends on (``recent``: the lists)."""
    out: set[str] = set()
    for q in walk(p):
        if isinstance(q, AddrIn | PortIn | MarkMasked | IfaceIs):
            out.add(q.field)
        elif isinstance(q, ProtoIs):
            out.add("proto")
        elif isinstance(q, CtStateIn):
            out |= CT_READS
        elif isinstance(q, Recent):
            out |= {q.field, "recent"}
    return frozenset(out)


def unknowns(p: Pred) -> Iterator[Unknown]:
    return (q for q in walk(p) if isinstance(q, Unknown))


def address_constants(p: Pred, fields: Iterable[str] | None = None) -> Iterator[IPNetwork]:
    """The CIDRs the predicate compares the address ``fields`` (default: any) with."""
    want = None if fields is None else frozenset(fields)
    for q in walk(p):
        if isinstance(q, AddrIn) and (want is None or q.field in want):
            yield from q.nets


def port_constants(p: Pred, fields: Iterable[str] | None = None) -> Iterator[int]:
    """For every port range the predicate compares ``fields`` with: its first port and the one
    after its last (the boundaries of the intervals no port test can split)."""
    want = None if fields is None else frozenset(fields)
    for q in walk(p):
        if isinstance(q, PortIn) and (want is None or q.field in want):
            for lo, hi in q.ranges:
                yield lo
                yield hi + 1


# -- concrete meaning -------------------------------------------------------------------------


def _contains(nets: tuple[IPNetwork, ...]) -> Callable[[object], bool]:
    if len(nets) == 1:
        net = nets[0]
        if net.prefixlen == net.max_prefixlen:
            a = net.network_address
            return lambda x: x == a
        return lambda x: x in net
    return lambda x: any(x in n for n in nets)


def _not(inner: Evaluator) -> Evaluator:
    def ev(st: PacketState) -> Verdict:
        v = inner(st)
        if v is True:
            return False
        if v is False:
            return True
        if isinstance(v, Fraction):
            return 1 - v
        return v

    return ev


def conjunction(evs: tuple[Evaluator, ...]) -> Evaluator:
    """The evaluator of ``All``: False wins over Unknown, probabilities multiply."""

    def ev(st: PacketState) -> Verdict:
        prob: Fraction | None = None
        unknown: Unknown | None = None
        for e in evs:
            v = e(st)
            if v is False:
                return False
            if v is True:
                continue
            if isinstance(v, Unknown):
                unknown = unknown or v
                continue
            prob = v if prob is None else prob * v
        if unknown is not None:
            return unknown
        return True if prob is None else prob

    return ev


def _disjunction(evs: tuple[Evaluator, ...]) -> Evaluator:
    def ev(st: PacketState) -> Verdict:
        miss = Fraction(1)  # probability that no part holds
        unknown: Unknown | None = None
        for e in evs:
            v = e(st)
            if v is True:
                return True
            if v is False:
                continue
            if isinstance(v, Unknown):
                unknown = unknown or v
                continue
            miss *= 1 - v
        if unknown is not None:
            return unknown
        return False if miss == 1 else 1 - miss

    return ev


def _recent(p: Recent) -> Evaluator:
    name, field, verb, seconds = p.name, p.field, p.verb, p.seconds

    def ev(st: PacketState) -> Verdict:
        key = (name, str(getattr(st, field)))
        if verb == "set":
            st.recent_add(key)
            return True  # --set always matches
        age = st.recent_age(key)
        hit = age is not None and (seconds is None or age < seconds)
        if verb == "update" and hit:
            st.recent_add(key)
        if verb == "remove" and hit:
            st.recent_remove(key)
        return hit

    return ev


def evaluator(p: Pred) -> Evaluator:
    """A closure computing the predicate's verdict on a walk state (built once per rule)."""
    if isinstance(p, Const):
        v = p.value
        return lambda st: v
    if isinstance(p, AddrIn):
        field, inside = p.field, _contains(p.nets)
        if field == "src":
            return lambda st: inside(st.src)
        if field == "dst":
            return lambda st: inside(st.dst)
        return lambda st: inside(getattr(st, field))
    if isinstance(p, PortIn):
        field, ranges = p.field, p.ranges
        if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
            port = ranges[0][0]
            return lambda st: getattr(st, field) == port
        return lambda st: any(a <= getattr(st, field) <= b for a, b in ranges)
    if isinstance(p, ProtoIs):
        name = PROTO_NAMES.get(p.number)
        if name is None:
            return lambda st: False  # the model's packets are tcp, udp, sctp or icmp
        return lambda st: st.proto == name
    if isinstance(p, MarkMasked):
        field, value, mask = p.field, p.value, p.mask
        return lambda st: (getattr(st, field) & mask) == value
    if isinstance(p, IfaceIs):
        field, name, prefix = p.field, p.name, p.prefix

        def iface(st: PacketState) -> Verdict:
            v: str = getattr(st, field)
            if v[:1] == UNKNOWN_IFACE or v[-1:] == "+":
                # a name known only by its prefix, or not at all (``context.iface_verdict``)
                r = iface_verdict(v, name, prefix)
                return r if isinstance(r, bool) else Unknown(r)
            return v.startswith(name) if prefix else v == name

        return iface
    if isinstance(p, CtStateIn):
        states = p.states

        def ctstate(st: PacketState) -> Verdict:
            have = {"UNTRACKED"} if st.untracked else {"NEW"}
            if st.dnat and not st.untracked:
                have.add("DNAT")
            if st.snat_done and not st.untracked:
                have.add("SNAT")
            return bool(states & have)

        return ctstate
    if isinstance(p, Chance):
        prob = p.p
        return lambda st: prob
    if isinstance(p, Recent):
        return _recent(p)
    if isinstance(p, Unknown):
        return lambda st: p
    if isinstance(p, Not):
        return _not(evaluator(p.inner))
    if isinstance(p, All):
        return conjunction(tuple(evaluator(q) for q in p.parts))
    if isinstance(p, AnyOf):
        return _disjunction(tuple(evaluator(q) for q in p.parts))
    raise TypeError(f"not a predicate: {p!r}")


# -- partial evaluation -----------------------------------------------------------------------


def decide(p: Pred, known: Mapping[str, object]) -> bool | None:
    """The verdict for every state whose fields ``known`` gives, or None when it depends on
    others (a random draw counts as "depends": it may hold)."""
    if isinstance(p, Const):
        return p.value
    if isinstance(p, AddrIn | PortIn | MarkMasked | IfaceIs | ProtoIs):
        field = "proto" if isinstance(p, ProtoIs) else p.field
        if field not in known:
            return None
        value = known[field]
        if isinstance(p, AddrIn):
            return any(value in n for n in p.nets if n.version == getattr(value, "version", 0))
        if isinstance(p, PortIn):
            return any(a <= value <= b for a, b in p.ranges)  # type: ignore[operator]
        if isinstance(p, ProtoIs):
            return PROTO_NAMES.get(p.number) == value
        if isinstance(p, MarkMasked):
            return (value & p.mask) == p.value  # type: ignore[operator]
        return value.startswith(p.name) if p.prefix else value == p.name  # type: ignore[attr-defined]
    if isinstance(p, Not):
        v = decide(p.inner, known)
        return None if v is None else not v
    if isinstance(p, All):
        vs = [decide(q, known) for q in p.parts]
        if False in vs:
            return False
        return True if all(v is True for v in vs) else None
    if isinstance(p, AnyOf):
        vs = [decide(q, known) for q in p.parts]
        if True in vs:
            return True
        return False if all(v is False for v in vs) else None
    return None  # Chance, Recent, CtStateIn, Unknown


def describe(p: Pred) -> str:
    """A short human reading (for messages and tests)."""
    if isinstance(p, Const):
        return "true" if p.value else "false"
    if isinstance(p, AddrIn):
        return f"{p.field} in {','.join(map(str, p.nets))}"
    if isinstance(p, PortIn):
        return f"{p.field} in " + ",".join(str(a) if a == b else f"{a}:{b}" for a, b in p.ranges)
    if isinstance(p, ProtoIs):
        return f"proto {PROTO_NAMES.get(p.number, p.number)}"
    if isinstance(p, MarkMasked):
        return f"{p.field} & {p.mask:#x} == {p.value:#x}"
    if isinstance(p, IfaceIs):
        return f"{p.field} {'starts with' if p.prefix else 'is'} {p.name}"
    if isinstance(p, CtStateIn):
        return f"ctstate in {','.join(sorted(p.states))}"
    if isinstance(p, Chance):
        return f"chance {p.p}"
    if isinstance(p, Recent):
        return f"recent {p.verb} {p.name} {p.field}"
    if isinstance(p, Unknown):
        return f"unknown ({p.reason})"
    if isinstance(p, Not):
        return f"not ({describe(p.inner)})"
    if isinstance(p, All):
        return " and ".join(f"({describe(q)})" for q in p.parts)
    return " or ".join(f"({describe(q)})" for q in p.parts)


def networks_of(addresses: Iterable[object]) -> tuple[IPNetwork, ...]:
    """Host networks (/32, /128) for addresses, CIDRs kept as they are."""
    out: list[IPNetwork] = []
    for a in addresses:
        if isinstance(a, ipaddress.IPv4Network | ipaddress.IPv6Network):
            out.append(a)
        else:
            out.append(ipaddress.ip_network(a))  # type: ignore[arg-type]
    return tuple(out)
