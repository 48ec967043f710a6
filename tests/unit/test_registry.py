"""Every registry entry keeps its declarations: what it reads, the constants it compares, the
node facts it needs, the fields it writes. The proofs rest on these (the summaries and the
exhaustive classes look only at declared fields and constants), so each is checked on drawn
options and states rather than trusted."""

from __future__ import annotations

import bisect
import ipaddress
from fractions import Fraction

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.parse import DumpError, parse
from nat_verify.netfilter.predicate import (
    Recent,
    Unknown,
    address_constants,
    evaluator,
    port_constants,
    reads,
    unknowns,
    walk,
)
from nat_verify.netfilter.registry import (
    CORE,
    MATCHES,
    TARGET_NAMES,
    TARGETS,
    compile_match,
    compile_target,
)
from nat_verify.netfilter.ruleset import Match, Option
from nat_verify.netfilter.spec import MatchSpec, RuleError, TargetSpec
from nat_verify.netfilter.state import ADDR_FIELDS, PORT_FIELDS, PacketState
from nat_verify.netfilter.validate import validate_ruleset
from tests.property import rules as R

# (drawn on an IPv4 node; the IPv6-only icmp6 is checked on its own below)
MODELLED_MATCHES = sorted({s.name: s for s in (*MATCHES.values(), CORE) if s.meaning is not None and 4 in s.families}.items())
MODELLED_TARGETS = sorted((n, t) for n, t in TARGETS.items() if t.effect is not None)
FIELDS = (*ADDR_FIELDS, *PORT_FIELDS, "proto", "mark", "ctmark", "in_iface", "out_iface", "dnat", "snat_done", "untracked")


def _match(spec: MatchSpec, text: str) -> Match:
    """The parsed form of ``-m NAME text`` (the core options for the core entry)."""
    rs = parse(f"*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD {'-m ' + spec.name + ' ' if spec.name else ''}{text}\nCOMMIT\n", family=4)
    r = rs.tables[0].chains[0].rules[0]
    return Match("", r.core) if not spec.name else r.matches[0]


def _core_or_module(spec: MatchSpec) -> st.SearchStrategy[str]:
    if spec.name:
        return R.module(spec).map(lambda t: t.split(" ", 2)[2] if t.count(" ") >= 2 else "")
    by_name = {o.name: o for o in spec.options or ()}
    names = st.lists(st.sampled_from(("-s", "-d", "-p", "-i", "-o", "-f")), min_size=1, max_size=3, unique=True)
    return names.flatmap(lambda ns: st.tuples(*(R.value(n, by_name[n]).map(lambda v, n=n: f"{n} {v}".rstrip()) for n in ns))).map(" ".join)


def _compile(spec: MatchSpec, m: Match, ctx: NodeContext):  # type: ignore[no-untyped-def]
    if spec.name:
        return compile_match(m, ctx)
    from nat_verify.netfilter.registry import compile_core

    return compile_core(m.options, ctx)


def _state(draw: st.DrawFn) -> PacketState:
    st_ = PacketState.__new__(PacketState)
    addr = st.sampled_from(R.ADDRESSES).map(ipaddress.ip_address) | st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address)
    for f in ADDR_FIELDS:
        setattr(st_, f, draw(addr))
    for f in PORT_FIELDS:
        setattr(st_, f, draw(st.sampled_from(R.PORTS) | st.integers(0, 65535)))
    st_.proto = draw(st.sampled_from(("tcp", "udp", "sctp", "icmp")))
    st_.mark, st_.ctmark = draw(st.sampled_from(R.MARKS)), draw(st.sampled_from(R.MARKS))
    st_.in_iface = draw(st.sampled_from(("eth0", "eth1", "cni0", "lo", "vethab", "")))
    st_.out_iface = draw(st.sampled_from(("eth0", "cni0", "lo", "")))
    st_.dnat, st_.snat_done, st_.untracked = draw(st.booleans()), draw(st.booleans()), draw(st.booleans())
    st_.masq = False
    st_.prob, st_.path, st_.recent, st_.recent_set = Fraction(1), (), {}, ()
    st_.reject_with = st_.reason = ""
    st_.wlog = ()
    return st_


