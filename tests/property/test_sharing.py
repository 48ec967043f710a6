"""Symmetry reduction: sharing one check per shape gives exactly the unshared report.

The reference is ``check_ruleset`` (every Service port checked on its own). Random clusters
come from ``nat_verify.strategies``, with their Pods or without; a generated cluster of the benchmark mix, where most
ports share a shape, pins that sharing actually happens, and planted differences in one
instance's rules show an instance that differs from its representative is checked on its own.
"""

from __future__ import annotations

import sys
from pathlib import Path

import attrs
from hypothesis import given
from hypothesis import strategies as st

from nat_verify.check import check_ruleset
from nat_verify.check.sharing import ShapeMemo, check_shared
from nat_verify.kubeproxy import compile_node
from nat_verify.model.cluster import Cluster
from nat_verify.netfilter.parse import parse
from nat_verify.strategies import clusters

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from gen_cluster import generate_cluster  # noqa: E402


def _results(rep: object) -> list[tuple[str, str, str, str, int]]:
    return sorted((r.invariant, r.service, r.node, r.status, r.checked) for r in rep.results)  # type: ignore[attr-defined]


def _findings(rep: object) -> list[tuple[str, str, str, str]]:
    return sorted((f.invariant, f.service, f.severity, f.message) for f in rep.findings)  # type: ignore[attr-defined]


def _same(cluster: Cluster, node: str, family: int, text: str | None = None, memo: ShapeMemo | None = None) -> ShapeMemo:
    rs = parse(text if text is not None else compile_node(cluster, node, family), family=family)
    memo = memo if memo is not None else ShapeMemo()
    shared = check_shared(cluster, node, rs, memo=memo)
    alone = check_ruleset(cluster, node, rs)
    assert _results(shared) == _results(alone)
    assert _findings(shared) == _findings(alone)
    return memo


@given(clusters(max_nodes=3, max_services=5, max_endpoints=4), st.booleans(), st.data())
def test_shared_equals_unshared_on_random_clusters(cluster: Cluster, keep_pods: bool, data: st.DataObject) -> None:
    cluster = cluster if keep_pods else attrs.evolve(cluster, pods=())
    node = data.draw(st.sampled_from([n.name for n in cluster.nodes]))
    _same(cluster, node, 4)


def test_the_benchmark_mix_shares_most_ports_and_equals_unshared() -> None:
    cluster = generate_cluster(60, 3, nodes=3)
    memo = _same(cluster, "node-0", 4)
    assert memo.shared > memo.checked  # 60 ports of ~20 kinds: most take a representative's result


def test_a_fleet_memo_shares_between_nodes_and_each_node_equals_unshared() -> None:
    cluster = generate_cluster(40, 2, nodes=4)
    memo = ShapeMemo()
    for n in cluster.nodes:
        _same(cluster, n.name, 4, memo=memo)
    first = ShapeMemo()
    _same(cluster, "node-0", 4, memo=first)
    assert memo.checked < 4 * first.checked  # later nodes reuse shapes proved on earlier ones


def test_an_instance_whose_rules_differ_is_checked_on_its_own() -> None:
    cluster = generate_cluster(40, 3, nodes=3)
    text = compile_node(cluster, "node-0", 4)
    # svc29 is a plain ClusterIP Service like svc9 and svc19 (same shape when unbroken); send
    # one of its endpoints' traffic to a pod that is not an endpoint
    ep = next(e.addresses[0] for s in cluster.slices if s.service_name == "svc29" for e in s.endpoints)
    assert text.count(f"--to-destination {ep}:8080") == 1
    broken = text.replace(f"--to-destination {ep}:8080", "--to-destination 10.3.200.200:8080")
    rs = parse(broken, family=4)
    shared = check_shared(cluster, "node-0", rs)
    assert any(r.service == "ns29/svc29:p" and r.status == "violated" for r in shared.results)
    _same(cluster, "node-0", 4, text=broken)


def test_one_or_two_workers_give_the_same_report() -> None:
    cluster = generate_cluster(60, 3, nodes=3)
    rs = parse(compile_node(cluster, "node-1", 4), family=4)
    one = check_shared(cluster, "node-1", rs, workers=1)
    two = check_shared(cluster, "node-1", rs, workers=2)
    assert _results(one) == _results(two)
    assert _findings(one) == _findings(two)
    assert one.assumptions == two.assumptions


@given(clusters(max_nodes=3, max_services=4, max_endpoints=3), st.booleans())
def test_verify_shared_equals_verify_cluster(cluster: Cluster, keep_pods: bool) -> None:
    from nat_verify.check import verify_cluster
    from nat_verify.check.sharing import verify_shared

    cluster = cluster if keep_pods else attrs.evolve(cluster, pods=())
    shared, alone = verify_shared(cluster), verify_cluster(cluster)
    assert _results(shared) == _results(alone)
    assert _findings(shared) == _findings(alone)
