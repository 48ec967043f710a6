"""Netfilter semantics of the interpreter, rule by rule, with expected values reasoned from the
kernel's behaviour (each test says why)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from nat_verify.model.packet import Packet
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.interpreter import Interpreter, RecentState
from nat_verify.netfilter.parse import parse

CTX = NodeContext(family=4, addresses=("192.168.0.2",), pod_cidrs=("10.0.0.0/8",), local_pod_cidrs=("10.0.1.0/24",))


def interp(nat: str = "", filter_: str = "", *, memo: bool = True) -> Interpreter:
    text = f"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n{filter_}COMMIT\n"
    text += f"*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n{nat}COMMIT\n"
    return Interpreter(parse(text), CTX, memo=memo, replay_after=0)


def ext(dst: str, dport: int = 80, src: str = "203.0.113.9", proto: str = "tcp") -> Packet:
    return Packet(src=src, dst=dst, dport=dport, proto=proto, origin="external")


def test_statistic_cascade_is_exact_with_kernel_quantisation() -> None:
    # kube-proxy's cascade for 3 endpoints: 1/3 (stored round(2^31/3)), then 1/2, then the rest
    it = interp(
        ":S - [0:0]\n"
        "-A PREROUTING -d 10.96.0.1/32 -j S\n"
        "-A S -m statistic --mode random --probability 0.3333333333 -j DNAT --to-destination 10.0.1.1:80\n"
        "-A S -m statistic --mode random --probability 0.5000000000 -j DNAT --to-destination 10.0.1.2:80\n"
        "-A S -j DNAT --to-destination 10.0.1.3:80\n"
    )
    outs = {o.destination: o.probability for o in it.trace(ext("10.96.0.1")).outcomes}
    p1 = Fraction(round(2**31 / 3), 2**31)  # 715827883 / 2^31
    assert outs == {"10.0.1.1:80": p1, "10.0.1.2:80": (1 - p1) / 2, "10.0.1.3:80": (1 - p1) / 2}
    assert sum(outs.values()) == 1


def test_mark_with_masks_and_masquerade_only_when_marked() -> None:
    # KUBE-MARK-MASQ ORs the bit in (other bits survive), KUBE-POSTROUTING XORs it out
    it = interp(
        ":KUBE-MARK-MASQ - [0:0]\n:KUBE-POSTROUTING - [0:0]\n"
        "-A PREROUTING -d 10.96.0.1/32 -j MARK --set-xmark 0x1/0x1\n"
        "-A PREROUTING -d 10.96.0.1/32 -j KUBE-MARK-MASQ\n"
        "-A PREROUTING -d 10.96.0.1/32 -j DNAT --to-destination 10.0.2.5:8080\n"
        "-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000\n"
        "-A POSTROUTING -j KUBE-POSTROUTING\n"
        "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN\n"
        "-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000\n"
        "-A KUBE-POSTROUTING -j MASQUERADE --random-fully\n"
    )
    (o,) = it.trace(ext("10.96.0.1")).outcomes
    assert o.dnat and o.destination == "10.0.2.5:8080" and o.masquerade
    assert o.src == CTX.addresses[0]  # the egress address (default route: the node's address)
    assert o.mark == 0x1  # 0x4000 cleared, the other agent's bit kept
    (o2,) = it.trace(ext("10.96.0.2")).outcomes  # unmarked: no masquerade
    assert not o2.masquerade and not o2.dnat and o2.verdict == "forward"


def test_goto_does_not_return_and_return_resumes_caller() -> None:
    it = interp(
        "",
        ":A - [0:0]\n:B - [0:0]\n"
        "-A FORWARD -j A\n-A FORWARD -j DROP\n"
        "-A A -p udp -g B\n-A A -j RETURN\n"
        "-A B -j RETURN\n",
    )
    # tcp: A returns, FORWARD continues to DROP
    assert {o.verdict for o in it.trace(ext("10.0.2.5")).outcomes} == {"drop"}
    # udp: goto B; B's RETURN goes back to FORWARD's caller level, i.e. the end of FORWARD after rule 1
    # (a goto replaces A's frame, so RETURN from B resumes FORWARD at its next rule: DROP as well)
    assert {o.verdict for o in it.trace(ext("10.0.2.5", proto="udp")).outcomes} == {"drop"}


def test_goto_then_accept_skips_the_rest() -> None:
    it = interp("", ":A - [0:0]\n:B - [0:0]\n-A FORWARD -j A\n-A FORWARD -j DROP\n-A A -g B\n-A A -j DROP\n-A B -j ACCEPT\n")
    assert {o.verdict for o in it.trace(ext("10.0.2.5")).outcomes} == {"forward"}


def test_reject_type_and_default() -> None:
    it = interp("", "-A FORWARD -p tcp -m tcp --dport 81 -j REJECT --reject-with tcp-reset\n-A FORWARD -j REJECT\n")
    (o,) = it.trace(ext("10.0.2.5", 81)).outcomes
    assert (o.verdict, o.reject_with) == ("reject", "tcp-reset")
    (o,) = it.trace(ext("10.0.2.5", 82)).outcomes
    assert (o.verdict, o.reject_with) == ("reject", "icmp-port-unreachable")


def test_local_delivery_goes_through_input_not_forward() -> None:
    it = interp("", "-A INPUT -j DROP\n")
    assert {o.verdict for o in it.trace(ext("192.168.0.2", 22)).outcomes} == {"drop"}
    assert {o.verdict for o in it.trace(ext("10.0.2.5", 22)).outcomes} == {"forward"}


def test_host_packet_to_itself_loops_through_input_without_nat_again() -> None:
    # OUTPUT -> lo -> PREROUTING/INPUT: the nat chains do not see the looped packet (conntrack)
    it = interp("-A PREROUTING -j DNAT --to-destination 10.0.2.5:1\n", "-A INPUT -p tcp -m tcp --dport 22 -j REJECT\n")
    p = Packet(src="192.168.0.2", dst="192.168.0.2", dport=22, origin="host")
    (o,) = it.trace(p).outcomes
    assert o.verdict == "reject" and not o.dnat


def test_recent_set_then_rcheck_is_sticky_and_expires() -> None:
    it = interp(
        ":S - [0:0]\n:E1 - [0:0]\n:E2 - [0:0]\n"
        "-A PREROUTING -d 10.96.0.1/32 -j S\n"
        "-A S -m recent --name E1 --rcheck --seconds 10 --reap -j E1\n"
        "-A S -m recent --name E2 --rcheck --seconds 10 --reap -j E2\n"
        "-A S -m statistic --mode random --probability 0.5 -j E1\n"
        "-A S -j E2\n"
        "-A E1 -m recent --name E1 --set -p tcp -j DNAT --to-destination 10.0.2.1:80\n"
        "-A E2 -m recent --name E2 --set -p tcp -j DNAT --to-destination 10.0.2.2:80\n"
    )
    first = it.trace(ext("10.96.0.1")).outcomes
    assert {o.destination for o in first} == {"10.0.2.1:80", "10.0.2.2:80"}
    o1 = next(o for o in first if o.destination == "10.0.2.2:80")
    assert o1.recent_set == (("E2", "203.0.113.9"),)
    again = it.trace(ext("10.96.0.1"), RecentState.of({("E2", "203.0.113.9"): 9.0})).outcomes
    assert [(o.destination, o.probability) for o in again] == [("10.0.2.2:80", 1)]
    # xt_recent matches only while the entry is younger than --seconds
    late = it.trace(ext("10.96.0.1"), RecentState.of({("E2", "203.0.113.9"): 10.0})).outcomes
    assert len(late) == 2
    # another client is not sticky
    other = it.trace(ext("10.96.0.1", src="203.0.113.10"), RecentState.of({("E2", "203.0.113.9"): 1.0})).outcomes
    assert len(other) == 2


def test_unknown_module_and_target_are_inconclusive_with_reason() -> None:
    it = interp("-A PREROUTING -m frobnicate --x 1 -j ACCEPT\n")
    (o,) = it.trace(ext("10.0.2.5")).outcomes
    assert o.verdict == "inconclusive" and "frobnicate" in o.reason
    it = interp("-A PREROUTING -d 10.0.2.5/32 -j NETMAP --to 10.1.0.0/16\n")
    (o,) = it.trace(ext("10.0.2.5")).outcomes
    assert o.verdict == "inconclusive" and "NETMAP" in o.reason
    # a definite mismatch decides even next to an unknown match: no inconclusive
    it = interp("-A PREROUTING -d 10.9.9.9/32 -m frobnicate --x 1 -j DROP\n")
    assert {o.verdict for o in it.trace(ext("10.0.2.5")).outcomes} == {"forward"}


def test_notrack_skips_nat() -> None:
    text = (
        "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A PREROUTING -d 10.96.0.1/32 -j CT --notrack\nCOMMIT\n"
        "*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -d 10.96.0.1/32 -j DNAT --to-destination 10.0.2.5:80\nCOMMIT\n"
    )
    (o,) = Interpreter(parse(text), CTX).trace(ext("10.96.0.1")).outcomes
    assert not o.dnat and o.verdict == "forward"


@pytest.mark.parametrize("memo", [True, False])
def test_pod_to_itself_stays_in_the_pod(memo: bool) -> None:
    # found by the kernel oracle: a pod's own address is on its local table, the node never sees it;
    # and the whole-trace replay must not confuse it with a packet to another pod of the same class
    it = interp("-A PREROUTING -d 10.0.1.7/32 -j DNAT --to-destination 10.0.1.8:80\n", memo=memo)
    other = Packet(src="10.0.1.7", dst="10.0.1.9", dport=80, origin="pod")
    own = Packet(src="10.0.1.7", dst="10.0.1.7", dport=80, origin="pod")
    (a,) = it.trace(own).outcomes
    assert a.verdict == "accept" and not a.path and "inside the pod" in a.reason
    (b,) = it.trace(other).outcomes
    assert b.verdict == "forward" and b.destination == "10.0.1.9:80"
    (c,) = it.trace(own).outcomes
    assert c == a


def test_addrtype_local_includes_loopback_and_node_addresses() -> None:
    it = interp("-A PREROUTING -m addrtype --dst-type LOCAL -j DNAT --to-destination 10.0.2.5:80\n")
    assert {o.dnat for o in it.trace(ext("192.168.0.2")).outcomes} == {True}
    assert {o.dnat for o in it.trace(ext("192.168.0.3")).outcomes} == {False}
    host = Packet(src="127.0.0.1", dst="127.0.0.1", dport=80, origin="host")
    # OUTPUT path: no nat rule in OUTPUT here, so no DNAT for the host's packet
    assert {o.dnat for o in it.trace(host).outcomes} == {False}


def test_reply_is_reversed_only_when_it_comes_back_through_the_node() -> None:
    from nat_verify.netfilter.interpreter import reply

    it = interp("-A PREROUTING -d 10.96.0.1/32 -j DNAT --to-destination 10.0.2.5:8080\n")
    p = ext("10.96.0.1")
    (o,) = it.trace(p).outcomes
    # 10.0.2.5 is a pod on another node (not in this node's 10.0.1.0/24) and the client is off the
    # node: without masquerade the endpoint answers the client directly, from its own address
    r = reply(p, o, CTX)
    assert r.sent == (o.dst, 8080, p.src, p.sport)
    assert not r.through_node and r.broken and str(r.received[0]) == "10.0.2.5"
    # an endpoint on this node answers through it: conntrack restores the address the client called
    it2 = interp("-A PREROUTING -d 10.96.0.1/32 -j DNAT --to-destination 10.0.1.5:8080\n")
    (o2,) = it2.trace(p).outcomes
    r2 = reply(p, o2, CTX)
    assert r2.through_node and not r2.broken and str(r2.received[0]) == "10.96.0.1" and r2.received[1] == 80


# -- pinned: an ipset with known members (the summaries and the classes must see its members) ---

_IPSET_DUMP = (
    "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
    "-A FORWARD -m set --match-set blocked src -j DROP\nCOMMIT\n"
)
_IPSET_CTX = NodeContext(family=4, addresses=("192.168.1.10",), ipsets=(("blocked", ("203.0.113.0/24",)),))


def test_ipset_members_split_the_memoised_walk() -> None:
    # A source inside the set is dropped (xt_set matches it), one outside is forwarded. The
    # memoised interpreter replays a walk per class of packets: a class that does not know the
    # members answered "forward" for the second packet, from the first one's walk.
    fast = Interpreter(parse(_IPSET_DUMP), _IPSET_CTX, replay_after=0)
    plain = Interpreter(parse(_IPSET_DUMP), _IPSET_CTX, linear=True)
    outside = Packet(src="198.51.100.1", dst="10.1.2.3", dport=80)
    inside = Packet(src="203.0.113.5", dst="10.1.2.3", dport=80)
    for it in (fast, plain):
        assert [o.verdict for o in it.trace(outside).outcomes] == ["forward"]
        assert [o.verdict for o in it.trace(inside).outcomes] == ["drop"]


def test_ipset_members_are_constants_of_the_exhaustive_classes() -> None:
    # the classes must hold a source inside the set, or a proof would never look at the
    # dropped sources
    import ipaddress

    from nat_verify.check.atoms import SourceSpace

    it = Interpreter(parse(_IPSET_DUMP), _IPSET_CTX)
    classes = SourceSpace(it).classes(_IPSET_CTX, ipaddress.ip_address("10.1.2.3"), 80, "tcp", [])
    assert any(src in ipaddress.ip_network("203.0.113.0/24") for src, _, _ in classes)
    assert any(src not in ipaddress.ip_network("203.0.113.0/24") for src, _, o in classes if o == "external")


@pytest.mark.parametrize("linear", [False, True])
def test_ten_thousand_matching_rules_in_a_row_need_no_recursion(linear: bool) -> None:
    # each rule matches and goes on to the next (a non-terminating target): the walk is a loop,
    # not a call per rule (474 such rules used to exhaust Python's recursion limit)
    rules = "".join("-A FORWARD -s 10.0.0.0/8 -j MARK --or-mark 0x1\n" for _ in range(10_000))
    it = interp(filter_=rules, memo=not linear) if not linear else Interpreter(
        parse(f"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n{rules}COMMIT\n"), CTX,
        linear=True,
    )  # fmt: skip
    (o,) = it.trace(ext("10.9.9.9", src="10.5.5.5")).outcomes
    assert o.verdict == "forward" and o.mark == 1 and len(o.path) == 10_000
