"""``nat-verify explain`` on the README's web-svc, with every expectation reasoned from the spec.

specs/web-svc.yaml: Service default/web-svc, type NodePort, selector app=nginx, ClusterIP
10.43.0.15, port http 80/TCP -> targetPort 8080, NodePort 30080, externalTrafficPolicy Cluster;
Pods nginx-1 (10.42.1.7, node-1) and nginx-2 (10.42.2.3, node-2), both Ready with container port
http 8080; EndpointSlice web-svc-abc12 lists both; nodes node-1 (192.168.1.10) and node-2
(192.168.1.11); clusterCIDR 10.42.0.0/16.

What kube-proxy's rules must then do on node-1 (DESIGN.md's invariants, README's walk-through):
- every flow DNATs to 10.42.1.7:8080 or 10.42.2.3:8080, each with probability 1/2 (NV001,
  NV002, NV007): the port changes too (80 or 30080 -> 8080);
- a pod's packet (source in 10.42.0.0/16) to the ClusterIP keeps its client IP; a packet from
  outside the cluster CIDR to the ClusterIP is masqueraded (NV009); NodePort traffic is
  masqueraded from every origin (eTP=Cluster, NV004);
- pods and outside enter by nat PREROUTING, the node's own processes by nat OUTPUT.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_cli import run

SPECS = Path(__file__).resolve().parents[2] / "specs"
WEB = str(SPECS / "web-svc.yaml")
ENDPOINTS = {"10.42.1.7:8080": "node-1", "10.42.2.3:8080": "node-2"}



def explain_json(*args: str) -> dict[str, Any]:
    code, out, err = run("explain", *args, "--format", "json")
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    assert doc["format"] == "nat_verify.explain/v1"
    return doc


@pytest.fixture(scope="module")
def web() -> dict[str, Any]:
    return explain_json("default/web-svc", "--cluster", WEB)


def _flow(doc: dict[str, Any], cls: str, origin: str) -> dict[str, Any]:
    return next(f for f in doc["flows"] if f["class"] == cls and f["origin"] == origin)


def test_the_service_its_pods_and_the_slice_kube_proxy_reads(web: dict[str, Any]) -> None:
    assert web["node"] == "node-1"  # no --node: the first node
    (svc,) = web["services"]
    assert svc["service"] == "default/web-svc" and svc["type"] == "NodePort"
    assert svc["selector"] == {"app": "nginx"}
    pods = {p["pod"]: p for p in svc["pods"]}
    assert set(pods) == {"default/nginx-1", "default/nginx-2"}
    assert (pods["default/nginx-1"]["ip"], pods["default/nginx-1"]["node"]) == ("10.42.1.7", "node-1")
    for p in pods.values():
        assert p["ready"] and p["endpoint"]
        (port,) = p["ports"]
        assert port["resolved"] == 8080 and port["container_port"] == "http"
    assert svc["near_misses"] == []
    (sl,) = svc["slices"]
    assert sl["name"] == "web-svc-abc12"
    assert {e["address"]: e["node"] for e in sl["endpoints"]} == {"10.42.1.7": "node-1", "10.42.2.3": "node-2"}


@pytest.mark.parametrize("cls, address", [("cluster-ip", "10.43.0.15:80"), ("node-port", "192.168.1.10:30080")])
@pytest.mark.parametrize("origin", ["pod", "host", "external"])
def test_flows_from_each_origin(web: dict[str, Any], cls: str, address: str, origin: str) -> None:
    f = _flow(web, cls, origin)
    assert f["address"] == address
    assert {o["destination"] for o in f["outcomes"]} == set(ENDPOINTS)
    kept = cls == "cluster-ip" and origin == "pod"
    hook = "nat OUTPUT" if origin == "host" else "nat PREROUTING"
    for o in f["outcomes"]:
        assert Fraction(o["probability"]) == Fraction(1, 2)
        assert o["dnat"] and o["verdict"] == "forward"
        assert o["endpoint"]["node"] == ENDPOINTS[o["destination"]]
        assert o["masquerade"] is not kept
        labels = [h["label"] for h in o["hops"]]
        assert labels[2] == hook and "KUBE-SERVICES" in labels
        assert ("KUBE-NODEPORTS" in labels) == (cls == "node-port")
        # the address change is on the DNAT edge: both address and port are rewritten
        edges = [h.get("edge", "") for h in o["hops"]]
        assert f"dst {address} -> {o['destination']}" in edges
        assert any(e.startswith("src ") for e in edges) is not kept
        # each chain hop shows the rule that fired, with its text from the rules
        fired = [r for h in o["hops"] for r in h.get("rules", [])]
        assert fired and all(r["line"] > 0 and r["text"].startswith("-A ") for r in fired)


def test_the_facts_people_get_wrong_with_the_packet_that_shows_them(web: dict[str, Any]) -> None:
    facts = {f["fact"]: f for f in web["facts"]}
    assert list(facts)[:3] == ["nodeport-reaches-other-nodes", "dnat-rewrites-port", "kernel-rewrites"]
    other = facts["nodeport-reaches-other-nodes"]
    # node-1's NodePort sends half of its connections to nginx-2 on node-2
    assert other["packet"]["dst"] == "192.168.1.10:30080"
    assert "10.42.2.3:8080 on node-2" in other["text"]
    assert "--to-destination 10.42.2.3:8080" in other["evidence"]
    assert re.search(r"-> 10\.42\.\d\.\d:8080", facts["dnat-rewrites-port"]["text"])
    assert "-j DNAT" in facts["kernel-rewrites"]["evidence"]


def test_text_prints_every_flow_with_its_address_changes() -> None:
    code, out, _ = run("explain", "default/web-svc", "--cluster", WEB)
    assert code == 0
    for title in ("ClusterIP 10.43.0.15:80/tcp from a pod on the node",
                  "ClusterIP 10.43.0.15:80/tcp from the node itself",
                  "ClusterIP 10.43.0.15:80/tcp from outside the cluster",
                  "NodePort 192.168.1.10:30080/tcp from a pod on the node",
                  "NodePort 192.168.1.10:30080/tcp from the node itself",
                  "NodePort 192.168.1.10:30080/tcp from outside the cluster"):  # fmt: skip
        assert title in out
    assert "dst 10.43.0.15:80 -> 10.42.1.7:8080" in out
    assert "dst 192.168.1.10:30080 -> 10.42.2.3:8080" in out
    assert "client IP kept: the endpoint sees" in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_a_cluster_ip_belongs_to_no_pod() -> None:
    doc = explain_json("10.43.0.15", "--cluster", WEB)
    assert any("ClusterIP of Service default/web-svc" in w for w in doc["what"])
    assert any(w.startswith("No Pod, node or interface has 10.43.0.15") for w in doc["what"])
    assert {f["class"] for f in doc["flows"]} == {"cluster-ip"}


def test_a_pod_ip_is_explained_on_the_pods_node() -> None:
    doc = explain_json("10.42.2.3", "--cluster", WEB)
    assert doc["node"] == "node-2"
    # the Pod's document starts at line 64 of the spec
    assert doc["what"] == ["10.42.2.3 is the IP of Pod default/nginx-2 on node node-2 (" + WEB + ":64)."]
    assert doc["flows"] == []  # a Pod IP is no Service address: nothing rewrites it


def test_a_nodeport_on_another_node() -> None:
    doc = explain_json("192.168.1.11:30080", "--cluster", WEB)
    assert doc["node"] == "node-2"
    assert any("address of node node-2" in w for w in doc["what"])
    assert any("NodePort of default/web-svc" in w for w in doc["what"])
    assert {f["address"] for f in doc["flows"]} == {"192.168.1.11:30080"}


def test_with_the_nodes_own_dump(tmp_path: Path) -> None:
    code, dump, _ = run("compile", WEB, "--node", "node-1", "--style", "save")
    assert code == 0
    (tmp_path / "n1.save").write_text(dump)
    doc = explain_json("default/web-svc", "--cluster", WEB, "--node", "node-1", "--dump", str(tmp_path / "n1.save"))
    assert "n1.save" in doc["rules"]
    f = _flow(doc, "cluster-ip", "pod")
    # the rule text comes from the dump's own lines (iptables-save spelling: /32)
    fired = [r["text"] for o in f["outcomes"] for h in o["hops"] for r in h.get("rules", [])]
    assert any("-d 10.43.0.15/32" in t for t in fired)
    code, _, err = run("explain", "default/web-svc", "--cluster", WEB, "--dump", str(tmp_path / "n1.save"))
    assert code == 2 and "--node" in err


def test_near_misses_when_nothing_is_selected(tmp_path: Path) -> None:
    text = Path(WEB).read_text().replace("  selector:\n    app: nginx", "  selector:\n    app: ngnix")
    assert "ngnix" in text
    (tmp_path / "typo.yaml").write_text(text)
    doc = explain_json("default/web-svc", "--cluster", str(tmp_path / "typo.yaml"))
    (svc,) = doc["services"]
    assert svc["pods"] == []
    assert any("app=ngnix: it has app=nginx" in m for m in svc["near_misses"])


def test_bad_target_is_bad_input() -> None:
    code, out, err = run("explain", "default/nope", "--cluster", WEB)
    assert code == 2 and out == "" and "default/nope" in err and "Traceback" not in err
    code, _, err = run("explain", "not-an-address", "--cluster", WEB)
    assert code == 2 and "namespace/service" in err


def test_report_files_in_every_format(tmp_path: Path) -> None:
    names = ["e.html", "e.md", "e.json", "e.txt", "e.sarif", "e.xml"]
    args = [a for n in names for a in ("--report", str(tmp_path / n))]
    code, _, _ = run("explain", "default/web-svc", "--cluster", WEB, *args)
    assert code == 0
    doc = json.loads((tmp_path / "e.json").read_text())
    html = (tmp_path / "e.html").read_text()
    assert html.count('<svg class="path"') == sum(len(f["outcomes"]) for f in doc["flows"])
    md = (tmp_path / "e.md").read_text()
    assert md.count("```mermaid\nflowchart TD") == sum(len(f["outcomes"]) for f in doc["flows"])
    assert "dst 10.43.0.15:80" in (tmp_path / "e.txt").read_text()
    root = ET.parse(tmp_path / "e.xml").getroot()
    assert root.get("tests") == str(len(doc["flows"])) and root.get("failures") == "0"
    sarif = json.loads((tmp_path / "e.sarif").read_text())
    assert len(sarif["runs"][0]["results"]) == len(doc["facts"])
    from tests.unit.test_report_golden import _sarif_schema

    jsonschema = pytest.importorskip("jsonschema")
    assert not list(jsonschema.Draft4Validator(_sarif_schema()).iter_errors(sarif))


def _spec_services() -> list[tuple[str, str]]:
    from nat_verify.kube.loader import load_cluster

    return [(str(f), s.key) for f in sorted(SPECS.glob("*.yaml")) for s in load_cluster([str(f)]).services]


@pytest.mark.parametrize("spec, service", _spec_services())
def test_every_spec_service_is_explained(spec: str, service: str) -> None:
    doc = explain_json(service, "--cluster", spec)
    assert doc["services"][0]["service"] == service
    for f in doc["flows"]:
        # each flow is a trace: its outcomes' probabilities add up to 1
        assert sum(Fraction(o["probability"]) for o in f["outcomes"]) == 1, f["address"]
    code, out, _ = run("explain", service, "--cluster", spec)
    assert code == 0 and max(len(line) for line in out.splitlines()) <= 80


def test_a_dual_stack_service_is_traced_in_both_families() -> None:
    # specs/dual-stack.yaml: ClusterIPs 10.43.0.50 and fd00:43::32, nodes with both families
    doc = explain_json("default/dual", "--cluster", str(SPECS / "dual-stack.yaml"))
    cluster_ips = {f["address"] for f in doc["flows"] if f["class"] == "cluster-ip"}
    assert cluster_ips == {"10.43.0.50:80", "[fd00:43::32]:80"}
