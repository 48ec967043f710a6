"""Whole-dump questions (``symbolic.query``) on small dumps whose answers can be read off the
rules: ``yes`` comes with a witness the interpreter replays, ``no`` is a proof over every
packet (every source and port, every destination)."""

from __future__ import annotations

import ipaddress

from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.parse import parse
from nat_verify.symbolic import query as Q

CTX = NodeContext(family=4, addresses=("192.168.0.2",), pod_cidrs=("10.0.0.0/8",), local_pod_cidrs=("10.0.1.0/24",))
A = ipaddress.ip_address


def dump(nat: str = "", filter_: str = "", forward: str = "ACCEPT") -> str:
    text = f"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD {forward} [0:0]\n:OUTPUT ACCEPT [0:0]\n{filter_}COMMIT\n"
    return text + f"*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n{nat}COMMIT\n"


# a Service: 10.96.0.1:80 is DNATed to the pod 10.0.1.5:8080, masqueraded unless from the pod network
SERVICE = (
    "-A PREROUTING -d 10.96.0.1/32 -p tcp --dport 80 ! -s 10.0.0.0/8 -j MARK --set-xmark 0x4000/0x4000\n"
    "-A PREROUTING -d 10.96.0.1/32 -p tcp --dport 80 -j DNAT --to-destination 10.0.1.5:8080\n"
    "-A POSTROUTING -m mark --mark 0x4000/0x4000 -j MASQUERADE\n"
)


def test_reach_through_nat_gives_a_replayed_witness() -> None:
    rs = parse(dump(SERVICE, "-A FORWARD -d 10.0.1.5/32 -p tcp --dport 8080 -j ACCEPT\n", forward="DROP"))
    a = Q.ask(rs, CTX, Q.reach(CTX, A("10.0.1.5"), 8080, [ipaddress.ip_network("203.0.113.0/24")]))
    assert a.answer == "yes" and not a.bugs
    (w,) = a.witnesses
    assert w.packet.src in ipaddress.ip_network("203.0.113.0/24")
    # filter FORWARD drops everything but the pod's port: the witness goes through the Service
    # or straight at the pod, and either way arrives at 10.0.1.5:8080
    assert any(o.verdict == "forward" and o.destination == "10.0.1.5:8080" for o in w.trace.outcomes)


def test_no_packet_reaches_a_dropped_destination_proved() -> None:
    # FORWARD drops every packet from 203.0.113.0/24, and no rule leads it to the node itself
    rs = parse(dump(SERVICE, "-A FORWARD -s 203.0.113.0/24 -j DROP\n"))
    a = Q.ask(rs, CTX, Q.reach(CTX, A("10.0.1.5"), 8080, [ipaddress.ip_network("203.0.113.0/24")]))
    assert (a.answer, a.witnesses, a.reasons, a.bugs) == ("no", (), (), ())
    assert a.slices > 0
    # ...but the pod network, which FORWARD does not drop, reaches it
    b = Q.ask(rs, CTX, Q.reach(CTX, A("10.0.1.5"), 8080, [ipaddress.ip_network("10.0.2.0/24")]))
    assert b.answer == "yes"


def test_which_packets_to_a_service_are_masqueraded() -> None:
    rs = parse(dump(SERVICE))
    q = Q.masqueraded("10.96.0.1:80", Q.service_slices([(A("10.96.0.1"), 80)]), ("tcp",))
    a = Q.ask(rs, CTX, q)
    assert a.answer == "yes" and not a.bugs
    # every source outside 10.0.0.0/8 arriving from off the node is masqueraded; this node's
    # pods (10.0.1.0/24) never are, nor is the node itself (its packets take nat OUTPUT, which
    # has no rule here)
    origins = {w.packet.origin for w in a.witnesses}
    assert origins == {"external"}
    assert all(ipaddress.ip_address(w.packet.src) not in ipaddress.ip_network("10.0.0.0/8") for w in a.witnesses)
    sources = {o: srcs for d, o, srcs in a.sources if d == "10.96.0.1:80"}
    assert set(sources) == {"external"}
    # (this node's pods, 10.0.1.0/24, are not external sources: the shortest exact answer)
    assert sources["external"] == "every source but 10.0.0.0/8"


def test_which_sources_keep_their_client_ip() -> None:
    rs = parse(dump(SERVICE))
    q = Q.keeps_client_ip("10.96.0.1:80", Q.service_slices([(A("10.96.0.1"), 80)]), ("tcp",))
    a = Q.ask(rs, CTX, q)
    assert a.answer == "yes"
    sources = {o: srcs for d, o, srcs in a.sources if d == "10.96.0.1:80"}
    assert sources["pod"] == "every source (10.0.1.0/24)"
    for w in a.witnesses:
        assert w.packet.src in ipaddress.ip_network("10.0.0.0/8")
        assert any(o.dnat and not o.masquerade for o in w.trace.outcomes)
    # with masqueradeAll-like rules nothing keeps it: proved
    everyone = SERVICE.replace("! -s 10.0.0.0/8 ", "")
    b = Q.ask(parse(dump(everyone)), CTX, q)
    assert (b.answer, b.witnesses) == ("no", ())


def test_an_undecidable_rule_makes_no_inconclusive() -> None:
    rs = parse(dump(SERVICE, "-A FORWARD -s 203.0.113.0/24 -m u32 --u32 0x0=0x0 -j DROP\n-A FORWARD -s 203.0.113.0/24 -j DROP\n"))
    a = Q.ask(rs, CTX, Q.reach(CTX, A("10.0.1.5"), 8080, [ipaddress.ip_network("203.0.113.0/24")]))
    assert a.answer == "inconclusive"
    assert any("u32" in r for r in a.reasons)
