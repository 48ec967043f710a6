"""Where a packet comes from: the origin of a source address, and "local traffic".

Two different questions:

* ``classify_origin``: what entered the node (a process on the node, a pod on the node, or
  anything else). This is physical: a node address is the host, this node's pod CIDR (or a
  pod known to run here) is a pod, everything else arrives from off the node, including pods
  of other nodes.
* ``is_local_traffic``: what kube-proxy's configured local-traffic detector calls "traffic from
  inside the cluster" (KubeProxyConfiguration ``detectLocalMode``: ``ClusterCIDR``,
  ``NodeCIDR``, ``BridgeInterface``, ``InterfaceNamePrefix``). It decides ClusterIP masquerade
  (NV009) and the externalTrafficPolicy=Local pod short-circuit (NV005). The CIDR detectors
  judge the source address; the interface detectors judge the input interface, which only a
  pod on this node comes through. With no detector, nothing is local traffic.
"""

from __future__ import annotations

import ipaddress

import attrs

from nat_verify.intent.index import index, parse_ip
from nat_verify.model.cluster import Cluster, IPNetwork

LOOPBACK_NETS = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))


@attrs.frozen
class Detector:
    """The configured local-traffic detector, resolved for one node and family."""

    mode: str  # "" (none) | ClusterCIDR | NodeCIDR | BridgeInterface | InterfaceNamePrefix
    cidrs: tuple[IPNetwork, ...] = ()  # for the CIDR modes, of the family

    @property
    def configured(self) -> bool:
        return self.mode != ""

    def describe(self) -> str:
        if not self.mode:
            return "no local-traffic detector"
        if self.cidrs:
            return f"detectLocalMode {self.mode} ({', '.join(map(str, self.cidrs))})"
        return f"detectLocalMode {self.mode}"


def networks_of_family(texts: tuple[str, ...], family: int) -> tuple[IPNetwork, ...]:
    """The CIDRs among ``texts`` of ``family`` (whitespace trimmed, invalid entries ignored)."""
    out: list[IPNetwork] = []
    for t in texts:
        try:
            net = ipaddress.ip_network(t.strip(), strict=False)
        except ValueError:
            continue
        if net.version == family:
            out.append(net)
    return tuple(out)


def detector_for(cluster: Cluster, node: str, family: int) -> Detector:
    """The detector in force; ``ClusterCIDR`` is the default when cluster CIDRs are set.

    A CIDR mode with no CIDR of the family, or an interface mode with no interface name, can
    detect nothing and counts as no detector (kube-proxy then uses its no-op detector).
    """
    memo = index(cluster).memo
    key = ("detector", node, family)
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = _detector(cluster, node, family)
    assert isinstance(hit, Detector)
    return hit


def _detector(cluster: Cluster, node: str, family: int) -> Detector:
    proxy = cluster.proxy
    mode = proxy.detect_local_mode or ("ClusterCIDR" if proxy.cluster_cidrs else "")
    if mode == "ClusterCIDR":
        cidrs = networks_of_family(proxy.cluster_cidrs, family)
        return Detector("ClusterCIDR", cidrs) if cidrs else Detector("")
    if mode == "NodeCIDR":
        n = index(cluster).nodes.get(node)
        cidrs = networks_of_family(n.pod_cidrs if n is not None else (), family)
        return Detector("NodeCIDR", cidrs) if cidrs else Detector("")
    if mode == "BridgeInterface":
        return Detector(mode) if proxy.bridge_interface else Detector("")
    if mode == "InterfaceNamePrefix":
        return Detector(mode) if proxy.interface_name_prefix else Detector("")
    return Detector("")


def is_local_traffic(det: Detector, src: str, origin: str) -> bool:
    """Whether the detector calls this packet traffic from inside the cluster."""
    if not det.configured:
        return False
    if det.cidrs:
        addr = parse_ip(src)
        return any(addr in net for net in det.cidrs)
    # interface detectors: only a pod on this node arrives through the bridge / veth prefix
    return origin == "pod"


def node_addresses(cluster: Cluster, node: str) -> frozenset[str]:
    """The node's own addresses (canonical text), both families."""
    idx = index(cluster)
    hit = idx.memo.get(("node-addresses", node))
    if hit is None:
        n = idx.nodes.get(node)
        hit = frozenset(str(a) for a in _addrs(n.internal_ips)) if n is not None else frozenset()
        idx.memo[("node-addresses", node)] = hit
    assert isinstance(hit, frozenset)
    return hit


def pod_networks(cluster: Cluster, node: str, family: int) -> tuple[IPNetwork, ...]:
    """This node's pod CIDRs of the family; the cluster CIDRs if the node has none."""
    n = index(cluster).nodes.get(node)
    own = networks_of_family(n.pod_cidrs, family) if n is not None else ()
    return own or networks_of_family(cluster.proxy.cluster_cidrs, family)


def _addrs(texts: tuple[str, ...]) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    out: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = set()
    for t in texts:
        try:
            out.add(parse_ip(t.strip()))
        except ValueError:
            continue
    return out


def classify_origin(cluster: Cluster, node: str, src: str) -> str:
    """``host`` for a node or loopback address, ``pod`` for a pod of this node, else ``external``."""
    addr = parse_ip(src)
    if str(addr) in node_addresses(cluster, node) or any(addr in n for n in LOOPBACK_NETS):
        return "host"
    for pod in index(cluster).pods_by_node.get(node, ()):
        if not pod.host_network and addr in _addrs(pod.ips):
            return "pod"
    if any(addr in net for net in pod_networks(cluster, node, addr.version)):
        return "pod"
    return "external"
