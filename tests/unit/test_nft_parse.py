"""The nftables parser reads the three forms users have, and they are one ruleset.

Expected values come from the kernel: each corpus case holds kube-proxy's batch literal, and
the real kernel's ``nft list`` and ``nft -j list`` of the same ruleset (nft 1.0.6, in a
throwaway namespace). ``data/nft/*.nft`` are hand-written rulesets covering constructs the
corpus lacks, stored with their kernel listings.
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from nat_verify import dumpformat
from nat_verify.netfilter.parse import DumpError
from nat_verify.netfilter.parse import parse as parse_iptables
from nat_verify.nftables import (
    json_form,
    kernel_form,
    parse_file,
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
    Ct,
    Fib,
    Flags,
    Mangle,
    MapItem,
    Match,
    Meta,
    Nat,
    Numgen,
    Opaque,
    Payload,
    Prefix,
    Range,
    Reject,
    SetRef,
    SetUpdate,
    Value,
    Verdict,
    VerdictMap,
)
from nat_verify.nftables.model import Ruleset
from tests.conformance import nftcorpus

DATA = Path(__file__).parent / "data" / "nft"
CASES = nftcorpus.kube_proxy_cases()


def _batch(name: str) -> Ruleset:
    return parse_ruleset(nftcorpus.case(name)["dump"], source=f"{name}.dump")


def test_the_corpus_has_fourteen_kube_proxy_rulesets() -> None:
    assert len(CASES) == 14
    assert len(nftcorpus.expectations()) == 13


@pytest.mark.parametrize("name", CASES)
def test_batch_literal_is_the_ruleset_the_kernel_lists(name: str) -> None:
    batch = _batch(name)
    text = parse_ruleset(nftcorpus.listing_text(name))
    js = parse_ruleset(nftcorpus.listing_json(name))
    assert batch.rule_count() == text.rule_count() == js.rule_count() > 0
    assert batch.element_count() == text.element_count() == js.element_count()
    assert same_ruleset(batch, text)
    assert same_ruleset(json_form(text), json_form(js))
    assert same_ruleset(json_form(batch), json_form(js))


@pytest.mark.parametrize("name", CASES)
def test_the_listing_renderer_prints_what_the_kernel_lists(name: str) -> None:
    """Byte for byte, once elements are in the kernel's (hash) order, the one thing it picks."""
    batch = _batch(name)
    kernel = parse_ruleset(nftcorpus.listing_text(name))
    (t,) = batch.tables
    (kt,) = kernel.tables
    sets = []
    for s in t.sets:
        order = [e.key for e in kt.set(s.name).elements]  # type: ignore[union-attr]
        sets.append(attrs.evolve(s, elements=tuple(sorted(s.elements, key=lambda e: order.index(e.key)))))
    # the kernel lists sets and maps first (as declared), then chains: the corpus declares in name order
    t = attrs.evolve(t, sets=tuple(sorted(sets, key=lambda s: (s.is_map, s.name))), chains=tuple(sorted(t.chains, key=lambda c: c.name)))
    assert render_listing(attrs.evolve(batch, tables=(t,))) == nftcorpus.listing_text(name)


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("render", [render_listing, render_batch, render_json])
def test_parse_render_parse_is_stable(name: str, render: object) -> None:
    once = parse_ruleset(render(_batch(name)))  # type: ignore[operator]
    twice = parse_ruleset(render(once))  # type: ignore[operator]
    assert once == twice
    assert same_ruleset(once, _batch(name))


def test_rules_keep_their_line_and_text() -> None:
    text = nftcorpus.case("TestOverallNFTablesRules")["dump"]
    lines = text.split("\n")
    rs = parse_ruleset(text)
    (t,) = rs.tables
    for c in t.chains:
        for r in c.rules:
            prefix = f"add rule ip kube-proxy {c.name} "
            assert lines[r.line - 1] == prefix + r.raw
    r = t.chain("cluster-ips-check").rules[0]  # type: ignore[union-attr]
    assert r.raw == 'ip daddr @cluster-ips reject comment "Reject traffic to invalid ports of ClusterIPs"'
    assert r.comment == "Reject traffic to invalid ports of ClusterIPs"


