"""The kernel oracle seen through the model's eyes: a topology that mirrors a ``NodeContext``,
and kernel answers written as model ``Trace`` s.

``topology_for`` builds the sandboxed node the model reasons about (its addresses, its pod
range and gateway, its local pods, the remote endpoints on "node2", the external clients) and
returns, next to it, the ``NodeContext`` the model must use for that sandbox: the same
addresses (the pod gateway and the link address to node2 are addresses of the node too, so
``addrtype LOCAL`` agrees) and the same routes, so that the address MASQUERADE picks in the
model is the one the kernel picks::

    local pod P       Route(P/32, "<prefix>N", gateway)   # MASQUERADE towards a pod: the gateway
    remote endpoint R Route(R/32, "n2", node_link_ip)      # towards another node: the link address
    external client C Route(C/32, "ext0", node_ips[0])
    node address A    Route(A/32, "lo", A)                 # local delivery
    anything else     Route(0.0.0.0/0, "n2", node_link_ip) # the sandbox's default route

``kernel_traces`` answers packets from the kernel (``nat-verify trace --kernel``): one
``Outcome`` per packet, probability 1, no rule path (the kernel does not say which rules
fired without the trace machinery), in the model's JSON shape.

IPv4 only: the oracle's topology is IPv4 (IPv6 namespaces, routes and ICMPv6 evidence are not
built yet), so an IPv6 context is refused with ``OracleUnsupported``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Iterator
from fractions import Fraction

import attrs

from nat_verify.model.cluster import Cluster, IPAddress
from nat_verify.model.outcome import Outcome, Trace
from nat_verify.model.packet import Packet
from nat_verify.netfilter.context import NodeContext, Route
from nat_verify.netfilter.parse import DumpError
from nat_verify.netfilter.render import render, render_rule
from nat_verify.netfilter.ruleset import Ruleset
from nat_verify.oracle.loader import RestoreError
from nat_verify.oracle.netns import TopologySpec
from nat_verify.oracle.oracle import KernelOracle, KernelResult, kernel_available
from nat_verify.oracle.probe import ProbeError

__all__ = [
    "EXTERNAL_CLIENT",
    "KernelUnavailable",
    "OracleUnsupported",
    "dnat_targets",
    "kernel_outcome",
    "kernel_traces",
    "load_ruleset",
    "local_dnat_ports",
    "mirror_packet",
    "probe_packet",
    "topology_for",
]

# The external client every topology has (RFC 5737 documentation range).
EXTERNAL_CLIENT = "203.0.113.2"
# Sandbox-only addresses (RFC 2544 benchmarking range): node2, the node's link to it, and the
# pod range used when the node has no pod CIDR of its own.
NODE2_IP, NODE_LINK_IP = "198.18.1.2", "198.18.1.1"
FALLBACK_POD_CIDR = "198.18.0.0/24"
_SANDBOX = ipaddress.ip_network("198.18.0.0/15")
_ANY4 = ipaddress.ip_network("0.0.0.0/0")
_LOOPBACK4 = ipaddress.ip_network("127.0.0.0/8")
_TRAILING_DIGITS = re.compile(r"\d+$")


class OracleUnsupported(ValueError):
    """The kernel oracle cannot mirror this node (IPv6, no node address, address clash)."""


class KernelUnavailable(RuntimeError):
    """This machine cannot run the kernel oracle (not root, tools missing, ...)."""


def _ip4(text: str) -> ipaddress.IPv4Address | None:
    try:
        a = ipaddress.ip_address(text)
    except ValueError:
        return None
    return a if isinstance(a, ipaddress.IPv4Address) else None


def dnat_targets(ruleset: Ruleset) -> tuple[IPAddress, ...]:
    """Every address a ``DNAT --to-destination`` of the ruleset names, in dump order.

    A range ``A-B`` contributes both ends (the kernel may pick any address in it; the model
    calls such a rule inconclusive anyway).
    """
    out: list[IPAddress] = []
    for t in ruleset.tables:
        for c in t.chains:
            for r in c.rules:
                if r.target.name != "DNAT":
                    continue
                o = r.target.get("--to-destination")
                if o is None:
                    continue
                host = o.value
                if host.startswith("["):
                    continue  # IPv6
                host = host.split(":", 1)[0]
                for part in host.split("-"):
                    a = _ip4(part)
                    if a is not None and a not in out:
                        out.append(a)
    return tuple(out)


def _exact_destinations(ruleset: Ruleset) -> set[IPAddress]:
    out: set[IPAddress] = set()
    for t in ruleset.tables:
        for c in t.chains:
            for r in c.rules:
                d = r.core_option("-d")
                if d is None or d.negated:
                    continue
                for part in d.value.split(","):
                    try:
                        net = ipaddress.ip_network(part, strict=False)
                    except ValueError:
                        continue
                    if net.prefixlen == net.max_prefixlen:
                        out.add(net.network_address)
    return out


def _iface_prefix(pod_iface: str) -> str:
    """``veth0`` -> ``veth``, ``cni0`` -> ``cni``: pod N's veth is named prefix + N."""
    prefix = _TRAILING_DIGITS.sub("", pod_iface.rstrip("+"))
    if prefix.isalnum() and 0 < len(prefix) <= 11 and prefix not in ("ext", "n", "lo"):
        return prefix
    return "vp"


