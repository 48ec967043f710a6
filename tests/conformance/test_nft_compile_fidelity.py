"""The nftables compiler reproduces every literal of kube-proxy's nftables corpus.

Each case's cluster is plain Kubernetes YAML in ``nft_clusters/<case>.yaml`` (written from the
case's ``services``, ``node_ips`` and ``proxier_config``), loaded with the project's loader. The
expected text is the case's ``dump``: upstream's literal after upstream's own sort
(``sortNFTablesTransaction``), which the compiler's output must equal after the same sort. The
stale chains of three steps are kube-proxy's state from the step before (chains it flushed and
deletes a second later), as the corpus's step descriptions and assertions give them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nat_verify.kube import load_cluster
from nat_verify.kubeproxy.nftables import compile_node_nft, sort_transaction
from nat_verify.kubeproxy.nftables.names import endpoint_base, service_port_base
from nat_verify.nftables import parse_ruleset, same_ruleset
from tests.conformance import nftcorpus

CLUSTERS = Path(__file__).parent / "nft_clusters"

STALE = {
    # OnServiceDelete(svc2): its chains are flushed, not yet deleted
    "TestSyncProxyRulesRepeated__03_delete_svc2": (
        "service-MHHHYRWA-ns2/svc2/tcp/p8080",
        "endpoint-7RVP4LUQ-ns2/svc2/tcp/p8080__10.0.2.1/8080",
    ),
    # svc3's endpoint 10.0.3.1 replaced by 10.0.3.2
    "TestSyncProxyRulesRepeated__07_change_svc3_endpoint": ("endpoint-2OCDJSZQ-ns3/svc3/tcp/p80__10.0.3.1/80",),
    # the assertion fp.staleChains == {...} of that step
    "TestSyncProxyRulesRepeated__09_empty_svc3_endpoints": (
        "service-4AT6LBPK-ns3/svc3/tcp/p80",
        "endpoint-SWWHDC7X-ns3/svc3/tcp/p80__10.0.3.2/80",
        "endpoint-TQ2QKHCZ-ns3/svc3/tcp/p80__10.0.3.3/80",
    ),
}


def test_every_kube_proxy_case_has_a_cluster() -> None:
    assert sorted(p.stem for p in CLUSTERS.glob("*.yaml")) == nftcorpus.kube_proxy_cases()


@pytest.mark.parametrize("name", nftcorpus.kube_proxy_cases())
def test_literal_reproduced(name: str) -> None:
    case = nftcorpus.case(name)
    cluster = load_cluster(CLUSTERS / f"{name}.yaml")
    assert cluster.proxy.mode == "nftables"
    got = compile_node_nft(cluster, case["node_name"], 4, STALE.get(name, ()))
    assert sort_transaction(got) == case["dump"]


def test_stale_chains_match_the_step_assertion() -> None:
    (assertion,) = nftcorpus.case("TestSyncProxyRulesRepeated__09_empty_svc3_endpoints")["other_assertions"][:1]
    for chain in STALE["TestSyncProxyRulesRepeated__09_empty_svc3_endpoints"]:
        assert chain in assertion


@pytest.mark.parametrize("name", nftcorpus.kube_proxy_cases())
def test_output_is_the_ruleset_the_kernel_loaded(name: str) -> None:
    """The compiler's own order declares before use; parsed, it is what the kernel listed."""
    case = nftcorpus.case(name)
    got = compile_node_nft(load_cluster(CLUSTERS / f"{name}.yaml"), case["node_name"], 4, STALE.get(name, ()))
    assert same_ruleset(parse_ruleset(got), parse_ruleset(nftcorpus.listing_text(name)))


def test_unsorted_output_is_upstream_dump_order() -> None:
    """Fake.Dump() order: table, chains by name, sets, maps, rules, set then map elements."""
    got = compile_node_nft(load_cluster(CLUSTERS / "TestOverallNFTablesRules.yaml"), "test-node")
    kinds = [line.split(" ")[1] for line in got.splitlines()]
    assert kinds == sorted(kinds, key=["table", "chain", "set", "map", "rule", "element"].index)
    chains = [line.split(" ")[4] for line in got.splitlines() if line.startswith("add chain")]
    assert chains == sorted(chains)


def test_name_hashing_matches_upstream_tests() -> None:
    data = json.loads((nftcorpus.DATA / "names" / "chain_name_base.json").read_text())
    for c in data["servicePortChainNameBase"]:
        assert service_port_base(c["namespace"], c["service"], c["protocol"], c["port"]) == c["expected"]
    for c in data["servicePortEndpointChainNameBase"]:
        assert endpoint_base(c["namespace"], c["service"], c["protocol"], c["port"], c["endpoint"]) == c["expected"]
    assert len(data["servicePortChainNameBase"]) + len(data["servicePortEndpointChainNameBase"]) == 9
