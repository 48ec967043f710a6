"""Generate large synthetic clusters for the benchmarks (compile, parse, trace, check, fleet).

``generate_cluster(services, endpoints, nodes)`` is deterministic: the same arguments give the
same Cluster. ``services`` counts service ports (every Service has one port), each with
``endpoints`` ready endpoints spread round-robin over the nodes. The mix follows what large
clusters run (mostly plain ClusterIP Services, a minority exposed outside the cluster), cycling
over ``i % 20`` so every slice of the cluster has every kind:

==========  =====================================================================
``i % 20``  kind
==========  =====================================================================
0, 10       NodePort, externalTrafficPolicy Cluster
1           LoadBalancer, eTP Local, one ingress IP, healthCheckNodePort
2, 12       ClusterIP with ClientIP session affinity
3           ClusterIP with one externalIP
4           ClusterIP with internalTrafficPolicy Local
5           LoadBalancer, eTP Cluster, loadBalancerSourceRanges (two CIDRs)
6           ClusterIP without endpoints (REJECT)
7, 17       dual-stack ClusterIP (IPv4 and IPv6 ClusterIPs, one slice per family)
8           UDP ClusterIP (DNS-like, port 53)
otherwise   plain ClusterIP
==========  =====================================================================

Nodes are ``node-0`` .. ``node-{nodes-1}`` (at most 250) with addresses
``192.168.<k//250>.<k%250+1>`` and ``fd00::<k+1>``, pod CIDRs ``10.<k+1>.0.0/16`` and
``fd10::<k+1>:0/112``; every endpoint's address lies in its node's pod CIDR. The
KubeProxyConfiguration has clusterCIDRs 10.0.0.0/8 and fd10::/64.
``nfacct=False``: ``iptables-legacy-restore`` would need the nfacct objects created first.
"""

from __future__ import annotations

import ipaddress

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

_CLUSTER_IP_BASE = int(ipaddress.ip_address("172.30.0.0"))
_CLUSTER_IP6_BASE = int(ipaddress.ip_address("fd20::"))
_LB_BASE = int(ipaddress.ip_address("203.0.0.0"))

KINDS = {
    0: "nodeport", 10: "nodeport", 1: "lb-local", 2: "affinity", 12: "affinity", 3: "external-ip",
    4: "itp-local", 5: "lb-ranges", 6: "no-endpoints", 7: "dual-stack", 17: "dual-stack", 8: "udp",
}  # fmt: skip


def kind_of(i: int) -> str:
    """The kind of the i-th generated Service (see the table in the module docstring)."""
    return KINDS.get(i % 20, "cluster-ip")


def _ip(n: int) -> str:
    return str(ipaddress.IPv4Address(n))


def _ip6(n: int) -> str:
    return str(ipaddress.IPv6Address(n))


def generate_nodes(nodes: int) -> tuple[Node, ...]:
    return tuple(
        Node(
            f"node-{k}",
            internal_ips=(f"192.168.{k // 250}.{k % 250 + 1}", f"fd00::{k + 1:x}"),
            pod_cidrs=(f"10.{k + 1}.0.0/16", f"fd10::{k + 1:x}:0/112"),
        )
        for k in range(nodes)
    )


def generate_cluster(services: int, endpoints: int, nodes: int = 10) -> Cluster:
    """A cluster of ``services`` one-port Services with ``endpoints`` endpoints each."""
    if services < 0 or endpoints < 0 or not 1 <= nodes <= 250:
        raise ValueError("services and endpoints must be >= 0, 1 <= nodes <= 250")
    if services > 60000:
        raise ValueError("at most 60000 services (ClusterIPs come from 172.30.0.0/16)")
    node_objs = generate_nodes(nodes)
    node_names = [n.name for n in node_objs]
    svcs: list[Service] = []
    slices: list[EndpointSlice] = []
    pods_on = [0] * nodes  # endpoints placed on each node so far
    for i in range(services):
        ns = f"ns{i % 50}"
        name = f"svc{i}"
        kind = kind_of(i)
        proto = "UDP" if kind == "udp" else "TCP"
        port_no, target = (53, 5353) if kind == "udp" else (80, 8080)
        exposed = kind in ("nodeport", "lb-local", "lb-ranges")
        port = ServicePort(port_no, proto, "p", target, node_port=30000 + i % 2767 if exposed else 0)  # type: ignore[arg-type]
        extra: dict[str, object] = {}
        cluster_ips: tuple[str, ...] = (_ip(_CLUSTER_IP_BASE + 10 + i),)
        if kind == "nodeport":
            extra["type"] = "NodePort"
        elif kind == "lb-local":
            extra.update(
                type="LoadBalancer",
                external_traffic_policy="Local",
                lb_ingress=(LoadBalancerIngress(ip=_ip(_LB_BASE + i)),),
                health_check_node_port=32000 + i % 700,
            )
        elif kind == "lb-ranges":
            extra.update(
                type="LoadBalancer",
                lb_ingress=(LoadBalancerIngress(ip=_ip(_LB_BASE + i)),),
                lb_source_ranges=("198.51.100.0/24", f"100.{64 + i % 64}.0.0/16"),
            )
        elif kind == "affinity":
            extra.update(session_affinity="ClientIP", affinity_timeout=10800)
        elif kind == "external-ip":
            extra["external_ips"] = (_ip(_LB_BASE + 0x100000 + i),)
        elif kind == "itp-local":
            extra["internal_traffic_policy"] = "Local"
        elif kind == "dual-stack":
            cluster_ips = (*cluster_ips, _ip6(_CLUSTER_IP6_BASE + 10 + i))
            extra["ip_families"] = ("IPv4", "IPv6")
        svcs.append(
            Service(
                namespace=ns, name=name, ports=(port,), cluster_ips=cluster_ips,
                selector=(("app", name),), **extra,  # type: ignore[arg-type]
            )  # fmt: skip
        )
        n_eps = 0 if kind == "no-endpoints" else endpoints
        v4, v6 = [], []
        for j in range(n_eps):
            k = (i + j) % nodes
            c = pods_on[k]
            pods_on[k] += 1
            if c >= 65000:
                raise ValueError("at most 65000 endpoints per node")
            v4.append(Endpoint((f"10.{k + 1}.{c // 250}.{c % 250 + 1}",), node_name=node_names[k]))
            if kind == "dual-stack":
                v6.append(Endpoint((f"fd10::{k + 1:x}:{c + 1:x}",), node_name=node_names[k]))
        eport = (EndpointPort(target, proto, "p"),)  # type: ignore[arg-type]
        slices.append(EndpointSlice(ns, f"{name}-abcde", name, "IPv4", tuple(v4), eport))
        if kind == "dual-stack":
            slices.append(EndpointSlice(ns, f"{name}-v6xyz", name, "IPv6", tuple(v6), eport))
    return Cluster(
        services=tuple(svcs),
        slices=tuple(slices),
        nodes=node_objs,
        proxy=ProxyConfig(cluster_cidrs=("10.0.0.0/8", "fd10::/64"), nfacct=False),
        name=f"generated-{services}x{endpoints}",
    )
