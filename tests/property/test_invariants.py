"""For random clusters, the rules nat-verify compiles satisfy every invariant on every node.

This pits three independent pieces against each other: the intent (Kubernetes' documented
semantics), the compiler (kube-proxy's templates) and the netfilter model. Every real
disagreement found so far was fixed and is pinned below as an ``@example``.
"""

from __future__ import annotations

from hypothesis import example, given

from nat_verify import strategies as nvst
from nat_verify.check import verify_cluster
from nat_verify.model.cluster import (
    Cluster,
    Endpoint,
    EndpointPort,
    EndpointSlice,
    LoadBalancerIngress,
    Node,
    ProxyConfig,
    Service,
    ServicePort,
)


def _one_node(svc: Service, proxy: ProxyConfig, *, v6: bool = False) -> Cluster:
    node = Node("node-0", ("192.168.1.10", "fd00:1::10") if v6 else ("192.168.1.10",), ("10.42.0.0/24",))
    ep = EndpointSlice("default", svc.name + "-1", svc.name, "IPv4",
                       (Endpoint(("10.42.0.2",), node_name="node-0"),), (EndpointPort(80, "TCP", ""),))  # fmt: skip
    return Cluster((svc,), (ep,), (node,), (), proxy, name="pinned")


# found by this test: loadBalancerSourceRanges with only IPv6 entries on an IPv4 LB IP; kube-proxy
# does not filter the IPv4 family (intent now reports it as an NV012 warning, not an error)
V6_ONLY_RANGES = _one_node(
    Service("default", "svc-0", (ServicePort(80, "TCP", "", 80, 30001),), type="LoadBalancer",
            cluster_ips=("10.43.0.10",), selector=(("app", "svc-0"),),
            lb_ingress=(LoadBalancerIngress(ip="203.0.113.10"),), lb_source_ranges=("2001:db8:ffff::/64",)),
    ProxyConfig(cluster_cidrs=("10.42.0.0/16",), detect_local_mode="ClusterCIDR"),
)  # fmt: skip

# found by the quality suite's random clusters: nodePortAddresses without loopback turns
# localhost NodePorts (and route_localnet) off, so the CVE-2020-8558 DROP is not needed
NODEPORT_ADDRESSES = _one_node(
    Service("default", "svc-0", (ServicePort(80, "TCP", "", 80, 30001),), type="NodePort",
            cluster_ips=("10.43.0.10",), selector=(("app", "svc-0"),)),
    ProxyConfig(cluster_cidrs=("10.42.0.0/16",), detect_local_mode="ClusterCIDR",
                node_port_addresses=("192.168.1.0/24",), localhost_node_ports=True),
)  # fmt: skip


# found by this test (thorough profile): zone hints with internalTrafficPolicy=Local; kube-proxy
# narrows the cluster-wide set (used by the eTP=Cluster NodePort) to this zone, intent ignored hints
_ZONE = "topology.kubernetes.io/zone"
HINTS_WITH_ITP_LOCAL = Cluster(
    (Service("team-a", "svc-3", (ServicePort(443, "UDP", "", 8021, 30094),), type="NodePort",
             cluster_ips=("10.43.0.16",), selector=(("app", "svc-3"),), internal_traffic_policy="Local"),),
    (EndpointSlice("team-a", "svc-3-ipv4-0", "svc-3", "IPv4", (
        Endpoint(("10.42.0.8",), node_name="node-0", zone="zone-a", hint_zones=("zone-a",)),
        Endpoint(("10.42.1.5",), node_name="node-1", zone="zone-b", hint_zones=("zone-b",)),
    ), (EndpointPort(8021, "UDP", ""),)),),
    (Node("node-0", ("192.168.1.10",), ("10.42.0.0/24",), ((_ZONE, "zone-a"),)),
     Node("node-1", ("192.168.1.11",), ("10.42.1.0/24",), ((_ZONE, "zone-b"),))),
    (),
    ProxyConfig(cluster_cidrs=("10.42.0.0/16",), detect_local_mode="ClusterCIDR"),
    name="pinned-hints",
)  # fmt: skip


@given(nvst.clusters(max_nodes=3, max_services=4, max_endpoints=4, families=(4, 6)))
@example(V6_ONLY_RANGES)
@example(NODEPORT_ADDRESSES)
@example(HINTS_WITH_ITP_LOCAL)
def test_compiled_rules_satisfy_every_invariant(cluster: Cluster) -> None:
    # the rules' invariants: a generated cluster's Pods are drawn to exercise the rules (Services
    # without Ready Pods included), so its objects are checked in tests/property/test_objects.py
    report = verify_cluster(cluster, objects=False)
    errors = [f for f in report.findings if f.severity == "error"]
    assert not errors, "\n".join(f"{f.invariant} {f.node} {f.message} [{f.packet}]" for f in errors[:5])
    inconclusive = [r for r in report.results if r.status == "inconclusive"]
    assert not inconclusive
    assert report.results and all(r.status == "proved" for r in report.results)
