"""``--partial``: excerpts of dumps are read, what they do not show is inconclusive, never proved.

Expected answers come from reading the excerpts: which table a headerless rule belongs to is
what its target and chain names allow; a packet whose path reaches a chain the excerpt lacks
is inconclusive naming that chain; packets decided before any unseen part keep their answers.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from nat_verify.cli import main
from nat_verify.kube import load_cluster
from nat_verify.kubeproxy import compile_node
from nat_verify.netfilter.excerpt import looks_like_excerpt, read_excerpt
from nat_verify.netfilter.parse import parse
from nat_verify.netfilter.render import render
from nat_verify.netfilter.saveform import to_save_form
from tests.realdumps import corpus

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "web-svc.yaml"
TRACE_SCHEMA = json.loads((ROOT / "nat_verify" / "report" / "schemas" / "trace.v1.json").read_text())
SEP_B = "KUBE-SEP-GH44O5CVIQO6N23X"  # web-svc's endpoint 10.42.2.3 on node-2
EMPTY_TABLES = "".join(
    f"*{t}\n" + "".join(f":{c} ACCEPT [0:0]\n" for c in chains) + "COMMIT\n"
    for t, chains in (
        ("raw", ("PREROUTING", "OUTPUT")),
        ("mangle", ("PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING")),
        ("security", ("INPUT", "FORWARD", "OUTPUT")),
    )
)


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    if r.exception and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture(scope="module")
def node1_save() -> str:
    cluster = load_cluster(SPEC)
    return render(to_save_form(parse(compile_node(cluster, "node-1", 4), family=4)))


def _trace(path: Path, *extra: str) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    code, out, err = run("trace", str(path), "--cluster", str(SPEC), "--node", "node-1",
                         "--src", "10.42.1.7", "--dst", "10.43.0.15:80", "--format", "json", *extra)  # fmt: skip
    return code, json.loads(out) if out else {}, err


def test_a_chain_the_excerpt_lacks_makes_only_its_branch_inconclusive(tmp_path: Path, node1_save: str) -> None:
    # the excerpt: every table shown, but the chain of the endpoint on node-2 cut out
    lines = [ln for ln in node1_save.splitlines() if SEP_B not in ln or "-j " + SEP_B in ln]
    f = tmp_path / "cut.rules"
    f.write_text(EMPTY_TABLES + "\n".join(lines) + "\n")
    assert run("trace", str(f), "--cluster", str(SPEC), "--node", "node-1", "--src", "10.42.1.7",
               "--dst", "10.43.0.15:80")[0] == 2  # fmt: skip
    code, doc, err = _trace(f, "--partial")
    assert code == 3
    assert doc["partial"] is True and f"nat {SEP_B}" in doc["excerpt"]["unseen"]
    by_verdict = {o["verdict"]: o for o in doc["outcomes"]}
    # the branch to the endpoint shown (10.42.1.7, the pod itself: hairpin, masqueraded)
    assert by_verdict["forward"]["probability"] == "1/2"
    assert by_verdict["forward"]["destination"] == "10.42.1.7:8080" and by_verdict["forward"]["masquerade"]
    assert by_verdict["inconclusive"]["probability"] == "1/2"
    assert SEP_B in by_verdict["inconclusive"]["reason"]
    assert f"nat {SEP_B}" in err  # listed on stderr


def test_a_whole_dump_read_with_partial_gives_the_strict_answers(tmp_path: Path, node1_save: str) -> None:
    f = tmp_path / "whole.rules"
    f.write_text(EMPTY_TABLES + node1_save)
    strict = _trace(f)
    partial = _trace(f, "--partial")
    assert strict[0] == partial[0] == 0
    assert strict[1]["outcomes"] == partial[1]["outcomes"]
    assert partial[1]["partial"] is True and partial[1]["excerpt"]["complete"] is True


def test_an_unreadable_rule_leaves_a_marker_where_it_stood(tmp_path: Path, node1_save: str) -> None:
    # the first SVC rule (masquerade off-cluster sources) broken: rules after it are unknown
    lines = node1_save.splitlines()
    i = next(n for n, ln in enumerate(lines) if ln.startswith("-A KUBE-SVC-") and "! -s" in ln)
    lines[i] = lines[i].replace("! -s 10.42.0.0/16", "! -s 10.42.0.0/99")
    f = tmp_path / "broken.rules"
    f.write_text(EMPTY_TABLES + "\n".join(lines) + "\n")
    code, doc, err = _trace(f, "--partial")
    n = len(EMPTY_TABLES.splitlines()) + i + 1
    assert f"{f}:{n}: not used: -s expects an address or CIDR" in err
    assert code == 3
    (out,) = doc["outcomes"]
    assert out["verdict"] == "inconclusive" and f"line {n} of the excerpt" in out["reason"]
    assert [u["line"] for u in doc["excerpt"]["unusable"]] == [n]


def test_absent_tables_are_unseen_not_empty(tmp_path: Path, node1_save: str) -> None:
    f = tmp_path / "nat-only.rules"
    nat = node1_save.split("*filter")[0]
    f.write_text("$ sudo iptables-save -t nat\n" + nat)
    code, doc, _ = _trace(f, "--partial")
    assert code == 3
    assert {"raw table", "mangle table", "filter table"} <= set(doc["excerpt"]["unseen"])
    assert all(o["verdict"] == "inconclusive" for o in doc["outcomes"])


EXCERPT_FORMS = """\
root@node:~# iptables -t nat -S
> -P PREROUTING ACCEPT
> -A KUBE-SVC-AAA -m statistic --mode random --probability 0.5 -j KUBE-SEP-BBB

