"""Public Hypothesis strategies for nat-verify's values, in the style of ``hypothesis.strategies``.

::

    from nat_verify import strategies as nvst

    @given(nvst.clusters(max_services=3, families=(4, 6)), st.data())
    def test_something(cluster, data):
        node = data.draw(nvst.node_names(cluster))
        packet = data.draw(nvst.packets(cluster, node, family=4))

Everything is built **by construction** (no ``filter``/``assume``), so every drawn value is a
valid cluster that the loader would accept and ``compile_node`` compiles for every node and
family, and shrinking heads for small clusters: "simpler" is fewer nodes, Services, ports and
endpoints, lower addresses and ports, and default knobs (each ``sampled_from`` lists the
default first).

Address plan (one family or dual-stack, ``families=(4, 6)``):

=================  ==========================  ==============================
what               IPv4                        IPv6
=================  ==========================  ==============================
node ``i``         192.168.1.(10+i)            fd00:1::(10+i)
pods (cluster)     10.42.0.0/16                fd00:42::/56
pods on node i     10.42.i.0/24                fd00:42:0:i::/64
ClusterIPs         10.43.0.0/16 (unique)       fd00:43::/112 (unique)
externalIPs        198.51.100.0/24             2001:db8:100::/64
LB ingress IPs     203.0.113.0/24              2001:db8:113::/64
outside clients    100.64.0.1, 100.64.1.1      2001:db8:ffff::1, 2001:db8:fffe::1
=================  ==========================  ==============================

Pod addresses ``.1`` of a node's pod CIDR is the node's bridge; endpoints and client pods start
at ``.2``. nodePorts and healthCheckNodePorts are unique in 30000-32767.

``register_type_strategies()`` makes ``st.from_type(Cluster)`` (and Service, EndpointSlice,
ProxyConfig, Node) use these strategies; Hypothesis calls it through the ``hypothesis``
entry point (``nat_verify._hypothesis_hook``), so it must stay cheap.
"""

from __future__ import annotations


def register_type_strategies() -> None:
    """Register strategies for the model types with ``st.register_type_strategy``.

    Defined before this module imports Hypothesis: importing Hypothesis runs the entry point,
    which calls this function on the half-imported module when ``nat_verify.strategies`` is the
    first to import Hypothesis. The registered callables only look up ``clusters`` & co. when
    ``st.from_type`` resolves them, after the import has finished; so this stays cheap, too.
    """
    from hypothesis import strategies as st

    from nat_verify.model.cluster import Cluster, EndpointSlice, Node, ProxyConfig, Service

    st.register_type_strategy(Cluster, lambda _t: clusters())
    st.register_type_strategy(Service, lambda _t: services())
    st.register_type_strategy(EndpointSlice, lambda _t: endpoint_slices())
    st.register_type_strategy(ProxyConfig, lambda _t: proxy_configs())
    st.register_type_strategy(Node, lambda _t: nodes())


import ipaddress  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

import attrs  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.errors import InvalidArgument  # noqa: E402

from nat_verify.model.cluster import (  # noqa: E402
    Cluster,
    Condition,
    Container,
    ContainerPort,
    Endpoint,
    EndpointPort,
    EndpointSlice,
    LoadBalancerIngress,
    Node,
    Pod,
    ProxyConfig,
    Service,
    ServicePort,
)
from nat_verify.model.packet import Packet  # noqa: E402

__all__ = [
    "CLUSTER_CIDRS",
    "SERVICE_CIDRS",
    "clusters",
    "endpoint_slices",
    "node_names",
    "nodes",
    "packets",
    "proxy_configs",
    "register_type_strategies",
    "sample_clusters",
    "services",
]

CLUSTER_CIDRS = {4: "10.42.0.0/16", 6: "fd00:42::/56"}
SERVICE_CIDRS = {4: "10.43.0.0/16", 6: "fd00:43::/112"}
NODE_NETS = {4: "192.168.1.0/24", 6: "fd00:1::/64"}
NODE_PORT_MIN, NODE_PORT_MAX = 30000, 32767
MAX_NODES = 200  # node i's pod CIDR is 10.42.i.0/24 and its IP 192.168.1.(10+i)
MAX_PODS_PER_NODE = 250  # .2 .. .251 of the node's /24
ZONE_LABEL = "topology.kubernetes.io/zone"

