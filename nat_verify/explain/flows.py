"""What happens to a packet to a Service, from a pod, from the node and from outside.

Every flow is a real trace: a packet built for the origin is run through the node's rules by the
interpreter (``nat_verify.netfilter.interpreter``), and each outcome it reports is drawn as the
whiteboard flow of ``nat_verify.report.flow`` (hook, chains, DNAT, routing, POSTROUTING). Nothing
here describes kube-proxy a second time: the chains, the endpoints, their probabilities and
whether the source is masqueraded are what the rules do.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

from nat_verify.intent import Destination, destinations, interesting_sources
from nat_verify.model.cluster import Cluster, Service
from nat_verify.model.outcome import Outcome, Trace
from nat_verify.model.packet import Packet
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.report.flow import Hop, flow

ORIGINS = ("pod", "host", "external")
ORIGIN_WORDS = {"pod": "from a pod on the node", "host": "from the node itself", "external": "from outside the cluster"}
CLASS_WORDS = {
    "cluster-ip": "ClusterIP",
    "node-port": "NodePort",
    "localhost-node-port": "localhost NodePort",
    "external-ip": "externalIP",
    "lb-ip": "LoadBalancer IP",
}


def _source(cluster: Cluster, node: str, dest: Destination, origin: str) -> str | None:
    for ip, o in interesting_sources(cluster, node, dest):
        if o == origin:
            return ip
    return None


def hop_json(h: Hop) -> dict[str, Any]:
    d: dict[str, Any] = {"kind": h.kind, "label": h.label}
    if h.edge:
        d["edge"] = h.edge
    if h.note:
        d["note"] = h.note
    if h.fired:
        d["rules"] = [
            {"rule": f.step.rule, "line": f.step.line, "chain": f.step.chain, "text": f.text} for f in h.fired
        ]
    return d


def trace_doc(packet: Packet, o: Outcome, lines: Sequence[str]) -> dict[str, Any]:
    """One outcome in the shape ``report.flow.flow`` draws (a finding's fields, severity note)."""
    rules = [lines[s.line - 1].rstrip("\r\n") if 0 < s.line <= len(lines) else "" for s in o.path]
    out = o.to_json()
    path, nums = out.pop("path"), out.pop("lines")
    return {
        "severity": "note",
        "counterexample": packet.to_json(),
        "path": path,
        "lines": nums,
        "targets": [s.target for s in o.path],
        "rules": rules,
        "outcome": out,
    }


def _endpoint(cluster: Cluster, o: Outcome) -> dict[str, str] | None:
    if not o.dnat:
        return None
    for pod in cluster.pods:
        if any(ipaddress.ip_address(a) == o.dst for a in pod.ips if _is_ip(a)):
            return {"pod": pod.key, "node": pod.node_name}
    for s in cluster.slices:
        for e in s.endpoints:
            if any(_is_ip(a) and ipaddress.ip_address(a) == o.dst for a in e.addresses):
                return {"pod": "", "node": e.node_name}
    return {"pod": "", "node": ""}


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def client_ip(packet: Packet, o: Outcome) -> str:
    """What the endpoint sees as the client: the packet's own source, or the node's."""
    if o.verdict not in ("accept", "forward"):
        return ""
    if (o.masquerade or o.snat) and o.src == packet.src:
        return f"masqueraded, but the source already is the node's: the endpoint sees {o.src}"
    if o.masquerade or o.snat:
        return f"masqueraded: the endpoint sees {o.src}, not {packet.src}"
    if o.src == packet.src:
        return f"client IP kept: the endpoint sees {packet.src}"
    return f"source rewritten to {o.src}"


def service_flows(
    cluster: Cluster, node: str, interp: Interpreter, lines: Sequence[str], services: Sequence[Service],
    *, ip: str = "", port: int = 0,
) -> list[dict[str, Any]]:  # fmt: skip
    """Every address of ``services`` on ``node`` (only ``ip``/``port`` when given) from each origin."""
    keys = {s.key for s in services}
    out = []
    for dest in destinations(cluster, node, interp.ctx.family):
        if dest.service.split(":", 1)[0] not in keys:
            continue
        if ip and ipaddress.ip_address(dest.ip) != ipaddress.ip_address(ip):
            continue
        if port and dest.port != port:
            continue
        for origin in ORIGINS:
            if dest.address_class == "localhost-node-port" and origin != "host":
                continue
            src = _source(cluster, node, dest, origin)
            if src is None:
                continue
            packet = Packet(
                src=ipaddress.ip_address(src), dst=ipaddress.ip_address(dest.ip), dport=dest.port,
                sport=40000, proto=dest.proto, origin=origin,  # type: ignore[arg-type]
            )  # fmt: skip
            out.append(_flow(cluster, dest, packet, interp.trace(packet), lines))
    return out


def _flow(cluster: Cluster, dest: Destination, packet: Packet, tr: Trace, lines: Sequence[str]) -> dict[str, Any]:
    outcomes = []
    for o in tr.outcomes:
        doc = trace_doc(packet, o, lines)
        outcomes.append({
            **doc["outcome"],
            "endpoint": _endpoint(cluster, o),
            "client": client_ip(packet, o),
            "hops": [hop_json(h) for h in flow(doc)],
            "trace": doc,
        })  # fmt: skip
    return {
        "service": dest.service,
        "class": dest.address_class,
        "address": f"{dest.ip}:{dest.port}" if ":" not in dest.ip else f"[{dest.ip}]:{dest.port}",
        "proto": dest.proto,
        "origin": packet.origin,
        "packet": packet.to_json(),
        "outcomes": outcomes,
    }
