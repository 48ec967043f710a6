"""Node (v1) -> ``model.Node``: addresses kube-proxy treats as the node's IPs, pod CIDRs."""

from __future__ import annotations

from nat_verify.kube.documents import RawObject
from nat_verify.kube.meta import read_meta
from nat_verify.model.cluster import Node


def read_node(obj: RawObject) -> Node:
    meta = read_meta(obj, "Node", namespaced=False)
    f = meta.fields
    spec = f.mapping_or_empty("spec")
    status = f.mapping_or_empty("status")
    internal: list[str] = []
    external: list[str] = []
    for a in status.items("addresses"):
        kind = a.text("type", required=True)
        if kind in ("InternalIP", "ExternalIP"):
            addr = a.ip("address", a.text("address", required=True))
            (internal if kind == "InternalIP" else external).append(addr)
    cidrs = spec.strings("podCIDRs")
    if cidrs:
        pod_cidrs = tuple(spec.cidr("podCIDRs", v, line=ln) for v, ln in cidrs)
    elif spec.text("podCIDR"):
        pod_cidrs = (spec.cidr("podCIDR", spec.text("podCIDR")),)
    else:
        pod_cidrs = ()
    return Node(
        name=meta.name,
        # InternalIP first: kube-proxy's node IP detection prefers it over ExternalIP.
        internal_ips=tuple(internal + external),
        pod_cidrs=pod_cidrs,
        labels=tuple(sorted(meta.labels.items())),
        source=meta.source,
    )