_ADDRESS_TYPE = {4: "IPv4", 6: "IPv6"}
_EXTERNAL_IP_BASE = {4: "198.51.100.10", 6: "2001:db8:100::10"}
_LB_IP_BASE = {4: "203.0.113.10", 6: "2001:db8:113::10"}
# Outside clients: one inside the source range offered below, one outside every range.
_OUTSIDE_CLIENTS = {4: ("100.64.0.1", "100.64.1.1"), 6: ("2001:db8:ffff::1", "2001:db8:fffe::1")}
# An address nothing in a generated cluster uses (TEST-NET-1 / documentation prefix).
_UNRELATED = {4: "192.0.2.1", 6: "2001:db8:2::1"}
# loadBalancerSourceRanges choices: outside clients, the nodes (the allow-from-node rule), pods,
# everything.
_SOURCE_RANGES = {
    4: ("100.64.0.0/24", "192.168.1.0/24", "10.42.0.0/16", "0.0.0.0/0"),
    6: ("2001:db8:ffff::/64", "fd00:1::/64", "fd00:42::/56", "::/0"),
}

PROTOCOLS = ("TCP", "UDP", "SCTP")
SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer")
POLICIES = ("Cluster", "Local")
DETECTORS = ("ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix", "")
NAMESPACES = ("default", "team-a")
_BASE_PORTS = (80, 53, 443, 8080)
_PORT_NAMES = ("http", "dns", "metrics", "grpc", "admin", "debug", "extra", "more")
_AFFINITY_TIMEOUTS = (10800, 1, 60, 86400)
_MASQUERADE_BITS = (14, 0, 1, 15, 31)
# (ready, serving, terminating), the ordinary ready endpoint first
_CONDITIONS = (
    (True, True, False),
    (False, True, True),
    (False, False, True),
    (False, False, False),
)


def _check_families(families: Sequence[int]) -> tuple[int, ...]:
    fams = tuple(families)
    if not fams or len(set(fams)) != len(fams) or any(f not in (4, 6) for f in fams):
        raise InvalidArgument(f"families must be (4,), (6,), (4, 6) or (6, 4), got {families!r}")
    return fams


def _offset(base: str, n: int) -> str:
    return str(ipaddress.ip_address(base) + n)


def node_ip(i: int, family: int) -> str:
    """Node ``i``'s address of ``family`` in the address plan."""
    return _offset("192.168.1.10" if family == 4 else "fd00:1::10", i)


def pod_cidr(i: int, family: int) -> str:
    """Node ``i``'s pod CIDR of ``family`` (inside ``CLUSTER_CIDRS[family]``)."""
    # canonical spelling (fd00:42::/64, not fd00:42:0:0::/64): the loader normalises too
    return str(ipaddress.ip_network(f"10.42.{i}.0/24" if family == 4 else f"fd00:42:0:{i:x}::/64"))


def _pod_ip(i: int, k: int, family: int) -> str:
    net = ipaddress.ip_network(pod_cidr(i, family))
    return str(net.network_address + 2 + k)


def _zone(i: int) -> str:
    return "zone-a" if i % 2 == 0 else "zone-b"


def _node(i: int, families: tuple[int, ...], zones: bool) -> Node:
    return Node(
        name=f"node-{i}",
        internal_ips=tuple(node_ip(i, f) for f in families),
        pod_cidrs=tuple(pod_cidr(i, f) for f in families),
        labels=((ZONE_LABEL, _zone(i)),) if zones else (),
    )