def test_typed_fields_of_kube_proxy_rules() -> None:
    (t,) = _batch("TestOverallNFTablesRules").tables
    assert t.family == "ip" and t.name == "kube-proxy" and t.comment == "rules for kube-proxy"
    fwd = t.chain("filter-prerouting-pre-dnat")
    assert fwd is not None and fwd.base is not None
    assert (fwd.base.type, fwd.base.hook, fwd.base.priority, fwd.base.policy) == ("filter", "prerouting", -110, "accept")
    (r,) = fwd.rules
    assert r.stmts == (Match(Ct("state"), "in", Value("new")), Verdict("jump", "firewall-check"))

    svc4 = t.chain("service-LAUZTJTB-ns4/svc4/tcp/p80")
    assert svc4 is not None
    masq, lb = svc4.rules
    assert masq.stmts == (
        Match(Payload("ip", "daddr"), "==", Value("172.30.0.44")),
        Match(Payload("ip", "saddr"), "!=", Prefix("10.0.0.0", 8)),
        Verdict("jump", "mark-for-masquerade"),
    )
    assert lb.stmts == (
        VerdictMap(
            Numgen("random", 2),
            AnonSet((
                MapItem(Value(0), Verdict("goto", "endpoint-UNZV3OEC-ns4/svc4/tcp/p80__10.180.0.4/80")),
                MapItem(Value(1), Verdict("goto", "endpoint-5RFCDDV7-ns4/svc4/tcp/p80__10.180.0.5/80")),
            )),
        ),
    )  # fmt: skip
    services = t.chain("services")
    assert services is not None
    assert services.rules[0].stmts == (
        VerdictMap(Concat((Payload("ip", "daddr"), Meta("l4proto"), Payload("th", "dport"))), SetRef("service-ips")),
    )
    ext = t.chain("external-42NFTM6N-ns2/svc2/tcp/p80")
    assert ext is not None
    assert ext.rules[1].stmts == (Match(Fib(("saddr",), "type"), "==", Value("local")), Verdict("jump", "mark-for-masquerade"))
    assert ext.rules[1].comment == "masquerade local traffic"
    mark = t.chain("mark-for-masquerade")
    assert mark is not None and mark.rules[0].stmts == (Mangle(Meta("mark"), Binop("|", Meta("mark"), Value(0x4000))),)
    masq_chain = t.chain("masquerading")
    assert masq_chain is not None
    assert [r.stmts for r in masq_chain.rules] == [
        (Match(Binop("&", Meta("mark"), Value(0x4000)), "==", Value(0)), Verdict("return")),
        (Mangle(Meta("mark"), Binop("^", Meta("mark"), Value(0x4000))),),
        (Nat("masquerade", flags=("fully-random",)),),
    ]
    ep = t.chain("endpoint-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80")
    assert ep is not None
    assert ep.rules[1].stmts == (SetUpdate("update", "affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80", Payload("ip", "saddr")),)
    assert ep.rules[2].stmts == (Match(Meta("l4proto"), "==", Value("tcp")), Nat("dnat", addr=Value("10.180.0.3"), port=Value(80)))
    reject = t.chain("reject-chain")
    assert reject is not None and reject.rules[0].stmts == (Reject(),) and reject.comment.startswith("helper for")
    aff = t.set("affinity-GTK6MW7G-ns5/svc5/tcp/p80__10.180.0.3/80")
    assert aff is not None and aff.flags == ("dynamic", "timeout") and aff.timeout == 10800 and aff.dynamic
    noep = t.set("no-endpoint-nodeports")
    assert noep is not None and noep.is_map and noep.key == ("inet_proto", "inet_service") and noep.data == "verdict"
    (el,) = noep.elements
    assert (el.key, el.value, el.comment) == (Concat((Value("tcp"), Value(3001))), Verdict("drop"), "ns2/svc2:p80")


