"""Golden: upstream's TestOverallIPTablesRules literal (current era), compiled from YAML."""

from __future__ import annotations

from pathlib import Path

import attrs
import yaml

from nat_verify.kube import load_cluster
from nat_verify.kubeproxy import apply_annotations, canonical_order, compile_node

GOLDEN = Path(__file__).parents[1] / "golden" / "kube-proxy" / "TestOverallIPTablesRules"


def test_overall_iptables_rules() -> None:
    path = GOLDEN / "cluster.yaml"
    cluster = load_cluster(path)
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc.get("kind") == "KubeProxyConfiguration":
            cluster = attrs.evolve(
                cluster, proxy=apply_annotations(cluster.proxy, doc["metadata"]["annotations"])
            )
    expected = (GOLDEN / "expected.rules").read_text()
    got = compile_node(cluster, "test-node", 4, base_jumps=False)
    assert got == expected
    # the literal is already in upstream's canonical order, and so is the output
    assert canonical_order(expected) == expected
