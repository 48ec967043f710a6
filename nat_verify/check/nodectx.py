"""The model's view of one node of a cluster (``NodeContext``), derived from its objects."""

from __future__ import annotations

import ipaddress

from nat_verify.model.cluster import Cluster
from nat_verify.netfilter.context import NodeContext, Route


def _of_family(texts: tuple[str, ...], family: int) -> tuple[str, ...]:
    out = []
    for t in texts:
        try:
            if ipaddress.ip_network(t, strict=False).version == family:
                out.append(t)
        except ValueError:
            continue
    return tuple(out)


def pod_network(cluster: Cluster, family: int) -> tuple[str, ...]:
    """The cluster's pod network: the configured cluster CIDRs, else every node's pod CIDRs."""
    cidrs = _of_family(cluster.proxy.cluster_cidrs, family)
    if cidrs:
        return cidrs
    return tuple(c for n in cluster.nodes for c in _of_family(n.pod_cidrs, family))


def pod_interface(cluster: Cluster) -> str:
    """The interface pod traffic arrives on, as the configured local-traffic detector sees it."""
    p = cluster.proxy
    if p.detect_local_mode == "BridgeInterface" and p.bridge_interface:
        return p.bridge_interface
    if p.detect_local_mode == "InterfaceNamePrefix" and p.interface_name_prefix:
        return p.interface_name_prefix + "0"
    return "cni0"


def localhost_node_ports(cluster: Cluster) -> bool:
    """kube-proxy turns localhost NodePorts (and route_localnet) off when nodePortAddresses is
    set and admits no IPv4 loopback address."""
    p = cluster.proxy
    if not p.localhost_node_ports:
        return False
    if not p.node_port_addresses:
        return True
    lo = ipaddress.ip_address("127.0.0.1")
    for c in p.node_port_addresses:
        if c in ("localhost", "all"):
            return True
        try:
            if lo in ipaddress.ip_network(c, strict=False):
                return True
        except ValueError:
            continue
    return False


def node_context(cluster: Cluster, node: str, family: int = 4) -> NodeContext:
    n = cluster.node(node)
    addrs = _of_family(n.internal_ips, family)
    local = _of_family(n.pod_cidrs, family)
    iface = pod_interface(cluster)
    routes = []
    for c in local:
        net = ipaddress.ip_network(c, strict=False)
        routes.append(Route(net, iface, net.network_address + 1))
    localhost = family == 4 and localhost_node_ports(cluster)
    return NodeContext(
        family=family,
        addresses=addrs,
        pod_cidrs=pod_network(cluster, family),
        local_pod_cidrs=local,
        pod_iface=iface,
        route_localnet=localhost,
        routes=tuple(routes),
        name=node,
    )