def topology_for(
    ruleset: Ruleset, ctx: NodeContext, *, packets: Iterable[Packet] = ()
) -> tuple[TopologySpec, NodeContext]:
    """The sandbox mirroring ``ctx`` for ``ruleset``, and the context the model must use for it.

    ``packets``: packets that will be probed; pod sources among them become pods of the
    sandbox (a pod probe needs a namespace owning its address), external sources that no rule
    or packet aims at become addresses of the external client namespace (the others are sent
    as raw, spoofed packets).

    Raises ``OracleUnsupported`` for an IPv6 context, a node without an IPv4 address, or a
    node whose addresses clash with the sandbox's own range (198.18.0.0/15).
    """
    if ctx.family != 4 or ruleset.family != 4:
        raise OracleUnsupported(
            "the kernel oracle mirrors IPv4 nodes only (IPv6 topologies are not built yet)"
        )
    pkts = list(packets)
    node_ips = [a for a in ctx.addresses if isinstance(a, ipaddress.IPv4Address)]
    if not node_ips:
        raise OracleUnsupported("the node has no IPv4 address to give the sandboxed node")
    local_cidrs = [n for n in ctx.local_pod_cidrs if n.version == 4]
    pod_net = local_cidrs[0] if local_cidrs else ipaddress.ip_network(FALLBACK_POD_CIDR)
    gateway = ctx.pod_gateway(pod_net)
    link, node2 = ipaddress.ip_address(NODE_LINK_IP), ipaddress.ip_address(NODE2_IP)
    targets = dnat_targets(ruleset)
    for a in (*node_ips, *targets):
        if a in _SANDBOX:
            raise OracleUnsupported(
                f"address {a} lies in 198.18.0.0/15, which the sandbox uses for its own links"
            )
    node_local = {*node_ips, gateway, link}

    def is_local(a: IPAddress) -> bool:
        return a in node_local or a in _LOOPBACK4

    pods: list[IPAddress] = []

    def add_pod(a: IPAddress) -> None:
        if a not in pods and not is_local(a):
            pods.append(a)

    for a in targets:
        if any(a in n for n in local_cidrs):
            add_pod(a)
    for p in pkts:
        if p.origin == "pod" and p.src.version == 4:
            add_pod(p.src)
    remote = [a for a in targets if a not in pods and not is_local(a)]

    aimed = _exact_destinations(ruleset) | {p.dst for p in pkts} | set(targets)
    clients = [ipaddress.ip_address(EXTERNAL_CLIENT)]
    for p in pkts:
        s = p.src
        if (
            p.origin == "external"
            and s.version == 4
            and s not in clients
            and s not in aimed
            and s not in pods
            and not is_local(s)
            and not ctx.in_pod_network(s)
            and s not in _SANDBOX
            and not s.is_multicast
            and not s.is_unspecified
        ):
            clients.append(s)

    prefix = _iface_prefix(ctx.pod_iface)
    spec = TopologySpec(
        node_ips=tuple(str(a) for a in node_ips),
        pod_cidr=str(pod_net),
        pod_gateway=str(gateway),
        pods=tuple(str(a) for a in pods),
        remote=tuple(f"{a}/32" for a in remote),
        external_clients=tuple(str(c) for c in clients),
        node2_ip=NODE2_IP,
        node_link_ip=NODE_LINK_IP,
        pod_iface_prefix=prefix,
    )
    host = lambda a: ipaddress.ip_network(f"{a}/32")  # noqa: E731
    routes: list[Route] = [Route(_LOOPBACK4, "lo", ipaddress.ip_address("127.0.0.1"))]
    routes += [Route(host(a), "lo", a) for a in sorted(node_local)]
    routes += [Route(host(p), f"{prefix}{i}", gateway) for i, p in enumerate(pods)]
    routes += [Route(host(r), "n2", link) for r in remote]
    routes += [Route(host(node2), "n2", link)]
    routes += [Route(host(c), "ext0", node_ips[0]) for c in clients]
    routes.append(Route(_ANY4, "n2", link))
    model_ctx = attrs.evolve(
        ctx,
        # the node IPs first: the model's fallbacks pick the first address
        addresses=tuple(dict.fromkeys((*node_ips, gateway, link))),
        ext_iface="ext0",
        pod_iface=f"{prefix}0",
        route_localnet=True,  # the sandbox sets net.ipv4.conf.all.route_localnet=1
        routes=tuple(routes),
        bridge_nf_call=True,
        known=None,  # the sandbox's every fact is the one set up here
    )
    return spec, model_ctx


