"""parse -> render -> parse is the identity, for any ruleset the renderer can write."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from nat_verify.netfilter.parse import parse
from nat_verify.netfilter.render import render
from nat_verify.netfilter.ruleset import (
    BUILTIN_CHAINS,
    Chain,
    Match,
    Option,
    Rule,
    Ruleset,
    Table,
    Target,
)

WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=8)
# free text: quotes, backslashes, spaces, leading dashes and '!' must all survive
FREE = st.text(
    alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF, blacklist_characters="\x7f"),
    max_size=24,
)
CIDR4 = st.builds(
    lambda a, b, c, d, p: f"{a}.{b}.{c}.{d}/{p}",
    st.integers(0, 255), st.integers(0, 255), st.integers(0, 255), st.integers(0, 255), st.integers(0, 32),
)  # fmt: skip
PORT = st.integers(1, 65535).map(str)
USER_CHAIN = st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-", min_size=1, max_size=28).filter(
    lambda s: not s.startswith("-") and s not in {"ACCEPT", "DROP", "RETURN", "REJECT", "DNAT", "SNAT", "MASQUERADE", "MARK", "LOG", "CT", "SET", "TEE", "NFLOG", "TRACE", "AUDIT", "LED", "TOS", "TTL", "HL", "ECN"}
    and s not in {c for cs in BUILTIN_CHAINS.values() for c in cs}
)  # fmt: skip


def opt(name: str, args: st.SearchStrategy[tuple[str, ...]]) -> st.SearchStrategy[Option]:
    return st.builds(Option, st.just(name), args, st.booleans())


def one(s: st.SearchStrategy[str]) -> st.SearchStrategy[tuple[str, ...]]:
    return s.map(lambda x: (x,))


CORE = st.lists(
    st.sampled_from(["-s", "-d", "-i", "-o", "-p"]), unique=True, max_size=4
).flatmap(
    lambda names: st.tuples(*[
        opt(n, one(CIDR4 if n in ("-s", "-d") else (st.sampled_from(["tcp", "udp", "sctp"]) if n == "-p" else WORD.map(lambda w: w + "+"))))
        for n in sorted(names, key=["-s", "-d", "-i", "-o", "-p"].index)
    ])
)  # fmt: skip

MATCHES = st.one_of(
    st.builds(lambda o: Match("comment", (o,)), st.builds(Option, st.just("--comment"), one(FREE))),
    st.builds(lambda o: Match("tcp", (o,)), opt("--dport", one(PORT))),
    st.builds(lambda o: Match("mark", (o,)), opt("--mark", one(st.integers(0, 2**32 - 1).map(hex)))),
    st.builds(lambda o: Match("conntrack", (o,)), opt("--ctstate", one(st.sampled_from(["NEW", "RELATED,ESTABLISHED", "INVALID"])))),
    st.builds(lambda p: Match("statistic", (Option("--mode", ("random",)), Option("--probability", (p,)))), st.sampled_from(["0.5000000000", "0.33333333349"])),
    st.builds(lambda n: Match("recent", (Option("--rcheck"), Option("--seconds", ("10800",)), Option("--reap"), Option("--name", (n,)))), WORD),
    st.builds(lambda o: Match("addrtype", (o,)), opt("--dst-type", one(st.sampled_from(["LOCAL", "UNICAST"])))),
    st.builds(lambda m, o: Match(m, (o,)), WORD.map(lambda w: "x" + w), opt("--level", one(WORD))),
)  # fmt: skip


def targets(chains: list[str]) -> st.SearchStrategy[Target]:
    simple = st.sampled_from([Target("ACCEPT"), Target("DROP"), Target("RETURN"), Target(""),
                              Target("REJECT", (Option("--reject-with", ("icmp-port-unreachable",)),)),
                              Target("MASQUERADE", (Option("--random-fully"),)),
                              Target("MARK", (Option("--set-xmark", ("0x4000/0x4000",)),))])  # fmt: skip
    dnat = st.builds(
        lambda p: Target("DNAT", (Option("--to-destination", (f"10.0.0.1:{p}",)),)), PORT
    )
    if not chains:
        return st.one_of(simple, dnat)
    jump = st.builds(lambda c, g: Target(c, (), g), st.sampled_from(chains), st.booleans())
    return st.one_of(simple, dnat, jump)


@st.composite
def rulesets(draw: st.DrawFn) -> Ruleset:
    tables = []
    for tname in draw(
        st.lists(st.sampled_from(list(BUILTIN_CHAINS)), unique=True, min_size=1, max_size=3)
    ):
        builtin = [c for c in BUILTIN_CHAINS[tname] if draw(st.booleans())]
        user = draw(st.lists(USER_CHAIN, unique=True, max_size=3))
        chains = []
        for name in builtin + user:
            rules = draw(st.lists(
                st.builds(lambda core, m, t, n=name: Rule(n, core, tuple(m), t), CORE, st.lists(MATCHES, max_size=3), targets(user)),
                max_size=4,
            ))  # fmt: skip
            policy = draw(st.sampled_from(["ACCEPT", "DROP"])) if name in builtin else None
            chains.append(Chain(name, policy, tuple(rules)))
        tables.append(Table(tname, tuple(chains)))
    order = list(BUILTIN_CHAINS)
    return Ruleset(4, tuple(sorted(tables, key=lambda t: order.index(t.name))))


@given(rulesets())
def test_parse_render_parse_is_identity(rs: Ruleset) -> None:
    text = render(rs)
    once = parse(text, family=4)
    assert once == rs
    assert parse(render(once), family=4) == once
