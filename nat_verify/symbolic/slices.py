"""Every packet a node can see, cut into slices small enough to walk one at a time.

Questions about a whole dump ("can anything from this CIDR reach that address?", "are these
two dumps equivalent?") range over every first packet: every destination and port, every
source and port, every origin and protocol. One symbolic walk over all of them would meet
every Service of the dump at once; instead the destinations are cut into *slices*, each walked
on its own, and the answers combined. The cut only has to be a partition for the answer to be
exact; it is chosen so that each walk is small:

* every address a chain's destination index names (kube-proxy's Service IPs) and every node
  address is a slice of its own (the walk then meets only that address's rules);
* loopback (reached from the node itself only) is one slice;
* everything else is one slice whose destination is a variable over the rest of the space.

A slice whose walk still forks too much (a node address meets every NodePort) is cut again
by destination port, at every port boundary a rule names (``port_cuts``).

Sources are cut by origin as the exhaustive classes do (``check.atoms``): the node's own
addresses are the host (loopback ones only towards loopback), this node's pod CIDRs are its
pods, anything else arrives from outside, except martian sources (multicast, the limited
broadcast, ``0.0.0.0/8``, the unspecified address), which routing drops before any rule.
Destinations leave out the same martians; destination and source ports are never 0.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator

import attrs

from nat_verify.model.cluster import IPNetwork
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.program import Program
from nat_verify.symbolic import domain
from nat_verify.symbolic.domain import Span

PORTS: Span = ((1, 65535),)
ORIGINS = ("external", "pod", "host")


@attrs.frozen
class Slice:
    """Destinations ``dst`` (one address or a set) and destination ports ``dport``."""

    dst: Span
    dport: Span = PORTS
    loopback: bool = False  # the destinations are loopback addresses


def martians(family: int) -> Span:
    if family == 4:
        nets = ["224.0.0.0/4", "255.255.255.255/32", "0.0.0.0/8"]
    else:
        nets = ["ff00::/8", "::/128"]
    return domain.of_nets([ipaddress.ip_network(n) for n in nets], family)


def _nets(ctx: NodeContext, nets: Iterable[IPNetwork]) -> Span:
    return domain.of_nets(nets, ctx.family)


def node_addresses(ctx: NodeContext) -> Span:
    return domain.normalise((int(a), int(a)) for a in ctx.addresses if a.version == ctx.family)


def sources(ctx: NodeContext, origin: str, loopback_dst: bool) -> Span:
    """The source addresses of ``origin`` towards the destinations of a slice."""
    bits = 32 if ctx.family == 4 else 128
    lo = _nets(ctx, (ctx.loopback,))
    own = node_addresses(ctx)
    if origin == "host":
        return lo if loopback_dst else domain.subtract(own, lo)
    if loopback_dst:
        return ()  # a loopback destination is reached from the node only
    pods = _nets(ctx, ctx.local_pod_cidrs)
    taken = domain.union(domain.union(own, lo), martians(ctx.family))
    if origin == "pod":
        return domain.subtract(pods, taken)
    return domain.subtract(domain.full(bits), domain.union(taken, pods))


def exact_destinations(programs: Iterable[Program], ctx: NodeContext) -> list[int]:
    """The addresses that get a slice of their own."""
    out = {int(a) for a in ctx.addresses if a.version == ctx.family}
    for p in programs:
        for ch in p.chains.values():
            index = getattr(ch, "by_dst", None)
            if index is not None:
                out.update(int(k) for k in index if k.version == ctx.family)
    lo = _nets(ctx, (ctx.loopback,))
    bad = martians(ctx.family)
    return sorted(a for a in out if not domain.contains(lo, a) and not domain.contains(bad, a))


def slices(programs: Iterable[Program], ctx: NodeContext) -> Iterator[Slice]:
    """The slices of every destination (see the module)."""
    bits = 32 if ctx.family == 4 else 128
    exact = exact_destinations(programs, ctx)
    for a in exact:
        yield Slice(domain.point(a))
    lo = _nets(ctx, (ctx.loopback,))
    taken = domain.normalise((a, a) for a in exact)
    yield Slice(domain.subtract(lo, taken), loopback=True)
    rest = domain.subtract(domain.full(bits), domain.union(domain.union(taken, lo), martians(ctx.family)))
    if rest:
        yield Slice(rest)


def port_cuts(programs: Iterable[Program], fields: tuple[str, ...] = ("dport", "orig_dport")) -> list[int]:
    """Every port boundary the rules' port tests name (compiles every chain)."""
    out = {1, 65536}
    for p in programs:
        for ch in p.chains.values():
            for cr in ch.rules:
                out.update(b for b in cr.port_constants(fields) if 1 <= b <= 65536)
    return sorted(out)


def by_port(s: Slice, cuts: list[int]) -> list[Slice]:
    """``s`` cut at every boundary of ``cuts``."""
    out = []
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        part = domain.intersect(s.dport, ((lo, hi - 1),))
        if part:
            out.append(attrs.evolve(s, dport=part))
    return out
