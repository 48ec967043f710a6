"""NV015 by meaning: rule text that changes no packet is a note; a changed packet is an error.

The dumps are the golden cluster compiled in one era (``tests/golden/eras``), printed as
iptables-save prints it, then compared with the cluster under another era or edited the way
a node drifts (a wrong target port, a stale Service, an orphaned chain).
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from nat_verify.check.drift import drift, owned_chains, replace_kube_proxy_rules
from nat_verify.cli import main
from nat_verify.kube import load_cluster
from nat_verify.kubeproxy.compiler import compile_node
from nat_verify.kubeproxy.eras import era_named
from nat_verify.netfilter.parse import parse
from nat_verify.netfilter.render import render
from nat_verify.netfilter.saveform import to_save_form

GOLDEN = Path(__file__).parents[1] / "golden" / "eras"
REAL = Path(__file__).parents[1] / "realdumps"
CLUSTER = load_cluster(GOLDEN / "cluster.yaml")


def saved(era: str) -> str:
    return render(to_save_form(parse(compile_node(CLUSTER, "node-1", era=era_named(era)), family=4)))


def test_each_era_matches_itself_with_no_finding() -> None:
    for era in ("1.16", "1.17", "1.18", "1.20", "1.21", "1.23", "1.24", "1.31"):
        rep = drift(CLUSTER, "node-1", parse(saved(era), family=4))
        assert rep.era.era.name == era and rep.era.how == "inferred"
        assert rep.items == (), (era, rep.items)


def test_an_era_the_rules_cannot_pin_gets_notes_not_errors() -> None:
    """Nothing in a 1.25 dump rules out 1.31 (the nfacct counters may be missing because the
    node lacks them), so 1.31 is assumed; what 1.25 writes differently changes no packet."""
    for era in ("1.25", "1.26", "1.27", "1.30"):
        rep = drift(CLUSTER, "node-1", parse(saved(era), family=4))
        inf = rep.era.inference
        assert inf is not None and inf.low is not None and era_named("1.25").index <= inf.low.index <= era_named(era).index
        assert {i.severity for i in rep.items} <= {"note"}, (era, rep.items)


def test_same_meaning_other_text_is_a_note() -> None:
    """From 1.27 kube-proxy owns KUBE-FIREWALL (its own copy of the localnet DROP); a 1.25 node
    still has kubelet's chain, with the mark-drop rule besides. Compared with 1.27 that rule
    is stale, but no packet carries kubelet's drop mark: a note."""
    rep = drift(CLUSTER, "node-1", parse(saved("1.25"), family=4), pinned="1.27")
    assert rep.items and {i.severity for i in rep.items} == {"note"}
    assert any("kubernetes firewall for dropping marked packets" in x for i in rep.items for x in i.extra)


def test_a_difference_that_changes_packets_is_an_error_with_the_packet() -> None:
    """1.24 refuses an LB source with KUBE-MARK-DROP, which kubelet drops only on INPUT and
    OUTPUT; 1.25+ drops it in KUBE-PROXY-FIREWALL from FORWARD too. A 1.24 node compared with
    1.31 forwards, un-DNATed, what 1.31 drops."""
    rep = drift(CLUSTER, "node-1", parse(saved("1.24"), family=4), pinned="1.31")
    errors = [i for i in rep.items if i.severity == "error"]
    lb = next(i for i in errors if i.service == "ns2/lb:p443")
    assert lb.packet is not None and str(lb.packet.dst) == "203.0.113.7" and lb.packet.dport == 443
    assert {o.verdict for o in lb.actual} == {"forward"} and {o.verdict for o in lb.expected} == {"drop"}
    # the localhost NodePort nfacct rule 1.31 adds for ns3/np changes nothing
    assert {i.severity for i in rep.items if i.service == "ns3/np"} == {"note"}


def test_wrong_target_port_is_an_error() -> None:
    text = saved("1.31").replace("--to-destination 10.42.2.9:5353", "--to-destination 10.42.2.9:5354")
    rep = drift(CLUSTER, "node-1", parse(text, family=4))
    (item,) = [i for i in rep.items if i.service == "ns3/np"]
    assert item.severity == "error" and item.packet is not None
    assert any(o.dport == 5354 for o in item.actual) and not any(o.dport == 5354 for o in item.expected)


def _add_nat(text: str, chains: list[str], rules: list[str], before_last_services_rule: str = "") -> str:
    head, nat = text.split("*nat\n", 1)
    decl_end = nat.index("\n-A ") + 1
    nat = nat[:decl_end] + "".join(f":{c} - [0:0]\n" for c in chains) + nat[decl_end:]
    if before_last_services_rule:
        i = nat.index('-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports')
        nat = nat[:i] + before_last_services_rule + "\n" + nat[i:]
    j = nat.index("\nCOMMIT") + 1
    nat = nat[:j] + "".join(r + "\n" for r in rules) + nat[j:]
    return head + "*nat\n" + nat