def test_hand_written_constructs_in_every_form() -> None:
    script = parse_file(str(DATA / "constructs.nft"))
    text = parse_file(str(DATA / "constructs.list.txt"))
    js = parse_file(str(DATA / "constructs.list.json"))
    assert script.rule_count() == text.rule_count() == js.rule_count() == 35
    r = {x.raw: x.stmts for x in script.tables[0].chain("r").rules}  # type: ignore[union-attr]
    assert r["ct state established,related accept"] == (Match(Ct("state"), "in", Flags(("established", "related"))), Verdict("accept"))
    assert r["tcp dport 1000-2000 drop"][0] == Match(Payload("tcp", "dport"), "==", Range(Value(1000), Value(2000)))
    assert r["numgen random mod 10 offset 5 vmap { 5-9 : accept, 10-14 : drop }"][0] == VerdictMap(
        Numgen("random", 10, 5),
        AnonSet((MapItem(Range(Value(5), Value(9)), Verdict("accept")), MapItem(Range(Value(10), Value(14)), Verdict("drop")))),
    )
    assert r["fib saddr . iif oif missing drop"][0] == Match(Fib(("saddr", "iif"), "oif"), "==", Value("missing"))
    assert r["limit rate 10/second accept"] == (Opaque("limit rate 10/second"), Verdict("accept"))
    assert r["meta l4proto tcp masquerade to :1000-2000 random,persistent"][1] == Nat("masquerade", port=Range(Value(1000), Value(2000)), flags=("random", "persistent"))
    assert r["reject with tcp reset"] == (Reject("tcp reset"),)
    # the JSON form of the same rules: the kernel's own reading
    jr = [x.stmts for x in js.tables[0].chain("r").rules]  # type: ignore[union-attr]
    assert jr[0] == r["ct state established,related accept"]
    assert jr[16] == r["fib saddr . iif oif missing drop"]
    for form in (text, js):
        again = parse_ruleset(render_listing(form))
        assert again == parse_ruleset(render_listing(again))


def test_families_and_inet_defaults() -> None:
    script = parse_file(str(DATA / "families.nft"))
    listing = parse_file(str(DATA / "families.list.txt"))
    assert same_ruleset(script, listing)
    assert same_ruleset(json_form(listing), json_form(parse_file(str(DATA / "families.list.json"))))
    assert [t.family for t in script.tables] == ["ip6", "inet", "ip"]
    t6 = script.tables[0]
    assert t6.flags == ("dormant",)
    c = t6.chain("c")
    assert c is not None and c.rules[0].stmts[1] == Nat("dnat", addr=Value("fd00::1"), port=Value(80))
    # "reject" in an inet table is ICMPx; next to an IPv4 match the kernel makes it ICMP
    inet = kernel_form(script).tables[1].chain("c")
    assert inet is not None
    assert inet.rules[0].stmts == (Reject(),)
    assert inet.rules[1].stmts[1] == Reject("icmp", "port-unreachable")


