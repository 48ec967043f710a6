"""The other half of a quality suite: correct rules give no error finding.

kube-proxy's own output (``compile_node``, byte-exact with upstream's test literals) for every
spec cluster, every conformance cluster and random clusters from ``nat_verify.strategies``,
on every node and family, in restore form and in the ``iptables-save`` spelling a real node
shows, must satisfy every invariant. A finding here is a false positive (or a compiler bug,
which the conformance suite would show as well).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nat_verify import strategies as nvst
from nat_verify.check import check_objects, check_ruleset, families
from nat_verify.kube import load_cluster
from nat_verify.kubeproxy import compile_node
from nat_verify.model.cluster import Cluster
from nat_verify.model.outcome import Finding
from nat_verify.netfilter.parse import parse
from nat_verify.netfilter.render import render
from nat_verify.netfilter.saveform import to_save_form

ROOT = Path(__file__).resolve().parents[2]
CLUSTER_FILES = sorted(
    [*ROOT.glob("specs/*.yaml"), *ROOT.glob("tests/conformance/clusters/*.yaml"), *ROOT.glob("tests/quality/clusters/*.yaml")]
)


def _errors(cluster: Cluster, node: str, family: int, form: str, *, objects: bool = True) -> list[Finding]:
    text = compile_node(cluster, node, family=family)
    if form == "save":
        text = render(to_save_form(parse(text, family=family)))
    report = check_ruleset(cluster, node, parse(text, family=family))
    if objects:  # the cluster files' objects must be consistent too (NV016-NV028)
        report = report.merged(check_objects(cluster))
    return [f for f in report.findings if f.severity == "error"]


def _describe(errors: list[Finding]) -> str:
    return "\n".join(f"  {f.invariant} {f.service}: {f.message} [{f.packet}]" for f in errors[:10])


def test_cluster_files_are_found() -> None:
    # 10 specs + 29 conformance clusters + the quality clusters: a glob that finds nothing
    # would make the parametrised test below vacuous.
    assert len(CLUSTER_FILES) >= 40


@pytest.mark.parametrize("path", CLUSTER_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
@pytest.mark.parametrize("form", ["restore", "save"])
def test_kube_proxy_rules_have_no_error(path: Path, form: str) -> None:
    cluster = load_cluster([str(path)])
    assert cluster.nodes, f"{path}: no node to check"
    for node in cluster.nodes:
        for fam in families(cluster, node.name):
            errors = _errors(cluster, node.name, fam, form)
            assert not errors, f"{path.name} {node.name} IPv{fam} ({form}):\n{_describe(errors)}"


@settings(max_examples=25)
@given(nvst.clusters(max_nodes=2, max_services=3, max_endpoints=3, families=(4, 6)), st.data())
def test_random_clusters_have_no_error(cluster: Cluster, data: st.DataObject) -> None:
    node = data.draw(nvst.node_names(cluster))
    for fam in families(cluster, node):
        # generated Pods exercise the rules (some Services have no Ready Pod): rules only
        errors = _errors(cluster, node, fam, "restore", objects=False)
        assert not errors, f"{node} IPv{fam}:\n{_describe(errors)}"
