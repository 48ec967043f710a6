"""Service (v1) -> ``model.Service``, with the API server's defaults and validation."""

from __future__ import annotations

from nat_verify.kube.documents import RawObject
from nat_verify.kube.fields import Fields, ip_family, is_port_name
from nat_verify.kube.meta import read_meta
from nat_verify.model.cluster import Lines, LoadBalancerIngress, Service, ServicePort

PROTOCOLS = ("TCP", "UDP", "SCTP")
TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")
POLICIES = ("Cluster", "Local")
# kube-proxy falls back to this annotation when spec.loadBalancerSourceRanges is empty.
SOURCE_RANGES_ANNOTATION = "service.beta.kubernetes.io/load-balancer-source-ranges"
MAX_AFFINITY_TIMEOUT = 86400


def read_service(obj: RawObject) -> Service:
    meta = read_meta(obj, "Service")
    f = meta.fields
    spec = f.mapping_or_empty("spec")
    svc_type = spec.choice("type", TYPES, "ClusterIP")

    cluster_ips = _cluster_ips(spec)
    headless = cluster_ips == ("None",)
    selector = spec.string_map("selector")
    ports = tuple(_port(p, svc_type) for p in spec.items("ports"))
    _check_ports(spec, ports, svc_type, headless, selector)

    families = _families(spec, cluster_ips)
    external = _external_accessible(svc_type, spec)
    etp = spec.choice("externalTrafficPolicy", POLICIES, "Cluster")
    if spec.has("externalTrafficPolicy") and not external:
        spec.fail(
            "externalTrafficPolicy",
            "may only be set on NodePort or LoadBalancer Services or ones with externalIPs "
            f"(type is {svc_type})",
        )
    itp = spec.choice("internalTrafficPolicy", POLICIES, "Cluster")
    affinity = spec.choice("sessionAffinity", ("None", "ClientIP"), "None")
    timeout = 10800
    cfg = spec.mapping("sessionAffinityConfig")
    client_ip = cfg.mapping("clientIP") if cfg is not None else None
    if client_ip is not None:
        timeout = client_ip.integer("timeoutSeconds", 10800, lo=1, hi=MAX_AFFINITY_TIMEOUT)
    hc_port = spec.integer("healthCheckNodePort", 0, lo=1, hi=65535)
    if hc_port and not (svc_type == "LoadBalancer" and etp == "Local"):
        spec.fail(
            "healthCheckNodePort",
            "may only be set on LoadBalancer Services with externalTrafficPolicy Local",
        )

    svc = Service(
        namespace=meta.namespace,
        name=meta.name,
        ports=ports,
        type=svc_type,
        cluster_ips=cluster_ips,
        # An empty selector selects nothing for the EndpointSlice controller: selector-less.
        selector=tuple(sorted(selector.items())) if selector else None,
        external_ips=tuple(
            spec.ip("externalIPs", v, line=ln, sloppy=True) for v, ln in spec.strings("externalIPs")
        ),
        lb_ingress=_ingress(f) if svc_type == "LoadBalancer" else (),
        lb_source_ranges=_source_ranges(spec, meta.annotations, meta.fields),
        external_traffic_policy=etp,  # type: ignore[arg-type]
        internal_traffic_policy=itp,  # type: ignore[arg-type]
        session_affinity=affinity,
        affinity_timeout=timeout,
        health_check_node_port=hc_port,
        ip_families=families,
        source=meta.source,
        publish_not_ready_addresses=spec.boolean("publishNotReadyAddresses", False),
        lines=_lines(meta.lines, spec),
    )
    return svc


def _lines(meta_lines: tuple[tuple[str, int], ...], spec: Fields) -> Lines:
    """The lines a finding about the Service may name: its selector (each key) and ports."""
    out = [*meta_lines]
    for key in ("selector", "ports", "publishNotReadyAddresses"):
        if spec.has(key):
            out.append((spec.field(key), spec.line(key)))
    sel = spec.mapping("selector")
    if sel is not None:
        out.extend((sel.field(str(k)), sel.line(str(k))) for k in sel.data)
    for item in spec.items("ports"):
        out.append((item.path, item.line()))
        out.extend((item.field(k), item.line(k)) for k in ("port", "targetPort", "protocol", "name") if item.has(k))
    return Lines(tuple(out))


def _cluster_ips(spec: Fields) -> tuple[str, ...]:
    listed = spec.strings("clusterIPs")
    single = spec.text("clusterIP")
    values = [v for v, _ in listed] or ([single] if single else [])
    lines = [ln for _, ln in listed] or [spec.line("clusterIP")] * len(values)
    if listed and single and single != listed[0][0]:
        spec.fail("clusterIP", f"must equal clusterIPs[0] ({listed[0][0]!r}) (got {single!r})")
    if "None" in values:
        if values != ["None"]:
            spec.expect("clusterIPs", "['None'] alone for a headless Service", values)
        return ("None",)
    key = "clusterIPs" if listed else "clusterIP"
    out = tuple(spec.ip(key, v, line=ln, sloppy=True) for v, ln in zip(values, lines, strict=True))
    if len(out) > 2 or (len(out) == 2 and ip_family(out[0]) == ip_family(out[1])):
        spec.expect(key, "at most one address per IP family", list(values))
    return out


