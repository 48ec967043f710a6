"""The README's recipe: the outputs of its commands, recorded, go through `verify` and `check`.

The recorded files (``data/recorded``, see its README) are one cluster in every shape the recipe
collects it: ``kubectl get ... -o yaml`` and ``-o json`` Lists, v1 Endpoints, the ``kube-proxy``
ConfigMap, ``kubectl cluster-info dump`` (stream and directory), Helm-rendered manifests, and a
node's ``iptables-save`` and ``ip -j addr``. Every shape must load into the same Services and
endpoints, verify clean, and check clean against the node's rules; what an input adds or lacks
(the cluster CIDR of the ConfigMap, the EndpointSlices a cluster-info dump leaves out) must show.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from nat_verify.cli import main
from nat_verify.kube import load_cluster
from nat_verify.model.cluster import Cluster

DATA = Path(__file__).parent / "data" / "recorded"
NODES = DATA / "nodes"
CONFIGMAP = DATA / "kube-proxy-configmap.yaml"

# What the cluster is (the README of data/recorded): Service -> its ready endpoints.
ENDPOINTS = {
    "default/kubernetes": {("192.168.56.10", 6443)},
    "kube-system/kube-dns": {("10.244.0.2", 53), ("10.244.0.3", 53), ("10.244.0.2", 9153), ("10.244.0.3", 9153)},
    "shop/frontend": {("10.244.1.5", 8080), ("10.244.2.7", 8080)},
    "shop/cart": {("10.244.2.9", 6379)},
}

# Each way of collecting the cluster, as the --cluster inputs the recipe gives for it.
INPUTS = {
    "get-yaml": ["get-all.yaml", "kube-proxy-configmap.yaml"],
    "get-json": ["get-all.json", "kube-proxy-configmap.yaml"],
    "cluster-info-stream": ["cluster-info-dump.json", "get-endpoints.yaml", "kube-proxy-configmap.yaml"],
    "cluster-info-directory": ["cluster-info", "get-endpoints.yaml", "kube-proxy-configmap.yaml"],
    "get-yaml-with-workloads-and-endpoints": ["get-all.yaml", "get-workloads.yaml", "get-endpoints.yaml", "kube-proxy-configmap.yaml"],
}


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


def ready_endpoints(c: Cluster) -> dict[str, set[tuple[str, int]]]:
    out: dict[str, set[tuple[str, int]]] = {}
    for svc in c.services:
        out[svc.key] = {
            (e.addresses[0], p.port) for s in c.slices_for(svc) for e in s.endpoints if e.ready for p in s.ports
        }
    return out


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_every_shape_loads_the_same_cluster(name: str) -> None:
    c = load_cluster([DATA / f for f in INPUTS[name]])
    assert ready_endpoints(c) == ENDPOINTS
    assert sorted(n.name for n in c.nodes) == ["cp-1", "worker-1", "worker-2"]
    assert len(c.pods) == 9  # 2 CoreDNS, the API server, 3 kube-proxy, 2 frontend, cart-0
    # the KubeProxyConfiguration inside the kube-proxy ConfigMap (config.conf)
    assert c.proxy.cluster_cidrs == ("10.244.0.0/16",) and c.proxy.detect_local_mode == "ClusterCIDR"
    assert c.proxy.source.file == str(CONFIGMAP)
    frontend = next(s for s in c.services if s.key == "shop/frontend")
    assert frontend.ports[0].target_port == "http" and frontend.ports[0].node_port == 30080


def test_cluster_info_dump_reads_typed_lists_and_skips_logs() -> None:
    c = load_cluster([DATA / "cluster-info-dump.json"])
    # typed Lists (ServiceList, PodList...) whose items carry no kind: the list's kind tells
    assert {s.key for s in c.services} == set(ENDPOINTS)
    # the dump lists DaemonSets, Deployments and ReplicaSets (and ReplicationControllers), not
    # StatefulSets
    assert sorted({w.kind for w in c.workloads}) == ["DaemonSet", "Deployment", "ReplicaSet"]
    # the logs (one holds a JSON object) are not objects; the Pods after them still are read
    assert "shop/cart-0" in {p.key for p in c.pods}
    # no EndpointSlice in a cluster-info dump: slices come from the Pods, and the Service
    # without selector has none, which the note explains
    assert {s.origin for s in c.slices} == {"synthesised"}
    (note,) = [n for n in c.notes if n.service == "default/kubernetes"]
    assert "kubectl cluster-info dump leaves them out" in note.message
    assert not c.proxy.cluster_cidrs  # no ConfigMap either


def test_configmap_lines_point_into_the_embedded_config(tmp_path: Path) -> None:
    text = CONFIGMAP.read_text().replace("clusterCIDR: 10.244.0.0/16", "clusterCIDR: 10.244.0.0/33")
    bad = tmp_path / "kube-proxy.yaml"
    bad.write_text(text)
    code, out, err = run("compile", str(DATA / "get-all.yaml"), str(bad), "--node", "worker-1")
    assert code == 2 and not out
    line = next(n for n, t in enumerate(text.splitlines(), 1) if "10.244.0.0/33" in t)
    assert f"{bad}:{line}: ConfigMap kube-system/kube-proxy data[config.conf]" in err
    assert "must be a CIDR" in err


def _cluster_dir(tmp_path: Path, files: list[str]) -> Path:
    """The recipe's layout: one directory per cluster under a snapshot directory."""
    root = tmp_path / "snapshot"
    one = root / "shop"
    one.mkdir(parents=True)
    for f in files:
        src = DATA / f
        if src.is_dir():
            shutil.copytree(src, one / f)
        else:
            shutil.copy(src, one / f)
    return root


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_recipe_verify(tmp_path: Path, name: str) -> None:
    code, out, err = run("verify", str(_cluster_dir(tmp_path, INPUTS[name])), "--format", "json")
    doc = json.loads(out)
    assert code == 0, [f["message"] for f in doc["findings"] if f["severity"] == "error"]
    statuses = {(r["invariant"], r["status"]) for r in doc["results"]}
    # the object invariants were checked, not skipped: selectors, ports, slices against Pods
    for inv in ("NV016", "NV018", "NV021", "NV023", "NV024", "NV026"):
        assert (inv, "proved") in statuses, inv
    # and so were the rules on every node (the control plane's local API server endpoint too)
    assert {r["node"] for r in doc["results"]} >= {"cp-1", "worker-1", "worker-2"}


