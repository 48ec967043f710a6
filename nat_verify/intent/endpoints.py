"""Which endpoints a Service port may use, from EndpointSlice conditions.

Sources (Kubernetes documentation and KEPs, not kube-proxy's code):

* EndpointSlice docs, "Conditions": ``ready`` endpoints receive traffic; ``serving`` is the
  readiness of a terminating endpoint; ``terminating`` marks deletion. "Only the first address
  is used" is the documented contract for ``addresses`` ("consumers ... may choose to only use
  the first element", issue 106267).
* KEP-1669 (ProxyTerminatingEndpoints, GA 1.28): when a Service has no ready endpoints, traffic
  goes to endpoints that are serving and terminating, never to not-serving ones. The fallback is
  applied separately to the cluster-wide set and to the node-local set.
* "Service Traffic Policy" / KEP-2086: ``Local`` means only endpoints on the same node
  (EndpointSlice ``nodeName``).
* "Topology Aware Routing": hints restrict the cluster-wide set to endpoints hinted for the
  node's zone when every ready endpoint carries hints and one is hinted for that zone; hints
  never touch the node-local set that ``internalTrafficPolicy: Local`` uses, but an iTP=Local
  Service's external addresses (eTP=Cluster) still use the narrowed cluster-wide set.
* Ports: the EndpointSlice port whose ``name`` and ``protocol`` equal the Service port's is the
  resolved ``targetPort`` (a named targetPort resolves per Pod, so the slice carries the number).
"""

from __future__ import annotations

import attrs

from nat_verify.intent.index import index, parse_ip
from nat_verify.model.cluster import Cluster, Service, ServicePort

EndpointKey = tuple[str, int]  # (ip, port)


@attrs.frozen
class EndpointInfo:
    """One endpoint (ip, port) of a Service port, conditions merged over duplicate copies."""

    ip: str
    port: int
    ready: bool
    serving: bool
    terminating: bool
    local: bool  # EndpointSlice nodeName is this node
    hint_zones: tuple[str, ...] | None

    @property
    def key(self) -> EndpointKey:
        return (self.ip, self.port)


@attrs.frozen
class EndpointSets:
    """The endpoints a Service port may use on one node, and why."""

    all: tuple[EndpointInfo, ...]  # every endpoint of the family, usable or not
    cluster: frozenset[EndpointKey]  # for Cluster traffic policy
    local: frozenset[EndpointKey]  # for Local traffic policy
    cluster_terminating: bool  # the cluster set is the KEP-1669 fallback
    local_terminating: bool  # the local set is the KEP-1669 fallback
    hints_used: bool
    notes: tuple[str, ...] = ()
    local_keys: frozenset[EndpointKey] = frozenset()  # every endpoint on this node, usable or not

    @property
    def any_usable(self) -> bool:
        return bool(self.cluster or self.local)

    def is_local(self, key: EndpointKey) -> bool:
        return key in self.local_keys


def _family_of(address_type: str) -> int:
    return {"IPv4": 4, "IPv6": 6}.get(address_type, 0)


def endpoint_infos(
    cluster: Cluster, node: str, svc: Service, sp: ServicePort, family: int
) -> tuple[EndpointInfo, ...]:
    """All endpoints of one Service port for ``family``, deduplicated by (ip, port).

    The same (ip, port) may appear in several slices (during slice churn); the copies are
    merged generously (ready/serving if any copy says so, terminating only if all do, local if
    any copy names this node), so intent never forbids an endpoint some slice offers.
    """
    merged: dict[EndpointKey, EndpointInfo] = {}
    for es in index(cluster).slices_for(svc):
        if _family_of(es.address_type) != family:
            continue
        ports = [p.port for p in es.ports if p.name == sp.name and p.protocol == sp.protocol]
        if not ports or not ports[0]:
            continue  # the slice does not carry this Service port
        port = ports[0]
        for ep in es.endpoints:
            if not ep.addresses:
                continue
            try:
                addr = parse_ip(ep.addresses[0].strip())
            except ValueError:
                continue
            if addr.version != family:
                continue
            info = EndpointInfo(
                ip=str(addr),
                port=port,
                ready=ep.ready,
                serving=ep.serving,
                terminating=ep.terminating,
                local=ep.node_name == node and node != "",
                hint_zones=ep.hint_zones,
            )
            old = merged.get(info.key)
            if old is not None:
                info = EndpointInfo(
                    ip=info.ip,
                    port=info.port,
                    ready=old.ready or info.ready,
                    serving=old.serving or info.serving,
                    terminating=old.terminating and info.terminating,
                    local=old.local or info.local,
                    hint_zones=old.hint_zones if old.hint_zones is not None else info.hint_zones,
                )
            merged[info.key] = info
    return tuple(merged[k] for k in sorted(merged))


def usable_endpoints(
    cluster: Cluster, node: str, svc: Service, sp: ServicePort, family: int
) -> EndpointSets:
    """The cluster-wide and node-local endpoint sets of a Service port on ``node``."""
    memo = index(cluster).memo
    key = ("usable", svc.key, sp.name, sp.protocol, node, family)
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = _usable(cluster, node, svc, sp, family)
    assert isinstance(hit, EndpointSets)
    return hit


def _usable(
    cluster: Cluster, node: str, svc: Service, sp: ServicePort, family: int
) -> EndpointSets:
    infos = endpoint_infos(cluster, node, svc, sp, family)
    fallback = cluster.proxy.terminating_fallback
    notes: list[str] = []

    ready = [e for e in infos if e.ready]
    hinted = _hint_filter(cluster, node, svc, ready)
    hints_used = hinted is not None
    if hinted is not None:
        ready = hinted
        notes.append("topology hints restrict the cluster endpoints to this node's zone")
    cluster_set = frozenset(e.key for e in ready)
    cluster_term = False
    if not cluster_set and fallback:
        cluster_set = frozenset(e.key for e in infos if e.serving and e.terminating)
        cluster_term = bool(cluster_set)
        if cluster_term:
            notes.append(
                "no ready endpoint anywhere: serving terminating endpoints are used (KEP-1669)"
            )

    local_set = frozenset(e.key for e in infos if e.local and e.ready)
    local_term = False
    if not local_set and fallback:
        local_set = frozenset(e.key for e in infos if e.local and e.serving and e.terminating)
        local_term = bool(local_set)
        if local_term:
            notes.append(
                "no ready endpoint on this node: its serving terminating endpoints are used"
                " (KEP-1669)"
            )
    return EndpointSets(
        all=infos,
        cluster=cluster_set,
        local=local_set,
        cluster_terminating=cluster_term,
        local_terminating=local_term,
        hints_used=hints_used,
        notes=tuple(notes),
        local_keys=frozenset(e.key for e in infos if e.local),
    )


def _hint_filter(
    cluster: Cluster, node: str, svc: Service, ready: list[EndpointInfo]
) -> list[EndpointInfo] | None:
    """Ready endpoints hinted for this node's zone, or None when hints do not apply."""
    # hints never touch the node-local set (which internalTrafficPolicy=Local uses); the
    # cluster-wide set that an iTP=Local Service still uses for its external addresses is
    # narrowed like any other's (kube-proxy pkg/proxy/topology.go CategorizeEndpoints)
    if not ready:
        return None
    n = index(cluster).nodes.get(node)
    zone = n.zone if n is not None else ""
    if not zone or any(not e.hint_zones for e in ready):
        return None
    chosen = [e for e in ready if e.hint_zones and zone in e.hint_zones]
    return chosen or None
