"""Which Pods a Service selects and why, and what kube-proxy reads: one call, ``selection``.

It puts together what ``nat_verify.kube.selection`` works out (the selector, the Pods it
matches with their readiness, the near misses when something is off by a label, and each
targetPort resolved to a container port) with the EndpointSlices of the Service, which are what
kube-proxy actually reads.
"""

from __future__ import annotations

from typing import Any

from nat_verify.kube import selection as sel
from nat_verify.model.cluster import Cluster, Service


def selection(cluster: Cluster, svc: Service) -> dict[str, Any]:
    """The selector, selected Pods, near misses and EndpointSlices of ``svc``, as JSON values."""
    pods = []
    for pod in sel.selected_pods(cluster, svc):
        ready = sel.readiness(pod)
        ports = []
        for sp in svc.ports:
            res = sel.resolve_target_port(pod.ports, sp)
            ports.append({
                "service_port": f"{sp.name or sp.port} {sp.port}/{sp.protocol}",
                "target_port": str(sp.target_port),
                "resolved": res.number,
                "container_port": res.declared.name if res.declared is not None and res.declared.name else "",
                "reason": res.reason,
            })  # fmt: skip
        pods.append({
            "pod": pod.key, "ip": pod.ips[0] if pod.ips else "", "node": pod.node_name,
            "ready": ready.ready, "readiness": ready.describe(), "endpoint": sel.is_endpoint_candidate(pod),
            "workload": sel.workload_of(cluster, pod), "location": pod.location(), "ports": ports,
        })  # fmt: skip
    near = [] if pods or svc.selector is None else [m.describe() for m in sel.near_misses(cluster, svc)]
    slices = []
    for s in cluster.slices_for(svc):
        slices.append({
            "name": s.name, "origin": s.origin, "location": s.location(), "address_type": s.address_type,
            "ports": [f"{p.name or '-'} {p.port}/{p.protocol}" for p in s.ports],
            "endpoints": [
                {"address": e.addresses[0] if e.addresses else "", "node": e.node_name, "ready": e.ready,
                 "serving": e.serving, "terminating": e.terminating}
                for e in s.endpoints
            ],
        })  # fmt: skip
    return {
        "selector": dict(svc.selector) if svc.selector is not None else None,
        "pods": pods,
        "near_misses": near,
        "slices": slices,
    }
