"""What an address, ``IP:PORT`` or ``namespace/service`` is, from the cluster's own objects.

A person debugging Service networking first asks what the thing they were given is: a Pod's IP
(which Pod, on which node), a Service's ClusterIP, externalIP or LoadBalancer IP, a node's
address, a NodePort. A ClusterIP is worth saying twice: no Pod, node or interface has it; it
exists only in the rules, which rewrite packets sent to it.
"""

from __future__ import annotations

import ipaddress

import attrs

from nat_verify.model.cluster import Cluster, Service
from nat_verify.model.packet import parse_endpoint


class TargetError(ValueError):
    """A TARGET that is neither an address nor a Service of the cluster."""


@attrs.frozen
class Identity:
    target: str
    services: tuple[Service, ...]  # the Services the target is (an address or port of)
    ip: str = ""  # the address asked about ("" for a Service name)
    port: int = 0  # the port asked about (0: any)
    node: str = ""  # the node the target lives on (a Pod's, or the node an address belongs to)
    what: tuple[str, ...] = ()  # one sentence per thing the target is


def _canon(text: str) -> str:
    return str(ipaddress.ip_address(text))


def _same(a: str, b: str) -> bool:
    try:
        return _canon(a) == _canon(b)
    except ValueError:
        return False


def _ports(svc: Service, port: int, attr: str) -> str:
    ports = [p for p in svc.ports if not port or getattr(p, attr) == port]
    return ", ".join(f"{p.name or 'port'} {getattr(p, attr)}/{p.protocol}" for p in ports)


def identify(cluster: Cluster, target: str) -> Identity:
    """Parse TARGET and say everything the cluster's objects make of it."""
    if "/" in target and ":" not in target.split("/", 1)[0]:
        namespace, _, name = target.partition("/")
        svc = next((s for s in cluster.services if s.namespace == namespace and s.name == name), None)
        if svc is None:
            known = ", ".join(s.key for s in cluster.services) or "none"
            raise TargetError(f"no Service {target!r} in the cluster (Services: {known})")
        return Identity(target, (svc,), what=(f"{svc.key} is a Service of type {svc.type} ({svc.location()}).",))
    try:
        if target.startswith("[") or target.count(":") == 1:
            addr, port = parse_endpoint(target)
        else:
            addr, port = ipaddress.ip_address(target), 0
    except ValueError:
        raise TargetError(
            f"expected an address, IP:PORT or namespace/service, received {target!r}"
        ) from None
    ip = str(addr)
    what: list[str] = []
    services: list[Service] = []
    node = ""
    owned = False  # a Pod or a node has the address
    for pod in cluster.pods:
        if any(_same(ip, a) for a in pod.ips):
            where = f"on node {pod.node_name}" if pod.node_name else "not scheduled on a node"
            kind = "hostNetwork Pod" if pod.host_network else "Pod"
            what.append(f"{ip} is the IP of {kind} {pod.key} {where} ({pod.location()}).")
            node = node or pod.node_name
            owned = True
    for n in cluster.nodes:
        if any(_same(ip, a) for a in n.internal_ips):
            what.append(f"{ip} is an address of node {n.name}.")
            node = node or n.name
            owned = True
            for svc in cluster.services:
                if any(p.node_port and (not port or p.node_port == port) for p in svc.ports):
                    what.append(
                        f"{ip}:{port or '*'}: NodePort of {svc.key} ({_ports(svc, port, 'node_port')}), "
                        "open on every node's addresses, not only this one."
                    )
                    services.append(svc)
    for svc in cluster.services:
        matches = [
            ("ClusterIP", [a for a in svc.cluster_ips if a != "None"]),
            ("externalIP", list(svc.external_ips)),
            ("LoadBalancer IP", [i.ip for i in svc.lb_ingress if i.ip]),
        ]
        for label, addrs in matches:
            if any(_same(ip, a) for a in addrs):
                ports = _ports(svc, port, "port")
                what.append(f"{ip} is the {label} of Service {svc.key} ({ports or 'no such port'}).")
                if svc not in services:
                    services.append(svc)
                if label == "ClusterIP" and not owned:
                    what.append(
                        f"No Pod, node or interface has {ip}: it exists only in the node's netfilter "
                        "rules, which kube-proxy writes and the kernel applies to each new connection "
                        "(DNAT to an endpoint)."
                    )
    if not what:
        what.append(f"{ip} is not an address of any Pod, node or Service of the cluster.")
    return Identity(target, tuple(services), ip, port, node, tuple(what))
