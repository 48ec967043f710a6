"""parse -> render -> parse is stable for nftables rulesets, in each of the three forms.

The strategy builds rulesets from the constructs the grammar models (selectors, relations,
anonymous and named sets, verdict maps, numgen, fib, NAT, marks, set updates, verdicts), with
every jump and ``@set`` naming an object of its table, in ``ip``, ``ip6`` and ``inet`` tables.
For every form: the ruleset read back from its rendering renders and reads back to itself, and is
the same ruleset as the one rendered (for JSON, up to what nft's JSON leaves out).
"""

from __future__ import annotations

from functools import lru_cache

from hypothesis import given
from hypothesis import strategies as st

from nat_verify.nftables import (
    BaseHook,
    Chain,
    Element,
    Rule,
    Ruleset,
    Set,
    Table,
    json_form,
    parse_ruleset,
    render_batch,
    render_json,
    render_listing,
    same_ruleset,
)
from nat_verify.nftables.expr import (
    AnonSet,
    Binop,
    Concat,
    Counter,
    Ct,
    Fib,
    Flags,
    Mangle,
    MapItem,
    Match,
    Meta,
    Nat,
    Numgen,
    Payload,
    Prefix,
    Range,
    Reject,
    SetRef,
    SetUpdate,
    Stmt,
    Value,
    Verdict,
    VerdictMap,
)

# a letter, then name characters; "x" keeps keywords (type, policy, comment...) out
NAME = st.builds(lambda a, b: a + "x" + b, st.sampled_from("abcdefghijklmnopqrstuvwxyz"), st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_/.", max_size=10))
COMMENT = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126, blacklist_characters='"\\'), max_size=16)
V4 = st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t)))
V6 = st.sampled_from(["fd00::1", "2001:db8::7", "fe80::1:2", "::1"])
PORT = st.integers(1, 65535)


def addr(v6: bool) -> st.SearchStrategy[str]:
    return V6 if v6 else V4


def address_value(v6: bool) -> st.SearchStrategy[object]:
    n = 128 if v6 else 32
    base = "fd00::" if v6 else "10.0.0.0"
    return st.one_of(addr(v6).map(Value), st.integers(8, n).map(lambda p: Prefix(base, p)))


@lru_cache(maxsize=256)
def match(v6: bool, sets: tuple[str, ...]) -> st.SearchStrategy[Stmt]:
    ip = "ip6" if v6 else "ip"
    choices: list[st.SearchStrategy[Stmt]] = [
        st.builds(Match, st.sampled_from([Payload(ip, "saddr"), Payload(ip, "daddr")]), st.sampled_from(["==", "!="]), address_value(v6)),
        st.builds(
            Match,
            st.just(Payload(ip, "daddr")),
            st.sampled_from(["==", "!="]),
            st.lists(addr(v6).map(Value), min_size=2, max_size=3, unique=True).map(lambda xs: AnonSet(tuple(xs))),
        ),
        st.builds(Match, st.just(Meta("l4proto")), st.just("=="), st.sampled_from(["tcp", "udp", "sctp"]).map(Value)),
        st.builds(Match, st.sampled_from([Payload("tcp", "dport"), Payload("th", "dport")]), st.sampled_from(["==", "!=", "<", ">="]), PORT.map(Value)),
        st.builds(lambda a, b: Match(Payload("th", "dport"), "==", Range(Value(min(a, b)), Value(max(a, b) + 1))), PORT, st.integers(1, 60000)),
        st.builds(Match, st.just(Ct("state")), st.just("in"), st.one_of(st.sampled_from(["new", "established", "related", "invalid"]).map(Value), st.just(Flags(("established", "related"))))),
        st.builds(Match, st.just(Ct("status")), st.just("in"), st.just(Value("dnat"))),
        st.builds(Match, st.builds(Fib, st.sampled_from([("saddr",), ("daddr",)]), st.just("type")), st.sampled_from(["==", "!="]), st.just(Value("local"))),
        st.builds(lambda m, v, op: Match(Binop("&", Meta("mark"), Value(m)), op, Value(v & m)), st.integers(1, 2**32 - 1), st.integers(0, 2**32 - 1), st.sampled_from(["==", "!="])),
        st.builds(Match, st.just(Meta("iifname")), st.sampled_from(["==", "!="]), st.sampled_from(["eth0", "cni0", "veth*", "lo"]).map(Value)),
    ]
    if sets:
        choices.append(st.builds(Match, st.just(Payload(ip, "saddr")), st.sampled_from(["==", "!="]), st.sampled_from(sets).map(SetRef)))
    return st.one_of(choices)


