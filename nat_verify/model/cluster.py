"""The Kubernetes objects nat-verify reasons about, as frozen values.

Only the fields that decide Service networking are kept. Defaults are already applied
(the loader in ``nat_verify.kube`` does what the API server would do), so the compiler and
the intent never have to guess: ``ServicePort.target_port`` is always set, protocols are
upper case as in the API (``TCP``, ``UDP``, ``SCTP``), traffic policies are ``Cluster`` or
``Local``.

Every object carries a ``SourceRef`` so a finding can point at ``file:line``, and objects read
from YAML also carry ``Lines`` (the line of each field that a finding may name, such as
``spec.selector`` or ``spec.ports[0].targetPort``); ``lines`` never takes part in equality.
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

    def at(self, line: int) -> str:
        """``file:line`` of another line of the same file (the object's own line when 0)."""
        return str(SourceRef(self.file, line or self.line))


@attrs.frozen
class Lines:
    """The 1-based line of each field of one object that was read, by path.

    Paths are written as in ``kubectl explain``: ``spec.selector``, ``spec.ports[0].targetPort``,
    ``spec.template.metadata.labels``. ``get`` takes several paths and answers the first one
    known, so a caller can ask for the most precise field and fall back to its parent.
    """

    by_path: tuple[tuple[str, int], ...] = ()

    def get(self, *paths: str) -> int:
        table = dict(self.by_path)
        for path in paths:
            if table.get(path):
                return table[path]
        return 0


def _no_lines() -> Lines:
    return Lines()


class Located:
    """``location(path, ...)``: ``file:line`` of a field, for objects with ``source`` and ``lines``."""

    __slots__ = ()
    source: SourceRef
    lines: Lines

    def location(self, *paths: str) -> str:
        return self.source.at(self.lines.get(*paths))


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
class Service(Located):
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
    # EndpointSlice controller input only (not read by kube-proxy): not-ready Pods listed as ready
    publish_not_ready_addresses: bool = False
    lines: Lines = attrs.field(factory=_no_lines, eq=False, repr=False)

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
    line: int = attrs.field(default=0, eq=False, repr=False)  # where the endpoint was read


SliceOrigin = Literal["given", "synthesised", "mirrored"]


@attrs.frozen
class EndpointSlice(Located):
    namespace: str
    name: str
    service_name: str  # label kubernetes.io/service-name
    address_type: str  # IPv4 | IPv6 | FQDN
    endpoints: tuple[Endpoint, ...]
    ports: tuple[EndpointPort, ...] = ()
    source: SourceRef = SourceRef()
    managed_by: str = ""  # label endpointslice.kubernetes.io/managed-by
    # given: read from the input; synthesised: from Pods (kube.synthesis); mirrored: from v1
    # Endpoints (kube.endpoints). Only given slices can disagree with the Pods.
    origin: SliceOrigin = attrs.field(default="given", eq=False)
    lines: Lines = attrs.field(factory=_no_lines, eq=False, repr=False)


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
    line: int = attrs.field(default=0, eq=False, repr=False)


@attrs.frozen
class Container:
    """A container of a Pod or Pod template: what serves a Service's targetPort."""

    name: str
    image: str = ""
    ports: tuple[ContainerPort, ...] = ()
    sidecar: bool = False  # an init container with restartPolicy Always (its ports count)
    readiness_probe: bool = False


@attrs.frozen
class ContainerState:
    """``status.containerStatuses[]`` of a Pod, reduced to what explains readiness."""

    name: str
    ready: bool
    state: str = ""  # running | waiting | terminated | "" (unknown)
    reason: str = ""  # CrashLoopBackOff, ImagePullBackOff, Error, ...
    message: str = ""
    restarts: int = 0
    exit_code: int | None = None
    init: bool = False


@attrs.frozen
class Condition:
    """A Pod condition (``PodScheduled``, ``Initialized``, ``ContainersReady``, ``Ready``, gates)."""

    type: str
    status: str  # True | False | Unknown
    reason: str = ""
    message: str = ""
    line: int = attrs.field(default=0, eq=False, repr=False)


@attrs.frozen
class OwnerRef:
    """The controlling owner of an object (``ownerReferences`` entry with ``controller: true``)."""

    kind: str
    name: str


@attrs.frozen
class Pod(Located):
    namespace: str
    name: str
    node_name: str = ""
    ips: tuple[str, ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    # every container port a named targetPort may resolve to (containers and sidecars), in order
    ports: tuple[ContainerPort, ...] = ()
    host_network: bool = False
    ready: bool = True  # the Pod's Ready condition
    terminating: bool = False  # metadata.deletionTimestamp is set
    source: SourceRef = SourceRef()
    phase: str = "Running"
    containers: tuple[Container, ...] = ()
    conditions: tuple[Condition, ...] = ()
    container_states: tuple[ContainerState, ...] = ()
    readiness_gates: tuple[str, ...] = ()
    owner: OwnerRef | None = None
    hostname: str = ""
    subdomain: str = ""
    status_reason: str = ""  # status.reason, e.g. Evicted
    status_message: str = ""
    has_status: bool = True  # False for a Pod from a manifest (no status: never scheduled)
    lines: Lines = attrs.field(factory=_no_lines, eq=False, repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@attrs.frozen
class Requirement:
    """One ``matchExpressions`` entry of a label selector."""

    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: tuple[str, ...] = ()


@attrs.frozen
class LabelSelector:
    """A workload's ``spec.selector`` (``matchLabels`` and ``matchExpressions``)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[Requirement, ...] = ()


@attrs.frozen
class Workload(Located):
    """A controller with a Pod template: Deployment, StatefulSet, DaemonSet, ReplicaSet,
    ReplicationController. Its template's labels and container ports are what its Pods get."""

    kind: str
    namespace: str
    name: str
    selector: LabelSelector = LabelSelector()
    labels: tuple[tuple[str, str], ...] = ()  # spec.template.metadata.labels
    containers: tuple[Container, ...] = ()
    replicas: int | None = None  # None: not given (DaemonSets have none)
    owner: OwnerRef | None = None  # a ReplicaSet's Deployment
    source: SourceRef = SourceRef()
    lines: Lines = attrs.field(factory=_no_lines, eq=False, repr=False)

    @property
    def key(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    @property
    def ports(self) -> tuple[ContainerPort, ...]:
        return tuple(p for c in self.containers for p in c.ports)


@attrs.frozen
class EndpointAddress:
    """One address of a v1 Endpoints subset."""

    ip: str
    ready: bool  # listed under addresses (True) or notReadyAddresses (False)
    node_name: str = ""
    hostname: str = ""
    target_pod: str = ""  # "ns/name" from targetRef, if any
    line: int = attrs.field(default=0, eq=False, repr=False)


@attrs.frozen
class EndpointsSubset:
    addresses: tuple[EndpointAddress, ...] = ()
    ports: tuple[EndpointPort, ...] = ()


@attrs.frozen
class LegacyEndpoints(Located):
    """A v1 ``Endpoints`` object (one per Service, named after it)."""

    namespace: str
    name: str
    subsets: tuple[EndpointsSubset, ...] = ()
    skip_mirror: bool = False  # label endpointslice.kubernetes.io/skip-mirror: "true"
    truncated: bool = False  # annotation endpoints.kubernetes.io/over-capacity: truncated (> 1000)
    source: SourceRef = SourceRef()
    lines: Lines = attrs.field(factory=_no_lines, eq=False, repr=False)


@attrs.frozen
class LoadNote:
    """Something the loader decided that a reader of the result should know."""

    invariant: str  # the invariant the note concerns
    service: str  # "ns/name" or ""
    message: str
    location: str = ""


@attrs.frozen
class SkippedKind:
    """Objects of a kind nat-verify does not read, skipped (never an error)."""

    kind: str
    api_version: str
    count: int
    first: SourceRef = SourceRef()
    hint: str = ""  # a kind it may be a misspelling of


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
    kube_proxy_version: str = ""  # "1.24": the layout of that release (kubeproxy.eras); "" = from legacy_layout / newest
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
    workloads: tuple[Workload, ...] = ()
    legacy_endpoints: tuple[LegacyEndpoints, ...] = ()
    notes: tuple[LoadNote, ...] = attrs.field(default=(), eq=False)
    skipped: tuple[SkippedKind, ...] = attrs.field(default=(), eq=False)

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def slices_for(self, svc: Service) -> tuple[EndpointSlice, ...]:
        return tuple(
            s for s in self.slices if s.namespace == svc.namespace and s.service_name == svc.name
        )