def mirror_packet(packet: Packet, spec: TopologySpec) -> Packet:
    """``packet`` with the interface it really arrives on in the sandbox (pod N: prefix + N,
    external: ext0), so that ``-i`` matches see what the kernel sees."""
    if packet.in_iface:
        return packet
    if packet.origin == "pod" and str(packet.src) in spec.pods:
        i = spec.pods.index(str(packet.src))
        return attrs.evolve(packet, in_iface=f"{spec.pod_iface_prefix}{i}")
    if packet.origin == "external":
        return attrs.evolve(packet, in_iface="ext0")
    return packet


def probe_packet(oracle: KernelOracle, packet: Packet, *, fresh_port: bool = True) -> KernelResult:
    """Probe ``packet`` once. ``fresh_port=False`` sends it from ``packet.sport`` (only safe
    right after ``reset()``: a live conntrack entry on that 5-tuple would shadow the NAT)."""
    return oracle.probe(
        str(packet.src),
        str(packet.dst),
        packet.dport,
        packet.proto,
        packet.origin,
        None if fresh_port else packet.sport,
    )


def kernel_outcome(packet: Packet, r: KernelResult) -> Outcome:
    """A kernel answer as a model ``Outcome`` (probability 1, no rule path)."""
    verdict = r.verdict
    reason = "kernel"
    if verdict == "lost":
        # the model's "pod to its own loopback" case: accepted where it was sent, the node
        # never sees it
        verdict = "accept"
        reason = "kernel: the packet stays in the sending namespace; it never reaches the node"
    elif verdict == "unreachable":
        verdict = "inconclusive"
        reason = "kernel: the sender could not route the packet at all"
    elif verdict == "drop":
        reason = "kernel: no answer before the deadline (dropped)"
    dst, dport = (r.dnat[0], r.dnat[1]) if r.dnat is not None else (str(packet.dst), packet.dport)
    src = r.snat_ip if r.snat_ip is not None else str(packet.src)
    sport = r.snat_port if r.snat_ip is not None and r.snat_port else (r.sport or packet.sport)
    return Outcome(
        probability=Fraction(1),
        verdict=verdict,  # type: ignore[arg-type]
        dst=ipaddress.ip_address(dst),
        dport=dport,
        src=ipaddress.ip_address(src),
        sport=sport,
        dnat=r.dnat is not None,
        masquerade=r.snat_ip is not None,
        reject_with=r.reject_with,
        path=(),
        reason=reason,
    )