class _Plan:
    """Allocators for one generated cluster: every address and port handed out once.

    Local to one ``draw`` (never escapes a strategy), which is why it may be mutable. Gaps
    between allocations are drawn, so shrinking drives them to 0 (lower addresses and ports).
    """

    def __init__(self, families: tuple[int, ...], n_nodes: int, zones: bool) -> None:
        self.families = families
        self.nodes = tuple(_node(i, families, zones) for i in range(n_nodes))
        self.zones = zones
        self._cluster_ip = 9  # 10.43.0.10 first, as kube's default Service range is used
        self._node_port = NODE_PORT_MIN - 1
        self._external = 0
        self._lb = 0
        self._pods = [0] * n_nodes

    def cluster_ip(self, draw: st.DrawFn) -> int:
        self._cluster_ip += 1 + draw(st.integers(0, 3))
        return self._cluster_ip

    def node_port(self, draw: st.DrawFn) -> int:
        gap = draw(st.integers(0, 99)) if self._node_port < NODE_PORT_MAX - 2000 else 0
        self._node_port += 1 + gap
        if self._node_port > NODE_PORT_MAX:
            raise InvalidArgument("too many node ports for 30000-32767: lower max_services")
        return self._node_port

    def external_ip(self, family: int) -> str:
        self._external += 1
        return _offset(_EXTERNAL_IP_BASE[family], self._external - 1)

    def lb_ip(self, family: int) -> str:
        self._lb += 1
        return _offset(_LB_IP_BASE[family], self._lb - 1)

    def pod_slot(self, node: int) -> int:
        k = self._pods[node]
        if k >= MAX_PODS_PER_NODE:
            raise InvalidArgument("too many pods on one node: lower max_services/max_endpoints")
        self._pods[node] += 1
        return k


def _service_families(draw: st.DrawFn, families: tuple[int, ...]) -> tuple[int, ...]:
    options: list[tuple[int, ...]] = [(families[0],)]
    if len(families) == 2:
        options += [(families[1],), families, (families[1], families[0])]
    return draw(st.sampled_from(options))


def _draw_service(
    draw: st.DrawFn, plan: _Plan, index: int, max_ports: int, namespace: str | None = None
) -> Service:
    ns = namespace if namespace is not None else draw(st.sampled_from(NAMESPACES))
    name = f"svc-{index}"
    fams = _service_families(draw, plan.families)
    svc_type = draw(st.sampled_from(SERVICE_TYPES))
    # LoadBalancer with allocateLoadBalancerNodePorts: false has no nodePorts
    with_node_ports = svc_type == "NodePort" or (
        svc_type == "LoadBalancer" and draw(st.sampled_from((True, False)))
    )

    n_ports = draw(st.integers(1, max_ports))
    ports: list[ServicePort] = []
    number = draw(st.sampled_from(_BASE_PORTS))
    for j in range(n_ports):
        if j:
            number += 1 + draw(st.integers(0, 20))  # ascending, so (port, protocol) is unique
        # one port may be unnamed; several need unique names (API validation)
        pname = _PORT_NAMES[j] if n_ports > 1 else draw(st.sampled_from(("", "http")))
        kind = draw(st.sampled_from(("same", "number", "named")))
        target: int | str = number
        if kind == "number":
            target = 8000 + draw(st.integers(0, 999))
        elif kind == "named":
            target = f"c-{pname or 'port'}"  # a container port name, resolved per slice
        ports.append(
            ServicePort(
                port=number,
                protocol=draw(st.sampled_from(PROTOCOLS)),
                name=pname,
                target_port=target,
                node_port=plan.node_port(draw) if with_node_ports else 0,
            )
        )

    cluster_ips = tuple(
        _offset(SERVICE_CIDRS[f].split("/")[0], plan.cluster_ip(draw)) for f in fams
    )
    external_ips: tuple[str, ...] = ()
    if draw(st.integers(0, 1)):
        external_ips = tuple(plan.external_ip(f) for f in fams)
    externally_accessible = svc_type != "ClusterIP" or bool(external_ips)
    etp = draw(st.sampled_from(POLICIES)) if externally_accessible else "Cluster"

    ingress: list[LoadBalancerIngress] = []
    ranges: tuple[str, ...] = ()
    hc_port = 0
    if svc_type == "LoadBalancer":
        for _ in range(draw(st.integers(0, 2))):
            fam = draw(st.sampled_from(fams))
            mode = draw(st.sampled_from(("", "VIP", "Proxy")))
            ingress.append(LoadBalancerIngress(ip=plan.lb_ip(fam), ip_mode=mode))
        choices = [r for f in fams for r in _SOURCE_RANGES[f]]
        ranges = tuple(draw(st.lists(st.sampled_from(choices), max_size=2, unique=True)))
        if etp == "Local":
            hc_port = plan.node_port(draw)

    affinity = draw(st.sampled_from(("None", "ClientIP")))
    timeout = draw(st.sampled_from(_AFFINITY_TIMEOUTS)) if affinity == "ClientIP" else 10800
    return Service(
        namespace=ns,
        name=name,
        ports=tuple(ports),
        type=svc_type,
        cluster_ips=cluster_ips,
        selector=(("app", name),),
        external_ips=external_ips,
        lb_ingress=tuple(ingress),
        lb_source_ranges=ranges,
        external_traffic_policy=etp,  # type: ignore[arg-type]
        internal_traffic_policy=draw(st.sampled_from(POLICIES)),
        session_affinity=affinity,
        affinity_timeout=timeout,
        health_check_node_port=hc_port,
        ip_families=tuple(_ADDRESS_TYPE[f] for f in fams),
    )