[3:180] -A KUBE-SEP-BBB -p tcp -m tcp -j DNAT --to-destination 10.1.0.5:80
`-A KUBE-SERVICES -d 10.96.0.1/32 -p tcp -m tcp --dport 443 -j KUBE-SVC-AAA`
iptables v1.8.7 (nf_tables)
-A KUBE-SERVICES -d 10.96.0.2/32 -p tcp -m tcp --dpo
"""


def test_forms_of_excerpts_and_the_lines_not_used() -> None:
    ex = read_excerpt(EXCERPT_FORMS, source="x.rules")
    nat = ex.ruleset.table("nat")
    assert nat is not None
    svc = nat.chain("KUBE-SVC-AAA")
    sep = nat.chain("KUBE-SEP-BBB")
    services = nat.chain("KUBE-SERVICES")
    assert svc is not None and sep is not None and services is not None
    assert sep.rules[0].counters == (3, 180) and sep.rules[0].line == 5
    assert services.rules[0].line == 6
    # 'iptables v1.8.7' is command output; the last line is cut (no target)
    assert [(u.line, u.reason.split(":")[0]) for u in ex.unusable] == [
        (7, "not a rule, chain or table line"),
        (8, "the last line is a rule without a target"),
    ]
    assert "filter table" in ex.unseen
    assert not ex.complete


@pytest.mark.parametrize(
    ("rule", "table"),
    [
        ("-A KUBE-SEP-X -p tcp -m tcp -j DNAT --to-destination 10.0.0.1:80", "nat"),
        ("-A KUBE-SERVICES -d 10.0.0.10/32 -p udp -m udp --dport 53 -j REJECT --reject-with icmp-port-unreachable", "filter"),
        ("-A KUBE-SERVICES -d 10.0.0.10/32 -p udp -m udp --dport 53 -j KUBE-SVC-Y", "nat"),
        ("-A FORWARD -j KUBE-FORWARD", "filter"),
        ("-A PREROUTING -j KUBE-SERVICES", "nat"),
        ("-A POSTROUTING -m comment --comment x -j CILIUM_POST_mangle", "mangle"),
    ],
)
def test_the_table_of_a_headerless_rule_is_what_its_names_allow(rule: str, table: str) -> None:
    ex = read_excerpt(rule + "\n")
    assert not ex.unusable
    chain = rule.split()[1]
    t = ex.ruleset.table(table)
    assert t is not None and t.chain(chain) is not None and t.chain(chain).rules[0].raw == rule  # type: ignore[union-attr]


def test_counters_without_a_rule_are_a_line_not_used() -> None:
    # found by the fuzzer: '[1:2]' alone on a line was an IndexError
    (u,) = read_excerpt("[1:2]\n-A KUBE-SEP-X -j KUBE-MARK-MASQ\n").unusable
    assert u.line == 1 and "no rule after them" in u.reason


def test_an_undecidable_table_is_a_line_not_used_unless_table_is_given() -> None:
    rule = "-A DOCKER -i docker0 -j RETURN\n"
    ex = read_excerpt(rule)
    (u,) = ex.unusable
    assert u.line == 1 and "give --table" in u.reason
    ex = read_excerpt(rule, table="filter")
    assert not ex.unusable and ex.ruleset.table("filter").chain("DOCKER").rules[0].line == 1  # type: ignore[union-attr]


def test_iptables_S_of_filter_without_its_command_line() -> None:
    ex = read_excerpt("-P INPUT ACCEPT\n-P FORWARD DROP\n-P OUTPUT ACCEPT\n-N KUBE-FORWARD\n-A FORWARD -j KUBE-FORWARD\n")
    fwd = ex.ruleset.table("filter").chain("FORWARD")  # type: ignore[union-attr]
    assert fwd is not None and fwd.policy == "DROP"
    assert ex.assumed and "filter" in ex.assumed[0]


def test_check_partial_is_never_proved_and_says_partial(tmp_path: Path, node1_save: str) -> None:
    f = tmp_path / "grep.rules"
    f.write_text(EMPTY_TABLES + node1_save)
    code, out, _ = run("check", str(f), "--cluster", str(SPEC), "--node", "node-1", "--format", "json", "--partial")
    doc = json.loads(out)
    statuses = {r["status"] for r in doc["results"]}
    assert statuses and "proved" not in statuses
    assert doc["meta"]["partial"] is True
    code_strict, out_strict, _ = run("check", str(f), "--cluster", str(SPEC), "--node", "node-1", "--format", "json")
    assert "proved" in {r["status"] for r in json.loads(out_strict)["results"]}


def test_diff_partial_says_partial(tmp_path: Path, node1_save: str) -> None:
    f = tmp_path / "a.rules"
    f.write_text(EMPTY_TABLES + node1_save)
    code, out, _ = run("diff", str(f), str(f), "--cluster", str(SPEC), "--node", "node-1", "--format", "json", "--partial")
    assert code == 0 and json.loads(out)["partial"] is True


def test_strict_errors_suggest_partial_only_for_excerpts(tmp_path: Path, node1_save: str) -> None:
    f = tmp_path / "grep.rules"
    f.write_text("".join(ln + "\n" for ln in node1_save.splitlines() if "KUBE-SVC" in ln))
    code, out, err = run("trace", str(f), "--node-ip", "192.0.2.1", "--src", "10.0.0.1", "--dst", "10.0.0.2:1")
    assert code == 2 and out == "" and "--partial" in err and f"{f}:1:" in err
    g = tmp_path / "broken.save"
    g.write_text(node1_save.replace("COMMIT\n", "", 1))
    code, out, err = run("trace", str(g), "--node-ip", "192.0.2.1", "--src", "10.0.0.1", "--dst", "10.0.0.2:1")
    assert code == 2 and "--partial" not in err
    assert looks_like_excerpt("> -A X -j ACCEPT\n") and not looks_like_excerpt(node1_save)


def test_table_needs_partial(tmp_path: Path, node1_save: str) -> None:
    f = tmp_path / "a.rules"
    f.write_text(node1_save)
    code, out, err = run("trace", str(f), "--table", "nat", "--node-ip", "192.0.2.1", "--src", "10.0.0.1", "--dst", "10.0.0.2:1")
    assert code == 2 and "--partial" in err


@pytest.mark.parametrize("dump_id", [e["id"] for e in corpus.entries()])
def test_every_published_dump_reads_with_partial(dump_id: str) -> None:
    e = corpus.entry(dump_id)
    p = str(corpus.path(e))
    code, out, err = run("trace", p, "--partial", "--node-ip", "192.0.2.10", "--src", "198.51.100.7",
                         "--dst", "10.96.0.1:443", "--format", "json")  # fmt: skip
    assert code in (0, 3), err
    doc = json.loads(out)
    assert doc["partial"] is True
    jsonschema.validate(doc, TRACE_SCHEMA)
    # every line not used is named on stderr with its number
    for u in doc["excerpt"]["unusable"]:
        assert f"{p}:{u['line']}: not used: " in err
    if "complete" not in e["form"]:
        assert not doc["excerpt"]["complete"]


def test_a_rule_the_model_refuses_is_a_line_not_used_in_an_excerpt(tmp_path: Path, node1_save: str) -> None:
    portals = '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES'
    f = tmp_path / "bad-port.rules"
    f.write_text(EMPTY_TABLES + node1_save.replace(portals, "-A PREROUTING -p tcp -m tcp --dport 99999 -j KUBE-SERVICES", 1))
    n = next(i for i, ln in enumerate(f.read_text().splitlines(), 1) if "99999" in ln)
    assert _trace(f)[0] == 2  # strictly: bad input
    code, doc, err = _trace(f, "--partial")
    assert code == 3
    assert f"{f}:{n}: not used: " in err and "99999" in err
    (out,) = doc["outcomes"]
    assert out["verdict"] == "inconclusive" and f"line {n} of the excerpt" in out["reason"]
    assert not doc["excerpt"]["complete"]
