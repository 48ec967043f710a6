"""The oracle runs nftables rulesets: every corpus ruleset loads, and the host is untouched.

The expected listings are the corpus's (``kernel/*.list.json``: what nft 1.0.6 listed after
loading each literal); the expected verdicts are kube-proxy's documented nftables behaviour
(unused ports of a ClusterIP are rejected, unallocated ClusterIPs dropped, a Service without
endpoints rejected).
"""

from __future__ import annotations

import json

import attrs
import pytest

from nat_verify.nftables import json_form, parse_ruleset, same_ruleset
from nat_verify.oracle import RestoreError
from nat_verify.oracle.netns import run_in
from nat_verify.oracle.nftload import dump_order
from nat_verify.oracle.oracle import KernelOracle, TopologySpec
from tests.conformance import nftcorpus
from tests.kernel.test_isolation import _netns_list, _root_rules

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("kernel_ok")]

# TestOverallNFTablesRules' node: its IPv4 addresses, a pod, the endpoints behind node2
SPEC = TopologySpec(
    node_ips=("192.168.0.2", "192.168.1.2", "192.168.99.11"),
    pod_cidr="10.0.0.0/24",
    pods=("10.0.0.2",),
    remote=("10.180.0.0/16",),
)


def _listed(k: KernelOracle) -> object:
    res = run_in(k.topology.node, ["nft", "-j", "list", "table", "ip", "kube-proxy"])
    assert res.returncode == 0, res.stderr
    return parse_ruleset(res.stdout)


def test_every_corpus_ruleset_loads_as_the_kernel_listed_it() -> None:
    """Each literal as the test builds it (blank and # lines, forward references) loads, and
    the node then holds exactly the corpus's listing of it; one oracle, reloaded 14 times."""
    with KernelOracle(SPEC) as k:
        for name in nftcorpus.kube_proxy_cases():
            k.load(nftcorpus.case(name)["dump_as_built"], source=name)
            want = parse_ruleset(nftcorpus.listing_json(name))
            assert same_ruleset(json_form(_listed(k)), json_form(want)), name  # type: ignore[arg-type]
        tables = run_in(k.topology.node, ["nft", "list", "tables"]).stdout.splitlines()
        # only the last ruleset's table and the oracle's own conntrack keeper remain
        assert sorted(tables) == ["table ip kube-proxy", "table ip nat_verify_conntrack"]


def test_the_helper_fixture_is_refused_by_the_kernel_with_its_line() -> None:
    case = nftcorpus.case(nftcorpus.HELPER)
    text = case["dump_as_built"]
    with KernelOracle(SPEC) as k, pytest.raises(RestoreError) as e:
        k.load_nft(text, source="fixture")
    assert "No such file or directory" in e.value.stderr
    # the offending line is a line of the original text: an element of an undeclared map
    assert e.value.text == text.split("\n")[e.value.line - 1]
    assert e.value.text.startswith("add element ip testing ")


def test_dump_order_keeps_every_line_and_maps_them_back() -> None:
    text = nftcorpus.case("TestOverallNFTablesRules")["dump_as_built"]
    ordered, lines = dump_order(text)  # type: ignore[misc]
    src = text.split("\n")
    assert [src[n - 1] for n in lines] == ordered.rstrip("\n").split("\n")
    assert sorted(ordered.rstrip("\n").split("\n")) == sorted(ln for ln in src if ln.strip() and not ln.startswith("#"))


def _without_set_comments(r: object) -> object:
    t = r.tables[0]  # type: ignore[attr-defined]
    return attrs.evolve(r, tables=(attrs.evolve(t, sets=tuple(attrs.evolve(s, comment="") for s in t.sets)),))


def test_json_and_listing_forms_load_too() -> None:
    name = "TestOverallNFTablesRules"
    want = json_form(parse_ruleset(nftcorpus.listing_json(name)))
    with KernelOracle(SPEC) as k:
        k.load(nftcorpus.listing_text(name), source=name)
        assert same_ruleset(json_form(_listed(k)), want)  # type: ignore[arg-type]
        k.load(nftcorpus.listing_json(name), source=name)
        # nft 1.0.6 lists set comments in JSON but does not read them back from it
        assert same_ruleset(json_form(_listed(k)), _without_set_comments(want))  # type: ignore[arg-type]


def test_the_kernel_judges_a_bad_ruleset_first() -> None:
    """Loading does not stop at nat-verify's own parser: the kernel's refusal (with its line)
    is what is reported."""
    with KernelOracle(SPEC) as k, pytest.raises(RestoreError) as e:
        k.load_nft("table ip t {\n\tchain c {\n\t\tip daddr { 10.0.0.1 drop\n\t}\n}\n")
    assert e.value.line == 3 and "syntax error" in e.value.stderr


def test_kube_proxy_nftables_verdicts_in_the_kernel() -> None:
    with KernelOracle(SPEC) as k:
        k.load(nftcorpus.case("TestOverallNFTablesRules")["dump"])
        r = k.probe("10.0.0.2", "172.30.0.41", 80, origin="pod")
        assert (r.verdict, r.dnat) == ("forward", ("10.180.0.1", 80))
        # an unused port of a ClusterIP: rejected by cluster-ips-check
        assert k.probe("10.0.0.2", "172.30.0.41", 81, origin="pod").verdict == "reject"
        # an unallocated address of the service CIDR: dropped
        assert k.probe("10.0.0.2", "172.30.0.99", 80, origin="pod").verdict == "drop"
        # svc6 has no endpoints: reject-chain
        assert k.probe("10.0.0.2", "172.30.0.46", 80, origin="pod").verdict == "reject"
        # a NodePort on the primary address, from outside: masqueraded to svc3's endpoint
        r = k.probe("203.0.113.2", "192.168.0.2", 3003)
        assert (r.verdict, r.dnat, r.snat_ip is not None) == ("forward", ("10.180.0.3", 80), True)
        # ... but not on another node address: NodePorts only on nodeport-ips
        assert k.probe("203.0.113.2", "192.168.1.2", 3003).dnat is None


def test_host_ruleset_unchanged_by_nft_loads() -> None:
    before = _root_rules()
    netns_before = _netns_list()
    with KernelOracle(SPEC) as k:
        for name in ("TestOverallNFTablesRules", "TestSyncProxyRulesRepeated__09_empty_svc3_endpoints"):
            k.load(nftcorpus.case(name)["dump"])
            assert k.probe("10.0.0.2", "172.30.0.41", 80, origin="pod").dnat is not None
        k.reset()
    assert _root_rules() == before
    assert _netns_list() == netns_before
    assert json.dumps(before)  # a snapshot was taken
