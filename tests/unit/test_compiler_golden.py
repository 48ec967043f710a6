"""Golden: upstream's TestOverallIPTablesRules literal (current era), compiled from YAML."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import attrs
import pytest
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


@pytest.mark.kernel
@pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t) for t in ("unshare", "nfacct", "iptables-restore")),
    reason="needs root, unshare, nfacct and iptables-restore",
)
def test_nfacct_output_loads_once_the_counters_exist() -> None:
    """kube-proxy creates its nfacct counters before restoring; so does this throwaway netns."""
    path = GOLDEN / "cluster.yaml"
    cluster = load_cluster(path)
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc.get("kind") == "KubeProxyConfiguration":
            cluster = attrs.evolve(
                cluster, proxy=apply_annotations(cluster.proxy, doc["metadata"]["annotations"])
            )
    text = compile_node(cluster, "test-node", 4, base_jumps=True)
    script = (
        "nfacct add ct_state_invalid_dropped_pkts && nfacct add localhost_nps_accepted_pkts"
        " && iptables-restore --noflush"
    )
    proc = subprocess.run(
        ["unshare", "-n", "sh", "-c", script], input=text, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