@lru_cache(maxsize=256)
def action(v6: bool, chains: tuple[str, ...], sets: tuple[str, ...], maps: tuple[str, ...]) -> st.SearchStrategy[list[Stmt]]:
    ip = "ip6" if v6 else "ip"
    verdicts = [st.sampled_from(["accept", "drop", "return", "continue"]).map(Verdict)]
    if chains:
        verdicts.append(st.builds(Verdict, st.sampled_from(["jump", "goto"]), st.sampled_from(chains)))
    verdict = st.one_of(verdicts)
    host = addr(v6).map(Value)
    choices: list[st.SearchStrategy[list[Stmt]]] = [
        verdict.map(lambda v: [v]),
        st.just([Reject()]),
        st.just([Reject("tcp reset")]),
        st.builds(lambda a, p: [Match(Meta("l4proto"), "==", Value("tcp")), Nat("dnat", addr=a, port=Value(p))], host, PORT),
        st.builds(lambda fl: [Nat("masquerade", flags=fl)], st.sampled_from([(), ("fully-random",), ("random", "persistent")])),
        st.builds(lambda m: [Mangle(Meta("mark"), Binop("|", Meta("mark"), Value(m)))], st.integers(1, 2**32 - 1)),
        st.builds(lambda m: [Mangle(Meta("mark"), Binop("^", Meta("mark"), Value(m)))], st.integers(1, 2**32 - 1)),
        st.just([Counter(), Verdict("accept")]),
    ]
    if chains:
        choices.append(
            st.builds(
                lambda n, off, targets: [VerdictMap(Numgen("random", n, off), AnonSet(tuple(MapItem(Value(off + i), Verdict("goto", targets[i % len(targets)])) for i in range(n))))],
                st.integers(1, 4), st.integers(0, 3), st.lists(st.sampled_from(chains), min_size=1, max_size=4),
            )
        )  # fmt: skip
    if maps:
        choices.append(st.sampled_from(maps).map(lambda m: [VerdictMap(Concat((Payload(ip, "daddr"), Meta("l4proto"), Payload("th", "dport"))), SetRef(m))]))
    if sets:
        choices.append(st.sampled_from(sets).map(lambda s: [SetUpdate("update", s, Payload(ip, "saddr"))]))
    return st.one_of(choices)


@st.composite
def tables(draw: st.DrawFn, family: str) -> Table:
    v6 = family == "ip6"
    names = draw(st.lists(NAME, min_size=1, max_size=5, unique=True))
    nb = draw(st.integers(0, min(2, len(names))))
    base_names, regular = names[:nb], names[nb:]
    set_names = draw(st.lists(NAME.map(lambda n: "s-" + n), max_size=2, unique=True))
    map_names = draw(st.lists(NAME.map(lambda n: "m-" + n), max_size=1, unique=True))
    sets = []
    for s in set_names:
        dynamic = draw(st.booleans())
        elems = () if dynamic else tuple(Element(Value(a)) for a in draw(st.lists(addr(v6), max_size=4, unique=True)))
        sets.append(Set(s, "set", ("ipv6_addr" if v6 else "ipv4_addr",), flags=("dynamic", "timeout") if dynamic else (), timeout=draw(st.integers(1, 90000)) if dynamic else None, comment=draw(COMMENT), elements=elems))
    for m in map_names:
        keys = draw(st.lists(st.tuples(addr(v6), st.sampled_from(["tcp", "udp"]), PORT), max_size=4, unique=True))
        targets = [Verdict("drop"), Verdict("accept")] + [Verdict("goto", c) for c in regular]
        elems = tuple(Element(Concat((Value(a), Value(p), Value(port))), draw(st.sampled_from(targets)), draw(COMMENT)) for a, p, port in keys)
        sets.append(Set(m, "map", ("ipv6_addr" if v6 else "ipv4_addr", "inet_proto", "inet_service"), "verdict", comment=draw(COMMENT), elements=elems))
    dyn = [s.name for s in sets if s.dynamic]
    chains = []
    for name in names:
        rules = []
        for _ in range(draw(st.integers(0, 3))):
            stmts = draw(st.lists(match(v6, tuple(set_names)), max_size=2)) + draw(action(v6, tuple(regular), tuple(dyn), tuple(map_names)))
            rules.append(Rule(name, tuple(stmts), draw(COMMENT)))
        base = None
        if name in base_names:
            ctype, hook = draw(st.sampled_from([("filter", "input"), ("filter", "forward"), ("nat", "prerouting"), ("nat", "postrouting"), ("filter", "output")]))
            base = BaseHook(ctype, hook, draw(st.integers(-400, 400)), draw(st.sampled_from(["accept", "drop"])) if ctype == "filter" else "accept")
        chains.append(Chain(name, base, tuple(rules), draw(COMMENT)))
    return Table(family, draw(NAME), tuple(chains), tuple(sets), draw(COMMENT))


RULESETS = st.lists(st.sampled_from(["ip", "ip6", "inet"]), min_size=1, max_size=2).flatmap(
    lambda fams: st.tuples(*[tables(f) for f in fams]).map(lambda ts: Ruleset(tuple({t.key: t for t in ts}.values())))
)


@given(RULESETS)
def test_listing_round_trip(rs: Ruleset) -> None:
    once = parse_ruleset(render_listing(rs))
    assert parse_ruleset(render_listing(once)) == once
    assert same_ruleset(once, rs)


@given(RULESETS)
def test_batch_round_trip(rs: Ruleset) -> None:
    once = parse_ruleset(render_batch(rs))
    assert parse_ruleset(render_batch(once)) == once
    assert same_ruleset(once, rs)


@given(RULESETS)
def test_json_round_trip(rs: Ruleset) -> None:
    once = parse_ruleset(render_json(rs))
    assert parse_ruleset(render_json(once)) == once
    assert same_ruleset(once, rs)
    assert same_ruleset(json_form(once), json_form(rs))


@given(RULESETS, st.sampled_from([render_listing, render_batch, render_json]))
def test_every_form_reads_to_the_same_ruleset(rs: Ruleset, render: object) -> None:
    assert same_ruleset(parse_ruleset(render(rs)), parse_ruleset(render_listing(rs)))  # type: ignore[operator]
