"""Service ports as one kube-proxy instance (one IP family) sees them.

kube-proxy turns every port of every Service into a ``ServicePortInfo``; everything the rule
templates need is computed here once: the family's ClusterIP, externalIPs, LoadBalancer VIPs
and source ranges (all filtered to the family, invalid entries dropped as kube-proxy does), the
traffic-policy flags and the chain names.
"""

from __future__ import annotations

import ipaddress

import attrs

from nat_verify.kubeproxy.addresses import canonical_ip
from nat_verify.kubeproxy.errors import CompileError
from nat_verify.kubeproxy.hashing import port_proto_hash, service_port_name
from nat_verify.model.cluster import Cluster, Service, ServicePort


@attrs.frozen
class ServicePortInfo:
    namespace: str
    name: str
    port_name: str
    protocol: str  # as in the API: TCP, UDP, SCTP
    spn: str  # "ns/name:port" or "ns/name"
    proto: str  # lower case, as written in rules and hashed
    port: int
    cluster_ip: str
    node_port: int
    external_ips: tuple[str, ...]
    lb_ips: tuple[str, ...]
    source_ranges: tuple[str, ...]
    health_check_node_port: int  # 0 unless the Service needs a health check
    internal_local: bool
    external_local: bool
    affinity_timeout: int  # 0 = no ClientIP affinity
    hash16: str

    @property
    def svc_key(self) -> str:
        """``ns/name``: what upstream's canonical sort orders service blocks by."""
        return f"{self.namespace}/{self.name}"

    @property
    def externally_accessible(self) -> bool:
        return bool(self.node_port or self.lb_ips or self.external_ips)

    @property
    def uses_cluster_endpoints(self) -> bool:
        # eTP=Local still needs the Cluster chain to short-circuit pod and host traffic.
        return not self.internal_local or self.externally_accessible

    @property
    def uses_local_endpoints(self) -> bool:
        return self.internal_local or (self.external_local and self.externally_accessible)


def _ip_of_family(text: str, family: int) -> str | None:
    parsed = canonical_ip(text)
    return parsed[0] if parsed is not None and parsed[1] == family else None


def _cidr_of_family(text: str, family: int) -> str | None:
    try:
        net = ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        return None  # kube-proxy ignores invalid source ranges
    return str(net) if net.version == family else None


def _cluster_ip(svc: Service, family: int) -> str | None:
    for text in svc.cluster_ips:
        if text in ("", "None"):
            return None
        parsed = canonical_ip(text)
        if parsed is None:
            raise CompileError(
                f"Service {svc.key}: clusterIP {text!r} is not an IP address", svc.source
            )
        if parsed[1] == family:
            return parsed[0]
    return None


def _externally_accessible_type(svc: Service) -> bool:
    # pkg/apis/core/v1/helper: ExternallyAccessible (decides whether eTP applies at all)
    return svc.type in ("LoadBalancer", "NodePort") or (
        svc.type == "ClusterIP" and bool(svc.external_ips)
    )


def _info(svc: Service, sp: ServicePort, family: int, cluster_ip: str) -> ServicePortInfo:
    proto = sp.protocol.lower()
    spn = service_port_name(svc.namespace, svc.name, sp.name)
    external_local = _externally_accessible_type(svc) and svc.external_traffic_policy == "Local"
    lb_ips = []
    for ing in svc.lb_ingress:
        # ipMode Proxy: the LB proxies to the node, kube-proxy programs nothing for that IP.
        if not ing.ip or ing.ip_mode == "Proxy":
            continue
        ip = _ip_of_family(ing.ip, family)
        if ip is not None:
            lb_ips.append(ip)
    return ServicePortInfo(
        namespace=svc.namespace,
        name=svc.name,
        port_name=sp.name,
        protocol=sp.protocol,
        spn=spn,
        proto=proto,
        port=sp.port,
        cluster_ip=cluster_ip,
        node_port=sp.node_port,
        external_ips=tuple(
            ip for ip in (_ip_of_family(t, family) for t in svc.external_ips) if ip is not None
        ),
        lb_ips=tuple(lb_ips),
        source_ranges=tuple(
            c for c in (_cidr_of_family(t, family) for t in svc.lb_source_ranges) if c is not None
        ),
        health_check_node_port=(
            svc.health_check_node_port if svc.type == "LoadBalancer" and external_local else 0
        ),
        internal_local=svc.internal_traffic_policy == "Local",
        external_local=external_local,
        affinity_timeout=svc.affinity_timeout if svc.session_affinity == "ClientIP" else 0,
        hash16=port_proto_hash(spn, proto),
    )


def service_ports(cluster: Cluster, family: int) -> list[ServicePortInfo]:
    """Every service port this family's kube-proxy programs, in canonical order.

    Canonical order = services sorted by the ``ns/name`` string (what upstream's
    ``sortIPTablesRules`` orders KUBE-SERVICES/KUBE-NODEPORTS blocks by), ports in spec order.
    Headless, ExternalName and other-family-only Services are skipped, as kube-proxy does.
    """
    out: list[ServicePortInfo] = []
    for svc in sorted(cluster.services, key=lambda s: s.key):
        if svc.type == "ExternalName":
            continue
        cluster_ip = _cluster_ip(svc, family)
        if cluster_ip is None:
            continue
        out.extend(_info(svc, sp, family, cluster_ip) for sp in svc.ports)
    return out
