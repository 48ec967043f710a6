"""``nat-verify compile --mode nftables``: the transaction, its listing and its JSON form."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from nat_verify.cli import main
from nat_verify.kubeproxy.nftables import sort_transaction
from nat_verify.nftables import parse_ruleset, same_ruleset
from tests.conformance import nftcorpus

CLUSTERS = Path(__file__).resolve().parents[1] / "conformance" / "nft_clusters"
OVERALL = str(CLUSTERS / "TestOverallNFTablesRules.yaml")
WEB = str(Path(__file__).resolve().parents[2] / "specs" / "web-svc.yaml")


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    if r.exception and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.stdout, r.stderr


def test_the_mode_comes_from_the_kube_proxy_configuration() -> None:
    code, out, _ = run("compile", OVERALL, "--node", "test-node")
    assert code == 0
    assert sort_transaction(out) == nftcorpus.case("TestOverallNFTablesRules")["dump"]


def test_styles_are_the_forms_nft_lists() -> None:
    name = "TestOverallNFTablesRules"
    code, text, _ = run("compile", OVERALL, "--node", "test-node", "--style", "text")
    assert code == 0 and text.startswith("table ip kube-proxy {\n\tcomment")
    assert same_ruleset(parse_ruleset(text), parse_ruleset(nftcorpus.listing_text(name)))
    code, js, _ = run("compile", OVERALL, "--node", "test-node", "--style", "json")
    assert code == 0 and json.loads(js)["nftables"][1] == {"table": {"family": "ip", "name": "kube-proxy", "comment": "rules for kube-proxy"}}
    assert same_ruleset(parse_ruleset(js), parse_ruleset(text))


def test_mode_flag_overrides_the_configuration() -> None:
    code, out, _ = run("compile", WEB, "--node", "node-1", "--mode", "nftables")
    assert code == 0 and out.startswith("add table ip kube-proxy")
    code, out, _ = run("compile", OVERALL, "--node", "test-node", "--mode", "iptables")
    assert code == 0 and out.startswith("*filter")


def test_a_style_of_the_other_mode_is_refused() -> None:
    code, out, err = run("compile", OVERALL, "--node", "test-node", "--style", "save")
    assert code == 2 and out == "" and "--style save is an iptables form" in err
    code, out, err = run("compile", WEB, "--node", "node-1", "--style", "batch")
    assert code == 2 and out == "" and "--style batch is an nftables form" in err


def test_ipv6_transaction() -> None:
    code, out, _ = run("compile", OVERALL, "--node", "test-node", "--family", "ipv6")
    assert code == 0 and out.startswith("add table ip6 kube-proxy")
    ruleset = parse_ruleset(out)
    (t,) = ruleset.tables
    np = t.set("nodeport-ips")
    assert np is not None and [e.key.value for e in np.elements] == ["2001:db8::1"]  # type: ignore[union-attr]