def api_pod(
    namespace: str,
    name: str,
    node: str,
    ips: tuple[str, ...],
    labels: tuple[tuple[str, str], ...],
    ports: tuple[ContainerPort, ...],
    *,
    ready: bool = True,
    terminating: bool = False,
) -> Pod:
    """A running Pod as the API server returns it: one container ``app`` and a Ready condition."""
    return Pod(
        namespace=namespace, name=name, node_name=node, ips=ips, labels=labels, ports=ports,
        ready=ready, terminating=terminating, containers=(Container("app", "app", ports),),
        conditions=(Condition("Ready", "True" if ready else "False"),),
    )  # fmt: skip


def _draw_backends(
    draw: st.DrawFn, plan: _Plan, svc: Service, max_endpoints: int, host_network: bool = False
) -> tuple[tuple[EndpointSlice, ...], tuple[Pod, ...]]:
    """The Service's endpoint pods and EndpointSlices (one per family and pod group).

    Endpoints are split into one or two groups; a named targetPort is resolved per group (the
    Pods of one group share a container port number), as the EndpointSlice controller does. A
    Service without endpoints still gets one empty slice per family, as the controller writes
    and as the loader synthesises for it, so the cluster reads back from YAML unchanged.
    ``host_network``: a group may be hostNetwork Pods (a DaemonSet: at most one per node, the
    node's own addresses as endpoints).
    """
    fams = tuple(4 if f == "IPv4" else 6 for f in svc.ip_families)
    n_eps = draw(st.integers(0, max_endpoints))
    groups = [n_eps]
    if n_eps >= 2 and draw(st.booleans()):
        split = draw(st.integers(1, n_eps - 1))
        groups = [split, n_eps - split]
    hints = plan.zones and draw(st.booleans())

    slices: list[EndpointSlice] = []
    pods: list[Pod] = []
    taken: set[int] = set()  # nodes that run this Service's hostNetwork Pod
    for g, size in enumerate(groups):
        hostnet = host_network and draw(st.booleans())
        resolved: list[int] = []
        for sp in svc.ports:
            if isinstance(sp.target_port, str):
                resolved.append(8000 + draw(st.integers(0, 999)))
            else:
                resolved.append(sp.target_port)
        endpoints: dict[int, list[Endpoint]] = {f: [] for f in fams}
        for _ in range(size):
            node = draw(st.integers(0, len(plan.nodes) - 1))
            if hostnet and node in taken:
                continue  # one Pod per node: two would bind the same node port
            if hostnet:
                taken.add(node)
            ready, serving, terminating = draw(st.sampled_from(_CONDITIONS))
            if hostnet:
                ips = tuple(node_ip(node, f) for f in fams)
            else:
                slot = plan.pod_slot(node)
                ips = tuple(_pod_ip(node, slot, f) for f in fams)
            ports = tuple(
                ContainerPort(n, sp.protocol, sp.target_port if isinstance(sp.target_port, str) else "")
                for sp, n in zip(svc.ports, resolved, strict=True)
            )
            # as the EndpointSlice controller writes it: serving is the Pod's Ready condition
            pod = api_pod(
                svc.namespace, f"{svc.name}-pod-{len(pods)}", plan.nodes[node].name, ips,
                svc.selector or (), ports, ready=serving, terminating=terminating,
            )  # fmt: skip
            if hostnet:
                pod = attrs.evolve(pod, host_network=True)
            pods.append(pod)
            zone = _zone(node) if plan.zones else ""
            for f, ip in zip(fams, ips, strict=True):
                endpoints[f].append(
                    Endpoint(
                        addresses=(ip,),
                        ready=ready,
                        serving=serving,
                        terminating=terminating,
                        node_name=pod.node_name,
                        zone=zone,
                        hint_zones=(zone,) if hints else None,
                        target_pod=f"{pod.namespace}/{pod.name}",
                    )
                )
        # the EndpointSlice port carries the Service port's name and the resolved number
        slice_ports = tuple(
            EndpointPort(n, sp.protocol, sp.name) for sp, n in zip(svc.ports, resolved, strict=True)
        )
        for f in fams:
            slices.append(
                EndpointSlice(
                    namespace=svc.namespace,
                    name=f"{svc.name}-{_ADDRESS_TYPE[f].lower()}-{g}",
                    service_name=svc.name,
                    address_type=_ADDRESS_TYPE[f],
                    endpoints=tuple(endpoints[f]),
                    ports=slice_ports,
                )
            )
    return tuple(slices), tuple(pods)


