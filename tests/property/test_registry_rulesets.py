"""Random rulesets drawn from the registry: the speed-ups and the exhaustive classes are exact.

Two claims the proofs rest on, checked on rulesets no compiler wrote (every modelled match
module and target, ipsets with known members, addrtype, marks, random matches):

* the fast interpreter (destination index, chain summaries, whole-trace replay) gives exactly
  the outcomes of the plain rule-by-rule walk;
* every source inside an exhaustive class (``check.atoms``) is traced exactly like the class's
  representative: the classes are the packets the rules cannot tell apart.
"""

from __future__ import annotations

import ipaddress

from hypothesis import given, settings
from hypothesis import strategies as st

from nat_verify.check.atoms import SourceSpace
from nat_verify.model.outcome import Outcome
from nat_verify.model.packet import Packet
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.ruleset import Ruleset
from tests.property import rules as R


@settings(max_examples=max(200, settings.default.max_examples))
@given(R.rulesets(), st.lists(R.packets(), min_size=1, max_size=30))
def test_fast_interpreter_equals_the_rule_by_rule_walk(rs: Ruleset, pkts: list[Packet]) -> None:
    ctx = R.context()
    fast = Interpreter(rs, ctx, replay_after=0)  # replay whole traces from the first packet on
    plain = Interpreter(rs, ctx, linear=True)
    for p in pkts:
        assert fast.trace(p) == plain.trace(p), p


def _seen_as(o: Outcome, p: Packet) -> tuple[object, ...]:
    """An outcome with the packet's own source written as a placeholder (so that two sources of
    one class compare equal when the rules treated them alike)."""
    src = "SRC" if o.src == p.src else o.src
    sport = "SPORT" if o.sport == p.sport else o.sport
    recent = tuple((n, "SRC" if a == str(p.src) else a) for n, a in o.recent_set)
    return (o.probability, o.verdict, o.dst, o.dport, src, sport, o.dnat, o.masquerade, o.snat, o.reject_with,
            o.path, o.reason, recent, o.mark)  # fmt: skip


def _origin(ctx_src: ipaddress.IPv4Address, local: set[ipaddress.IPv4Address]) -> str:
    if ctx_src in local or ctx_src in ipaddress.ip_network("127.0.0.0/8"):
        return "host"
    if ctx_src in ipaddress.ip_network(R.LOCAL_PODS):
        return "pod"
    return "external"


@settings(max_examples=max(200, settings.default.max_examples))
@given(R.rulesets(), st.data())
def test_every_source_in_a_class_traces_like_its_representative(rs: Ruleset, data: st.DataObject) -> None:
    ctx = R.context()
    it = Interpreter(rs, ctx, linear=True)
    space = SourceSpace(it)
    dst = ipaddress.ip_address(data.draw(st.sampled_from(R.ADDRESSES)))
    dport = data.draw(st.sampled_from(R.PORTS))
    proto = data.draw(st.sampled_from(("tcp", "udp")))
    part = space.partition(ctx, dst, dport, proto, ())
    reps = {(part.signature(int(a)), part.sport_class(sp), o): (a, sp) for a, sp, o in space.classes(ctx, dst, dport, proto, ())}
    local = set(ctx.addresses)
    for _ in range(data.draw(st.integers(1, 8))):
        src = ipaddress.IPv4Address(data.draw(st.sampled_from(R.ADDRESSES) | st.integers(1 << 24, 2**32 - 1)))
        sport = data.draw(st.sampled_from(R.PORTS))
        origin = _origin(src, local)
        rep = reps.get((part.signature(int(src)), part.sport_class(sport), origin))
        if rep is None:
            # no class: not a valid source for this destination (a martian, a loopback source
            # to a non-loopback destination); the classes leave such packets out on purpose
            assert src.is_multicast or int(src) == 0xFFFFFFFF or src in ipaddress.ip_network("127.0.0.0/8") or (
                dst in ipaddress.ip_network("127.0.0.0/8")
            ), (src, dst)
            continue
        p = Packet(src=src, dst=dst, dport=dport, sport=sport, proto=proto, origin=origin)  # type: ignore[arg-type]
        q = Packet(src=rep[0], dst=dst, dport=dport, sport=rep[1], proto=proto, origin=origin)  # type: ignore[arg-type]
        got = [_seen_as(o, p) for o in it.trace(p).outcomes]
        want = [_seen_as(o, q) for o in it.trace(q).outcomes]
        assert got == want, (p, q)
