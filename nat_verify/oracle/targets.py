"""Packets worth sending to the kernel for a dump, when the user gives none.

``nat-verify oracle DUMP`` without ``--packets`` probes packets aimed at what the dump itself
names: every exact ``-d`` address with the ``--dport``/``--dports`` of its rule (ClusterIPs,
external IPs, LB IPs), every NodePort of ``KUBE-NODEPORTS`` on each node address (and on
127.0.0.1 from the host), sometimes with a port no rule names. Each is sent from every kind of
origin: an external client, a pod of this node (an endpoint, for hairpin, and one that is
not), a pod of another node, the host. Seeded, so a run can be repeated.
"""

from __future__ import annotations

import ipaddress
import random
from collections.abc import Iterator

from nat_verify.model.cluster import IPAddress
from nat_verify.model.packet import Packet
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.ruleset import Rule, Ruleset
from nat_verify.oracle.bridge import EXTERNAL_CLIENT, dnat_targets

__all__ = ["Aim", "aims", "packets_for_ruleset", "sources_for"]

Aim = tuple[IPAddress, int, str]  # destination, port, protocol
_PROTOS = ("tcp", "udp", "sctp")
_SPOOFED_CLIENT = "198.51.100.7"  # an external source the client namespace does not own


def _ports(rule: Rule) -> list[int]:
    out: list[int] = []
    for m in rule.matches:
        for o in m.options:
            if o.negated or o.name not in ("--dport", "--dports", "--destination-port"):
                continue
            for part in o.value.replace(" ", "").split(","):
                lo, _, hi = part.partition(":")
                if lo.isdigit():
                    out.append(int(lo))
                if hi.isdigit():
                    out.append(int(hi))
    return [p for p in out if 0 < p < 65536]


def _proto(rule: Rule) -> str | None:
    p = rule.core_option("-p")
    if p is None or p.negated:
        return None
    v = p.value.lower()
    return v if v in _PROTOS else None


def _exact(text: str) -> list[IPAddress]:
    out: list[IPAddress] = []
    for part in text.split(","):
        try:
            net = ipaddress.ip_network(part, strict=False)
        except ValueError:
            continue
        if net.prefixlen == net.max_prefixlen:
            out.append(net.network_address)
    return out


def aims(ruleset: Ruleset, ctx: NodeContext) -> list[Aim]:
    """Every (destination, port, protocol) the dump aims at, in dump order, without repeats."""
    out: list[Aim] = []

    def add(a: Aim) -> None:
        if a not in out:
            out.append(a)

    node_ips = [a for a in ctx.addresses if a.version == ruleset.family]
    loopback = ipaddress.ip_address("::1" if ruleset.family == 6 else "127.0.0.1")
    for t in ruleset.tables:
        for c in t.chains:
            for r in c.rules:
                proto = _proto(r)
                ports = _ports(r)
                d = r.core_option("-d")
                if d is not None and not d.negated:
                    for addr in _exact(d.value):
                        for port in ports or [80]:
                            add((addr, port, proto or "tcp"))
                if c.name == "KUBE-NODEPORTS" and ports and t.name == "nat":
                    for port in ports:
                        for addr in node_ips:
                            add((addr, port, proto or "tcp"))
                        if ruleset.family == 4:
                            add((loopback, port, proto or "tcp"))
    return [a for a in out if a[0].version == ruleset.family]


def sources_for(ruleset: Ruleset, ctx: NodeContext) -> list[tuple[IPAddress, str]]:
    """(source, origin) pairs covering every origin: an external client (one the sandbox owns,
    one it spoofs), the endpoints on this node (hairpin) and one more pod of this node, the
    endpoints on other nodes (arriving from off the node), the host."""
    out: list[tuple[IPAddress, str]] = []
    if ruleset.family == 4:
        out.append((ipaddress.ip_address(EXTERNAL_CLIENT), "external"))
        out.append((ipaddress.ip_address(_SPOOFED_CLIENT), "external"))
    targets = [a for a in dnat_targets(ruleset) if a.version == ruleset.family]
    local = [n for n in ctx.local_pod_cidrs if n.version == ruleset.family]
    node_local = set(ctx.addresses)
    for a in targets:
        if a in node_local:
            continue
        out.append((a, "pod" if any(a in n for n in local) else "external"))
    for net in local:
        gateway = ctx.pod_gateway(net)
        for k in range(2, min(net.num_addresses - 1, 260)):
            cand = net.network_address + k
            if cand != gateway and cand not in targets:
                out.append((cand, "pod"))
                break
    hosts = [a for a in ctx.addresses if a.version == ruleset.family]
    if hosts:
        out.append((hosts[0], "host"))
    return out


def packets_for_ruleset(ruleset: Ruleset, ctx: NodeContext, n: int, seed: int = 0) -> list[Packet]:
    """``n`` random packets aimed at the dump's addresses, from every origin (see the module
    docstring). Pod-to-loopback and external-to-loopback packets are left out: they never
    reach the node, so they test nothing."""
    return list(_generate(ruleset, ctx, n, random.Random(seed)))


def _generate(ruleset: Ruleset, ctx: NodeContext, n: int, rng: random.Random) -> Iterator[Packet]:
    targets = aims(ruleset, ctx)
    sources = sources_for(ruleset, ctx)
    if not targets or not sources:
        return
    loopback = ctx.loopback
    made = 0
    attempts = 0
    while made < n and attempts < n * 50:
        attempts += 1
        dst, port, proto = rng.choice(targets)
        src, origin = rng.choice(sources)
        if dst in loopback:
            if origin != "host":
                continue
            src = dst  # only the host reaches its own loopback; it sends from it too
        if rng.random() < 0.1:
            port = rng.randrange(1, 65536)  # a port no rule names
        made += 1
        yield Packet(
            src=src,
            dst=dst,
            dport=port,
            sport=rng.randrange(1024, 65536),
            proto=proto,
            origin=origin,  # type: ignore[arg-type]
        )
