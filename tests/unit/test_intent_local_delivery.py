"""Intent for endpoints at node addresses: the API server of a control-plane node, hostNetwork pods.

The layout is ``web_cluster`` (``test_intent``) with the two endpoints moved to the nodes' own
addresses: 192.168.1.10 (node-1) and 192.168.1.11 (node-2), port 8080. Expectations follow from
the kernel (``tests/kernel/test_semantics.py::test_dnat_to_a_node_address_is_delivered_locally``):
a packet that entered node-1 and is DNATed to 192.168.1.10 goes to INPUT and never meets nat
POSTROUTING, so it cannot be masqueraded and its reply returns through node-1's conntrack; a
DNAT to 192.168.1.11 is forwarded out of node-1 like one to a remote pod.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nat_verify.intent import Destination, expect, interesting_sources
from nat_verify.model.cluster import Cluster, Endpoint
from tests.unit.test_cli import SPECS, run
from tests.unit.test_intent import CIP, CLIENT, HOST1, NP1, POD1, SVC, web_cluster

OWN = ("192.168.1.10", 8080)  # node-1's own address
OTHER = ("192.168.1.11", 8080)  # node-2's address
LB = Destination(SVC, "lb-ip", "203.0.113.10", 80, "tcp")


def host_network(*, node_names: bool = True, proxy: dict[str, object] | None = None, **svc: object) -> Cluster:
    eps = (
        Endpoint(("192.168.1.10",), node_name="node-1" if node_names else ""),
        Endpoint(("192.168.1.11",), node_name="node-2" if node_names else ""),
    )
    return web_cluster(svc=dict(svc) or None, endpoints=eps, proxy=proxy)


def test_cluster_ip_from_outside_keeps_its_source_on_the_local_endpoint() -> None:
    # the control-plane case: API server endpoints without nodeName
    c = host_network(node_names=False)
    e = expect(c, "node-1", CIP, CLIENT, "external")
    assert e.kind == "dnat" and e.endpoints == {OWN, OTHER}
    # outside the cluster CIDR: NV009 asks for masquerade, which only the forwarded DNAT gets
    assert e.masquerade is True
    assert e.masquerade_required(OTHER) is True
    assert e.masquerade_required(OWN) is False
    assert any("delivered locally" in r for r in e.reasons)
    # the reply of a locally delivered connection comes back through this node: no NV010 warning
    assert not e.warnings


def test_pod_to_local_endpoint_keeps_its_source() -> None:
    c = host_network(node_names=False)
    e = expect(c, "node-1", CIP, POD1, "pod")
    assert e.masquerade is False and e.masquerade_required(OWN) is False


def test_masquerade_all_cannot_masquerade_a_locally_delivered_packet() -> None:
    c = host_network(proxy={"masquerade_all": True})
    e = expect(c, "node-1", CIP, POD1, "pod")
    assert e.masquerade is True
    assert e.masquerade_required(OTHER) is True and e.masquerade_required(OWN) is False


def test_host_to_its_own_endpoint_has_no_hairpin_requirement() -> None:
    # the node's own connection passes nat POSTROUTING (OUTPUT path), so the usual NV009
    # requirement stands; but the node reaching itself is no hairpin: no NV008
    c = host_network()
    e = expect(c, "node-1", CIP, HOST1, "host")
    assert "NV008" not in e.invariants
    assert e.masquerade is True and e.masquerade_required(OWN) is True


def test_pod_hairpin_is_still_required() -> None:
    c = web_cluster()
    e = expect(c, "node-1", CIP, "10.42.1.7", "pod")
    assert "NV008" in e.invariants and e.masquerade_required(("10.42.1.7", 8080)) is True


def test_etp_cluster_node_port_to_the_local_endpoint() -> None:
    # NV004 asks for masquerade; the locally delivered endpoint cannot be masqueraded
    c = host_network()
    e = expect(c, "node-1", NP1, CLIENT, "external")
    assert "NV004" in e.invariants
    assert e.masquerade_required(OTHER) is True and e.masquerade_required(OWN) is False


def test_etp_local_external_goes_to_this_node_only() -> None:
    c = host_network(type="LoadBalancer", external_traffic_policy="Local")
    e = expect(c, "node-1", NP1, CLIENT, "external")
    assert e.endpoints == {OWN} and e.masquerade is False
    assert not e.warnings and not e.short_circuit


def test_etp_local_pod_is_short_circuited_to_every_node() -> None:
    c = host_network(type="LoadBalancer", external_traffic_policy="Local")
    e = expect(c, "node-1", NP1, POD1, "pod")
    assert e.short_circuit and e.endpoints == {OWN, OTHER}
    assert e.masquerade_required(OWN) is False and e.masquerade_required(OTHER) is False


def test_given_node_addresses_count_as_local() -> None:
    # an address the Node object does not list (a second interface given as a node fact)
    c = host_network()
    e = expect(c, "node-1", CIP, CLIENT, "external", node_ips=frozenset({"192.168.1.10", "192.168.1.11"}))
    assert e.masquerade_required(OTHER) is False and e.masquerade_required(OWN) is False


def test_sources_treat_a_hostnetwork_endpoint_as_the_host() -> None:
    c = host_network()
    pairs = interesting_sources(c, "node-1", CIP)
    assert ("192.168.1.10", "host") in pairs
    assert ("192.168.1.10", "pod") not in pairs
    # the other node's endpoint is a client arriving from off the node
    assert ("192.168.1.11", "external") in pairs


def test_sources_never_make_this_node_an_external_client() -> None:
    # API server endpoints have no nodeName: this node's own address is still not "remote"
    c = host_network(node_names=False)
    pairs = interesting_sources(c, "node-1", CIP)
    assert ("192.168.1.10", "external") not in pairs


@pytest.mark.parametrize("spec", ["control-plane", "hostnetwork-daemonset"])
def test_verify_and_check_pass_on_node_address_endpoints(spec: str, tmp_path: Path) -> None:
    # the false alarm: `verify` exited 1 on a cluster whose API server runs on a node
    path = str(SPECS / f"{spec}.yaml")
    code, out, _ = run("verify", path, "--format", "json")
    doc = json.loads(out)
    assert code == 0, [f["message"] for f in doc["findings"]]
    assert not [f for f in doc["findings"] if f["severity"] == "error"]
    # each finding once (verify's evidence annotation used to append the unannotated copy too)
    assert len({(f["node"], f["message"]) for f in doc["findings"]}) == len(doc["findings"])
    # the same rules as a real node's dump, checked against the cluster
    code, dump, _ = run("compile", path, "--node", "node-1", "--style", "save")
    (tmp_path / "node-1.save").write_text(dump)
    code, out, _ = run("check", str(tmp_path / "node-1.save"), "--cluster", path, "--node", "node-1", "--format", "json")
    assert code == 0, [f["message"] for f in json.loads(out)["findings"]]
