"""The shape of a Service port on a node: what its check reads, with its constants renamed.

Why Services of one shape share one proof
-----------------------------------------
kube-proxy writes every Service from a handful of templates, so most Service ports differ only
in their constants (ClusterIP, ports, endpoint addresses, chain-name hashes). The exhaustive
check of one Service port reads exactly:

1. the rules its packets can reach: the *slice*. Starting from every built-in chain, a rule
   is kept unless its ``-d``, ``-p`` or destination-port match rules out every destination the
   packet can have (the Service port's own destinations on this node, plus every DNAT target of
   a kept rule, to a fixed point). A rule left out can match no packet of this Service port at
   any hook, so the trace of every such packet is the same in the slice as in the whole ruleset;
2. the node's facts (``NodeContext``: its addresses, pod CIDRs, routes; its Pods) and the cluster-wide
   constants the intent compares sources with (every node's addresses and pod CIDRs, the
   cluster CIDRs, the proxy configuration);
3. the Service port itself and its endpoints (addresses, conditions, whether each is on this
   node, zones).

Every comparison the interpreter, the packet classes and the intent make with an address is
membership in a CIDR (equality is membership in a /32), and with a port, equality. The shape
renames every address constant to ``a<i>`` and every port to ``p<i>`` in order of first
appearance (node facts first, then the slice, then the Service), records each address
constant's family, prefix length, special kind (loopback, multicast, ...) and the nearest
constant containing it (CIDRs are nested or disjoint, so these parent links fix containment
between every pair), and renames user chains by first use. Comments are dropped (they match
every packet). Two Service ports with equal shapes are the same problem under a renaming that
preserves every membership the check can observe, so the check of one answers for the other:
the same statuses per invariant over the same number of packet classes.

What is *not* claimed: the packets and rule paths of findings are concrete, so a shape whose
check found anything is checked again for each instance (``sharing``). Where a slice holds
something the argument does not cover (a REDIRECT, an address range, a port range, an
option whose value cannot be read), the Service port has no shape and is checked on its own.
A property test checks shared against unshared results on random clusters.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator
from typing import Any

import attrs

from nat_verify.intent.destination import Destination
from nat_verify.intent.index import index
from nat_verify.model.cluster import Cluster, IPNetwork, SourceRef
from nat_verify.netfilter.constants import parse_network
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.ruleset import BUILTIN_CHAINS, Option, Rule, Ruleset

ADDRESS_OPTIONS = frozenset({"-s", "-d", "--source", "--destination", "--to-destination", "--to-source", "--to"})
PORT_OPTIONS = frozenset(
    {"--dport", "--sport", "--dports", "--sports", "--destination-port", "--source-port",
     "--destination-ports", "--source-ports", "--ports", "--to-ports"}
)  # fmt: skip
DPORT_OPTIONS = frozenset({"--dport", "--dports", "--destination-port", "--destination-ports", "--ports"})
UNSHAREABLE_TARGETS = frozenset({"REDIRECT", "TPROXY", "NETMAP"})
UNSHAREABLE_OPTIONS = frozenset({"--src-range", "--dst-range", "--ctorigdst", "--ctorigsrc", "--ctrepldst", "--ctreplsrc"})


class NoShape(Exception):
    """The slice holds something the sharing argument does not cover."""


@attrs.frozen
class Slicer:
    """Per-ruleset index: each chain's rules, and for rules with a plain ``-d`` of single CIDRs,
    which rules can see which destination (so a slice costs the Service's own rules, not the
    whole dump)."""

    chains: dict[tuple[str, str], tuple[Rule, ...]]
    by_host: dict[tuple[str, str], dict[int, list[int]]]  # chain -> /32|/128 -d address -> rule indices
    other: dict[tuple[str, str], list[int]]  # chain -> rules without such a -d

    @classmethod
    def of(cls, ruleset: Ruleset) -> Slicer:
        chains: dict[tuple[str, str], tuple[Rule, ...]] = {}
        by_host: dict[tuple[str, str], dict[int, list[int]]] = {}
        other: dict[tuple[str, str], list[int]] = {}
        for t in ruleset.tables:
            for c in t.chains:
                key = (t.name, c.name)
                chains[key] = c.rules
                hosts: dict[int, list[int]] = {}
                rest: list[int] = []
                for i, r in enumerate(c.rules):
                    d = r.core_option("-d")
                    net = _single_host(d)
                    if net is None:
                        rest.append(i)
                    else:
                        hosts.setdefault(int(net.network_address), []).append(i)
                by_host[key], other[key] = hosts, rest
        return cls(chains, by_host, other)

    def candidates(self, key: tuple[str, str], dsts: set[tuple[int, int]]) -> list[int]:
        hosts = self.by_host[key]
        picked = set(self.other[key])
        for ip, _port in dsts:
            picked.update(hosts.get(ip, ()))
        return sorted(picked)


def _single_host(d: Option | None) -> IPNetwork | None:
    if d is None or d.negated or "," in d.value:
        return None
    try:
        net = parse_network(d.value)
    except ValueError:
        return None
    return net if net.num_addresses == 1 else None


def _ports(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition(":")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise NoShape(f"port {text!r}")
        out.append((int(lo), int(hi or lo)))
    return out


def _may_match(rule: Rule, dsts: set[tuple[int, int]], proto: str, fam: int) -> bool:
    d = rule.core_option("-d")
    if d is not None and not d.negated:
        nets = []
        for part in d.value.split(","):
            try:
                nets.append(parse_network(part))
            except ValueError:
                raise NoShape(f"-d {d.value!r}") from None
        if not any(
            n.version == fam and int(n.network_address) <= ip <= int(n.broadcast_address)
            for n in nets for ip, _ in dsts
        ):  # fmt: skip
            return False
    p = rule.core_option("-p")
    if p is not None and not p.negated and p.value.lower() not in (proto, "all", "0"):
        return False
    for m in rule.matches:
        for o in m.options:
            if o.name in DPORT_OPTIONS and not o.negated:
                ranges = _ports(o.value)
                if not any(lo <= port <= hi for lo, hi in ranges for _, port in dsts):
                    return False
    return True


def _dnat_target(rule: Rule, fam: int, dports: set[int]) -> set[tuple[int, int]]:
    o = rule.target.get("--to-destination")
    if o is None:
        return set()
    text = o.value
    if fam == 6 and text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif fam == 4 and ":" in text:
        host, _, port = text.partition(":")
    else:
        host, port = text, ""
    if "-" in host or "-" in port:
        raise NoShape(f"--to-destination {text!r}")
    try:
        ip = int(ipaddress.ip_address(host))
    except ValueError:
        raise NoShape(f"--to-destination {text!r}") from None
    return {(ip, int(port))} if port.isdigit() else {(ip, p) for p in dports}


def slice_rules(slicer: Slicer, fam: int, proto: str, start: set[tuple[int, int]]) -> list[tuple[str, str, list[Rule]]]:
    """The rules packets to ``start`` (address, port) can reach: (table, chain, rules) per chain
    in order of first reach from the built-in chains; raises NoShape."""
    dsts = set(start)
    while True:
        order: list[tuple[str, str]] = []
        kept: dict[tuple[str, str], list[Rule]] = {}
        grew: set[tuple[int, int]] = set()
        todo = [(t, c) for t, chains in BUILTIN_CHAINS.items() for c in chains if (t, c) in slicer.chains]
        todo.reverse()
        while todo:
            key = todo.pop()
            if key in kept:
                continue
            order.append(key)
            kept[key] = []
            rules = slicer.chains[key]
            nxt: list[tuple[str, str]] = []
            for i in slicer.candidates(key, dsts):
                r = rules[i]
                if not _may_match(r, dsts, proto, fam):
                    continue
                if r.target.name in UNSHAREABLE_TARGETS:
                    raise NoShape(f"-j {r.target.name}")
                kept[key].append(r)
                grew |= _dnat_target(r, fam, {p for _, p in dsts}) - dsts
                sub = (key[0], r.target.name)
                if sub in slicer.chains and sub not in kept:
                    nxt.append(sub)
            todo.extend(reversed(nxt))
        if not grew:
            return [(t, c, kept[(t, c)]) for t, c in order]
        dsts |= grew


class _Namer:
    """First-appearance names for addresses (with their CIDR facts), ports and chains."""

    def __init__(self) -> None:
        self.addrs: dict[IPNetwork, str] = {}
        self.ports: dict[int, str] = {}
        self.chains: dict[str, str] = {}
        self.names: dict[str, str] = {}

    def copy(self) -> _Namer:
        out = _Namer()
        out.addrs, out.ports, out.chains, out.names = dict(self.addrs), dict(self.ports), dict(self.chains), dict(self.names)
        return out

    def net(self, text: str) -> str:
        try:
            n = parse_network(text.strip())
        except ValueError:
            raise NoShape(f"address {text!r}") from None
        name = self.addrs.get(n)
        if name is None:
            name = self.addrs[n] = f"a{len(self.addrs)}"
        return name

    def nets(self, values: Iterable[str | Any]) -> tuple[str, ...]:
        return tuple(self.net(str(v)) for v in values)

    def port(self, value: int) -> str:
        if not value:
            return "0"
        name = self.ports.get(value)
        if name is None:
            name = self.ports[value] = f"p{len(self.ports)}"
        return name

    def chain(self, table: str, name: str) -> str:
        if name in BUILTIN_CHAINS.get(table, ()) or not name:
            return name
        key = f"{table}/{name}"
        got = self.chains.get(key)
        if got is None:
            got = self.chains[key] = f"c{len(self.chains)}"
        return got

    def name(self, text: str) -> str:
        """A name that only identifies (an xt_recent list): equal or not is all that counts."""
        got = self.names.get(text)
        if got is None:
            got = self.names[text] = f"r{len(self.names)}"
        return got

    def forest(self) -> tuple[tuple[str, int, int, str, str], ...]:
        """Per address constant: (name, family, prefix length, special kind, parent name)."""
        items = sorted(self.addrs, key=lambda n: (n.version, int(n.network_address), -n.num_addresses))
        out: dict[str, tuple[str, int, int, str, str]] = {}
        stack: list[IPNetwork] = []
        for n in items:
            while stack and not (stack[-1].version == n.version and _contains(stack[-1], n)):
                stack.pop()
            parent = self.addrs[stack[-1]] if stack else ""
            name = self.addrs[n]
            out[name] = (name, n.version, n.prefixlen, _kind(n), parent)
            stack.append(n)
        return tuple(out[k] for k in sorted(out, key=lambda s: int(s[1:])))


def _contains(outer: IPNetwork, inner: IPNetwork) -> bool:
    return int(outer.network_address) <= int(inner.network_address) and int(inner.broadcast_address) <= int(outer.broadcast_address)


def _kind(n: IPNetwork) -> str:
    a = n.network_address
    return "".join(
        flag for flag, on in (
            ("L", a.is_loopback), ("M", a.is_multicast), ("U", a.is_unspecified), ("K", a.is_link_local),
            ("P", a.is_private), ("R", a.is_reserved),
        ) if on
    )  # fmt: skip


def _rule_tokens(namer: _Namer, table: str, rule: Rule) -> tuple[Any, ...]:
    out: list[Any] = []
    for o in rule.core:
        out.append(_option(namer, o))
    for m in rule.matches:
        if m.module == "comment":
            continue
        if m.module == "recent":
            out.append((m.module, tuple(
                (o.name, o.negated, namer.name(o.value)) if o.name == "--name" else _option(namer, o) for o in m.options
            )))  # fmt: skip
            continue
        out.append((m.module, tuple(_option(namer, o) for o in m.options)))
    t = rule.target
    out.append(("-g" if t.goto else "-j", namer.chain(table, t.name), tuple(_option(namer, o) for o in t.options)))
    return tuple(out)


def _option(namer: _Namer, o: Option) -> tuple[Any, ...]:
    if o.name in UNSHAREABLE_OPTIONS:
        raise NoShape(o.name)
    if o.name in ADDRESS_OPTIONS:
        parts = []
        for part in o.value.split(","):
            host, port = _host_port(part)
            parts.append((namer.net(host), tuple(namer.port(p) for p in port)))
        return (o.name, o.negated, tuple(parts))
    if o.name in PORT_OPTIONS:
        ranges = _ports(o.value)
        if any(lo != hi for lo, hi in ranges):
            raise NoShape(f"port range {o.value!r}")
        return (o.name, o.negated, tuple(namer.port(lo) for lo, _ in ranges))
    return (o.name, o.negated, o.args)


def _host_port(text: str) -> tuple[str, tuple[int, ...]]:
    """``10.0.0.1:8080`` / ``[fd00::1]:80`` / ``10.0.0.0/8`` -> host, ports."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:]
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, ""
    if not port:
        return host, ()
    if not port.isdigit():
        raise NoShape(f"port {text!r}")
    return host, (int(port),)