def local_dnat_ports(ruleset: Ruleset, local: frozenset[str]) -> dict[str, set[int]]:
    """protocol -> ports that a DNAT sends to a node-local address (hostNetwork endpoints)."""
    out: dict[str, set[int]] = {}
    for t in ruleset.tables:
        for c in t.chains:
            for r in c.rules:
                o = r.target.get("--to-destination") if r.target.name == "DNAT" else None
                if o is None or o.value.startswith("["):
                    continue
                host, _, port = o.value.partition(":")
                a = _ip4(host)
                if a is None or not port.isdigit() or not (str(a) in local or a in _LOOPBACK4):
                    continue
                p = r.core_option("-p")
                protos = (p.value.lower(),) if p is not None and not p.negated else ("tcp", "udp")
                for proto in protos:
                    out.setdefault(proto, set()).add(int(port))
    return out


def load_ruleset(oracle: KernelOracle, ruleset: Ruleset, *, source: str | None = None) -> None:
    """Load ``render(ruleset)`` into the sandbox. A rule the kernel refuses is reported as a
    ``DumpError`` at its line in the original dump (not the rendered text)."""
    for proto, ports in local_dnat_ports(ruleset, oracle.spec.node_local()).items():
        oracle.expect_local_ports(proto, ports)
    text = render(ruleset)
    src = source or ruleset.source
    try:
        oracle.load(text, source=src)
    except RestoreError as e:
        line, shown = 0, e.text
        if e.text:
            for t in ruleset.tables:
                for c in t.chains:
                    for rule in c.rules:
                        if render_rule(rule) == e.text:
                            line, shown = rule.line, rule.raw or e.text
        detail = e.stderr.strip().splitlines()[-1] if e.stderr.strip() else str(e)
        msg = (
            f"the kernel refused this rule ({detail})"
            if shown
            else f"the kernel refused the ruleset: {detail}"
        )
        raise DumpError(src, line, msg + (f": {shown}" if shown else "")) from e


def kernel_traces(
    dump_path: str,
    ruleset: Ruleset,
    ctx: NodeContext,
    packets: Iterable[Packet],
    *,
    cluster: Cluster | None = None,
    backend: str = "nft",
) -> Iterator[Trace]:
    """The kernel's answer for each packet (``nat-verify trace --kernel``).

    The ruleset is loaded into a sandbox built by ``topology_for``; each packet is probed once
    from its own source port after a reset (no conntrack entry, no affinity state), so the
    answer is that of a first connection. ``cluster`` is accepted for symmetry with the model
    path; the context already carries what the sandbox needs.
    """
    del cluster
    reason = kernel_available()
    if reason is not None:
        raise KernelUnavailable(f"--kernel needs the kernel oracle, which is unavailable: {reason}")
    pkts = list(packets)
    spec, _ = topology_for(ruleset, ctx, packets=pkts)
    with KernelOracle(spec, backend=backend) as k:
        load_ruleset(k, ruleset, source=dump_path)
        for p in pkts:
            k.reset()
            try:
                r = probe_packet(k, p, fresh_port=False)
            except ProbeError as e:
                yield Trace(p, (_unsent(p, str(e)),))
                continue
            yield Trace(p, (kernel_outcome(p, r),))


def _unsent(p: Packet, why: str) -> Outcome:
    return Outcome(
        probability=Fraction(1),
        verdict="inconclusive",
        dst=p.dst,
        dport=p.dport,
        src=p.src,
        sport=p.sport,
        reason=f"kernel: cannot send this packet: {why}",
    )
