"""EndpointSlice (discovery.k8s.io/v1) -> ``model.EndpointSlice``.

Conditions are defaulted as the API documents them for consumers: ``ready`` unset means
ready, ``serving`` unset defers to ``ready``, ``terminating`` unset means not terminating.
"""

from __future__ import annotations

from nat_verify.kube.documents import RawObject
from nat_verify.kube.fields import Fields, ip_family
from nat_verify.kube.meta import read_meta
from nat_verify.kube.service import PROTOCOLS
from nat_verify.model.cluster import Endpoint, EndpointPort, EndpointSlice, Lines

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
CONTROLLER = "endpointslice-controller.k8s.io"
ADDRESS_TYPES = ("IPv4", "IPv6", "FQDN")


def read_endpointslice(obj: RawObject) -> EndpointSlice:
    meta = read_meta(obj, "EndpointSlice")
    f = meta.fields
    service_name = meta.labels.get(SERVICE_NAME_LABEL, "")
    if not service_name:
        f.fail(
            None,
            f"must carry the label {SERVICE_NAME_LABEL!r} naming its Service "
            f"(got labels {meta.labels or {}})",
            line=obj.line,
        )
    if not f.has("addressType"):
        f.fail("addressType", "is required (IPv4, IPv6 or FQDN)")
    address_type = f.choice("addressType", ADDRESS_TYPES, "IPv4")
    lines = [*meta.lines]
    for key in ("addressType", "endpoints", "ports"):
        if f.has(key):
            lines.append((f.field(key), f.line(key)))
    lines.extend((p.path, p.line()) for p in f.items("ports"))
    return EndpointSlice(
        namespace=meta.namespace,
        name=meta.name,
        service_name=service_name,
        address_type=address_type,
        endpoints=tuple(_endpoint(e, address_type) for e in f.items("endpoints")),
        ports=tuple(p for p in (_port(p) for p in f.items("ports")) if p is not None),
        source=meta.source,
        managed_by=meta.labels.get(MANAGED_BY_LABEL, ""),
        lines=Lines(tuple(lines)),
    )


def _endpoint(e: Fields, address_type: str) -> Endpoint:
    listed = e.strings("addresses")
    if not listed:
        e.fail("addresses", "must list at least one address")
    addresses = []
    for value, line in listed:
        if address_type == "FQDN":
            addresses.append(value)
            continue
        addr = e.ip("addresses", value, line=line, sloppy=True)
        if ip_family(addr) != address_type:
            e.expect(
                "addresses",
                f"an {address_type} address (the slice's addressType)",
                value,
                line=line,
            )
        addresses.append(addr)
    cond = e.mapping_or_empty("conditions")
    ready = cond.boolean("ready", True)
    hints = e.mapping("hints")
    zones: tuple[str, ...] | None = None
    if hints is not None and hints.has("forZones"):
        zones = tuple(z.text("name", required=True) for z in hints.items("forZones"))
    ref = e.mapping("targetRef")
    target = ""
    if ref is not None and ref.text("kind", "Pod") == "Pod" and ref.has("name"):
        target = f"{ref.text('namespace')}/{ref.text('name')}"
    return Endpoint(
        addresses=tuple(addresses),
        ready=ready,
        serving=cond.boolean("serving", ready),
        terminating=cond.boolean("terminating", False),
        node_name=e.text("nodeName"),
        zone=e.text("zone"),
        hint_zones=zones,
        target_pod=target,
        line=e.line(),
    )


def _port(p: Fields) -> EndpointPort | None:
    # A port entry without a number means "all ports" to the API; kube-proxy skips it.
    if not p.has("port"):
        return None
    return EndpointPort(
        port=p.port("port"),
        protocol=p.choice("protocol", PROTOCOLS, "TCP"),  # type: ignore[arg-type]
        name=p.text("name"),
    )