def _same_class(draw: st.DrawFn, value: object, bounds: list[int], top: int) -> int:
    """Another value between the same two consecutive constants as ``value``."""
    v = int(value)  # type: ignore[call-overload]
    edges = sorted({0, top, *(b for b in bounds if 0 <= b <= top)})
    i = bisect.bisect_right(edges, v) - 1
    return draw(st.integers(edges[i], edges[i + 1] - 1))


@pytest.mark.parametrize("name,spec", MODELLED_MATCHES, ids=[n or "core" for n, _ in MODELLED_MATCHES])
@settings(max_examples=max(60, settings.default.max_examples))
@given(data=st.data())
def test_a_match_reads_only_what_it_declares_and_is_constant_between_its_constants(
    name: str, spec: MatchSpec, data: st.DataObject
) -> None:
    ctx = R.context()
    m = _match(spec, data.draw(_core_or_module(spec)))
    pred = _compile(spec, m, ctx)
    assert reads(pred) <= spec.reads, (m, pred)
    if any(isinstance(q, Recent) for q in walk(pred)):
        return  # recent reads the address itself, against its lists (the summaries key on it)
    ev = evaluator(pred)
    s = _state(data.draw)
    want = ev(s)
    t = s.copy()
    other = _state(data.draw)
    for f in FIELDS:
        if f in ADDR_FIELDS and f in reads(pred):
            setattr(t, f, ipaddress.IPv4Address(_same_class(data.draw, getattr(s, f), [
                b for n in address_constants(pred, (f,)) if n.version == 4
                for b in (int(n.network_address), int(n.broadcast_address) + 1)], 2**32)))  # fmt: skip
        elif f in PORT_FIELDS and f in reads(pred):
            setattr(t, f, _same_class(data.draw, getattr(s, f), list(port_constants(pred, (f,))), 65536))
        elif f not in reads(pred):
            setattr(t, f, getattr(other, f))
    assert ev(t) == want, (m, pred)


FACTLESS = NodeContext(family=4, addresses=("172.31.0.1",), ext_iface="wan0", pod_iface="br9")


@pytest.mark.parametrize("name,spec", MODELLED_MATCHES, ids=[n or "core" for n, _ in MODELLED_MATCHES])
@settings(max_examples=max(40, settings.default.max_examples))
@given(data=st.data())
def test_a_match_reads_only_the_node_facts_it_declares(name: str, spec: MatchSpec, data: st.DataObject) -> None:
    m = _match(spec, data.draw(_core_or_module(spec)))
    full = _compile(spec, m, R.context())
    # on a node of which nothing is known, it is unknown naming what is missing, or it did not
    # need anything
    lacking = _compile(spec, m, attrs.evolve(R.context(), known=frozenset(), ipsets=()))
    if lacking != full:
        assert spec.facts, (m, lacking)
        assert any("not given" in u.reason or "not known" in u.reason for u in unknowns(lacking)), lacking
    if not spec.facts:
        # an entry that declares no fact means the same on any node
        assert _compile(spec, m, attrs.evolve(FACTLESS, ipsets=())) == full


class _Env:
    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx

    def route(self, dst: object):  # type: ignore[no-untyped-def]
        return self.ctx.route(dst)  # type: ignore[arg-type]


@pytest.mark.parametrize("name,spec", MODELLED_TARGETS, ids=[n for n, _ in MODELLED_TARGETS])
@settings(max_examples=max(40, settings.default.max_examples))
@given(data=st.data())
def test_a_target_writes_and_reads_only_what_it_declares(name: str, spec: TargetSpec, data: st.DataObject) -> None:
    text = data.draw(R.target(spec))
    rs = parse(f"*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING {text}\nCOMMIT\n", family=4)
    t = rs.tables[0].chains[0].rules[0].target
    _, opts = compile_target(t, 4)
    env = _Env(R.context())
    s = _state(data.draw)
    a, b = s.copy(), s.copy()
    other = _state(data.draw)
    for f in FIELDS:
        if f not in spec.reads:
            setattr(b, f, getattr(other, f))
    try:
        va = spec.effect(env, "nat", a, opts)  # type: ignore[misc]
    except ValueError:
        return  # a case the model does not evaluate (NAT to a range): the walk is inconclusive
    vb = spec.effect(env, "nat", b, opts)  # type: ignore[misc]
    assert set(a.wlog) <= spec.writes, text
    changed = {f for f in (*FIELDS, "masq", "reject_with") if getattr(a, f) != getattr(s, f)}
    assert changed <= set(a.wlog), text  # every change is logged (the summaries replay the log)
    # what it writes depends only on what it declares to read
    assert va == vb and all(getattr(a, f) == getattr(b, f) for f in a.wlog), text


