"""A Service without selector and without EndpointSlices has no endpoints: its traffic is REJECTed.

Kubernetes and kube-proxy treat such a Service as one with no endpoints, and so do upstream's own
tests: ``TestNoEndpointsReject`` (pkg/proxy/iptables/proxier_test.go) builds exactly this Service
(``makeTestService`` sets no selector, and no EndpointSlice is populated) and expects REJECT from
pods and external clients on the ClusterIP, the external IP, the NodePort and the LoadBalancer
IP. The cluster below is that test's, written as YAML; the packets are its flows.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nat_verify.check import verify_cluster
from nat_verify.check.nodectx import node_context
from nat_verify.cli import main
from nat_verify.kube import load_cluster
from nat_verify.kubeproxy import compile_node
from nat_verify.model.packet import Packet
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.parse import parse

NO_ENDPOINTS_REJECT = """\
apiVersion: v1
kind: Service
metadata: {namespace: ns1, name: svc1}
spec:
  type: LoadBalancer
  clusterIP: 172.30.0.41
  externalIPs: [192.168.99.11]
  ports:
  - {name: p80, port: 80, protocol: TCP, nodePort: 3001}
status:
  loadBalancer:
    ingress: [{ip: 1.2.3.4}]
---
apiVersion: v1
kind: Node
metadata: {name: test-hostname}
status:
  addresses: [{type: InternalIP, address: 192.168.0.2}]
---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clusterCIDR: 10.0.0.0/8
"""
POD, EXTERNAL, NODE = "10.0.0.2", "203.0.113.2", "192.168.0.2"
# (source, destination, port): upstream's flows, every one "REJECT"
FLOWS = [
    (POD, "172.30.0.41", 80),
    (EXTERNAL, "192.168.99.11", 80),
    (POD, NODE, 3001),
    (EXTERNAL, NODE, 3001),
    (POD, "1.2.3.4", 80),
    (EXTERNAL, "1.2.3.4", 80),
]


@pytest.fixture
def spec(tmp_path: Path) -> Path:
    path = tmp_path / "no-endpoints-reject.yaml"
    path.write_text(NO_ENDPOINTS_REJECT)
    return path


def test_loads_with_no_endpoints_and_a_note(spec: Path) -> None:
    c = load_cluster(spec)
    assert c.services[0].selector is None and c.slices == ()
    (note,) = c.notes
    assert note.invariant == "NV003" and note.service == "ns1/svc1"
    assert "has no selector and no EndpointSlice" in note.message and "rejects" in note.message
    assert note.location == f"{spec}:1"


@pytest.mark.parametrize(("src", "dst", "port"), FLOWS)
def test_upstream_flows_are_rejected(spec: Path, src: str, dst: str, port: int) -> None:
    c = load_cluster(spec)
    rs = parse(compile_node(c, "test-hostname", 4), family=4)
    ctx = node_context(c, "test-hostname", 4)
    import ipaddress

    pkt = Packet(src=ipaddress.ip_address(src), dst=ipaddress.ip_address(dst), dport=port,
                 origin="pod" if src == POD else "external")  # fmt: skip
    tr = Interpreter(rs, ctx).trace(pkt)
    assert [o.verdict for o in tr.outcomes] == ["reject"]


def test_verify_passes_and_shows_the_note(spec: Path) -> None:
    report = verify_cluster(load_cluster(spec))
    assert not [f for f in report.findings if f.severity == "error"]
    assert any(r.invariant == "NV003" and r.status == "proved" for r in report.results)
    r = CliRunner().invoke(main, ["verify", str(spec), "--format", "json"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 0
    notes = [f for f in doc["findings"] if f["severity"] == "note"]
    assert [(f["invariant"], f["service"]) for f in notes] == [("NV003", "ns1/svc1")]


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("", 1),  # nothing at all: the file's first line
        ("# nothing but a comment\n---\n", 1),
        ("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n", 1),
        ("# a node, but no Service\napiVersion: v1\nkind: Node\nmetadata: {name: cp-1}\n", 2),  # the first object
    ],
)
def test_an_input_without_a_service_is_exit_2(tmp_path: Path, text: str, line: int) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text(text)
    for args in (["verify", str(path)], ["check", str(Path(__file__).parent / "data" / "recorded" / "nodes" / "cp-1.iptables-save"), "--cluster", str(path), "--node", "cp-1"]):
        r = CliRunner().invoke(main, args)
        assert r.exit_code == 2 and r.stdout == ""
        assert f"{path}:{line}: no Service found in the input" in r.stderr
