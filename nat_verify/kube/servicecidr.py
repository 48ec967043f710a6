"""ServiceCIDR (networking.k8s.io/v1) -> the ranges ClusterIPs are allocated from.

kube-proxy's nftables mode reads them to drop traffic to unallocated ClusterIPs; the API server
creates one (``kubernetes``) from ``--service-cluster-ip-range``.
"""

from __future__ import annotations

from nat_verify.kube.documents import RawObject
from nat_verify.kube.meta import read_meta


def read_service_cidr(obj: RawObject) -> tuple[str, tuple[str, ...]]:
    """(name, CIDRs) of one ServiceCIDR; at most one CIDR per IP family, as the API allows."""
    meta = read_meta(obj, "ServiceCIDR", namespaced=False)
    spec = meta.fields.mapping_or_empty("spec")
    listed = spec.strings("cidrs")
    cidrs = tuple(spec.cidr("cidrs", v, line=ln) for v, ln in listed)
    if not cidrs:
        spec.expect("cidrs", "one or two CIDRs", "nothing")
    if len(cidrs) > 2 or (len(cidrs) == 2 and (":" in cidrs[0]) == (":" in cidrs[1])):
        spec.expect("cidrs", "at most one CIDR per IP family", list(cidrs))
    return meta.name, cidrs