def test_every_target_and_module_has_one_entry() -> None:
    names = [s.name for s in (*MATCHES.values(),)]
    assert len(set(names)) == len({id(s) for s in MATCHES.values()})
    assert frozenset(TARGETS) == TARGET_NAMES
    # the strategies of the property tests draw every modelled module and target
    assert set(R.MODULES) == {s.name for s in MATCHES.values() if s.meaning is not None and 4 in s.families}
    assert set(R.TARGET_CHOICES) <= set(TARGETS)


@pytest.mark.parametrize(
    "rule,needle",
    [
        ("-m recent --rcheck --seconds 1h", "--seconds"),
        ("-m recent --seconds 10", "exactly one of --set"),
        ("-m statistic --mode random", "--probability"),
        ("-m statistic --mode random --probability 2", "probability"),
        ("-m tcp --dport 80:70", "port"),
        ("-m tcp --dport 70000", "port"),
        ("-m multiport --dports 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", "too many"),
        ("-m mark --mark 0x1/0x100000000", "32-bit"),
        ("-m conntrack --ctstate BOGUS", "BOGUS"),
        ("-m addrtype --src-type NOWHERE", "NOWHERE"),
        ("-m set --match-set onlyname", "NAME FLAGS"),
        ("-m comment --comment x --comment y", "twice"),
        ("-m tcp --flavour sweet", "unknown option"),
        ("-m frobnicate --level 3", "no match module"),
        ("-m icmp6 --icmpv6-type 1", "IPv4"),
        ("-m conntrack --ctorigdst 10.0.0.0/33", "address"),
        ("-i this-name-is-too-long", "interface"),
        ("-j MARK --set-xmark junk", "VALUE[/MASK]"),
        ("-j MARK", "exactly one of"),
        ("-j MARK --or-mark 1 --and-mark 2", "exactly one of"),
        ("-j FROBNICATE", "no target"),
        ("-j REJECT --reject-with icmp-bogus", "icmp-bogus"),
        ("-j CONNMARK --nfmask 1", "exactly one of"),
    ],
)
def test_a_malformed_rule_is_refused_at_load_with_its_line(rule: str, needle: str) -> None:
    text = f"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n\n-A FORWARD -p tcp {rule}\nCOMMIT\n"
    rs = parse(text, source="bad.rules", family=4)
    with pytest.raises(DumpError) as e:
        validate_ruleset(rs)
    assert (e.value.file, e.value.line) == ("bad.rules", 5)
    assert needle in e.value.message


@pytest.mark.parametrize(
    "text,needle,line",
    [
        # targets where the kernel refuses them (tests/kernel/test_target_placement.py)
        ("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j DNAT --to-destination 10.0.0.1\nCOMMIT\n", "nat table", 3),
        ("*nat\n:PREROUTING ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:X - [0:0]\n-A POSTROUTING -j X\n"
         "-A X -j DNAT --to-destination 10.0.0.1\nCOMMIT\n", "reached from POSTROUTING", 6),
        ("*mangle\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -j CLASSIFY --set-class 1:1\nCOMMIT\n", "CLASSIFY", 3),
        ("*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -j DROP\nCOMMIT\n", "DROP", 3),
        ("*filter\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -i eth0 -j ACCEPT\nCOMMIT\n", "-i cannot", 3),
        # a loop reachable from a base chain
        ("*filter\n:INPUT ACCEPT [0:0]\n:A - [0:0]\n:B - [0:0]\n-A INPUT -j A\n-A A -j B\n-A B -g A\nCOMMIT\n", "loop", 7),
        # QUEUE does not exist with the nf_tables backend (named by the header)
        ("# Generated by iptables-nft-save v1.8.9 (nf_tables)\n*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j QUEUE\nCOMMIT\n",
         "QUEUE", 4),
    ],
)  # fmt: skip
def test_a_ruleset_the_kernel_refuses_is_refused(text: str, needle: str, line: int) -> None:
    with pytest.raises(DumpError) as e:
        validate_ruleset(parse(text, source="k.rules"))
    assert e.value.line == line and needle in e.value.message


