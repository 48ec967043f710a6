"""Lookup tables over one Cluster value, built once and reused by every intent function.

A Cluster holds flat tuples; answering "which slices belong to this Service" by scanning them
makes a sweep over all Services quadratic (10,000 Services x 10,000 slices). The index is keyed
by the identity of the (immutable) Cluster and dropped when the Cluster is garbage-collected,
so callers keep passing plain values. Memo tables hold results of pure functions of the
Cluster, so caching them cannot change an answer.
"""

from __future__ import annotations

import functools
import ipaddress
import weakref
from typing import Any

import attrs

from nat_verify.model.cluster import Cluster, EndpointSlice, IPAddress, Node, Pod, Service


@attrs.define
class ClusterIndex:
    services: dict[str, Service]
    slices: dict[tuple[str, str], tuple[EndpointSlice, ...]]
    nodes: dict[str, Node]
    pods_by_node: dict[str, tuple[Pod, ...]]
    memo: dict[tuple[Any, ...], Any] = attrs.field(factory=dict)

    @classmethod
    def build(cls, cluster: Cluster) -> ClusterIndex:
        services: dict[str, Service] = {}
        for svc in cluster.services:
            services.setdefault(svc.key, svc)  # the first definition wins, as in a List
        slices: dict[tuple[str, str], list[EndpointSlice]] = {}
        for es in cluster.slices:
            slices.setdefault((es.namespace, es.service_name), []).append(es)
        nodes: dict[str, Node] = {}
        for n in cluster.nodes:
            nodes.setdefault(n.name, n)
        pods: dict[str, list[Pod]] = {}
        for p in cluster.pods:
            pods.setdefault(p.node_name, []).append(p)
        return cls(
            services=services,
            slices={k: tuple(v) for k, v in slices.items()},
            nodes=nodes,
            pods_by_node={k: tuple(v) for k, v in pods.items()},
        )

    def slices_for(self, svc: Service) -> tuple[EndpointSlice, ...]:
        return self.slices.get((svc.namespace, svc.name), ())


_CACHE: dict[int, tuple[weakref.ref[Cluster], ClusterIndex]] = {}


def index(cluster: Cluster) -> ClusterIndex:
    """The index of ``cluster``, built on first use."""
    key = id(cluster)
    hit = _CACHE.get(key)
    if hit is not None and hit[0]() is cluster:
        return hit[1]
    idx = ClusterIndex.build(cluster)

    def _drop(_ref: weakref.ref[Cluster], key: int = key) -> None:
        _CACHE.pop(key, None)

    _CACHE[key] = (weakref.ref(cluster, _drop), idx)
    return idx


@functools.lru_cache(maxsize=1 << 16)
def parse_ip(text: str) -> IPAddress:
    """``ipaddress.ip_address`` of the stripped text, cached: the same endpoint and node addresses
    are parsed for every destination and source of a sweep. Raises ValueError like the original.
    """
    return ipaddress.ip_address(text.strip())
