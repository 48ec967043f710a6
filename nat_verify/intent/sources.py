"""Source addresses that exercise every distinction intent makes for one destination.

Each pair is ``(src ip, origin)``. Together they cover: an off-node client (outside every
loadBalancerSourceRange), one client inside each range, the Service's own LB IP as a source
(the node-reaching-its-LB exception), a pod of this node that is not an endpoint, each local
endpoint pod (hairpin; a hostNetwork endpoint is the host), a pod of another node (arrives from off the node), and the host (a node
address; 127.0.0.1 for localhost NodePorts, which only the host can reach).
"""

from __future__ import annotations

import attrs

from nat_verify.intent.destination import Destination, family_ips, find_service_port, lb_ips
from nat_verify.intent.detector import (
    classify_origin,
    networks_of_family,
    node_addresses,
    pod_networks,
)
from nat_verify.intent.endpoints import EndpointInfo, usable_endpoints
from nat_verify.intent.index import index, parse_ip
from nat_verify.model.cluster import Cluster, IPAddress, IPNetwork

# documentation ranges first (RFC 5737 / RFC 3849), then further fallbacks
_EXTERNAL_CANDIDATES = {
    4: ("203.0.113.2", "198.51.100.2", "192.0.2.2", "100.64.0.2", "172.31.255.2"),
    6: ("2001:db8:ffff::2", "2001:db8:fffe::2", "fd12:3456:789a::2"),
}


def interesting_sources(
    cluster: Cluster, node: str, dest: Destination
) -> tuple[tuple[str, str], ...]:
    """(src ip, origin) pairs covering every distinction for ``dest`` on ``node``."""
    family = dest.family
    out: list[tuple[str, str]] = []

    def add(ip: str, origin: str | None = None) -> None:
        pair = (ip, origin or classify_origin(cluster, node, ip))
        if pair not in out:
            out.append(pair)

    if dest.address_class == "localhost-node-port":
        add("127.0.0.1", "host")
        return tuple(out)

    svc, sp = find_service_port(cluster, dest.service, dest.proto)
    infos = usable_endpoints(cluster, node, svc, sp, family).all
    ranges = networks_of_family(svc.lb_source_ranges, family) if dest.address_class == "lb-ip" else ()
    taken = _Taken(*_taken(cluster, family), frozenset(parse_ip(e.ip) for e in infos))

    outside = _external_client(family, taken, ranges)
    if outside is not None:
        add(outside, "external")
    for net in ranges:
        inside = _inside(net, taken)
        if inside is not None:
            add(inside)
    if dest.address_class == "lb-ip":
        for ip in lb_ips(svc, family):
            add(ip)

    pod = _non_endpoint_pod(cluster, node, family, {e.ip for e in infos})
    if pod is not None:
        add(pod, "pod")
    own = node_addresses(cluster, node)
    for e in infos:
        if e.local:
            # a hostNetwork endpoint's address is the node's: the host sends from it
            add(e.ip, "host" if e.ip in own else "pod")
    for remote in _remote_pods(cluster, node, family, infos):
        add(remote, "external")

    hosts = family_ips(index(cluster).nodes[node].internal_ips, family)
    if hosts:
        add(hosts[0], "host")
    return tuple(out)


def _taken(cluster: Cluster, family: int) -> tuple[frozenset[IPAddress], tuple[IPNetwork, ...]]:
    """Addresses and networks an "external" client must avoid (memoized per Cluster)."""
    memo = index(cluster).memo
    key = ("taken", family)
    hit = memo.get(key)
    if hit is not None:
        return hit
    addrs: set[IPAddress] = set()
    nets: list[IPNetwork] = []
    for n in cluster.nodes:
        for a in family_ips(n.internal_ips, family):
            addrs.add(parse_ip(a))
        nets.extend(networks_of_family(n.pod_cidrs, family))
    nets.extend(networks_of_family(cluster.proxy.cluster_cidrs, family))
    for svc in cluster.services:
        for a in family_ips(svc.cluster_ips + svc.external_ips, family) + lb_ips(svc, family):
            addrs.add(parse_ip(a))
    result = (frozenset(addrs), tuple(nets))
    memo[key] = result
    return result


@attrs.frozen
class _Taken:
    """Addresses a made-up client must avoid: cluster-wide ones, networks, this port's endpoints."""

    addrs: frozenset[IPAddress]
    nets: tuple[IPNetwork, ...]
    endpoints: frozenset[IPAddress]


def _free(addr: IPAddress, taken: _Taken) -> bool:
    return (
        addr not in taken.addrs
        and addr not in taken.endpoints
        and not any(addr in n for n in taken.nets)
        and not addr.is_loopback
    )


def _external_client(
    family: int,
    taken: _Taken,
    ranges: tuple[IPNetwork, ...],
) -> str | None:
    for text in _EXTERNAL_CANDIDATES[family]:
        addr = parse_ip(text)
        if _free(addr, taken) and not any(addr in r for r in ranges):
            return text
    return None


def _inside(net: IPNetwork, taken: _Taken) -> str | None:
    """An address inside ``net``, preferably one that is not a node, pod or service address."""
    # skip the network and broadcast addresses of ranges that have them
    offsets = (
        range(1, min(net.num_addresses - 1, 65))
        if net.num_addresses > 2
        else range(net.num_addresses)
    )
    candidates: list[IPAddress] = [net.network_address + k for k in offsets]
    for addr in candidates:
        if _free(addr, taken):
            return str(addr)
    return str(candidates[0]) if candidates else None


def _non_endpoint_pod(
    cluster: Cluster, node: str, family: int, endpoint_ips: set[str]
) -> str | None:
    for pod in index(cluster).pods_by_node.get(node, ()):
        if pod.host_network:
            continue
        for ip in family_ips(pod.ips, family):
            if ip not in endpoint_ips:
                return ip
    for net in pod_networks(cluster, node, family):
        for i, addr in enumerate(net.hosts() if net.num_addresses > 2 else iter(net)):
            if i > 64:
                break
            if i >= 1 and str(addr) not in endpoint_ips:  # skip .1, usually the bridge
                return str(addr)
    return None


def _remote_pods(
    cluster: Cluster, node: str, family: int, infos: tuple[EndpointInfo, ...]
) -> list[str]:
    """Pod addresses of other nodes: a remote endpoint, and a non-endpoint pod of another node."""
    out: list[str] = []
    own = node_addresses(cluster, node)
    # an endpoint without nodeName may still be this node (the API server's own address)
    remote_eps = [e.ip for e in infos if not e.local and e.ip not in own]
    out.extend(remote_eps[:1])
    used = {e.ip for e in infos} | set(own)
    for n in cluster.nodes:
        if n.name == node:
            continue
        for net in networks_of_family(n.pod_cidrs, family):
            for k in range(2, min(net.num_addresses, 66)):
                addr = str(net.network_address + k)
                if addr not in used:
                    out.append(addr)
                    return out
    return out
