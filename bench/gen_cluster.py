"""Generate large synthetic clusters for the benchmarks (compile, parse, trace).

``generate_cluster(services, endpoints, nodes)`` is deterministic: the same arguments give the
same Cluster. Every Service has one TCP port and ``endpoints`` ready endpoints spread round-robin
over the nodes; a mix of kinds exercises every large template:

* i % 10 == 0: NodePort (eTP Cluster)
* i % 10 == 1: LoadBalancer, eTP Local, one ingress IP, healthCheckNodePort
* i % 10 == 2: ClusterIP with ClientIP session affinity
* i % 10 == 3: ClusterIP with one externalIP
* otherwise: plain ClusterIP

Nodes are ``node-0`` .. ``node-{nodes-1}`` with addresses ``192.168.<k//250>.<k%250+1>``; the
KubeProxyConfiguration has clusterCIDR 10.0.0.0/8 (endpoint IPs come from 10.0.0.0/8 too).
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
_ENDPOINT_BASE = int(ipaddress.ip_address("10.1.0.0"))
_LB_BASE = int(ipaddress.ip_address("203.0.0.0"))


def _ip(n: int) -> str:
    return str(ipaddress.IPv4Address(n))


def generate_cluster(services: int, endpoints: int, nodes: int = 10) -> Cluster:
    """A cluster of ``services`` one-port Services with ``endpoints`` endpoints each."""
    if services < 0 or endpoints < 0 or nodes < 1:
        raise ValueError("services and endpoints must be >= 0, nodes >= 1")
    if services > 65000:
        raise ValueError("at most 65000 services (ClusterIPs come from 172.30.0.0/16)")
    node_names = [f"node-{k}" for k in range(nodes)]
    node_objs = tuple(
        Node(name, internal_ips=(f"192.168.{k // 250}.{k % 250 + 1}",))
        for k, name in enumerate(node_names)
    )
    svcs: list[Service] = []
    slices: list[EndpointSlice] = []
    ep_counter = 0
    for i in range(services):
        ns = f"ns{i % 50}"
        name = f"svc{i}"
        kind = i % 10
        port = ServicePort(
            80, "TCP", "http", 8080, node_port=30000 + i % 2767 if kind in (0, 1) else 0
        )
        extra: dict[str, object] = {}
        if kind == 0:
            extra["type"] = "NodePort"
        elif kind == 1:
            extra.update(
                type="LoadBalancer",
                external_traffic_policy="Local",
                lb_ingress=(LoadBalancerIngress(ip=_ip(_LB_BASE + i)),),
                health_check_node_port=32000 + i % 700,
            )
        elif kind == 2:
            extra.update(session_affinity="ClientIP", affinity_timeout=10800)
        elif kind == 3:
            extra["external_ips"] = (_ip(_LB_BASE + 0x100000 + i),)
        svcs.append(
            Service(
                namespace=ns,
                name=name,
                ports=(port,),
                cluster_ips=(_ip(_CLUSTER_IP_BASE + 10 + i),),
                selector=(("app", name),),
                **extra,  # type: ignore[arg-type]
            )
        )
        eps = []
        for j in range(endpoints):
            eps.append(
                Endpoint((_ip(_ENDPOINT_BASE + ep_counter),), node_name=node_names[(i + j) % nodes])
            )
            ep_counter += 1
        slices.append(
            EndpointSlice(
                ns, f"{name}-abcde", name, "IPv4", tuple(eps), (EndpointPort(8080, "TCP", "http"),)
            )
        )
    return Cluster(
        services=tuple(svcs),
        slices=tuple(slices),
        nodes=node_objs,
        proxy=ProxyConfig(cluster_cidrs=("10.0.0.0/8",)),
        name=f"generated-{services}x{endpoints}",
    )
