"""Whole-dump questions, answered over every packet: ``yes`` with a witness, or ``no``, proved.

Design
------
A question is a property of one outcome (``Question.wants``: its verdict and flags, and a
test on the fields it copies from the packet, such as "the translated destination is this
address") and the packets it is asked about (destinations and sources). The packets are
walked slice by slice (``whole.sliced_walks``); in each slice the answer is ``yes`` when some
packet of the slice lies in the set of a path whose outcome has the property (the path's set
narrowed by the property's test): Z3 finds one (interval sets alone where they decide it), the
interpreter replays it, and the replayed trace must show the property (else a nat-verify bug
is reported). ``no`` needs every slice to have no such packet and no packet whose walk the
model could not decide (an inconclusive path might have had the property).

For the Service questions the answer also says *which* sources: the union of the source sets
of the paths with the property, per origin, when those are interval sets (exact, since a path's
source set is the set of sources that take it for some source port).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Sequence

import attrs
import z3

from nat_verify.model.cluster import IPAddress, IPNetwork
from nat_verify.model.outcome import Outcome, Trace
from nat_verify.model.packet import Packet
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.interpreter import INCONCLUSIVE, Interpreter
from nat_verify.netfilter.ruleset import Ruleset
from nat_verify.symbolic import domain
from nat_verify.symbolic.classes import Undecided
from nat_verify.symbolic.domain import Span
from nat_verify.symbolic.slices import ORIGINS, Slice
from nat_verify.symbolic.state import Constrained, Space, SymState, Test, address, conjoin, equal
from nat_verify.symbolic.walk import Walker
from nat_verify.symbolic.whole import PROTOS, sliced_walks

REACHED = ("FORWARD", "LOCAL")  # the walk's verdicts of a packet that goes on (forward, accept)


@attrs.frozen
class Question:
    """``text``: the question as asked; ``wants(state, verdict)``: the tests an outcome must
    pass (None: it cannot have the property); ``holds(outcome)``: the same on a traced outcome
    (the replay check)."""

    text: str
    wants: Callable[[SymState, str], list[Test] | None]
    holds: Callable[[Outcome], bool]
    slices: tuple[Slice, ...] | None = None  # None: every destination
    protos: tuple[str, ...] = PROTOS
    sources: Span | None = None  # None: every source
    describe_sources: bool = False


@attrs.frozen
class Witness:
    packet: Packet
    trace: Trace


@attrs.frozen
class Answer:
    question: str
    answer: str  # yes | no | inconclusive
    witnesses: tuple[Witness, ...] = ()
    # (destination, origin, CIDRs) of the sources with the property
    sources: tuple[tuple[str, str, str], ...] = ()
    slices: int = 0
    reasons: tuple[str, ...] = ()
    bugs: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "format": "nat_verify.query/v1",
            "question": self.question,
            "answer": self.answer,
            "witnesses": [{"packet": w.packet.to_json(), "outcomes": [o.to_json() for o in w.trace.outcomes]} for w in self.witnesses],
            "sources": [{"destination": d, "from": o, "sources": s} for d, o, s in self.sources],
            "slices": self.slices,
            "reasons": list(self.reasons),
            "bugs": list(self.bugs),
        }


def reach(ctx: NodeContext, addr: IPAddress, port: int | None, sources: Sequence[IPNetwork] = (), protos: tuple[str, ...] = PROTOS) -> Question:
    """Can a packet (from ``sources``) reach ``addr[:port]``, after NAT?"""
    where = f"{addr}:{port}" if port else str(addr)
    frm = ", ".join(map(str, sources)) or "anywhere"

    def wants(st: SymState, verdict: str) -> list[Test] | None:
        if verdict not in REACHED:
            return None
        tests = [equal(st, st.dst, addr, "addr")]
        if port:
            tests.append(equal(st, st.dport, port, "port"))
        return tests

    def holds(o: Outcome) -> bool:
        return o.verdict in ("forward", "accept") and o.dst == addr and (not port or o.dport == port)

    span = domain.of_nets(sources, ctx.family) if sources else None
    return Question(f"can a packet from {frm} reach {where} (after NAT)?", wants, holds, protos=protos, sources=span)


def masqueraded(label: str, slices: tuple[Slice, ...], protos: tuple[str, ...]) -> Question:
    def wants(st: SymState, verdict: str) -> list[Test] | None:
        return [] if st.masq and verdict in REACHED else None

    return Question(f"which packets to {label} are masqueraded?", wants, lambda o: o.masquerade and o.verdict in ("forward", "accept"),
                    slices=slices, protos=protos, describe_sources=True)  # fmt: skip


def keeps_client_ip(label: str, slices: tuple[Slice, ...], protos: tuple[str, ...]) -> Question:
    def wants(st: SymState, verdict: str) -> list[Test] | None:
        return [] if st.dnat and not st.masq and not st.snat_done and verdict in REACHED else None

    def holds(o: Outcome) -> bool:
        return o.dnat and not o.masquerade and not o.snat and o.verdict in ("forward", "accept")

    return Question(f"which sources keep their client IP to {label}?", wants, holds, slices=slices, protos=protos, describe_sources=True)


def service_slices(dests: Sequence[tuple[IPAddress, int]]) -> tuple[Slice, ...]:
    return tuple(Slice(domain.point(int(a)), domain.point(p), a.is_loopback) for a, p in dict.fromkeys(dests))


def ask(ruleset: Ruleset, ctx: NodeContext, q: Question) -> Answer:
    """The answer to ``q`` over every packet it is about (see the module)."""
    interp = Interpreter(ruleset, ctx, memo=False)  # each witness is traced once
    walker = Walker(interp.program, interp.hooks)
    space = walker.space
    witnesses: list[Witness] = []
    sources: dict[tuple[str, str], Span] = {}  # per (destination, origin)
    universe: dict[tuple[str, str], Span] = {}  # the sources asked about
    exact_sources = True
    reasons: list[str] = []
    bugs: list[str] = []
    n = 0
    seen_origins: set[str] = set()
    for w in sliced_walks([walker], protos=q.protos, sources_within=q.sources, only=q.slices):
        if w.undecided:
            reasons.append(w.undecided)
            continue
        n += 1
        paths = w.paths[0]
        sets: list[Constrained] = []
        for st, v in paths:
            if v == INCONCLUSIVE and _meets(space, st, w.region):
                reasons.append(st.reason)
            tests = q.wants(st, v)
            if tests is None:
                continue
            c = conjoin(st, tests)
            if c is not None:
                sets.append(c)
        where = (_label(w.slice, ctx.family), w.origin)
        universe[where] = domain.union(universe.get(where, ()), w.region["src"])
        if q.describe_sources:
            for c in sets:
                if c.extras:
                    exact_sources = False
                src = domain.intersect(c.dom("src"), w.region["src"])
                if src:
                    sources[where] = domain.union(sources.get(where, ()), src)
        if w.origin in seen_origins:
            continue  # one witness per origin is enough
        try:
            found = witness(space, sets, w.region)
        except Undecided as e:
            reasons.append(str(e))
            continue
        if found is None:
            continue
        pkt = _packet(space, found, w.origin)
        tr = interp.trace(pkt)
        if not any(q.holds(o) for o in tr.outcomes):
            bugs.append(f"the witness {pkt} does not replay: the interpreter gives {[o.destination for o in tr.outcomes]}")
            continue
        seen_origins.add(w.origin)
        witnesses.append(Witness(pkt, tr))
        if not q.describe_sources:
            break
    answer = "yes" if witnesses else ("inconclusive" if reasons or bugs else "no")
    described = tuple((d, o, _describe(s, universe[(d, o)], ctx.family) + ("" if exact_sources else " (at least)"))
                      for (d, o), s in sorted(sources.items(), key=lambda kv: ORIGINS.index(kv[0][1])))  # fmt: skip
    return Answer(q.text, answer, tuple(witnesses), described if witnesses else (), n, tuple(dict.fromkeys(reasons))[:5], tuple(bugs))


def _label(s: Slice, family: int) -> str:
    a, p = domain.single(s.dst), domain.single(s.dport)
    if a is None:
        return "other destinations"
    addr = address(a, family)
    host = f"[{addr}]" if family == 6 else str(addr)
    return f"{host}:{p}" if p is not None else host


def _describe(span: Span, universe: Span, family: int) -> str:
    """The sources of ``span`` as few CIDRs: those it holds, or those it leaves out of
    ``universe`` (the sources asked about; addresses outside it may fall either way), each
    with a few exceptions when that is shorter ("every source but 10.42.0.0/16 (except
    10.42.2.3/32)")."""
    rest = domain.subtract(universe, span)
    if not rest:
        return f"every source ({domain.describe(universe, family)})" if len(universe) <= 4 else "every source"

    def shapes(main: Span, other: Span, prefix: str) -> list[tuple[int, str]]:
        out = []
        plain = domain.describe_cover(main, universe, family)
        out.append((len(plain), prefix + ", ".join(plain)))
        small = domain.normalise(iv for iv in other if iv[1] - iv[0] < 16)
        if small:
            wide = domain.describe_cover(domain.union(main, small), universe, family)
            holes = domain.describe_cover(small, universe, family)
            out.append((len(wide) + len(holes), f"{prefix}{', '.join(wide)} (except {', '.join(holes)})"))
        return out

    return min([*shapes(span, rest, ""), *shapes(rest, span, "every source but ")])[1]