def _node_port_address_options(families: tuple[int, ...]) -> list[tuple[str, ...]]:
    # unset (all local addresses) first; keywords like "localhost" are left out because
    # kube-proxy's iptables mode reads every entry but "primary" as a CIDR
    opts: list[tuple[str, ...]] = [()]
    if 4 in families:
        opts += [
            ("192.168.1.0/24",),
            ("primary",),
            ("192.168.1.10/32",),
            ("127.0.0.0/8",),
            ("192.168.1.0/24", "127.0.0.0/8"),
            ("0.0.0.0/0",),
        ]
    if 6 in families:
        opts += [("fd00:1::/64",), ("primary",), ("::/0",)]
    if len(families) == 2:
        opts += [("192.168.1.0/24", "fd00:1::/64")]
    return list(dict.fromkeys(opts))


@st.composite
def _proxy_configs(draw: st.DrawFn, families: tuple[int, ...]) -> ProxyConfig:
    mode = draw(st.sampled_from(DETECTORS))
    return ProxyConfig(
        # "" means no detector only without cluster CIDRs (kube-proxy defaults to ClusterCIDR)
        cluster_cidrs=tuple(CLUSTER_CIDRS[f] for f in families) if mode else (),
        detect_local_mode=mode,
        bridge_interface=draw(st.sampled_from(("cni0", "br0")))
        if mode == "BridgeInterface"
        else "",
        interface_name_prefix=(
            draw(st.sampled_from(("veth", "cali"))) if mode == "InterfaceNamePrefix" else ""
        ),
        masquerade_all=draw(st.booleans()),
        masquerade_bit=draw(st.sampled_from(_MASQUERADE_BITS)),
        node_port_addresses=draw(st.sampled_from(_node_port_address_options(families))),
        localhost_node_ports=draw(st.sampled_from((True, False))),
        random_fully=draw(st.sampled_from((True, False))),
        nfacct=draw(st.sampled_from((True, False))),
        mark_spelling=draw(st.sampled_from(("kube-proxy", "test"))),
        terminating_fallback=draw(st.sampled_from((True, False))),
        legacy_layout=draw(st.booleans()),
        # 1: every service port with an endpoint switches to large-cluster mode (no comments)
        large_cluster_threshold=draw(st.sampled_from((1000, 1))),
    )


def proxy_configs(families: Sequence[int] = (4,)) -> st.SearchStrategy[ProxyConfig]:
    """KubeProxyConfigurations for a cluster of ``families``: every local-traffic detector
    (ClusterCIDR, NodeCIDR, BridgeInterface, InterfaceNamePrefix, none), masqueradeAll,
    masqueradeBit, nodePortAddresses, localhostNodePorts, the output-spelling knobs and
    large-cluster mode."""
    return _proxy_configs(_check_families(families))


def nodes(
    max_index: int = 9, families: Sequence[int] = (4,), zones: bool = False
) -> st.SearchStrategy[Node]:
    """Node ``node-i`` of the address plan for some ``0 <= i <= max_index``."""
    fams = _check_families(families)
    if not 0 <= max_index < MAX_NODES:
        raise InvalidArgument(f"max_index must be in 0..{MAX_NODES - 1}, got {max_index}")
    return st.integers(0, max_index).map(lambda i: _node(i, fams, zones))