def test_stale_service_is_an_error_and_an_orphaned_chain_a_note() -> None:
    text = _add_nat(
        saved("1.31"),
        ["KUBE-SVC-AAAAAAAAAAAAAAAA", "KUBE-SEP-BBBBBBBBBBBBBBBB", "KUBE-SEP-CCCCCCCCCCCCCCCC"],
        ['-A KUBE-SVC-AAAAAAAAAAAAAAAA -m comment --comment "ns9/gone:http -> 10.42.1.99:80" -j KUBE-SEP-BBBBBBBBBBBBBBBB',
         '-A KUBE-SEP-BBBBBBBBBBBBBBBB -p tcp -m comment --comment "ns9/gone:http" -m tcp -j DNAT --to-destination 10.42.1.99:80',
         '-A KUBE-SEP-CCCCCCCCCCCCCCCC -p tcp -m comment --comment "ns9/old:http" -m tcp -j DNAT --to-destination 10.42.1.98:80'],
        '-A KUBE-SERVICES -d 10.43.0.99/32 -p tcp -m comment --comment "ns9/gone:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-AAAAAAAAAAAAAAAA',
    )  # fmt: skip
    items = {i.service: i for i in drift(CLUSTER, "node-1", parse(text, family=4)).items}
    gone = items["ns9/gone:http"]
    assert gone.severity == "error" and str(gone.packet.dst) == "10.43.0.99"  # type: ignore[union-attr]
    assert items["ns9/old:http"].severity == "note"  # nothing jumps to it: no packet reaches it


def test_expected_ruleset_keeps_other_agents_in_place() -> None:
    dump = parse(
        "*nat\n:PREROUTING ACCEPT [0:0]\n:DOCKER - [0:0]\n:KUBE-SERVICES - [0:0]\n"
        "-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER\n"
        '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES\n'
        "-A DOCKER -i docker0 -j RETURN\nCOMMIT\n",
        family=4,
    )
    compiled = parse(compile_node(CLUSTER, "node-1", era=era_named("1.31")), family=4)
    out = replace_kube_proxy_rules(dump, compiled, owned_chains(era_named("1.31")))
    nat = out.table("nat")
    assert nat is not None
    pre = nat.chain("PREROUTING")
    assert pre is not None and [r.target.name for r in pre.rules] == ["DOCKER", "KUBE-SERVICES"]
    assert nat.chain("DOCKER") is not None and nat.chain("KUBE-SVC-4LVCYZMTA5CQO6SX") is not None


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    if r.exception and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.stdout, r.stderr


def test_real_1_18_node_has_no_drift_and_the_report_names_the_era() -> None:
    """The published kind v1.18.2 / Calico dump of 2020 against the objects read off it: the
    rules are exactly what kube-proxy 1.18.0-1.18.5 writes (the patch releases before the mark
    fix), so NV015 has only its note naming the era and the lines that tell it."""
    dump = REAL / "dumps" / "k8sprototypes-kind-calico-2020.rules"
    code, out, err = run("check", str(dump), "--cluster", str(REAL / "clusters" / "k8sprototypes-kind-calico-2020.yaml"),
                         "--node", "kind-worker", "--format", "json")  # fmt: skip
    doc = json.loads(out)
    nv015 = [f for f in doc["findings"] if f["invariant"] == "NV015"]
    assert len(nv015) == 1, nv015
    msg = nv015[0]["message"]
    assert "kube-proxy 1.18.0-1.18.5 assumed" in msg and "line 69: KUBE-POSTROUTING" in msg
    assert "line 33: KUBE-FORWARD 'pod source' / 'pod destination' conntrack rules without a CIDR" in msg


def test_kube_proxy_version_option(tmp_path: Path) -> None:
    dump = tmp_path / "node.rules"
    dump.write_text(saved("1.24"))
    code, out, _ = run("check", str(dump), "--cluster", str(GOLDEN / "cluster.yaml"), "--node", "node-1",
                       "--kube-proxy-version", "1.31", "--format", "json")  # fmt: skip
    assert code == 1
    msgs = [f["message"] for f in json.loads(out)["findings"] if f["invariant"] == "NV015"]
    assert "rules compared with kube-proxy 1.31 and later layout, as --kube-proxy-version 1.31 asks" in msgs
    code, out, err = run("check", str(dump), "--cluster", str(GOLDEN / "cluster.yaml"), "--node", "node-1",
                         "--kube-proxy-version", "1.12")  # fmt: skip
    assert code == 2 and out == "" and "--kube-proxy-version" in err and "1.16" in err
    code, out, _ = run("compile", str(GOLDEN / "cluster.yaml"), "--node", "node-1", "--kube-proxy-version", "1.17")
    assert code == 0 and ":KUBE-XLB-YA563PM7F2UJRRK5 - [0:0]" in out


def test_kube_proxy_version_is_refused_where_it_cannot_apply(tmp_path: Path) -> None:
    """A directory of dumps (each node's layout is read from its own dump; the annotation pins
    one for all) and an nftables compile (the eras are layouts of the iptables rules)."""
    (tmp_path / "node-1.rules").write_text(saved("1.24"))
    code, out, err = run("check", str(tmp_path), "--cluster", str(GOLDEN / "cluster.yaml"), "--kube-proxy-version", "1.24")
    assert code == 2 and out == "" and "--kube-proxy-version" in err and "nat-verify.io/kube-proxy-version" in err
    code, out, err = run("compile", str(GOLDEN / "cluster.yaml"), "--node", "node-1", "--mode", "nftables",
                         "--kube-proxy-version", "1.24")  # fmt: skip
    assert code != 0 and out == "" and "--mode nftables" in err
