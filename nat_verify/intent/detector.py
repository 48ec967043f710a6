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


def _nets(texts: tuple[str, ...], family: int) -> tuple[IPNetwork, ...]:
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
    proxy = cluster.proxy
    mode = proxy.detect_local_mode or ("ClusterCIDR" if proxy.cluster_cidrs else "")
    if mode == "ClusterCIDR":
        cidrs = _nets(proxy.cluster_cidrs, family)
        return Detector("ClusterCIDR", cidrs) if cidrs else Detector("")
    if mode == "NodeCIDR":
        try:
            pod_cidrs = cluster.node(node).pod_cidrs
        except KeyError:
            pod_cidrs = ()
        cidrs = _nets(pod_cidrs, family)
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
        addr = ipaddress.ip_address(src)
        return any(addr in net for net in det.cidrs)
    # interface detectors: only a pod on this node arrives through the bridge / veth prefix
    return origin == "pod"


def node_addresses(cluster: Cluster, node: str) -> frozenset[str]:
    try:
        ips = cluster.node(node).internal_ips
    except KeyError:
        return frozenset()
    out: set[str] = set()
    for t in ips:
        try:
            out.add(str(ipaddress.ip_address(t.strip())))
        except ValueError:
            continue
    return frozenset(out)


def pod_networks(cluster: Cluster, node: str, family: int) -> tuple[IPNetwork, ...]:
    """This node's pod CIDRs of the family; the cluster CIDRs if the node has none."""
    try:
        own = _nets(cluster.node(node).pod_cidrs, family)
    except KeyError:
        own = ()
    return own or _nets(cluster.proxy.cluster_cidrs, family)


def _addrs(texts: tuple[str, ...]) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    out: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = set()
    for t in texts:
        try:
            out.add(ipaddress.ip_address(t.strip()))
        except ValueError:
            continue
    return out


def classify_origin(cluster: Cluster, node: str, src: str) -> str:
    """``host`` for a node or loopback address, ``pod`` for a pod of this node, else ``external``."""
    addr = ipaddress.ip_address(src)
    if str(addr) in node_addresses(cluster, node) or any(addr in n for n in LOOPBACK_NETS):
        return "host"
    for pod in cluster.pods:
        if pod.node_name == node and not pod.host_network and addr in _addrs(pod.ips):
            return "pod"
    if any(addr in net for net in pod_networks(cluster, node, addr.version)):
        return "pod"
    return "external"