@st.composite
def _services(
    draw: st.DrawFn, families: tuple[int, ...], max_ports: int, namespace: str | None
) -> Service:
    return _draw_service(draw, _Plan(families, 1, False), 0, max_ports, namespace)


def services(
    families: Sequence[int] = (4,), max_ports: int = 3, namespace: str | None = None
) -> st.SearchStrategy[Service]:
    """One Service (named ``svc-0``) with every Service knob: type ClusterIP/NodePort/
    LoadBalancer, ports (TCP/UDP/SCTP, numeric or named targetPorts), eTP/iTP, session
    affinity, externalIPs, LB ingress (ipMode VIP/Proxy), source ranges, healthCheckNodePort."""
    if not 1 <= max_ports <= len(_PORT_NAMES):
        raise InvalidArgument(f"max_ports must be in 1..{len(_PORT_NAMES)}, got {max_ports}")
    return _services(_check_families(families), max_ports, namespace)


@st.composite
def _endpoint_slices(
    draw: st.DrawFn,
    service: Service | None,
    n_nodes: int,
    families: tuple[int, ...],
    max_endpoints: int,
) -> EndpointSlice:
    plan = _Plan(families, n_nodes, False)
    svc = service if service is not None else _draw_service(draw, plan, 0, 3)
    slices, _ = _draw_backends(draw, plan, svc, max_endpoints)
    return slices[0]


def endpoint_slices(
    service: Service | None = None,
    *,
    nodes: int = 2,
    families: Sequence[int] = (4,),
    max_endpoints: int = 5,
) -> st.SearchStrategy[EndpointSlice]:
    """An EndpointSlice of ``service`` (drawn when not given) with endpoints on ``nodes`` nodes
    of the address plan, any conditions (ready, serving+terminating, terminating, not ready)
    and the Service's ports resolved (named targetPorts get a number)."""
    fams = _check_families(families)
    if service is not None:
        fams = tuple(4 if f == "IPv4" else 6 for f in service.ip_families) or fams
    if not 1 <= nodes <= MAX_NODES:
        raise InvalidArgument(f"nodes must be in 1..{MAX_NODES}, got {nodes}")
    return _endpoint_slices(service, nodes, fams, max_endpoints)


@st.composite
def _clusters(
    draw: st.DrawFn,
    min_nodes: int,
    max_nodes: int,
    min_services: int,
    max_services: int,
    max_endpoints: int,
    max_ports: int,
    families: tuple[int, ...],
    proxy: st.SearchStrategy[ProxyConfig],
    host_network: bool = False,
) -> Cluster:
    n_nodes = draw(st.integers(min_nodes, max_nodes))
    zones = draw(st.booleans())
    plan = _Plan(families, n_nodes, zones)
    cfg = draw(proxy)
    svcs: list[Service] = []
    slices: list[EndpointSlice] = []
    pods: list[Pod] = []
    for k in range(draw(st.integers(min_services, max_services))):
        svc = _draw_service(draw, plan, k, max_ports)
        svc_slices, svc_pods = _draw_backends(draw, plan, svc, max_endpoints, host_network)
        svcs.append(svc)
        slices.extend(svc_slices)
        pods.extend(svc_pods)
    # pods that back no Service: ordinary clients on their node
    for i in range(n_nodes):
        if draw(st.booleans()):
            slot = plan.pod_slot(i)
            ips = tuple(_pod_ip(i, slot, f) for f in families)
            pods.append(api_pod("default", f"client-{i}", plan.nodes[i].name, ips, (("app", "client"),), ()))
    return Cluster(
        services=tuple(svcs),
        slices=tuple(slices),
        nodes=plan.nodes,
        pods=tuple(pods),
        proxy=cfg,
        name="<generated>",
    )


