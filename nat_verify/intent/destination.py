"""Every way a Service port can be addressed on one node, for one IP family.

Written from the Kubernetes documentation, not from kube-proxy's rules:

* ClusterIP: ``spec.clusterIPs`` (Service docs, "Virtual IPs and Service Proxies"); a headless
  Service (``clusterIP: None``) and an ExternalName Service are not proxied at all.
* NodePort: "each node proxies that port (the same port number on every Node)"; which node
  addresses accept it is the kube-proxy ``nodePortAddresses`` setting: unset = every local IP,
  a list of CIDRs = the node IPs inside one of them, ``primary`` = the node's primary IP of the
  family (KubeProxyConfiguration reference); the newer keywords ``localhost`` (the loopback
  CIDRs) and ``all`` (the zero CIDRs) may be combined with CIDRs. A family with no CIDR in the
  list gets no NodePort address (the reference says connections are accepted "only on node IPs
  in one of the indicated ranges").
* localhost NodePorts (``localhostNodePorts``, IPv4 only): 127.0.0.1 accepts NodePorts when
  the flag is on and ``nodePortAddresses`` is unset or contains an IPv4 loopback range.
* ``spec.externalIPs`` and ``status.loadBalancer.ingress[].ip`` of the family; an ingress with
  ``ipMode: Proxy`` is not handled by the node (KEP-1860, "the load balancer proxies").

A Service only exists for a family in which it has a ClusterIP (dual-stack docs: the Service's
``ipFamilies`` follow its ``clusterIPs``), so a single-stack IPv4 Service has no IPv6 NodePort.
"""

from __future__ import annotations

import ipaddress

import attrs

from nat_verify.intent.index import index, parse_ip
from nat_verify.model.cluster import Cluster, Service, ServicePort

ADDRESS_CLASSES: tuple[str, ...] = (
    "cluster-ip",
    "node-port",
    "localhost-node-port",
    "external-ip",
    "lb-ip",
)
EXTERNAL_CLASSES: frozenset[str] = frozenset(ADDRESS_CLASSES[1:])
LOCALHOST_V4 = "127.0.0.1"
# nodePortAddresses keywords that stand for CIDRs
_KEYWORD_CIDRS = {"localhost": ("127.0.0.0/8", "::1/128"), "all": ("0.0.0.0/0", "::/0")}


class UnknownServicePort(ValueError):
    """A Destination names a Service port that is not in the cluster."""


@attrs.frozen
class Destination:
    """One way to address a Service port on this node."""

    service: str  # "ns/name:portname", or "ns/name" when the port has no name
    address_class: str  # one of ADDRESS_CLASSES
    ip: str
    port: int
    proto: str  # lower case: tcp | udp | sctp

    @property
    def family(self) -> int:
        return parse_ip(self.ip).version

    @property
    def external(self) -> bool:
        """Whether externalTrafficPolicy governs this address (everything but the ClusterIP)."""
        return self.address_class in EXTERNAL_CLASSES

    def __str__(self) -> str:
        host = f"[{self.ip}]" if self.family == 6 else self.ip
        return f"{self.service} {self.address_class} {self.proto} {host}:{self.port}"


def service_port_key(svc: Service, sp: ServicePort) -> str:
    """The service port name Kubernetes tools print: ``ns/name:port`` or ``ns/name``."""
    return f"{svc.key}:{sp.name}" if sp.name else svc.key


def is_proxied(svc: Service) -> bool:
    """ExternalName and headless Services get no virtual IP, so no node proxies them."""
    if svc.type == "ExternalName":
        return False
    return any(ip not in ("", "None") for ip in svc.cluster_ips)


def family_ips(addresses: tuple[str, ...], family: int) -> tuple[str, ...]:
    """The parseable addresses of one family, in order, without duplicates."""
    out: list[str] = []
    for text in addresses:
        try:
            addr = parse_ip(text.strip())
        except ValueError:
            continue
        if addr.version == family and str(addr) not in out:
            out.append(str(addr))
    return tuple(out)