def node_facts(namer: _Namer, cluster: Cluster, node: str, ctx: NodeContext) -> tuple[Any, ...]:
    """The node's context and its own objects, then the cluster-wide configuration. Other nodes
    are not named here (``NodeBase`` describes them), so the facts name no node."""
    idx = index(cluster)
    me = idx.nodes[node]
    facts: list[Any] = [
        ctx.family, namer.nets(ctx.addresses), namer.nets(ctx.pod_cidrs), namer.nets(ctx.local_pod_cidrs),
        ctx.ext_iface, ctx.pod_iface, ctx.route_localnet,
        tuple((namer.net(str(r.dst)), r.iface, namer.net(str(r.src))) for r in ctx.routes),
        tuple((s.name, s.type, s.family, namer.nets(s.members), namer.nets(s.nomatch), s.children) for s in ctx.ipsets),
        tuple((i.name, namer.nets([a.ip for a in i.addresses]), tuple(a.network.prefixlen for a in i.addresses))
              for i in ctx.interfaces),
        ctx.bridge_nf_call, ctx.known,
        namer.nets(me.internal_ips), namer.nets(me.pod_cidrs), me.labels,
    ]  # fmt: skip
    # the intent reads this node's Pods only: which addresses are pods here (the origin of a
    # packet) and a pod that is no endpoint (a representative source)
    pods = sorted(idx.pods_by_node.get(node, ()), key=lambda p: (p.host_network, _pod_order(p)))
    facts.append(tuple((namer.nets(p.ips), p.host_network) for p in pods))
    p = cluster.proxy
    facts.append(attrs.evolve(p, source=SourceRef(), cluster_cidrs=(), node_port_addresses=()))
    facts.append(namer.nets(p.cluster_cidrs))
    facts.append(tuple(namer.net(c) if c[:1].isdigit() or ":" in c else c for c in p.node_port_addresses))
    facts.append(namer.net("127.0.0.0/8" if ctx.family == 4 else "::1/128"))
    facts.append(len(cluster.nodes))
    return tuple(facts)


