"""v1 Endpoints -> ``model.LegacyEndpoints``, and the EndpointSlices they stand for.

kube-proxy reads EndpointSlices only. v1 Endpoints still matter in two ways:

* For a Service **without a selector**, the EndpointSlice mirroring controller copies the
  Endpoints someone wrote into EndpointSlices (unless the Endpoints carry the label
  ``endpointslice.kubernetes.io/skip-mirror: "true"``): one endpoint per address, ``ready`` true
  for ``addresses`` and false for ``notReadyAddresses`` (``serving`` and ``terminating`` unset,
  which consumers read as serving = ready, not terminating), with the subset's ports, ``nodeName``
  and ``targetRef`` as written.
* For a Service **with a selector**, the Endpoints controller writes Endpoints from the same Pods
  the EndpointSlice controller reads, so ``kubectl get endpoints`` output can stand in for slices
  that were not exported (the same conversion is used).

``slices_from_endpoints`` is used only when the input has no EndpointSlice for the Service; the
slices it makes have ``origin="mirrored"`` and point at the Endpoints' lines.
"""

from __future__ import annotations

from nat_verify.kube.documents import RawObject
from nat_verify.kube.fields import Fields, ip_family
from nat_verify.kube.meta import read_meta
from nat_verify.kube.service import PROTOCOLS
from nat_verify.model.cluster import (
    Endpoint,
    EndpointAddress,
    EndpointPort,
    EndpointSlice,
    EndpointsSubset,
    LegacyEndpoints,
    Lines,
)

SKIP_MIRROR_LABEL = "endpointslice.kubernetes.io/skip-mirror"
OVER_CAPACITY_ANNOTATION = "endpoints.kubernetes.io/over-capacity"


def read_endpoints(obj: RawObject) -> LegacyEndpoints:
    meta = read_meta(obj, "Endpoints")
    f = meta.fields
    subsets = tuple(_subset(s) for s in f.items("subsets"))
    lines = [*meta.lines]
    if f.has("subsets"):
        lines.append((f.field("subsets"), f.line("subsets")))
    return LegacyEndpoints(
        namespace=meta.namespace,
        name=meta.name,
        subsets=subsets,
        skip_mirror=meta.labels.get(SKIP_MIRROR_LABEL) == "true",
        truncated=meta.annotations.get(OVER_CAPACITY_ANNOTATION) == "truncated",
        source=meta.source,
        lines=Lines(tuple(lines)),
    )


def _subset(s: Fields) -> EndpointsSubset:
    addresses = [_address(a, True) for a in s.items("addresses")]
    addresses += [_address(a, False) for a in s.items("notReadyAddresses")]
    ports = tuple(
        EndpointPort(
            port=p.port("port", required=True),
            protocol=p.choice("protocol", PROTOCOLS, "TCP"),  # type: ignore[arg-type]
            name=p.text("name"),
        )
        for p in s.items("ports")
    )
    return EndpointsSubset(tuple(addresses), ports)


def _address(a: Fields, ready: bool) -> EndpointAddress:
    ref = a.mapping("targetRef")
    target = ""
    if ref is not None and ref.text("kind", "Pod") == "Pod" and ref.has("name"):
        target = f"{ref.text('namespace')}/{ref.text('name')}"
    return EndpointAddress(
        ip=a.ip("ip", a.text("ip", required=True)),
        ready=ready,
        node_name=a.text("nodeName"),
        hostname=a.text("hostname"),
        target_pod=target,
        line=a.line(),
    )


def slices_from_endpoints(ep: LegacyEndpoints) -> tuple[EndpointSlice, ...]:
    """The EndpointSlices the Endpoints stand for: one per subset and address family."""
    out: list[EndpointSlice] = []
    for index, subset in enumerate(ep.subsets):
        for family in ("IPv4", "IPv6"):
            endpoints = tuple(
                Endpoint(
                    addresses=(a.ip,),
                    ready=a.ready,
                    serving=a.ready,
                    terminating=False,
                    node_name=a.node_name,
                    target_pod=a.target_pod,
                    line=a.line,
                )
                for a in subset.addresses
                if ip_family(a.ip) == family
            )
            if not endpoints:
                continue
            out.append(
                EndpointSlice(
                    namespace=ep.namespace,
                    name=f"{ep.name}-endpoints-{index}-{family.lower()}",
                    service_name=ep.name,
                    address_type=family,
                    endpoints=endpoints,
                    ports=subset.ports,
                    source=ep.source,
                    origin="mirrored",
                    lines=ep.lines,
                )
            )
    return tuple(out)