def find_service_port(cluster: Cluster, service: str, proto: str) -> tuple[Service, ServicePort]:
    """The Service and port named ``ns/name[:port]`` with protocol ``proto`` (any case)."""
    key, _, port_name = service.partition(":")
    svc = index(cluster).services.get(key)
    if svc is not None:
        for sp in svc.ports:
            if sp.name == port_name and sp.protocol.lower() == proto.lower():
                return svc, sp
    raise UnknownServicePort(f"no Service port {service!r} with protocol {proto} in the cluster")


def node_port_ips(cluster: Cluster, node: str, family: int) -> tuple[str, ...]:
    """The node's own addresses of ``family`` on which NodePorts are accepted (no loopback)."""
    node_ips = family_ips(index(cluster).nodes[node].internal_ips, family)
    setting = cluster.proxy.node_port_addresses
    if not setting:
        return node_ips
    chosen: list[str] = []
    if any(entry.strip() == "primary" for entry in setting):
        chosen.extend(node_ips[:1])
    for net in _setting_networks(setting, family):
        chosen.extend(ip for ip in node_ips if parse_ip(ip) in net)
    return tuple(ip for ip in node_ips if ip in chosen)


def _setting_networks(
    setting: tuple[str, ...], family: int
) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """The CIDRs of ``family`` in a nodePortAddresses list (keywords expanded, bad ones ignored)."""
    texts: list[str] = []
    for entry in setting:
        texts.extend(_KEYWORD_CIDRS.get(entry.strip(), (entry.strip(),)))
    nets = []
    for text in texts:
        try:
            net = ipaddress.ip_network(text, strict=False)
        except ValueError:
            continue  # "primary", or an invalid CIDR, selects no range
        if net.version == family:
            nets.append(net)
    return nets


def localhost_node_ports(cluster: Cluster, family: int) -> bool:
    """127.0.0.1 accepts NodePorts: IPv4, flag on, and loopback allowed by nodePortAddresses."""
    if family != 4 or not cluster.proxy.localhost_node_ports:
        return False
    setting = cluster.proxy.node_port_addresses
    if not setting:
        return True
    loopback = parse_ip(LOCALHOST_V4)
    return any(loopback in net for net in _setting_networks(setting, 4))


def lb_ips(svc: Service, family: int) -> tuple[str, ...]:
    """LoadBalancer ingress IPs the node must handle: not hostname-only, not ``ipMode: Proxy``."""
    return family_ips(
        tuple(ing.ip for ing in svc.lb_ingress if ing.ip and ing.ip_mode != "Proxy"), family
    )


def service_destinations(
    cluster: Cluster, node: str, svc: Service, family: int
) -> tuple[Destination, ...]:
    """Every Destination of one Service on ``node`` for ``family``."""
    if not is_proxied(svc):
        return ()
    cluster_ips = family_ips(svc.cluster_ips, family)
    if not cluster_ips:
        return ()
    np_ips = node_port_ips(cluster, node, family)
    localhost = localhost_node_ports(cluster, family)
    out: list[Destination] = []
    for sp in svc.ports:
        key = service_port_key(svc, sp)
        proto = sp.protocol.lower()

        def add(cls: str, ip: str, port: int, key: str = key, proto: str = proto) -> None:
            d = Destination(key, cls, ip, port, proto)
            if d not in out:
                out.append(d)

        for ip in cluster_ips:
            add("cluster-ip", ip, sp.port)
        if sp.node_port:
            for ip in np_ips:
                add("node-port", ip, sp.node_port)
            if localhost:
                add("localhost-node-port", LOCALHOST_V4, sp.node_port)
        for ip in family_ips(svc.external_ips, family):
            add("external-ip", ip, sp.port)
        for ip in lb_ips(svc, family):
            add("lb-ip", ip, sp.port)
    return tuple(out)


def destinations(cluster: Cluster, node: str, family: int) -> tuple[Destination, ...]:
    """Every address class of every Service port on ``node`` for IP ``family`` (4 or 6)."""
    out: list[Destination] = []
    for svc in cluster.services:
        out.extend(service_destinations(cluster, node, svc, family))
    return tuple(out)
