"""Intent on the two-node ``web-svc`` layout, expectations derived by hand from the docs.

Layout: Service default/web-svc, ClusterIP 10.43.0.15, port 80 -> targetPort 8080, NodePort
30080; Ready endpoints 10.42.1.7 (node-1) and 10.42.2.3 (node-2); node-1 192.168.1.10 with pod
CIDR 10.42.1.0/24, node-2 192.168.1.11 with 10.42.2.0/24; cluster CIDR 10.42.0.0/16.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import attrs
import pytest

from nat_verify.intent import (
    Destination,
    UnknownServicePort,
    affinity,
    classify_origin,
    destinations,
    expect,
    interesting_sources,
)
from nat_verify.model.cluster import (
    Cluster,
    Endpoint,
    EndpointPort,
    EndpointSlice,
    LoadBalancerIngress,
    Node,
    Pod,
    ProxyConfig,
    Service,
    ServicePort,
)

EP1 = ("10.42.1.7", 8080)  # on node-1
EP2 = ("10.42.2.3", 8080)  # on node-2
BOTH = frozenset({EP1, EP2})
SVC = "default/web-svc"  # the port has no name
CIP = Destination(SVC, "cluster-ip", "10.43.0.15", 80, "tcp")
NP1 = Destination(SVC, "node-port", "192.168.1.10", 30080, "tcp")
NP2 = Destination(SVC, "node-port", "192.168.1.11", 30080, "tcp")
LOCALHOST = Destination(SVC, "localhost-node-port", "127.0.0.1", 30080, "tcp")
CLIENT = "203.0.113.2"  # off-cluster client
POD1 = "10.42.1.20"  # a pod on node-1 that is not an endpoint
REMOTE_POD = "10.42.2.9"  # a pod on node-2, not an endpoint
HOST1 = "192.168.1.10"


def web_cluster(
    *,
    svc: dict[str, Any] | None = None,
    endpoints: tuple[Endpoint, ...] | None = None,
    proxy: dict[str, Any] | None = None,
) -> Cluster:
    service = Service(
        "default",
        "web-svc",
        (ServicePort(80, "TCP", "", 8080, 30080),),
        type="NodePort",
        cluster_ips=("10.43.0.15",),
        selector=(("app", "web"),),
    )
    if svc:
        service = attrs.evolve(service, **svc)
    if endpoints is None:
        endpoints = (
            Endpoint(("10.42.1.7",), node_name="node-1"),
            Endpoint(("10.42.2.3",), node_name="node-2"),
        )
    es = EndpointSlice(
        "default", "web-svc-x7k2p", "web-svc", "IPv4", endpoints, (EndpointPort(8080, "TCP", ""),)
    )
    config = ProxyConfig(cluster_cidrs=("10.42.0.0/16",))
    if proxy:
        config = attrs.evolve(config, **proxy)
    return Cluster(
        services=(service,),
        slices=(es,),
        nodes=(
            Node("node-1", ("192.168.1.10",), ("10.42.1.0/24",)),
            Node("node-2", ("192.168.1.11",), ("10.42.2.0/24",)),
        ),
        proxy=config,
    )


# ---------------------------------------------------------------- destinations


def test_destinations_default_node_port_addresses() -> None:
    # NodePorts on every node IP, plus 127.0.0.1 (localhostNodePorts defaults to true)
    assert set(destinations(web_cluster(), "node-1", 4)) == {CIP, NP1, LOCALHOST}
    assert set(destinations(web_cluster(), "node-2", 4)) == {CIP, NP2, LOCALHOST}


def test_destinations_localhost_off_and_node_port_cidrs() -> None:
    c = web_cluster(proxy={"localhost_node_ports": False})
    assert set(destinations(c, "node-1", 4)) == {CIP, NP1}
    # a CIDR list without loopback: only node IPs inside it, no 127.0.0.1
    c = web_cluster(proxy={"node_port_addresses": ("192.168.1.0/24",)})
    assert set(destinations(c, "node-1", 4)) == {CIP, NP1}
    c = web_cluster(proxy={"node_port_addresses": ("10.0.0.0/8",)})
    assert set(destinations(c, "node-1", 4)) == {CIP}
    # loopback alone: only localhost NodePorts
    c = web_cluster(proxy={"node_port_addresses": ("127.0.0.0/8",)})
    assert set(destinations(c, "node-1", 4)) == {CIP, LOCALHOST}


def test_destinations_node_port_keywords() -> None:
    c = web_cluster(proxy={"node_port_addresses": ("localhost",)})
    assert set(destinations(c, "node-1", 4)) == {CIP, LOCALHOST}
    c = web_cluster(proxy={"node_port_addresses": ("all",)})
    assert set(destinations(c, "node-1", 4)) == {CIP, NP1, LOCALHOST}
    c = web_cluster(proxy={"node_port_addresses": ("primary", "localhost")})
    assert set(destinations(c, "node-1", 4)) == {CIP, NP1, LOCALHOST}


def test_destinations_primary_is_first_node_ip() -> None:
    c = web_cluster(proxy={"node_port_addresses": ("primary",)})
    c = attrs.evolve(c, nodes=(Node("node-1", ("192.168.1.10", "172.16.0.10"), ("10.42.1.0/24",)),))
    assert set(destinations(c, "node-1", 4)) == {CIP, NP1}


def test_destinations_external_and_lb_ips() -> None:
    c = web_cluster(
        svc={
            "type": "LoadBalancer",
            "external_ips": ("198.51.100.10",),
            "lb_ingress": (
                LoadBalancerIngress(ip="198.51.100.20"),
                LoadBalancerIngress(ip="198.51.100.21", ip_mode="Proxy"),  # LB proxies itself
                LoadBalancerIngress(hostname="lb.example.com"),
            ),
        }
    )
    got = set(destinations(c, "node-1", 4))
    assert Destination(SVC, "external-ip", "198.51.100.10", 80, "tcp") in got
    assert Destination(SVC, "lb-ip", "198.51.100.20", 80, "tcp") in got
    assert not any(d.ip == "198.51.100.21" for d in got)
    assert len(got) == 5


def test_headless_and_external_name_have_no_destinations() -> None:
    assert destinations(web_cluster(svc={"cluster_ips": ("None",)}), "node-1", 4) == ()
    assert destinations(web_cluster(svc={"type": "ExternalName"}), "node-1", 4) == ()


def test_named_service_port_key_and_named_target_port() -> None:
    # two named ports, targetPort by name: the slice port with the same name gives the number
    ports = (
        ServicePort(80, "TCP", "http", "web", 30080),
        ServicePort(9100, "TCP", "metrics", "metrics", 0),
    )
    c = web_cluster(svc={"ports": ports})
    es = attrs.evolve(
        c.slices[0],
        ports=(
            EndpointPort(8080, "TCP", "web-unrelated"),
            EndpointPort(8080, "TCP", "http"),
            EndpointPort(9100, "UDP", "metrics"),  # wrong protocol: not this service port
            EndpointPort(9102, "TCP", "metrics"),
        ),
    )
    c = attrs.evolve(c, slices=(es,))
    http = Destination("default/web-svc:http", "cluster-ip", "10.43.0.15", 80, "tcp")
    metrics = Destination("default/web-svc:metrics", "cluster-ip", "10.43.0.15", 9100, "tcp")
    assert {http, metrics} <= set(destinations(c, "node-1", 4))
    assert expect(c, "node-1", http, POD1, "pod").endpoints == BOTH
    assert expect(c, "node-1", metrics, POD1, "pod").endpoints == {
        ("10.42.1.7", 9102),
        ("10.42.2.3", 9102),
    }


def test_slice_without_the_port_name_gives_no_endpoints() -> None:
    c = web_cluster(svc={"ports": (ServicePort(80, "TCP", "http", "web", 30080),)})
    http = Destination("default/web-svc:http", "cluster-ip", "10.43.0.15", 80, "tcp")
    # the slice carries only the unnamed port: nothing serves "http", so REJECT
    assert expect(c, "node-1", http, POD1, "pod").kind == "reject"


# ---------------------------------------------------------------- eTP / iTP Cluster


def test_external_to_node_port_cluster_policy() -> None:
    e = expect(web_cluster(), "node-1", NP1, CLIENT, "external")
    assert e.kind == "dnat"
    assert e.endpoints == BOTH
    assert e.share == Fraction(1, 2)
    assert e.masquerade is True  # eTP=Cluster: client IP lost
    assert {"NV002", "NV004", "NV007"} <= set(e.invariants)


def test_host_to_node_port_cluster_policy_is_masqueraded_pod_either_way() -> None:
    e = expect(web_cluster(), "node-1", NP1, HOST1, "host")
    assert (e.kind, e.endpoints, e.masquerade) == ("dnat", BOTH, True)
    # eTP=Cluster promises masquerade for clients outside the cluster; a pod of this node needs
    # none (its reply returns through this node): either is allowed (kubernetes#96296)
    e = expect(web_cluster(), "node-1", NP1, POD1, "pod")
    assert (e.kind, e.endpoints, e.masquerade) == ("dnat", BOTH, None)
    # with no detector a pod cannot be told from an outside client: masqueraded
    e = expect(web_cluster(proxy={"cluster_cidrs": ()}), "node-1", NP1, POD1, "pod")
    assert e.masquerade is True
    e = expect(web_cluster(), "node-1", LOCALHOST, "127.0.0.1", "host")
    assert (e.kind, e.endpoints, e.masquerade) == ("dnat", BOTH, True)


def test_pod_of_another_node_is_no_outside_client_of_an_external_ip() -> None:
    # every node's kube-proxy captures externalIPs in PREROUTING: a pod of node-2 that reaches
    # node-1's rules with its own source is cluster traffic, not a client from outside
    c = web_cluster(svc={"external_ips": ("198.51.100.10",)})
    ext = Destination(SVC, "external-ip", "198.51.100.10", 80, "tcp")
    assert expect(c, "node-1", ext, REMOTE_POD, "external").masquerade is None
    assert expect(c, "node-1", ext, CLIENT, "external").masquerade is True
    # nor of node-1's NodePort: node-2 does not capture it, so the reply of an endpoint on
    # another node than node-1 bypasses node-1, which NV010 (return path) judges
    assert expect(c, "node-1", NP1, REMOTE_POD, "external").masquerade is None


def test_cluster_ip_from_pod_keeps_source() -> None:
    e = expect(web_cluster(), "node-1", CIP, POD1, "pod")
    assert (e.kind, e.endpoints, e.masquerade) == ("dnat", BOTH, False)
    assert "NV001" in e.invariants and "NV009" in e.invariants


def test_cluster_ip_from_outside_cluster_cidr_is_masqueraded() -> None:
    # ClusterCIDR detector (default with a cluster CIDR): 203.0.113.2 and the node IP are outside
    assert expect(web_cluster(), "node-1", CIP, CLIENT, "external").masquerade is True
    assert expect(web_cluster(), "node-1", CIP, HOST1, "host").masquerade is True


def test_hairpin_is_per_endpoint() -> None:
    # pod 10.42.1.7 reaching its own Service: masquerade only if it is sent to itself
    e = expect(web_cluster(), "node-1", CIP, "10.42.1.7", "pod")
    assert e.endpoints == BOTH
    assert e.masquerade_required(EP1) is True
    assert e.masquerade_required(EP2) is False
    assert "NV008" in e.invariants
    # the same through the NodePort (eTP=Cluster: a local pod may keep its source elsewhere)
    e = expect(web_cluster(), "node-1", NP1, "10.42.1.7", "pod")
    assert e.masquerade_required(EP1) is True and e.masquerade_required(EP2) is None


def test_localhost_node_port_from_pod_is_unmanaged() -> None:
    # a pod's 127.0.0.1 is its own loopback: nothing reaches the node
    assert expect(web_cluster(), "node-1", LOCALHOST, "127.0.0.1", "pod").kind == "unmanaged"


# ---------------------------------------------------------------- eTP=Local


def test_etp_local_with_local_endpoints() -> None:
    c = web_cluster(svc={"external_traffic_policy": "Local"})
    e = expect(c, "node-1", NP1, CLIENT, "external")
    assert (e.kind, e.endpoints, e.masquerade) == ("dnat", frozenset({EP1}), False)
    assert "NV005" in e.invariants and "NV004" not in e.invariants
    assert e.share == 1
    e = expect(c, "node-2", NP2, CLIENT, "external")
    assert (e.kind, e.endpoints, e.masquerade) == ("dnat", frozenset({EP2}), False)
    # ClusterIP is untouched by eTP
    assert expect(c, "node-1", CIP, POD1, "pod").endpoints == BOTH


def test_etp_local_without_local_endpoints() -> None:
    both_remote = (
        Endpoint(("10.42.2.3",), node_name="node-2"),
        Endpoint(("10.42.2.4",), node_name="node-2"),
    )
    remote = frozenset({("10.42.2.3", 8080), ("10.42.2.4", 8080)})
    c = web_cluster(svc={"external_traffic_policy": "Local"}, endpoints=both_remote)
    e = expect(c, "node-1", NP1, CLIENT, "external")
    assert e.kind == "drop" and e.invariants == ("NV005",)
    # pods on the node are short-circuited to all endpoints, keeping their IP (PR 77523)
    e = expect(c, "node-1", NP1, POD1, "pod")
    assert (e.kind, e.endpoints, e.masquerade) == ("dnat", remote, False)
    # the host too, masqueraded (its source is a node address)
    e = expect(c, "node-1", NP1, HOST1, "host")
    assert (e.kind, e.endpoints, e.masquerade) == ("dnat", remote, True)
    e = expect(c, "node-1", LOCALHOST, "127.0.0.1", "host")
    assert (e.kind, e.endpoints, e.masquerade) == ("dnat", remote, True)


def test_etp_local_remote_pod_is_short_circuited_with_return_path_warning() -> None:
    # a pod of node-2 reaching node-1's NodePort: the ClusterCIDR detector calls it cluster
    # traffic, so it gets the pod behaviour (all endpoints, source kept); the endpoint on
    # node-2 would reply straight to it, bypassing node-1's conntrack: NV010 warning
    c = web_cluster(svc={"external_traffic_policy": "Local"})
    e = expect(c, "node-1", NP1, REMOTE_POD, "external")
    assert (e.kind, e.endpoints, e.masquerade) == ("dnat", BOTH, False)
    assert "NV010" in e.invariants and e.warnings
    # the NodeCIDR detector calls it external: only node-1's endpoint
    c = web_cluster(
        svc={"external_traffic_policy": "Local"}, proxy={"detect_local_mode": "NodeCIDR"}
    )
    e = expect(c, "node-1", NP1, REMOTE_POD, "external")
    assert (e.kind, e.endpoints, e.masquerade) == ("dnat", frozenset({EP1}), False)
    assert not e.warnings


def test_etp_local_pod_without_detector_behaves_as_external() -> None:
    c = web_cluster(svc={"external_traffic_policy": "Local"}, proxy={"cluster_cidrs": ()})
    e = expect(c, "node-1", NP1, POD1, "pod")
    assert (e.kind, e.endpoints, e.masquerade) == ("dnat", frozenset({EP1}), False)
    assert any("detector" in w for w in e.warnings)


# ---------------------------------------------------------------- iTP=Local


def test_itp_local() -> None:
    c = web_cluster(svc={"internal_traffic_policy": "Local"})
    e = expect(c, "node-1", CIP, POD1, "pod")
    assert (e.kind, e.endpoints, e.masquerade) == ("dnat", frozenset({EP1}), False)
    assert "NV006" in e.invariants
    # the NodePort is governed by eTP=Cluster, not iTP
    assert expect(c, "node-1", NP1, CLIENT, "external").endpoints == BOTH
    only_remote = (Endpoint(("10.42.2.3",), node_name="node-2"),)
    c = web_cluster(svc={"internal_traffic_policy": "Local"}, endpoints=only_remote)
    e = expect(c, "node-1", CIP, POD1, "pod")
    assert e.kind == "drop" and e.invariants == ("NV006",)
    # some endpoint exists, so this is a DROP, not the no-endpoints REJECT
    assert expect(c, "node-2", CIP, "10.42.2.20", "pod").endpoints == {EP2}


# ---------------------------------------------------------------- endpoint conditions


def test_terminating_fallback_on_and_off() -> None:
    eps = (
        Endpoint(("10.42.1.7",), ready=False, serving=True, terminating=True, node_name="node-1"),
        Endpoint(("10.42.2.3",), ready=False, serving=False, terminating=True, node_name="node-2"),
    )
    e = expect(web_cluster(endpoints=eps), "node-1", CIP, POD1, "pod")
    # no ready endpoint anywhere: the serving terminating one is used, never the not-serving
    assert (e.kind, e.endpoints) == ("dnat", frozenset({EP1}))
    assert "NV013" in e.invariants
    off = web_cluster(endpoints=eps, proxy={"terminating_fallback": False})
    assert expect(off, "node-1", CIP, POD1, "pod").kind == "reject"
    assert expect(off, "node-1", NP1, CLIENT, "external").kind == "reject"


def test_terminating_not_used_when_ready_exists() -> None:
    eps = (
        Endpoint(("10.42.1.7",), ready=False, serving=True, terminating=True, node_name="node-1"),
        Endpoint(("10.42.2.3",), node_name="node-2"),
    )
    c = web_cluster(endpoints=eps)
    assert expect(c, "node-1", CIP, POD1, "pod").endpoints == {EP2}
    # eTP=Local: node-1 has no ready endpoint, its serving terminating one is used (KEP-1669)
    c = web_cluster(endpoints=eps, svc={"external_traffic_policy": "Local"})
    assert expect(c, "node-1", NP1, CLIENT, "external").endpoints == {EP1}
    c = attrs.evolve(c, proxy=attrs.evolve(c.proxy, terminating_fallback=False))
    assert expect(c, "node-1", NP1, CLIENT, "external").kind == "drop"


def test_no_endpoints_rejects_everything() -> None:
    # every address class, every origin: REJECT (NV003). This includes the host reaching an
    # externalIP that is not on the node, which kube-proxy leaves un-NATed (no
    # KUBE-EXTERNAL-SERVICES hook in filter OUTPUT): a documented disagreement with the rules.
    c = web_cluster(
        endpoints=(),
        svc={
            "type": "LoadBalancer",
            "external_ips": ("198.51.100.10",),
            "lb_ingress": (LoadBalancerIngress(ip="198.51.100.20"),),
            "lb_source_ranges": ("203.0.113.0/25",),
        },
    )
    classes = {d.address_class for d in destinations(c, "node-1", 4)}
    assert classes == {"cluster-ip", "node-port", "localhost-node-port", "external-ip", "lb-ip"}
    for node in ("node-1", "node-2"):
        for dest in destinations(c, node, 4):
            for src, origin in interesting_sources(c, node, dest):
                e = expect(c, node, dest, src, origin)
                assert (e.kind, e.invariants) == ("reject", ("NV003",)), (dest, src, origin)


# ---------------------------------------------------------------- masquerade knobs


def test_masquerade_all() -> None:
    c = web_cluster(proxy={"masquerade_all": True})
    assert expect(c, "node-1", CIP, POD1, "pod").masquerade is True


@pytest.mark.parametrize(
    ("proxy", "pod", "remote_pod", "client", "host"),
    [
        # by source address: the whole cluster CIDR is "local"
        ({"detect_local_mode": "ClusterCIDR"}, False, False, True, True),
        # by source address: only this node's pod CIDR
        ({"detect_local_mode": "NodeCIDR"}, False, True, True, True),
        # by input interface: only pods of this node come through the bridge / veths
        (
            {"detect_local_mode": "BridgeInterface", "bridge_interface": "cni0"},
            False,
            True,
            True,
            True,
        ),
        (
            {"detect_local_mode": "InterfaceNamePrefix", "interface_name_prefix": "veth"},
            False,
            True,
            True,
            True,
        ),
        # no detector: pods keep their IP, nothing is promised for the others (NV010 warning)
        ({"cluster_cidrs": ()}, False, None, None, None),
    ],
)
def test_detectors(
    proxy: dict[str, Any],
    pod: bool | None,
    remote_pod: bool | None,
    client: bool | None,
    host: bool | None,
) -> None:
    c = web_cluster(proxy=proxy)
    assert expect(c, "node-1", CIP, POD1, "pod").masquerade is pod
    assert expect(c, "node-1", CIP, REMOTE_POD, "external").masquerade is remote_pod
    assert expect(c, "node-1", CIP, CLIENT, "external").masquerade is client
    assert expect(c, "node-1", CIP, HOST1, "host").masquerade is host


def test_no_detector_warns() -> None:
    e = expect(web_cluster(proxy={"cluster_cidrs": ()}), "node-1", CIP, CLIENT, "external")
    assert e.masquerade is None
    assert any("NV010" in w for w in e.warnings)


# ---------------------------------------------------------------- loadBalancerSourceRanges


def lb_cluster(ranges: tuple[str, ...], **svc: object) -> Cluster:
    return web_cluster(
        svc={
            "type": "LoadBalancer",
            "lb_ingress": (LoadBalancerIngress(ip="198.51.100.20"),),
            "lb_source_ranges": ranges,
            **svc,
        }
    )


LB = Destination(SVC, "lb-ip", "198.51.100.20", 80, "tcp")


def test_lb_source_ranges() -> None:
    c = lb_cluster((" 203.0.113.0/25",))  # whitespace is trimmed
    e = expect(c, "node-1", LB, "203.0.113.2", "external")
    assert (e.kind, e.endpoints, e.masquerade) == ("dnat", BOTH, True)
    assert "NV012" in e.invariants
    e = expect(c, "node-1", LB, "203.0.113.130", "external")
    assert (e.kind, e.invariants) == ("drop", ("NV012",))
    # the source address decides, for pods and the host as well
    assert expect(c, "node-1", LB, POD1, "pod").kind == "drop"
    assert expect(c, "node-1", LB, HOST1, "host").kind == "drop"
    # the LB IP itself as source: admitted only when a node IP is in a range
    assert expect(c, "node-1", LB, "198.51.100.20", "external").kind == "drop"
    # NodePorts are not filtered by source ranges
    assert expect(c, "node-1", NP1, "203.0.113.130", "external").kind == "dnat"


def test_lb_source_ranges_including_the_node() -> None:
    c = lb_cluster(("192.168.1.0/24", "203.0.113.0/25"))
    assert expect(c, "node-1", LB, HOST1, "host").kind == "dnat"
    assert expect(c, "node-1", LB, "198.51.100.20", "external").kind == "dnat"
    # eTP=Local still applies after the range check
    c = lb_cluster(("203.0.113.0/25",), external_traffic_policy="Local")
    e = expect(c, "node-1", LB, "203.0.113.2", "external")
    assert (e.kind, e.endpoints, e.masquerade) == ("dnat", frozenset({EP1}), False)


def test_lb_source_ranges_of_other_family_admit_nobody() -> None:
    c = lb_cluster(("2001:db8::/64",))
    assert expect(c, "node-1", LB, "203.0.113.2", "external").kind == "drop"


def test_interesting_sources_cover_ranges() -> None:
    c = lb_cluster(("203.0.113.0/25", "198.51.100.0/28"))
    got = interesting_sources(c, "node-1", LB)
    kinds = {expect(c, "node-1", LB, s, o).kind for s, o in got}
    assert kinds == {"dnat", "drop"}
    srcs = [s for s, _ in got]
    assert any(s.startswith("203.0.113.") and int(s.rsplit(".", 1)[1]) < 128 for s in srcs)
    assert any(s.startswith("198.51.100.") and int(s.rsplit(".", 1)[1]) < 16 for s in srcs)
    assert "198.51.100.20" in srcs  # the LB IP itself


# ---------------------------------------------------------------- sources and origins


def test_interesting_sources_cluster_ip() -> None:
    got = dict(interesting_sources(web_cluster(), "node-1", CIP))
    assert got["10.42.1.7"] == "pod"  # the local endpoint (hairpin)
    assert got[HOST1] == "host"
    assert got["10.42.2.3"] == "external"  # remote endpoint pod arrives from off the node
    origins = list(got.values())
    assert origins.count("pod") >= 2  # a non-endpoint pod as well
    assert "external" in origins
    # every external one must be classified consistently
    for src, origin in interesting_sources(web_cluster(), "node-1", CIP):
        if origin in ("pod", "host"):
            assert classify_origin(web_cluster(), "node-1", src) == origin
    assert interesting_sources(web_cluster(), "node-1", LOCALHOST) == (("127.0.0.1", "host"),)


def test_classify_origin() -> None:
    c = web_cluster()
    assert classify_origin(c, "node-1", "192.168.1.10") == "host"
    assert classify_origin(c, "node-1", "127.0.0.1") == "host"
    assert classify_origin(c, "node-1", "10.42.1.99") == "pod"
    assert classify_origin(c, "node-1", "10.42.2.99") == "external"  # another node's pod
    assert classify_origin(c, "node-1", "192.168.1.11") == "external"  # another node
    c = attrs.evolve(c, pods=(Pod("default", "odd", node_name="node-1", ips=("172.20.0.5",)),))
    assert classify_origin(c, "node-1", "172.20.0.5") == "pod"


# ---------------------------------------------------------------- dual stack


def dual_cluster() -> Cluster:
    c = web_cluster(
        svc={"cluster_ips": ("10.43.0.15", "fd00:43::15"), "ip_families": ("IPv4", "IPv6")}
    )
    v6 = EndpointSlice(
        "default",
        "web-svc-v6",
        "web-svc",
        "IPv6",
        (
            Endpoint(("fd00:42:1::7",), node_name="node-1"),
            Endpoint(("fd00:42:2::3",), node_name="node-2"),
        ),
        (EndpointPort(8080, "TCP", ""),),
    )
    return attrs.evolve(
        c,
        slices=c.slices + (v6,),
        nodes=(
            Node("node-1", ("192.168.1.10", "2001:db8:1::10"), ("10.42.1.0/24", "fd00:42:1::/64")),
            Node("node-2", ("192.168.1.11", "2001:db8:1::11"), ("10.42.2.0/24", "fd00:42:2::/64")),
        ),
        proxy=attrs.evolve(c.proxy, cluster_cidrs=("10.42.0.0/16", "fd00:42::/32")),
    )


def test_dual_stack() -> None:
    c = dual_cluster()
    v6 = set(destinations(c, "node-1", 6))
    cip6 = Destination(SVC, "cluster-ip", "fd00:43::15", 80, "tcp")
    np6 = Destination(SVC, "node-port", "2001:db8:1::10", 30080, "tcp")
    assert v6 == {cip6, np6}  # no localhost NodePorts for IPv6
    assert set(destinations(c, "node-1", 4)) == {CIP, NP1, LOCALHOST}
    e = expect(c, "node-1", np6, "2001:db8:ffff::2", "external")
    assert e.endpoints == {("fd00:42:1::7", 8080), ("fd00:42:2::3", 8080)}
    assert expect(c, "node-1", CIP, POD1, "pod").endpoints == BOTH
    assert expect(c, "node-1", cip6, "fd00:42:1::20", "pod").masquerade is False
    with pytest.raises(ValueError, match="family"):
        expect(c, "node-1", cip6, POD1, "pod")


def test_single_stack_service_has_no_other_family() -> None:
    c = dual_cluster()
    c = attrs.evolve(c, services=(attrs.evolve(c.services[0], cluster_ips=("10.43.0.15",)),))
    assert destinations(c, "node-1", 6) == ()


# ---------------------------------------------------------------- affinity, errors


def test_affinity() -> None:
    assert affinity(web_cluster(), CIP) is None
    c = web_cluster(svc={"session_affinity": "ClientIP", "affinity_timeout": 3600})
    assert affinity(c, CIP) == 3600
    assert affinity(c, SVC) == 3600
    assert "NV011" in expect(c, "node-1", CIP, POD1, "pod").invariants


def test_unknown_service_and_origin() -> None:
    with pytest.raises(UnknownServicePort):
        expect(web_cluster(), "node-1", attrs.evolve(CIP, service="default/nope"), POD1, "pod")
    with pytest.raises(UnknownServicePort):
        expect(web_cluster(), "node-1", attrs.evolve(CIP, proto="udp"), POD1, "pod")
    with pytest.raises(ValueError, match="origin"):
        expect(web_cluster(), "node-1", CIP, POD1, "router")


# ---------------------------------------------------------------- topology hints, caching


def test_topology_hints_restrict_cluster_endpoints() -> None:
    # "Topology Aware Routing": every ready endpoint hinted, one for node-1's zone -> only it
    eps = (
        Endpoint(("10.42.1.7",), node_name="node-1", hint_zones=("zone-a",)),
        Endpoint(("10.42.2.3",), node_name="node-2", hint_zones=("zone-b",)),
    )
    c = web_cluster(endpoints=eps)
    zoned = (
        Node(
            "node-1",
            ("192.168.1.10",),
            ("10.42.1.0/24",),
            (("topology.kubernetes.io/zone", "zone-a"),),
        ),
        Node(
            "node-2",
            ("192.168.1.11",),
            ("10.42.2.0/24",),
            (("topology.kubernetes.io/zone", "zone-b"),),
        ),
    )
    c = attrs.evolve(c, nodes=zoned)
    assert expect(c, "node-1", CIP, POD1, "pod").endpoints == {EP1}
    assert expect(c, "node-2", NP2, CLIENT, "external").endpoints == {EP2}
    # one endpoint without hints: hints are ignored altogether
    unhinted = attrs.evolve(c.slices[0], endpoints=(eps[0], attrs.evolve(eps[1], hint_zones=None)))
    assert expect(attrs.evolve(c, slices=(unhinted,)), "node-1", CIP, POD1, "pod").endpoints == BOTH


def test_results_follow_the_cluster_value_not_a_stale_cache() -> None:
    for _ in range(20):  # fresh values, possibly at recycled addresses
        a = web_cluster()
        assert expect(a, "node-1", CIP, POD1, "pod").endpoints == BOTH
        del a
        b = web_cluster(endpoints=(Endpoint(("10.42.2.3",), node_name="node-2"),))
        assert expect(b, "node-1", CIP, POD1, "pod").endpoints == {EP2}
        del b