def _meets(space: Space, c: Constrained, region: dict[str, Span]) -> bool:
    return witness(space, [c], region) is not None


def witness(space: Space, sets: Sequence[Constrained], region: dict[str, Span]) -> dict[str, int] | None:
    """A packet of ``region`` in one of ``sets``, or None when there is none (Z3 decides what
    the interval sets do not)."""
    easy = []
    for c in sets:
        if c.extras or not all(v in region for v in c.doms):
            continue
        inside = {v: domain.intersect(c.dom(v), span) for v, span in region.items()}
        if all(inside.values()):
            easy.append(inside)
    # a readable witness where there is one
    for inside in sorted(easy, key=lambda d: not any(domain.contains(d["src"], x) for x in _NICE["src"])):
        return {v: domain.pick(span, _NICE.get(v, ())) for v, span in inside.items()}
    hard = [c for c in sets if c.extras or any(v not in region for v in c.doms)]
    if not hard:
        return None
    vs = space.vars
    s = z3.Solver()
    s.set("timeout", 20_000)
    s.add(*(domain.to_z3(vs[v], span) for v, span in region.items()))
    s.add(z3.Or([c.guard() for c in hard]))
    r = s.check()
    if r == z3.unknown:
        raise Undecided(f"z3: {s.reason_unknown()}")
    if r == z3.unsat:
        return None
    m = s.model()
    return {v: m.eval(t, model_completion=True).as_long() for v, t in vs.items()}


_NICE: dict[str, tuple[int, ...]] = {"sport": (40000,), "src": tuple(int(ipaddress.ip_address(a)) for a in ("203.0.113.2", "198.51.100.2", "192.0.2.2"))}


def _packet(space: Space, values: dict[str, int], origin: str) -> Packet:
    return Packet(
        src=space.concrete("src", values["src"]), dst=space.concrete("dst", values["dst"]),  # type: ignore[arg-type]
        dport=values["dport"], sport=values["sport"], proto=space.concrete("proto", values["proto"]),  # type: ignore[arg-type]
        origin=origin,  # type: ignore[arg-type]
    )