def clusters(
    min_nodes: int = 1,
    max_nodes: int = 3,
    max_services: int = 4,
    max_endpoints: int = 5,
    families: Sequence[int] = (4,),
    *,
    min_services: int = 0,
    max_ports: int = 3,
    proxy: st.SearchStrategy[ProxyConfig] | None = None,
    host_network: bool = False,
) -> st.SearchStrategy[Cluster]:
    """Consistent clusters: nodes ``node-0``..., Services ``svc-0``... with their
    EndpointSlices and Pods, and a KubeProxyConfiguration (``proxy``, default
    ``proxy_configs(families)``). ``families=(4, 6)`` makes a dual-stack cluster whose Services
    are IPv4, IPv6 or dual-stack (either order). ``host_network``: some Services are backed by
    hostNetwork Pods (endpoints at node addresses, as for a DaemonSet or the API server)."""
    fams = _check_families(families)
    if not 1 <= min_nodes <= max_nodes <= MAX_NODES:
        raise InvalidArgument(f"need 1 <= min_nodes <= max_nodes <= {MAX_NODES}")
    if not 0 <= min_services <= max_services:
        raise InvalidArgument("need 0 <= min_services <= max_services")
    if max_endpoints < 0 or max_services * max_endpoints + 1 > MAX_PODS_PER_NODE:
        raise InvalidArgument(
            f"max_services * max_endpoints must be at most {MAX_PODS_PER_NODE - 1} "
            "(all endpoints may land on one node's /24)"
        )
    if not 1 <= max_ports <= len(_PORT_NAMES):
        raise InvalidArgument(f"max_ports must be in 1..{len(_PORT_NAMES)}, got {max_ports}")
    return _clusters(
        min_nodes,
        max_nodes,
        min_services,
        max_services,
        max_endpoints,
        max_ports,
        fams,
        proxy if proxy is not None else proxy_configs(fams),
        host_network,
    )


def node_names(cluster: Cluster) -> st.SearchStrategy[str]:
    """The name of one of the cluster's nodes (the first is the simplest)."""
    if not cluster.nodes:
        raise InvalidArgument("the cluster has no nodes")
    return st.sampled_from([n.name for n in cluster.nodes])


def _of_family(texts: Sequence[str], family: int) -> list[str]:
    out = []
    for t in texts:
        try:
            if ipaddress.ip_address(t).version == family:
                out.append(t)
        except ValueError:
            continue
    return out


def _targets(cluster: Cluster, node: Node, family: int) -> list[tuple[str, int, str]]:
    """(dst ip, dst port, protocol) aimed at the cluster's addresses, then unrelated ones."""
    node_ips = _of_family(node.internal_ips, family)
    out: list[tuple[str, int, str]] = []
    unrelated: list[tuple[str, int, str]] = [(_UNRELATED[family], 80, "tcp")]
    for svc in cluster.services:
        cips = _of_family(svc.cluster_ips, family)
        if not cips:
            continue
        lbs = _of_family([i.ip for i in svc.lb_ingress if i.ip], family)  # Proxy-mode ones too
        for sp in svc.ports:
            proto = sp.protocol.lower()
            for ip in cips:
                out.append((ip, sp.port, proto))
            if sp.node_port:
                for ip in node_ips:
                    out.append((ip, sp.node_port, proto))
                if family == 4:
                    out.append(("127.0.0.1", sp.node_port, proto))
            for ip in _of_family(svc.external_ips, family) + lbs:
                out.append((ip, sp.port, proto))
            # the right address with the wrong port
            unrelated.append((cips[0], sp.port + 1, proto))
        if svc.health_check_node_port:
            for ip in node_ips:
                out.append((ip, svc.health_check_node_port, "tcp"))
    for sl in cluster.slices:
        if sl.address_type == _ADDRESS_TYPE[family] and sl.endpoints and sl.ports:
            # straight to an endpoint pod, no Service involved
            p = sl.ports[0]
            unrelated.append((sl.endpoints[0].addresses[0], p.port, p.protocol.lower()))
    for ip in node_ips[:1]:
        unrelated.append((ip, 22, "tcp"))
    for other in cluster.nodes:
        if other.name != node.name:
            unrelated.extend((ip, 80, "tcp") for ip in _of_family(other.internal_ips, family))
    return out + unrelated


