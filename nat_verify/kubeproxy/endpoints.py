"""Which endpoints kube-proxy uses for a service port (``pkg/proxy/topology.go``).

Two steps, as upstream: ``endpoint_index`` turns the EndpointSlices of one family into a
sorted endpoint list per service port (the ``EndpointsMap``), and ``categorize`` splits one
list into the Cluster set, the Local set, the union that gets SEP chains, and
``has_endpoints`` (``CategorizeEndpoints``).
"""

from __future__ import annotations

from typing import NamedTuple

import attrs

from nat_verify.kubeproxy.addresses import canonical_ip
from nat_verify.kubeproxy.errors import CompileError
from nat_verify.kubeproxy.serviceports import ServicePortInfo
from nat_verify.model.cluster import Cluster

# (namespace, service name, port name, protocol upper case)
PortKey = tuple[str, str, str, str]


class EndpointInfo(NamedTuple):
    """One endpoint of one service port (a NamedTuple: 100k of them are built per compile)."""

    ip: str
    port: int
    endpoint: str  # "ip:port" / "[ip6]:port": sort key, comment text, DNAT target, hash input
    is_local: bool
    ready: bool
    serving: bool
    terminating: bool
    zone_hints: tuple[str, ...] | None = None


@attrs.frozen
class Selection:
    cluster: tuple[EndpointInfo, ...]
    local: tuple[EndpointInfo, ...]
    reachable: tuple[EndpointInfo, ...]  # endpoints that get a KUBE-SEP chain
    has_endpoints: bool


def endpoint_index(cluster: Cluster, node: str, family: int) -> dict[PortKey, list[EndpointInfo]]:
    """Endpoints per service port, deduplicated by ``ip:port`` and sorted by that string.

    Only slices of this family's address type count; only the first address of an endpoint
    is used; the endpoint port is the slice port whose name and protocol equal the service
    port's (that is how a named targetPort is resolved). A duplicate ``ip:port`` keeps the
    local copy, as kube-proxy's EndpointSliceCache does.
    """
    address_type = "IPv4" if family == 4 else "IPv6"
    merged: dict[PortKey, dict[str, EndpointInfo]] = {}
    for sl in cluster.slices:
        if sl.address_type != address_type:
            continue
        # (bucket, ":port" suffix, port) per slice port, computed once per slice
        targets = [
            (merged.setdefault((sl.namespace, sl.service_name, p.name, p.protocol), {}), p.port)
            for p in sl.ports
            if p.port
        ]
        if not targets:
            continue
        for ep in sl.endpoints:
            if not ep.addresses:
                continue
            parsed = canonical_ip(ep.addresses[0])
            if parsed is None:
                raise CompileError(
                    f"EndpointSlice {sl.namespace}/{sl.name}: {ep.addresses[0]!r} is not an IP address",
                    sl.source,
                )
            ip, version = parsed
            if version != family:
                continue
            is_local = bool(ep.node_name) and ep.node_name == node
            host = f"[{ip}]" if family == 6 else ip
            for bucket, port in targets:
                text = f"{host}:{port}"
                if not is_local and text in bucket:
                    continue
                bucket[text] = EndpointInfo(
                    ip, port, text, is_local, ep.ready, ep.serving, ep.terminating, ep.hint_zones
                )
    return {key: [b[k] for k in sorted(b)] for key, b in merged.items()}


def _use_zone_hints(endpoints: list[EndpointInfo], zone: str) -> bool:
    # Hints are used only if every ready endpoint has some and one is for this node's zone.
    if not zone:
        return False
    found = False
    for ep in endpoints:
        if not ep.ready:
            continue
        if not ep.zone_hints:
            return False
        if zone in ep.zone_hints:
            found = True
    return found


def categorize(
    endpoints: list[EndpointInfo],
    sp: ServicePortInfo,
    zone: str = "",
    terminating_fallback: bool = True,
) -> Selection:
    """``CategorizeEndpoints``: the Cluster and Local sets for one service port.

    Cluster = ready endpoints (restricted by zone hints when usable), else, with the
    terminating fallback, serving+terminating ones cluster-wide. Local = local ready
    endpoints, else local serving+terminating ones. Order is kept (already sorted).
    """
    cluster: list[EndpointInfo] = []
    local: list[EndpointInfo] = []
    has_endpoints = False
    use_topology = False
    if sp.uses_cluster_endpoints:
        use_topology = _use_zone_hints(endpoints, zone)
        cluster = [
            ep
            for ep in endpoints
            if ep.ready and (not use_topology or zone in (ep.zone_hints or ()))
        ]
        if not cluster and terminating_fallback:
            cluster = [ep for ep in endpoints if ep.serving and ep.terminating]
        has_endpoints = bool(cluster)
    if not sp.uses_local_endpoints:
        return Selection(tuple(cluster), (), tuple(cluster), has_endpoints)

    local_ready = local_terminating = False
    for ep in endpoints:
        if ep.ready:
            has_endpoints = True
            local_ready = local_ready or ep.is_local
        elif ep.serving and ep.terminating and terminating_fallback:
            has_endpoints = True
            local_terminating = local_terminating or ep.is_local
    uses_terminating = False
    if local_ready:
        local = [ep for ep in endpoints if ep.is_local and ep.ready]
    elif local_terminating:
        uses_terminating = True
        local = [ep for ep in endpoints if ep.is_local and ep.serving and ep.terminating]
    if not sp.uses_cluster_endpoints:
        return Selection((), tuple(local), tuple(local), has_endpoints)
    if not use_topology and not uses_terminating:
        # local (ready) is then a subset of cluster (every ready endpoint)
        return Selection(tuple(cluster), tuple(local), tuple(cluster), has_endpoints)
    union = {ep.endpoint: ep for ep in cluster}
    union.update((ep.endpoint, ep) for ep in local)
    return Selection(
        tuple(cluster), tuple(local), tuple(union[k] for k in sorted(union)), has_endpoints
    )