BAD = [
    ("add table ip t\nadd chain ip t c\nadd rule ip t c jump nowhere\n", 3, "does not declare"),
    ("add table ip t\nadd rule ip t c accept\n", 2, "does not declare"),
    ("add table ip t\nadd chain ip t c\nadd rule ip t c ip daddr @nope drop\n", 3, "@nope"),
    ('add table ip t\nadd chain ip t c\nadd rule ip t c comment "unterminated\n', 3, "unterminated"),
    ("add table ip t\nadd chain ip t c { type filter hook input priority sideways ; }\n", 2, "unknown priority"),
    ("add table ip t\nadd chain ip t c { type filter hook nowhere priority 0 ; }\n", 2, "unknown hook"),
    ("add table ip t\nadd chain ip t c\nadd rule ip t c ip daddr\n", 3, "expected a value"),
    ("add table ip t\nadd chain ip t c\nadd rule ip t c ip daddr { 1.2.3.4\n", 3, "expected ',' or '}'"),
    ("add table ip t\nadd chain ip t c\nadd rule ip t c numgen random mod 0 vmap { 0 : drop }\n", 3, "at least 1"),
    ("add table ip t\nadd map ip t m { type ipv4_addr : verdict ; }\nadd element ip t m { 1.2.3.4 }\n", 3, "without ': value'"),
    ("add table ip t\nadd map ip t m { type ipv4_addr ; }\n", 2, "needs 'type KEY : VALUE'"),
    ("add table ip t\nadd element ip t nope { 1.2.3.4 }\n", 2, "does not declare"),
    ("table ip t {\n\tchain c {\n\t\tip saddr 1.2.3.4 ! drop\n\t}\n}\n", 3, "'!'"),
    ("table ip t {\n\tchain c {\n\t\ttype filter hook input priority filter; policy maybe;\n\t}\n}\n", 3, "policy must be"),
    ("frobnicate table ip t\n", 1, "expected 'add'"),
    ("add table ip t\ndefine X = 1\n", 2, "'define' is not supported"),
    ('{"nftables": [{"table": {"family": "ip", "name": "t"}},\n {"rule": {"family": "ip", "table": "t", "chain": "c", "expr": []}}]}', 2, "nftables[1]"),
    ('{"nftables": [{"table": {"family": "ip", "name": "t"}},\n {"chain": {"family": "ip", "table": "t"}}]}', 2, "missing field 'name'"),
    ('{"nftables": [\n  {"table": {"family": "ip", "name": "t"}}\n  ,, ]}', 3, "malformed JSON"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "line", "fragment"), BAD)
def test_bad_input_names_the_line(text: str, line: int, fragment: str) -> None:
    with pytest.raises(DumpError) as e:
        parse_ruleset(text, source="bad.nft")
    assert e.value.line == line, str(e.value)
    assert fragment in e.value.message
    assert str(e.value).startswith(f"bad.nft:{line}: ")


def test_the_helper_fixture_is_refused_as_the_kernel_refuses_it() -> None:
    """It adds elements to maps it never declares; nft -f fails with "No such file or directory"."""
    case = nftcorpus.case(nftcorpus.HELPER)
    assert case["kernel"]["converted"]["accepted"] is False
    with pytest.raises(DumpError, match="does not declare"):
        parse_ruleset(case["dump"])


def test_forward_references_of_the_test_literals_are_read() -> None:
    """The literals use chains before declaring them (the kernel refuses them verbatim); the
    parser resolves names over the whole file, as kube-proxy's fake does."""
    case = nftcorpus.case("TestOverallNFTablesRules")
    assert case["kernel"]["verbatim"]["accepted"] is False
    assert parse_ruleset(case["dump_as_built"]).rule_count() == 57


IPTABLES_SAVE = "# Generated by iptables-save v1.8.9\n*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n"


def test_formats_are_detected() -> None:
    name = "TestOverallNFTablesRules"
    assert dumpformat.detect(nftcorpus.case(name)["dump"]) == dumpformat.NFT_BATCH
    assert dumpformat.detect(nftcorpus.listing_text(name)) == dumpformat.NFT_TEXT
    assert dumpformat.detect(nftcorpus.listing_json(name)) == dumpformat.NFT_JSON
    assert dumpformat.detect(IPTABLES_SAVE) == dumpformat.IPTABLES
    assert dumpformat.detect("hello\n") is None


def test_an_iptables_dump_given_as_nft_says_what_it_is() -> None:
    with pytest.raises(DumpError, match="iptables-save dump, not an nftables ruleset"):
        parse_ruleset(IPTABLES_SAVE, source="x")


@pytest.mark.parametrize("form", ["dump", "listing", "json"])
def test_an_nft_ruleset_given_as_iptables_says_what_it_is(form: str) -> None:
    name = "TestOverallNFTablesRules"
    text = {"dump": nftcorpus.case(name)["dump"], "listing": nftcorpus.listing_text(name), "json": nftcorpus.listing_json(name)}[form]
    with pytest.raises(DumpError, match="nftables ruleset") as e:
        parse_iptables(text, source="x")
    assert e.value.line == 1
