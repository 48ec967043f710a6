"""Equivalence over every packet with Z3 (``symbolic.equivalence``): a dump and a mutant are told
apart by a packet whose outcomes really differ on the two (traced on both by the interpreter);
a dump and itself, or a reordering that changes nothing, are proved equivalent."""

from __future__ import annotations

import ipaddress

import pytest

from nat_verify.check.equivalence import _signature
from nat_verify.check.nodectx import node_context
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.parse import parse
from nat_verify.symbolic.equivalence import equivalent
from tests.quality.bugs import BUGS, PlantedBug, cluster_of, dumps
from tests.unit.test_symbolic_query import CTX, SERVICE, dump

SOME = [b for b in BUGS if not b.parse_error and b.expected][:6]


@pytest.mark.parametrize("bug", SOME, ids=lambda b: b.name)
def test_a_planted_bug_is_a_difference_that_replays(bug: PlantedBug) -> None:
    good, bad = dumps(bug)
    ctx = node_context(cluster_of(bug.cluster), bug.node, bug.family)
    a, b = parse(good, family=bug.family), parse(bad, family=bug.family)
    res = equivalent(a, b, ctx)
    assert res.difference is not None and not res.bugs
    p = res.difference.packet
    assert _signature(Interpreter(a, ctx).trace(p).outcomes) != _signature(Interpreter(b, ctx).trace(p).outcomes)
    assert res.difference.a == Interpreter(a, ctx).trace(p).outcomes


def test_a_dump_is_equivalent_to_itself() -> None:
    bug = SOME[0]
    good, _ = dumps(bug)
    ctx = node_context(cluster_of(bug.cluster), bug.node, bug.family)
    rs = parse(good, family=bug.family)
    res = equivalent(rs, rs, ctx)
    assert (res.difference, res.inconclusive, res.bugs) == (None, 0, ())
    assert res.classes > 0


def test_reordering_disjoint_rules_changes_nothing() -> None:
    one = "-A FORWARD -s 203.0.113.0/24 -j DROP\n-A FORWARD -d 10.0.2.0/24 -p udp -j ACCEPT\n"
    two = "-A FORWARD -d 10.0.2.0/24 -p udp -j ACCEPT\n-A FORWARD -s 203.0.113.0/24 -j DROP\n"
    res = equivalent(parse(dump(SERVICE, one)), parse(dump(SERVICE, two)), CTX)
    # 203.0.113.0/24 -> 10.0.2.0/24 udp is accepted by one order and dropped by the other
    assert res.difference is not None
    p = res.difference.packet
    assert p.proto == "udp" and p.src in ipaddress.ip_network("203.0.113.0/24") and p.dst in ipaddress.ip_network("10.0.2.0/24")
    three = "-A FORWARD -d 10.0.2.0/24 -p udp -j ACCEPT\n-A FORWARD -s 203.0.113.0/24 -p tcp -j DROP\n"
    four = "-A FORWARD -s 203.0.113.0/24 -p tcp -j DROP\n-A FORWARD -d 10.0.2.0/24 -p udp -j ACCEPT\n"
    res = equivalent(parse(dump(SERVICE, three)), parse(dump(SERVICE, four)), CTX)
    assert (res.difference, res.inconclusive, res.bugs) == (None, 0, ())


def test_a_difference_in_one_source_port_is_found() -> None:
    # one source port of one address: found among 2^32 x 2^16 sources
    res = equivalent(parse(dump(SERVICE)), parse(dump(SERVICE, "-A FORWARD -s 198.51.100.7/32 -p tcp --sport 4242 -j DROP\n")), CTX)
    assert res.difference is not None
    p = res.difference.packet
    assert (str(p.src), p.sport, p.proto, p.origin) == ("198.51.100.7", 4242, "tcp", "external")


def test_a_translation_that_coincides_with_the_destination_is_no_difference() -> None:
    # DNAT 10.0.2.9:80 to itself: the same destination and source as no rule at all, for every
    # packet (outcomes compare what happens to the packet, not which rules fired); a DNAT of a
    # whole /24 to that address differs for every packet to it but those to 10.0.2.9:80
    same = "-A PREROUTING -d 10.0.2.9/32 -p tcp --dport 80 -j DNAT --to-destination 10.0.2.9:80\n"
    res = equivalent(parse(dump()), parse(dump(same)), CTX)
    assert (res.difference, res.inconclusive, res.bugs) == (None, 0, ())
    other = "-A PREROUTING -d 10.0.2.0/24 -p tcp --dport 80 -j DNAT --to-destination 10.0.2.9:80\n"
    res = equivalent(parse(dump()), parse(dump(other)), CTX)
    assert res.difference is not None
    p = res.difference.packet
    assert p.dst in ipaddress.ip_network("10.0.2.0/24") and str(p.dst) != "10.0.2.9" and p.dport == 80