def _pod_order(pod: Any) -> tuple[tuple[int, int], ...]:
    out = []
    for ip in pod.ips:
        try:
            a = ipaddress.ip_address(ip)
        except ValueError:
            raise NoShape(f"pod address {ip!r}") from None
        out.append((a.version, int(a)))
    return tuple(out)


def _interval(n: IPNetwork) -> tuple[int, int, int]:
    return (n.version, int(n.network_address), int(n.broadcast_address))


class NodeBase:
    """What every Service port's shape on one node starts from, computed once per node.

    ``namer`` has named the node's own facts (``node_facts``). The other nodes are described
    without naming them: ``profiles`` is the multiset of their *profiles* (for each of their
    addresses and pod CIDRs: family, prefix length, kind, and the node-level constant or own
    constant containing it; their labels), the same from every node of a cluster where the
    nodes look alike. A Service port's shape then names only the other nodes its own constants
    fall in (``referenced``), in order of first use; the rest are the multiset minus those.
    """

    def __init__(self, cluster: Cluster, node: str, ctx: NodeContext) -> None:
        self.namer = _Namer()
        self.sound = True
        try:
            self.facts = node_facts(self.namer, cluster, node, ctx)
        except NoShape:
            self.sound, self.facts = False, ()
        self.others = [n for n in cluster.nodes if n.name != node]
        self.owners: list[tuple[tuple[int, int, int], str]] = []  # (interval, node) of others' constants
        profiles = []
        self.node_level = dict(self.namer.addrs)
        for n in self.others:
            nets = [parse_network(x) for x in (*n.internal_ips, *n.pod_cidrs) if _parses(x)]
            for net in nets:
                self.owners.append((_interval(net), n.name))
            profiles.append(self._profile(nets, n.labels))
        self.owners.sort()
        self.starts = [iv for iv, _ in self.owners]
        self.profiles = tuple(sorted(profiles, key=repr))
        # the profiles describe other nodes only if their constants are disjoint and no
        # constant of this node lies inside one of theirs
        for (a, _), (b, _) in zip(self.owners, self.owners[1:], strict=False):
            if a[0] == b[0] and b[1] <= a[2]:
                self.sound = False
        for net in self.node_level:
            owner = self.owner_of(net)
            if owner is not None and net.num_addresses < 2 ** (32 if net.version == 4 else 128):
                iv = _interval(net)
                if not any(o == iv for o, _ in self.owners):
                    self.sound = False

    def _profile(self, nets: list[IPNetwork], labels: tuple[tuple[str, str], ...]) -> tuple[Any, ...]:
        out = []
        for net in nets:
            parent: Any = ""
            best: IPNetwork | None = None
            for cand, name in self.node_level.items():
                if cand.version == net.version and _contains(cand, net) and cand != net and (best is None or cand.num_addresses < best.num_addresses):
                    best, parent = cand, name
            for j, own in enumerate(nets):
                if own is not net and own.version == net.version and _contains(own, net) and own != net and (best is None or own.num_addresses < best.num_addresses):
                    best, parent = own, ("own", j)
            if net in self.node_level:
                parent = ("is", self.node_level[net])
            out.append((net.version, net.prefixlen, _kind(net), parent))
        return (tuple(out), labels)

    def owner_of(self, net: IPNetwork) -> str | None:
        """The other node one of whose addresses or pod CIDRs contains ``net``, if any (the
        others' constants are disjoint, checked in ``__init__``, so only the nearest one below
        can contain it)."""
        import bisect

        iv = _interval(net)
        i = bisect.bisect_right(self.starts, (iv[0], iv[1], 1 << 129)) - 1
        if i >= 0:
            fam, lo, hi = self.starts[i]
            if fam == iv[0] and lo <= iv[1] and iv[2] <= hi:
                return self.owners[i][1]
        return None

    def others_part(self, namer: _Namer) -> tuple[Any, ...]:
        """Name the other nodes the Service port's constants fall in; raise NoShape if one of its
        CIDRs spans another node's constant without falling in it (a profile would not say so)."""
        import bisect

        referenced: list[str] = []
        for net, _name in list(namer.addrs.items()):
            if net in self.node_level:
                continue
            owner = self.owner_of(net)
            if owner is not None and owner not in referenced:
                referenced.append(owner)
            if net.num_addresses > 1:
                lo, hi = int(net.network_address), int(net.broadcast_address)
                i = bisect.bisect_left(self.starts, (net.version, lo, -1))
                while i < len(self.starts) and self.starts[i][0] == net.version and self.starts[i][1] <= hi:
                    if self.owners[i][1] not in referenced:
                        raise NoShape(f"{net} spans another node's addresses")
                    i += 1
        by_name = {n.name: n for n in self.others}
        named = tuple(
            (namer.nets(by_name[r].internal_ips), namer.nets(by_name[r].pod_cidrs), by_name[r].labels) for r in referenced
        )
        return (self.profiles, named)


