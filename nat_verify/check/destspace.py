"""Every class of destination (address, port, protocol) that rulesets can tell apart.

Why the classes cover every packet
----------------------------------
*Addresses.* Rules, routes and the node's context look at a destination address only through
membership in a CIDR: the ``-d`` of a rule, a node address (``addrtype LOCAL``), a route, the pod
networks, loopback. Two addresses inside exactly the same set of those CIDRs (the same
*signature*) are told apart by nothing, so one address per signature stands for all; the gaps
between a dump's ten thousand ClusterIPs are one class, not ten thousand. The special ranges a
packet never has as its destination (``0.0.0.0/8``, multicast, broadcast) are constants too, so
they are classes of their own and are left out.

*Ports.* For one destination address class, a destination port is compared only by rules a
packet to that address can reach: from every built-in chain (the INPUT hooks only for a LOCAL
address: a packet is delivered to the node only then), through rules whose ``-d``, ``-p`` and
``addrtype --dst-type LOCAL`` do not exclude it. Those rules' port constants cut the
ports into intervals, one port per interval. A packet that is DNATed with an explicit port
reaches later hooks with that port, whatever it came with, so rules reached only after such a
DNAT cannot tell original ports apart either. Where a rule rewrites the address and keeps the
port (DNAT or REDIRECT without a port), or compares the original destination port after NAT
(conntrack ``--ctorigdstport``), every port constant of the rulesets counts, as before.

Reaching a rule is judged over-approximately (a rule whose match cannot be read is reachable),
so a class is never merged with one a rule tells apart; at worst there are more classes.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator, Sequence

import attrs

from nat_verify.model.cluster import IPAddress, IPNetwork
from nat_verify.netfilter.constants import (
    DST_PORT_OPTIONS,
    networks,
    parse_network,
    port_boundaries,
)
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.ruleset import BUILTIN_CHAINS, Rule, Ruleset

PROTOS = ("tcp", "udp", "sctp")
SPECIAL = {4: ("0.0.0.0/8", "224.0.0.0/4", "255.255.255.255/32"), 6: ("::/128", "ff00::/8")}
ORIGINAL_PORT_OPTIONS = frozenset({"--ctorigdstport", "--ctrepldstport", "--ctorigsrcport", "--ctreplsrcport"})


@attrs.frozen
class _Chains:
    """One ruleset's chains, indexed so a walk for one address reads only rules that can see it."""

    rules: dict[tuple[str, str], tuple[Rule, ...]]
    by_host: dict[tuple[str, str], dict[int, list[int]]]  # a plain single-address -d
    local_only: dict[tuple[str, str], list[int]]  # no -d, needs addrtype --dst-type LOCAL
    rest: dict[tuple[str, str], list[int]]

    @classmethod
    def of(cls, rs: Ruleset) -> _Chains:
        rules, by_host, local_only, rest = {}, {}, {}, {}
        for t in rs.tables:
            for c in t.chains:
                key = (t.name, c.name)
                rules[key] = c.rules
                hosts: dict[int, list[int]] = {}
                loc: list[int] = []
                other: list[int] = []
                for i, r in enumerate(c.rules):
                    d = r.core_option("-d")
                    host = _host(d.value) if d is not None and not d.negated else None
                    if host is not None:
                        hosts.setdefault(host, []).append(i)
                    elif d is None and _dst_type_local(r) is True:
                        loc.append(i)
                    else:
                        other.append(i)
                by_host[key], local_only[key], rest[key] = hosts, loc, other
        return cls(rules, by_host, local_only, rest)


def _host(text: str) -> int | None:
    if "," in text:
        return None
    try:
        n = parse_network(text)
    except ValueError:
        return None
    return int(n.network_address) if n.num_addresses == 1 else None


def _dst_type_local(rule: Rule) -> bool | None:
    """True: the rule needs a LOCAL destination; False: a non-LOCAL one; None: no such test
    that can be read (no addrtype, or one with other options)."""
    for m in rule.matches:
        if m.module != "addrtype":
            continue
        if len(m.options) != 1 or m.options[0].name != "--dst-type" or m.options[0].value != "LOCAL":
            return None
        return not m.options[0].negated
    return None


def _may_see(rule: Rule, dst: IPAddress, proto: str, local: bool) -> bool:
    d = rule.core_option("-d")
    if d is not None:
        inside = any(n.version == dst.version and dst in n for n in networks(d.value))
        if inside == d.negated:
            return False
    p = rule.core_option("-p")
    if p is not None and not p.negated and p.value.lower() not in (proto, "all", "0"):
        return False
    for m in rule.matches:
        if m.module in PROTOS and m.module != proto:
            return False
    want = _dst_type_local(rule)
    return want is None or want == local


