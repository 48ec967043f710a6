"""The EndpointSlices the EndpointSlice controller would write for a selector Service.

Used only when a spec gives Pods but no slices for a Service, so small specs can be written
with Pods alone. It follows the controller (``k8s.io/endpointslice``):

* candidates: Pods in the Service's namespace whose labels contain the selector, not in a
  terminal phase (Succeeded/Failed), with an IP of the slice's family (``kube.selection``);
* conditions: serving = pod Ready; terminating = deletionTimestamp set; ready = serving and not
  terminating, or true when the Service sets publishNotReadyAddresses;
* ports: one per Service port, named after it, numbered by ``targetPort`` (a number as is,
  a name through the container port of that name and protocol, sidecars included:
  ``selection.resolve_target_port``); a Pod without such a container port simply has no entry
  for that Service port;
* one slice per address family and distinct port set; a Service whose selector matches no
  Pod gets one empty placeholder slice per family, as the controller writes.
"""

from __future__ import annotations

from collections.abc import Iterable

from nat_verify.kube.fields import ip_family
from nat_verify.kube.selection import is_endpoint_candidate, resolve_target_port, selects
from nat_verify.model.cluster import Endpoint, EndpointPort, EndpointSlice, Node, Pod, Service


def synthesise_slices(
    svc: Service, pods: Iterable[Pod], nodes: Iterable[Node]
) -> tuple[EndpointSlice, ...]:
    assert svc.selector is not None
    publish_not_ready = svc.publish_not_ready_addresses
    zones = {n.name: n.zone for n in nodes}
    selected = [
        p
        for p in pods
        if p.namespace == svc.namespace and is_endpoint_candidate(p) and selects(svc.selector, p.labels)
    ]
    families = svc.ip_families or _pod_families(selected)
    out: list[EndpointSlice] = []
    for family in families:
        groups: dict[tuple[EndpointPort, ...], list[Endpoint]] = {}
        for pod in selected:
            address = next((a for a in pod.ips if ip_family(a) == family), None)
            if address is None:
                continue
            serving = pod.ready
            groups.setdefault(_ports(svc, pod), []).append(
                Endpoint(
                    addresses=(address,),
                    ready=publish_not_ready or (serving and not pod.terminating),
                    serving=serving,
                    terminating=pod.terminating,
                    node_name=pod.node_name,
                    zone=zones.get(pod.node_name, ""),
                    target_pod=f"{pod.namespace}/{pod.name}",
                )
            )
        if not groups:
            groups[()] = []  # the placeholder slice
        base = f"{svc.name}-synth-{family.lower()}"
        for index, (ports, endpoints) in enumerate(groups.items()):
            out.append(
                EndpointSlice(
                    namespace=svc.namespace,
                    name=base if index == 0 else f"{base}-{index}",
                    service_name=svc.name,
                    address_type=family,
                    endpoints=tuple(endpoints),
                    ports=ports,
                    # Findings about a synthesised slice point at the Service that caused it.
                    source=svc.source,
                    origin="synthesised",
                )
            )
    return tuple(out)


def _ports(svc: Service, pod: Pod) -> tuple[EndpointPort, ...]:
    out = []
    for sp in svc.ports:
        number = resolve_target_port(pod.ports, sp).number
        if number is not None:
            out.append(EndpointPort(port=number, protocol=sp.protocol, name=sp.name))
    return tuple(out)


def _pod_families(pods: list[Pod]) -> tuple[str, ...]:
    # A Service without ipFamilies (not yet allocated in a hand-written spec): the families the
    # pods have, IPv4 first; IPv4 alone when no pod has an IP.
    found = {ip_family(a) for p in pods for a in p.ips}
    return tuple(f for f in ("IPv4", "IPv6") if f in found) or ("IPv4",)