def _parses(text: str) -> bool:
    try:
        parse_network(text)
    except ValueError:
        return False
    return True


def service_facts(namer: _Namer, cluster: Cluster, node: str, service: str, proto: str) -> tuple[Any, ...]:
    """The Service port (named ``service``) and its endpoints, constants renamed."""
    from nat_verify.intent import find_service_port

    svc, sp = find_service_port(cluster, service, proto)
    idx = index(cluster)
    other_nodes: dict[str, str] = {}

    def where(name: str) -> str:
        if name == node:
            return "self"
        if not name:
            return ""
        return other_nodes.setdefault(name, f"n{len(other_nodes)}")

    facts: list[Any] = [
        svc.type, svc.external_traffic_policy, svc.internal_traffic_policy, svc.session_affinity,
        svc.affinity_timeout, svc.ip_families, svc.selector is None, namer.port(svc.health_check_node_port),
        tuple(c if c in ("None", "") else namer.net(c) for c in svc.cluster_ips),
        namer.nets(svc.external_ips), namer.nets(svc.lb_source_ranges),
        tuple((namer.net(i.ip) if i.ip else "", bool(i.hostname), i.ip_mode) for i in svc.lb_ingress),
        len(svc.ports),
        (namer.port(sp.port), sp.protocol, namer.port(sp.target_port) if isinstance(sp.target_port, int) else sp.target_port,
         namer.port(sp.node_port)),
    ]  # fmt: skip
    for es in idx.slices_for(svc):
        # the intent sees a slice's endpoints as a set: list them in the order the rules first
        # named their addresses (kube-proxy's sorted order), not in the slice's order
        eps = sorted(es.endpoints, key=lambda e: [_order(namer.nets(e.addresses[:1]))])
        facts.append((
            es.address_type,
            tuple((namer.port(p.port), p.protocol, p.name == sp.name, p.name == "") for p in es.ports),
            tuple(
                (namer.nets(e.addresses), e.ready, e.serving, e.terminating, where(e.node_name), e.zone,
                 e.hint_zones, bool(e.target_pod))
                for e in eps
            ),
        ))  # fmt: skip
    return tuple(facts)


