"""The Kubernetes objects nat-verify reasons about, as frozen values.

Only the fields that decide Service networking are kept. Defaults are already applied
(the loader in ``nat_verify.kube`` does what the API server would do), so the compiler and
the intent never have to guess: ``ServicePort.target_port`` is always set, protocols are
upper case as in the API (``TCP``, ``UDP``, ``SCTP``), traffic policies are ``Cluster`` or
``Local``.

Every object carries a ``SourceRef`` so a finding can point at ``file:line``.
"""

from __future__ import annotations

import ipaddress
from typing import Literal

import attrs

Protocol = Literal["TCP", "UDP", "SCTP"]
Policy = Literal["Cluster", "Local"]
Family = Literal[4, 6]
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@attrs.frozen
class SourceRef:
    """Where an object was read from (``file`` may be ``<generated>``)."""

    file: str = "<generated>"
    line: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@attrs.frozen
class ServicePort:
    port: int
    protocol: Protocol = "TCP"
    name: str = ""
    # int (a number) or str (a named container port, resolved through EndpointSlice ports)
    target_port: int | str = 0
    node_port: int = 0  # 0 = none


@attrs.frozen
class LoadBalancerIngress:
    ip: str = ""
    hostname: str = ""
    ip_mode: str = ""  # "", "VIP" or "Proxy"


@attrs.frozen
class Service:
    namespace: str
    name: str
    ports: tuple[ServicePort, ...]
    type: str = "ClusterIP"  # ClusterIP | NodePort | LoadBalancer | ExternalName
    cluster_ips: tuple[str, ...] = ()  # () or ("None",) for headless
    selector: tuple[tuple[str, str], ...] | None = None  # None = selector-less Service
    external_ips: tuple[str, ...] = ()
    lb_ingress: tuple[LoadBalancerIngress, ...] = ()
    lb_source_ranges: tuple[str, ...] = ()
    external_traffic_policy: Policy = "Cluster"
    internal_traffic_policy: Policy = "Cluster"
    session_affinity: str = "None"  # None | ClientIP
    affinity_timeout: int = 10800
    health_check_node_port: int = 0
    ip_families: tuple[str, ...] = ()  # ("IPv4",), ("IPv6",), ("IPv4","IPv6")
    source: SourceRef = SourceRef()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@attrs.frozen
class EndpointPort:
    port: int
    protocol: Protocol = "TCP"
    name: str = ""


@attrs.frozen
class Endpoint:
    addresses: tuple[str, ...]
    # conditions, already defaulted: ready None -> True; serving None -> ready; terminating None -> False
    ready: bool = True
    serving: bool = True
    terminating: bool = False
    node_name: str = ""
    zone: str = ""
    hint_zones: tuple[str, ...] | None = None  # None = no hints
    target_pod: str = ""  # "ns/name" from targetRef, if any


@attrs.frozen
class EndpointSlice:
    namespace: str
    name: str
    service_name: str  # label kubernetes.io/service-name
    address_type: str  # IPv4 | IPv6 | FQDN
    endpoints: tuple[Endpoint, ...]
    ports: tuple[EndpointPort, ...] = ()
    source: SourceRef = SourceRef()


@attrs.frozen
class Node:
    name: str
    internal_ips: tuple[str, ...] = ()  # InternalIP (and ExternalIP) addresses, in order
    pod_cidrs: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    source: SourceRef = SourceRef()

    @property
    def zone(self) -> str:
        return dict(self.labels).get("topology.kubernetes.io/zone", "")


@attrs.frozen
class ContainerPort:
    port: int
    protocol: Protocol = "TCP"
    name: str = ""


@attrs.frozen
class Pod:
    namespace: str
    name: str
    node_name: str = ""
    ips: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    ports: tuple[ContainerPort, ...] = ()
    host_network: bool = False
    ready: bool = True
    terminating: bool = False
    source: SourceRef = SourceRef()


@attrs.frozen
class ProxyConfig:
    """The KubeProxyConfiguration fields that change the rules (iptables mode).

    ``detect_local_mode``: ``ClusterCIDR`` (default when ``cluster_cidrs`` is set), ``NodeCIDR``,
    ``BridgeInterface``, ``InterfaceNamePrefix``, or ``""`` for no detector.
    """

    cluster_cidrs: tuple[str, ...] = ()
    detect_local_mode: str = ""
    bridge_interface: str = ""
    interface_name_prefix: str = ""
    masquerade_all: bool = False
    masquerade_bit: int = 14
    node_port_addresses: tuple[str, ...] = ()  # CIDRs or "primary"; () = all local addresses
    localhost_node_ports: bool = True
    # how the output is spelled, not what it means
    random_fully: bool = True  # iptables >= 1.6.2 supports MASQUERADE --random-fully
    nfacct: bool = True  # nfacct counters present (v1.28+)
    mark_spelling: Literal["kube-proxy", "test"] = "kube-proxy"  # 0x00004000 vs 0x4000
    terminating_fallback: bool = True  # ProxyTerminatingEndpoints (GA 1.28)
    legacy_layout: bool = False  # v1.27-era details (no nfacct, KUBE-FIREWALL in filter as in the corpus)
    large_cluster_threshold: int = 1000
    mode: Literal["iptables", "nftables", "ipvs"] = "iptables"  # the proxy mode (KubeProxyConfiguration ``mode``)
    source: SourceRef = SourceRef()

    @property
    def masquerade_mark(self) -> int:
        return 1 << self.masquerade_bit


@attrs.frozen
class Cluster:
    services: tuple[Service, ...] = ()
    slices: tuple[EndpointSlice, ...] = ()
    nodes: tuple[Node, ...] = ()
    pods: tuple[Pod, ...] = ()
    proxy: ProxyConfig = ProxyConfig()
    # the ServiceCIDR objects' ranges (networking.k8s.io/v1): the nftables proxier drops
    # traffic to unallocated addresses in them
    service_cidrs: tuple[str, ...] = ()
    name: str = ""  # e.g. the spec file it came from
    source: SourceRef = SourceRef()

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def slices_for(self, svc: Service) -> tuple[EndpointSlice, ...]:
        return tuple(
            s for s in self.slices if s.namespace == svc.namespace and s.service_name == svc.name
        )