def _sources(cluster: Cluster, node: Node, family: int) -> list[tuple[str, str]]:
    """(src ip, origin): outside clients, pods on this node (endpoints too: hairpin), pods and
    hosts elsewhere, and this host (its addresses, 127.0.0.1, an LB IP it holds)."""
    out: list[tuple[str, str]] = [(ip, "external") for ip in _OUTSIDE_CLIENTS[family]]
    here: list[str] = []
    elsewhere: list[str] = []
    host_ips = {ip for n in cluster.nodes for ip in n.internal_ips}
    for pod in cluster.pods:
        for ip in _of_family(pod.ips, family):
            if ip not in host_ips:  # a hostNetwork Pod sends as its node (below)
                (here if pod.node_name == node.name else elsewhere).append(ip)
    for sl in cluster.slices:  # endpoints without a Pod object in the cluster
        if sl.address_type != _ADDRESS_TYPE[family]:
            continue
        for ep in sl.endpoints:
            ip = ep.addresses[0]
            if ip not in here and ip not in elsewhere and ip not in host_ips:
                (here if ep.node_name == node.name else elsewhere).append(ip)
    out += [(ip, "pod") for ip in dict.fromkeys(here)]
    # a pod of this node that no object mentions
    for cidr in _of_family_nets(node.pod_cidrs, family):
        out.append((str(cidr.network_address + 250), "pod"))
    out += [(ip, "external") for ip in dict.fromkeys(elsewhere)]
    for other in cluster.nodes:
        if other.name != node.name:
            out += [(ip, "external") for ip in _of_family(other.internal_ips, family)]
    out += [(ip, "host") for ip in _of_family(node.internal_ips, family)]
    if family == 4:
        out.append(("127.0.0.1", "host"))
    for svc in cluster.services:
        for ip in _of_family([i.ip for i in svc.lb_ingress if i.ip], family)[:1]:
            out.append((ip, "host"))
    return out


def _of_family_nets(
    texts: Sequence[str], family: int
) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    out = []
    for t in texts:
        try:
            net = ipaddress.ip_network(t, strict=False)
        except ValueError:
            continue
        if net.version == family:
            out.append(net)
    return out


def packets(cluster: Cluster, node: str, family: int = 4) -> st.SearchStrategy[Packet]:
    """First packets of connections on ``node`` (IP ``family``), aimed at the cluster's
    addresses (ClusterIPs, NodePorts on node IPs and 127.0.0.1, healthCheckNodePorts,
    externalIPs, LB IPs) and at some unrelated addresses and ports, from every origin: outside
    clients, pods on this node (endpoints themselves: hairpin), pods and hosts elsewhere, and
    the host itself. Sometimes the protocol is not the Service port's."""
    if family not in (4, 6):
        raise InvalidArgument(f"family must be 4 or 6, got {family!r}")
    try:
        n = cluster.node(node)
    except KeyError:
        raise InvalidArgument(f"node {node!r} is not in the cluster") from None
    targets = _targets(cluster, n, family)
    sources = _sources(cluster, n, family)

    @st.composite
    def _packets(draw: st.DrawFn) -> Packet:
        dst, dport, proto = draw(st.sampled_from(targets))
        src, origin = draw(st.sampled_from(sources))
        proto = draw(st.sampled_from([proto] + [p for p in ("tcp", "udp", "sctp") if p != proto]))
        return Packet(
            src=src,
            dst=dst,
            dport=dport,
            sport=draw(st.integers(32768, 60999)),
            proto=proto,
            origin=origin,  # type: ignore[arg-type]
        )

    return _packets()


def sample_clusters(n: int, seed: int = 0, **kwargs: Any) -> list[Cluster]:
    """``n`` clusters drawn from ``clusters(**kwargs)`` (default ``min_services=1``),
    reproducibly for a given ``seed``, named ``random-<seed>-<i>`` (for ``verify --random``).

    Outside a test: runs a ``@given`` function with Hypothesis' ``seed`` decorator, generation
    phase only, so the clusters come from Hypothesis' own search distribution. Do not call it
    from inside a ``@given`` test (Hypothesis does not nest).
    """
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hypothesis_seed

    if n < 0:
        raise InvalidArgument(f"n must be >= 0, got {n}")
    if n == 0:
        return []
    kwargs.setdefault("min_services", 1)
    out: list[Cluster] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        derandomize=False,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(clusters(**kwargs))
    def collect(c: Cluster) -> None:
        if len(out) < n:
            out.append(attrs.evolve(c, name=f"random-{seed}-{len(out)}"))

    collect()
    return out