def _families(spec: Fields, cluster_ips: tuple[str, ...]) -> tuple[str, ...]:
    given = spec.strings("ipFamilies")
    derived = tuple(ip_family(a) for a in cluster_ips if a != "None")
    if not given:
        return derived
    families = tuple(v for v, _ in given)
    for value, line in given:
        if value not in ("IPv4", "IPv6"):
            spec.expect("ipFamilies", "IPv4 or IPv6", value, line=line)
    if len(set(families)) != len(families):
        spec.expect("ipFamilies", "distinct families", list(families))
    if derived and families[: len(derived)] != derived:
        spec.fail(
            "ipFamilies",
            f"must match the families of clusterIPs {list(derived)} (got {list(families)})",
        )
    return families


def _port(p: Fields, svc_type: str) -> ServicePort:
    port = p.port("port", required=True)
    target: int | str
    raw_target = p.data.get("targetPort")
    if raw_target is None:
        target = port  # the API server defaults targetPort to port
    elif isinstance(raw_target, int) and not isinstance(raw_target, bool):
        target = p.port("targetPort")
    elif isinstance(raw_target, str):
        if not is_port_name(raw_target):
            p.expect(
                "targetPort",
                "a port number 1..65535 or a port name (1-15 of a-z, 0-9, '-', with a letter)",
                raw_target,
            )
        target = raw_target
    else:
        p.expect("targetPort", "a port number or a port name", raw_target)
    node_port = p.integer("nodePort", 0, lo=1, hi=65535)
    if node_port and svc_type not in ("NodePort", "LoadBalancer"):
        p.fail(
            "nodePort", f"may only be set on NodePort or LoadBalancer Services (type is {svc_type})"
        )
    return ServicePort(
        port=port,
        protocol=p.choice("protocol", PROTOCOLS, "TCP"),  # type: ignore[arg-type]
        name=p.text("name"),
        target_port=target,
        node_port=node_port,
    )


def _check_ports(
    spec: Fields,
    ports: tuple[ServicePort, ...],
    svc_type: str,
    headless: bool,
    selector: dict[str, str] | None,
) -> None:
    if not ports and svc_type != "ExternalName" and not (headless and not selector):
        spec.fail(
            "ports",
            "must list at least one port (only ExternalName and selector-less "
            "headless Services may have none)",
        )
    seen: set[tuple[int, str]] = set()
    names: set[str] = set()
    for sp, item in zip(ports, spec.items("ports"), strict=True):
        line = item.line()
        if len(ports) > 1 and not sp.name:
            item.fail("name", "is required when a Service has more than one port", line=line)
        if sp.name in names:
            item.fail("name", f"must be unique among the ports (got {sp.name!r} twice)")
        if (sp.port, sp.protocol) in seen:
            item.fail(None, f"duplicates port {sp.port}/{sp.protocol}", line=line)
        names.add(sp.name)
        seen.add((sp.port, sp.protocol))


def _external_accessible(svc_type: str, spec: Fields) -> bool:
    return svc_type in ("NodePort", "LoadBalancer") or (
        svc_type == "ClusterIP" and bool(spec.strings("externalIPs"))
    )


def _ingress(f: Fields) -> tuple[LoadBalancerIngress, ...]:
    status = f.mapping("status")
    lb = status.mapping("loadBalancer") if status is not None else None
    if lb is None:
        return ()
    out = []
    for ing in lb.items("ingress"):
        ip = ing.text("ip")
        out.append(
            LoadBalancerIngress(
                ip=ing.ip("ip", ip, sloppy=True) if ip else "",
                hostname=ing.text("hostname"),
                ip_mode=ing.choice("ipMode", ("", "VIP", "Proxy"), ""),
            )
        )
    return tuple(out)


def _source_ranges(spec: Fields, annotations: dict[str, str], f: Fields) -> tuple[str, ...]:
    listed = spec.strings("loadBalancerSourceRanges")
    if listed:
        return tuple(spec.cidr("loadBalancerSourceRanges", v, line=ln, sloppy=True) for v, ln in listed)
    raw = annotations.get(SOURCE_RANGES_ANNOTATION, "")
    parts = [p for p in (s.strip() for s in raw.split(",")) if p]
    md = f.mapping_or_empty("metadata").mapping_or_empty("annotations")
    return tuple(md.cidr(SOURCE_RANGES_ANNOTATION, p, sloppy=True) for p in parts)