def _keeps_port(rule: Rule) -> bool:
    """A rule that rewrites the destination address but keeps the port."""
    t = rule.target
    if t.name == "REDIRECT":
        return t.get("--to-ports") is None
    if t.name == "DNAT":
        o = t.get("--to-destination")
        if o is None:
            return True
        text = o.value
        has_port = "]:" in text if text.startswith("[") else text.count(":") == 1
        return not has_port
    return False


def _ports_seen(chains: _Chains, dst: IPAddress, proto: str, local: bool) -> tuple[list[int], bool]:
    """Port boundaries of every rule a packet to ``dst`` can reach, and whether one of them
    rewrites the address and keeps the port."""
    ports: list[int] = []
    keeps = False
    seen: set[tuple[str, str]] = set()
    # INPUT sees only packets delivered here: to a LOCAL address, or DNATed to one (with an
    # explicit port; a DNAT that keeps the port makes every port count, see ``keeps``)
    todo = [
        (t, c) for t, cs in BUILTIN_CHAINS.items() for c in cs if (t, c) in chains.rules and (local or c != "INPUT")
    ]
    ip = int(dst)
    while todo:
        key = todo.pop()
        if key in seen:
            continue
        seen.add(key)
        rules = chains.rules[key]
        picked = [*chains.by_host[key].get(ip, ()), *chains.rest[key], *(chains.local_only[key] if local else ())]
        for i in sorted(picked):
            r = rules[i]
            if not _may_see(r, dst, proto, local):
                continue
            ports += port_boundaries(r, DST_PORT_OPTIONS)
            keeps = keeps or _keeps_port(r)
            nxt = (key[0], r.target.name)
            if nxt in chains.rules and nxt not in seen:
                todo.append(nxt)
    return ports, keeps


def _all_rules(rs: Ruleset) -> Iterator[Rule]:
    for t in rs.tables:
        for c in t.chains:
            yield from c.rules


def _representatives(bounds: list[int], top: int) -> list[int]:
    edges = sorted({0, top, *[b for b in bounds if 0 <= b <= top]})
    return [lo if hi - lo <= 2 else lo + 1 for lo, hi in zip(edges, edges[1:], strict=False)]


def address_classes(rulesets: Sequence[Ruleset], ctx: NodeContext) -> list[IPAddress]:
    """One destination address per signature (see the module docstring), special ranges left out."""
    fam = ctx.family
    consts: set[IPNetwork] = {*ctx.pod_cidrs, *ctx.local_pod_cidrs, ctx.loopback}
    consts.update(ipaddress.ip_network(a) for a in ctx.addresses)
    consts.update(r.dst for r in ctx.routes)
    special = {ipaddress.ip_network(s) for s in SPECIAL[fam]}
    consts |= special
    for rs in rulesets:
        for r in _all_rules(rs):
            d = r.core_option("-d")
            if d is not None:
                consts.update(n for n in networks(d.value) if n.version == fam)
    consts = {n for n in consts if n.version == fam}
    events: list[tuple[int, int, IPNetwork]] = []  # (position, 0 = leave / 1 = enter, network)
    for n in consts:
        events.append((int(n.network_address), 1, n))
        events.append((int(n.broadcast_address) + 1, 0, n))
    events.sort(key=lambda e: (e[0], e[1]))
    top = 1 << (32 if fam == 4 else 128)
    to_ip = ipaddress.IPv4Address if fam == 4 else ipaddress.IPv6Address
    active: set[IPNetwork] = set()
    seen: set[frozenset[IPNetwork]] = set()
    out: list[IPAddress] = []
    pos, k = 0, 0
    while pos < top:
        while k < len(events) and events[k][0] == pos:
            _, enter, n = events[k]
            (active.add if enter else active.discard)(n)
            k += 1
        nxt = events[k][0] if k < len(events) else top
        sig = frozenset(active)
        if sig not in seen and not (sig & special):
            seen.add(sig)
            out.append(to_ip(pos if nxt - pos <= 2 else pos + 1))
        pos = nxt
    return out


def destination_classes(rulesets: Sequence[Ruleset], ctx: NodeContext) -> Iterator[tuple[IPAddress, int, str]]:
    """(address, port, protocol), one per class of destinations the rulesets can tell apart."""
    chains = [_Chains.of(rs) for rs in rulesets]
    protos = {"tcp"}
    every_port: list[int] = []
    original: list[int] = []
    for rs in rulesets:
        for r in _all_rules(rs):
            p = r.core_option("-p")
            if p is not None and p.value in PROTOS:
                protos.add(p.value)
            every_port += port_boundaries(r, DST_PORT_OPTIONS)
            original += port_boundaries(r, ORIGINAL_PORT_OPTIONS)
    for dst in address_classes(rulesets, ctx):
        local = ctx.is_local(dst)
        for proto in sorted(protos):
            ports = list(original)
            keeps = False
            for ch in chains:
                seen, k = _ports_seen(ch, dst, proto, local)
                ports += seen
                keeps = keeps or k
            for dport in _representatives(every_port if keeps else ports, 65536):
                if dport:
                    yield dst, dport, proto
