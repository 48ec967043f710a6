"""The symbolic walk on small rulesets whose paths can be read off the rules (each test says
why), and its limits: what it cannot encode ends inconclusive, naming it."""

from __future__ import annotations

import ipaddress
from fractions import Fraction

import pytest

from nat_verify.model.packet import Packet
from nat_verify.netfilter import targets
from nat_verify.netfilter.context import NodeContext, Route
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.parse import parse
from nat_verify.symbolic.paths import outcomes, same_outcomes
from nat_verify.symbolic.state import UNENCODED, Var
from nat_verify.symbolic.walk import Walker
from tests.unit.test_symbolic_query import CTX, dump


def walk(text: str, origin: str = "external", ctx: NodeContext = CTX, **kw: object) -> tuple[Interpreter, list]:
    it = Interpreter(parse(text), ctx, linear=True)
    return it, Walker(it.program).every_packet(origin, "tcp", **kw)  # type: ignore[arg-type]


def test_an_exact_source_test_makes_the_source_concrete_on_its_branch() -> None:
    # the hairpin test of kube-proxy's KUBE-SEP: on the branch that matches, the source is known
    it, paths = walk(dump("-A PREROUTING -s 10.0.1.5/32 -j MARK --set-xmark 0x4000/0x4000\n"
                          "-A PREROUTING -d 10.96.0.1/32 -j DNAT --to-destination 10.0.1.5:80\n"))  # fmt: skip
    marked = [st for st, _ in paths if st.mark == 0x4000]
    assert marked and all(str(st.src) == "10.0.1.5" for st in marked)
    assert all(isinstance(st.src, Var) for st, _ in paths if st.mark == 0)


def test_masquerade_source_follows_the_route_of_a_variable_destination() -> None:
    # two routes with their own source address: every packet forwarded and masqueraded leaves
    # with the source of the route to its (unknown) destination, as the interpreter says
    ctx = NodeContext(
        family=4, addresses=("192.168.0.2", "172.16.0.2"), pod_cidrs=("10.0.0.0/8",), local_pod_cidrs=("10.0.1.0/24",),
        routes=(Route(ipaddress.ip_network("172.16.0.0/12"), "eth1", ipaddress.ip_address("172.16.0.2")),),
    )  # fmt: skip
    it, paths = walk(dump("-A POSTROUTING -j MASQUERADE\n"), ctx=ctx)
    for dst in ("172.20.1.1", "8.8.8.8", "10.0.1.9"):
        p = Packet(src="203.0.113.9", dst=dst, dport=80, origin="external")
        assert same_outcomes(outcomes(p, paths), it.trace(p).outcomes), dst
    srcs = {str(o.src) for dst in ("172.20.1.1", "8.8.8.8") for o in outcomes(Packet(src="203.0.113.9", dst=dst, dport=80), paths)}
    assert srcs == {"172.16.0.2", "192.168.0.2"}


def test_a_random_choice_forks_with_exact_probabilities() -> None:
    it, paths = walk(dump("-A PREROUTING -d 10.96.0.1/32 -m statistic --mode random --probability 0.25 -j DNAT --to-destination 10.0.1.5:80\n"
                          "-A PREROUTING -d 10.96.0.1/32 -j DNAT --to-destination 10.0.1.6:80\n"))  # fmt: skip
    p = Packet(src="203.0.113.9", dst="10.96.0.1", dport=80)
    got = {o.destination: o.probability for o in outcomes(p, paths)}
    # 0.25 is stored exactly (2^29 / 2^31)
    assert got == {"10.0.1.5:80": Fraction(1, 4), "10.0.1.6:80": Fraction(3, 4)}
    assert same_outcomes(outcomes(p, paths), it.trace(p).outcomes)


def test_any_mark_is_one_walk() -> None:
    # the packet's own mark is a variable: one walk answers for every mark
    it, paths = walk(dump("-A PREROUTING -m mark --mark 0x1/0x1 -j DNAT --to-destination 10.0.1.5:80\n"), mark=Var("mark"))
    for mark in (0, 1, 2, 3, 0xFFFFFFFF):
        p = Packet(src="203.0.113.9", dst="10.96.0.1", dport=80, mark=mark)
        assert same_outcomes(outcomes(p, paths), it.trace(p).outcomes), mark


def test_what_cannot_be_encoded_ends_inconclusive_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # a target effect computing with the mark in a way no bit-vector term supports
    monkeypatch.setattr(targets, "apply_mark", lambda cur, o: int(cur) | 1)
    _, paths = walk(dump("-A PREROUTING -j MARK --set-xmark 0x1/0x1\n"), mark=Var("mark"))
    reasons = {st.reason for st, v in paths if v == "INCONCLUSIVE"}
    assert reasons and all(r.startswith(UNENCODED + "target MARK") for r in reasons)


def test_a_recent_set_before_a_failing_match_still_records_the_source() -> None:
    # the kernel evaluates a rule's matches in order and stops at the first that fails:
    # "-m recent --set" before "-m tcp ! --syn" (false for a connection's first packet) has
    # already added the source when the rule fails (found by test_symbolic_registry)
    text = dump(filter_="-A FORWARD -s 10.0.0.0/8 -m recent --set -m tcp ! --syn -j DROP\n")
    it, paths = walk(text)
    p = Packet(src="10.0.2.7", dst="10.0.3.9", dport=80, origin="external")
    (o,) = it.trace(p).outcomes
    assert o.verdict == "forward" and o.recent_set == (("DEFAULT", "10.0.2.7"),)
    assert same_outcomes(outcomes(p, paths), (o,))


def test_a_slice_that_forks_too_much_is_undecided_and_the_others_go_on() -> None:
    from nat_verify.symbolic.whole import sliced_walks

    # marks on source ranges and on source-port ranges: every combination is a path
    # (to the node's address only: the other destinations are walked as usual)
    rules = "".join(f"-A PREROUTING -d 192.168.0.2 -s 10.{i}.0.0/16 -j MARK --or-mark {1 << i:#x}\n" for i in range(6))
    rules += "".join(f"-A PREROUTING -d 192.168.0.2 -p tcp --sport {1000 * i + 1}:65535 -j MARK --or-mark {1 << (8 + i):#x}\n" for i in range(6))
    it = Interpreter(parse(dump(rules)), CTX, linear=True)
    walked = list(sliced_walks([Walker(it.program, max_paths=20)], budget=10, origins=("external",)))
    undecided = [w for w in walked if w.undecided]
    assert [w.undecided for w in undecided] == ["external packets to 192.168.0.2/32: the walk forks into too many paths"]
    assert len(walked) > len(undecided)  # the walk went on past them