def _order(names: tuple[str, ...]) -> int:
    return int(names[0][1:]) if names else -1


def shape_of(
    slicer: Slicer, cluster: Cluster, node: str, ctx: NodeContext, service: str, dests: list[Destination],
    base: NodeBase | None = None,
) -> tuple[Any, ...] | None:  # fmt: skip
    """The shape of one Service port's check on this node, or None where it has none.

    ``base`` (``NodeBase(cluster, node, ctx)``, built once per node) saves naming the node's
    facts again for every Service port."""
    fam = ctx.family
    try:
        base = base if base is not None else NodeBase(cluster, node, ctx)
        if not base.sound:
            return None
        namer = base.namer.copy()
        parts: list[Any] = []
        for proto in sorted({d.proto for d in dests}):
            start = {(int(ipaddress.ip_address(d.ip)), d.port) for d in dests if d.proto == proto}
            dest_part = tuple(
                (d.address_class, namer.net(d.ip), namer.port(d.port)) for d in dests if d.proto == proto
            )
            chains = tuple(
                (t, namer.chain(t, c), tuple(_rule_tokens(namer, t, r) for r in rules))
                for t, c, rules in slice_rules(slicer, fam, proto, start)
            )
            parts.append((proto, dest_part, chains, service_facts(namer, cluster, node, service, proto)))
        others = base.others_part(namer)
        return (base.facts, tuple(parts), others, namer.forest())
    except NoShape:
        return None


def group_destinations(dests: Iterable[Destination]) -> Iterator[tuple[str, list[Destination]]]:
    """Destinations by Service port, in first-seen order."""
    by: dict[str, list[Destination]] = {}
    for d in dests:
        by.setdefault(d.service, []).append(d)
    yield from by.items()