def _chain_of(depth: int, header: str) -> str:
    chains = "".join(f":C{i} - [0:0]\n" for i in range(1, depth + 1))
    jumps = "-A INPUT -j C1\n" + "".join(f"-A C{i} -j C{i + 1}\n" for i in range(1, depth))
    return f"{header}*filter\n:INPUT ACCEPT [0:0]\n{chains}{jumps}COMMIT\n"


def test_jump_depth_is_limited_by_the_nf_tables_backend_only() -> None:
    nft = "# Generated by iptables-nft-save v1.8.9 (nf_tables) on Tue Dec  1 21:33:33 2026\n"
    legacy = "# Generated by iptables-save v1.8.9 on Tue Dec  1 21:33:33 2026\n"
    validate_ruleset(parse(_chain_of(15, nft)))  # 15 jumps below INPUT: accepted
    with pytest.raises(DumpError) as e:
        validate_ruleset(parse(_chain_of(16, nft)))
    assert "nested 16 jumps" in e.value.message
    validate_ruleset(parse(_chain_of(40, legacy)))  # x_tables has no fixed limit
    validate_ruleset(parse(_chain_of(40, "")))  # unknown backend: only what both refuse


def test_an_unreachable_loop_and_a_misplaced_target_in_an_unreachable_chain_load() -> None:
    # the kernel checks hooks from the base chains that reach a chain; nothing reaches these
    validate_ruleset(parse(
        "*nat\n:PREROUTING ACCEPT [0:0]\n:A - [0:0]\n:B - [0:0]\n:C - [0:0]\n-A A -j B\n-A B -j A\n"
        "-A C -j MASQUERADE\nCOMMIT\n"
    ))  # fmt: skip


def test_a_fact_nobody_gave_makes_the_rule_unknown() -> None:
    ctx = NodeContext(family=4, addresses=("192.168.1.10",), known=frozenset())
    m = Match("addrtype", (Option("--dst-type", ("LOCAL",)),))
    (u,) = unknowns(compile_match(m, ctx))
    assert isinstance(u, Unknown) and "node addresses" in u.reason
    # an interface name nobody gave is carried by the walk state as "?<fact>": -i is unknown
    # on it, except where the interface's role decides (a packet from off the node never
    # arrives on a Calico veth)
    from nat_verify.netfilter.registry import compile_core

    s = PacketState.__new__(PacketState)
    s.in_iface = ctx.in_iface("external")
    assert isinstance(evaluator(compile_core((Option("-i", ("eth0",)),), ctx))(s), Unknown)
    assert evaluator(compile_core((Option("-i", ("cali+",)),), ctx))(s) is False


def test_icmp6_is_unknown_on_icmp_packets_and_false_on_others() -> None:
    ctx = NodeContext(family=6, addresses=("fd00::10",))
    pred = compile_match(Match("icmp6", (Option("--icmpv6-type", ("echo-request",)),)), ctx)
    assert reads(pred) <= MATCHES["icmp6"].reads
    s = PacketState.__new__(PacketState)
    s.proto = "icmpv6"
    assert isinstance(evaluator(pred)(s), Unknown)
    s.proto = "tcp"
    assert evaluator(pred)(s) is False


def test_rule_error_is_a_value_error() -> None:
    # callers that catch ValueError for bad input keep working
    assert issubclass(RuleError, ValueError)
