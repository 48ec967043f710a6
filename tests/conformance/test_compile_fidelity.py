"""The compiler reproduces every dump of kube-proxy's conformance corpus.

Each case's cluster is plain Kubernetes YAML in ``clusters/<case>.yaml`` (written from the
case's ``services``/``node_ips``/``proxier_config`` description), loaded with the project's
YAML loader. Expected text = the case's ``dump``: upstream's literal, already in canonical order.
The one hand-written literal (``current__TestTracePacket``) is not in canonical order and holds
its own, partly unquoted base-chain jumps; it is compared without them after ``canonical_order``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from nat_verify.kube import load_cluster
from nat_verify.kubeproxy import apply_annotations, canonical_order, compile_node
from nat_verify.model.cluster import Cluster

HERE = Path(__file__).parent
DATA = HERE / "data" / "kube-proxy"
CLUSTERS = HERE / "clusters"
CASES = sorted(p.stem for p in DATA.glob("*.json"))
BUILTIN = ("INPUT", "FORWARD", "OUTPUT", "PREROUTING", "POSTROUTING")


def _case(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text())
    return data


def _cluster(name: str) -> Cluster:
    path = CLUSTERS / f"{name}.yaml"
    cluster = load_cluster(path)
    # The spelling annotations are applied here too, so the test does not depend on whether
    # the loader forwards them (applying them twice is harmless).
    for doc in yaml.safe_load_all(path.read_text()):
        if doc and doc.get("kind") == "KubeProxyConfiguration":
            annotations = doc.get("metadata", {}).get("annotations", {}) or {}
            cluster = attrs.evolve(cluster, proxy=apply_annotations(cluster.proxy, annotations))
    return cluster


def _without_builtin_chains(text: str) -> str:
    return "\n".join(
        line
        for line in text.splitlines()
        if not any(line.startswith((f":{c} ", f"-A {c} ")) for c in BUILTIN)
    )


def test_every_case_has_a_cluster() -> None:
    assert len(CASES) == 29
    assert sorted(p.stem for p in CLUSTERS.glob("*.yaml")) == CASES


@pytest.mark.parametrize("name", CASES)
def test_dump_reproduced(name: str) -> None:
    case = _case(name)
    got = compile_node(_cluster(name), case["node_name"], 4, base_jumps=False)
    want: str = case["dump"]
    if case.get("implicit_rules") is None or name.startswith("current__"):
        want = canonical_order(_without_builtin_chains(want))
    assert got == want


@pytest.mark.parametrize("name", [n for n in CASES if n.startswith("legacy__")])
def test_base_jumps_match_the_fake(name: str) -> None:
    """``base_jumps`` adds exactly the jumps the Go fake held, in its (kernel) order.

    The fake renders comments unquoted, so quotes are removed before comparing.
    """
    case = _case(name)
    text = compile_node(_cluster(name), case["node_name"], 4, base_jumps=True)
    got: dict[str, list[str]] = {}
    table = ""
    for line in text.splitlines():
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith("-A ") and line.split()[1] in BUILTIN:
            got.setdefault(table, []).append(line.replace('"', ""))
    want = case["implicit_rules"]
    for tbl in ("filter", "nat"):
        order = ["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"]
        ordered = sorted(want[tbl], key=lambda r: order.index(r.split()[1]))
        assert sorted(got[tbl], key=lambda r: order.index(r.split()[1])) == ordered
    # the rest of the output is unchanged apart from the KUBE-FIREWALL chain line the jumps need
    plain = compile_node(_cluster(name), case["node_name"], 4, base_jumps=False)
    rest = [
        ln for ln in _without_builtin_chains(text).splitlines() if ln != ":KUBE-FIREWALL - [0:0]"
    ]
    assert rest == [ln for ln in plain.splitlines() if ln != ":KUBE-FIREWALL - [0:0]"]


def _can_use_netns() -> bool:
    return (
        os.geteuid() == 0
        and shutil.which("unshare") is not None
        and (shutil.which("iptables-restore") is not None)
    )


@pytest.mark.kernel
@pytest.mark.skipif(not _can_use_netns(), reason="needs root, unshare and iptables-restore")
@pytest.mark.parametrize("name", CASES)
def test_iptables_restore_accepts_the_output(name: str) -> None:
    """The real ``iptables-restore --noflush`` loads it, in a throwaway network namespace."""
    case = _case(name)
    text = compile_node(_cluster(name), case["node_name"], 4, base_jumps=True)
    proc = subprocess.run(
        ["unshare", "-n", "iptables-restore", "--noflush"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