@pytest.mark.parametrize("node", ["cp-1", "worker-1"])
@pytest.mark.parametrize("name", sorted(INPUTS))
def test_recipe_check(node: str, name: str) -> None:
    clusters = [a for f in INPUTS[name] for a in ("--cluster", str(DATA / f))]
    code, out, _ = run("check", str(NODES / f"{node}.iptables-save"), *clusters, "--node", node, "--format", "json")
    doc = json.loads(out)
    assert [f["message"] for f in doc["findings"] if f["severity"] == "error"] == []
    assert code == 0
    assert any(r["invariant"] == "NV015" and r["status"] == "proved" for r in doc["results"])


def test_helm_rendered_release_verifies_and_counts_what_it_skips() -> None:
    code, out, err = run("verify", str(DATA / "helm-template.yaml"), "--format", "json")
    doc = json.loads(out)
    assert code == 0
    assert "skipped 1 object of kind ServiceMonitor (monitoring.coreos.com/v1)" in err
    assert "skipped 1 object of kind Pod (helm.sh/hook)" in err
    assert any("ServiceMonitor" in s for s in doc["meta"]["skipped"])
    # the Deployment's template stands for its Pods: selector and named port checked
    assert {("NV016", "proved"), ("NV018", "proved")} <= {(r["invariant"], r["status"]) for r in doc["results"]}


@pytest.mark.parametrize("node", ["cp-1", "worker-1"])
def test_recipe_check_with_the_nodes_facts(node: str) -> None:
    # the README's check command: the node's interfaces, routes, CNI and sysctls given
    code, out, _ = run(
        "check", str(NODES / f"{node}.iptables-save"), "--cluster", str(DATA / "get-all.yaml"),
        "--cluster", str(CONFIGMAP), "--node", node,
        "--ip-addr", str(NODES / f"{node}.ip-addr.json"), "--ip-route", str(NODES / f"{node}.ip-route.json"),
        "--cni", "flannel", "--sysctl", "net.ipv4.conf.all.route_localnet=1",
        "--sysctl", "net.bridge.bridge-nf-call-iptables=1", "--format", "json",
    )  # fmt: skip
    doc = json.loads(out)
    assert [f["message"] for f in doc["findings"] if f["severity"] == "error"] == []
    assert code == 0
    assumed = {a["fact"] for a in doc.get("assumptions", []) if a["basis"] == "assumed"}
    # what was given is no longer assumed
    assert not assumed & {"routes", "route_localnet", "net.bridge.bridge-nf-call-iptables"}, assumed
