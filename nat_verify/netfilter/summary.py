"""Chain summaries: run a chain once per class of packets, reuse the result for the rest.

Why this is exact
-----------------
What a chain (with everything it jumps to) does to a packet depends only on the fields its
rules read, and for addresses and ports only on which side of each constant in those rules the
value falls. So the walk of a chain is keyed by a *projection* of the packet state: for every
field the chain reads, its value, or for addresses and ports the index of the interval between
consecutive constants (the same "atoms" the exhaustive checker uses). Two states with the same
key take the same rules, with the same probabilities, and write the same values into the
fields they change. A summary therefore stores, for each result of the walk, the fields the
walk changed (with their new values), the probability factor, the rules that fired and the
verdict; applying it to another state with the same key gives exactly what walking would.

Which fields a rule reads is decided from its matches and target (``-s`` reads the source,
``addrtype``/``MASQUERADE`` read addresses against the node's addresses and routes, ``recent``
reads its lists...). A chain whose rules use anything this table does not know is never
summarised, so unknown constructs cannot be short-cut.
"""

from __future__ import annotations

import bisect
import ipaddress
from collections.abc import Iterable
from fractions import Fraction
from typing import TYPE_CHECKING

from nat_verify.netfilter.constants import (
    DST_PORT_OPTIONS,
    SRC_PORT_OPTIONS,
    address_constants,
    port_boundaries,
)
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.ruleset import Rule

if TYPE_CHECKING:
    from nat_verify.netfilter.interpreter import PacketState

ADDR_FIELDS = ("src", "dst", "orig_src", "orig_dst")
PORT_FIELDS = ("sport", "dport", "orig_sport", "orig_dport")
PLAIN_FIELDS = ("proto", "mark", "ctmark", "in_iface", "out_iface", "dnat", "snat_done", "masq", "untracked")
# fields a walk may change (besides prob, path, recent and recent_set, handled apart)
STATE_FIELDS = ADDR_FIELDS + PORT_FIELDS + PLAIN_FIELDS + ("reject_with", "reason")

_KNOWN_MODULES = {
    "comment": set(), "nfacct": set(), "statistic": set(),
    "tcp": {"proto", "sport", "dport"}, "udp": {"proto", "sport", "dport"}, "sctp": {"proto", "sport", "dport"},
    "udplite": {"proto", "sport", "dport"}, "dccp": {"proto", "sport", "dport"},
    "multiport": {"sport", "dport"}, "addrtype": {"src", "dst"}, "mark": {"mark"}, "connmark": {"ctmark"},
    "conntrack": {"dnat", "snat_done", "untracked", "orig_src", "orig_dst", "orig_sport", "orig_dport", "proto"},
    "state": {"dnat", "snat_done", "untracked"}, "recent": {"src", "dst", "recent"}, "iprange": {"src", "dst"},
    "pkttype": {"dst"}, "set": {"src", "dst"}, "icmp": {"proto"}, "icmp6": {"proto"}, "icmpv6": {"proto"},
}  # fmt: skip
_CORE = {"-s": "src", "-d": "dst", "-p": "proto", "-i": "in_iface", "-o": "out_iface", "-f": ""}
_TARGET_READS = {
    "MASQUERADE": {"dst"}, "REDIRECT": {"in_iface"}, "MARK": {"mark"}, "CONNMARK": {"mark", "ctmark"},
}


def rule_reads(rule: Rule) -> set[str] | None:
    """The state fields a rule reads, or None when it uses something not listed here."""
    out: set[str] = set()
    for o in rule.core:
        f = _CORE.get(o.name)
        if f is None:
            return None
        if f:
            out.add(f)
    for m in rule.matches:
        fields = _KNOWN_MODULES.get(m.module)
        if fields is None:
            return None
        out |= fields
    out |= _TARGET_READS.get(rule.target.name, set())
    return out


def _addr_constants(rule: Rule) -> Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return address_constants(rule)


def _port_constants(rule: Rule) -> Iterable[int]:
    return port_boundaries(rule, SRC_PORT_OPTIONS | DST_PORT_OPTIONS)


class ChainInfo:
    """What one chain, with everything it can jump to, reads; and the constants that matter."""

    __slots__ = ("reads", "addr_bounds", "port_bounds", "ok")

    def __init__(self, reads: set[str], addr_bounds: list[int], port_bounds: list[int], ok: bool) -> None:
        self.reads = reads
        self.addr_bounds = addr_bounds
        self.port_bounds = port_bounds
        self.ok = ok


def _bounds(nets: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> list[int]:
    b: set[int] = set()
    for n in nets:
        b.add(int(n.network_address))
        b.add(int(n.broadcast_address) + 1)
    return sorted(b)


class Analyser:
    """ChainInfo per chain, computed on demand (transitively through jumps and gotos).

    Lazy because a packet meets a handful of a large dump's chains; ``whole()`` (every chain,
    for replaying whole traces) is computed only when asked for.
    """

    def __init__(self, chains: dict[tuple[str, str], tuple[Rule, ...]], ctx: NodeContext) -> None:
        self.chains = chains
        self.ctx_bounds = set(_bounds([*(ipaddress.ip_network(a) for a in ctx.addresses), ctx.loopback, *ctx.pod_cidrs,
                                       *ctx.local_pod_cidrs, *(r.dst for r in ctx.routes)]))  # fmt: skip
        self.ctx = ctx
        self._direct: dict[tuple[str, str], tuple[set[str], set[int], set[int], bool, set[tuple[str, str]]]] = {}
        self._info: dict[tuple[str, str], ChainInfo] = {}
        self._whole: ChainInfo | None = None

    def direct(self, key: tuple[str, str]) -> tuple[set[str], set[int], set[int], bool, set[tuple[str, str]]]:
        d = self._direct.get(key)
        if d is not None:
            return d
        reads: set[str] = set()
        bounds: set[int] = set()
        ports: set[int] = set()
        ok = True
        calls: set[tuple[str, str]] = set()
        for r in self.chains[key]:
            rr = rule_reads(r)
            if rr is None:
                ok = False
                continue
            reads |= rr
            for n in _addr_constants(r):
                bounds.add(int(n.network_address))
                bounds.add(int(n.broadcast_address) + 1)
            ports.update(_port_constants(r))
            if (key[0], r.target.name) in self.chains:
                calls.add((key[0], r.target.name))
            if r.target.name in ("MASQUERADE", "REDIRECT") or any(m.module in ("addrtype", "pkttype") for m in r.matches):
                bounds |= self.ctx_bounds
        d = self._direct[key] = (reads, bounds, ports, ok, calls)
        return d

    def info(self, key: tuple[str, str]) -> ChainInfo:
        i = self._info.get(key)
        if i is not None:
            return i
        reads: set[str] = set()
        bounds: set[int] = set()
        ports: set[int] = set()
        ok = True
        seen = set()
        todo = [key]
        while todo:
            k = todo.pop()
            if k in seen:
                continue
            seen.add(k)
            r_, b_, p_, ok_, c_ = self.direct(k)
            reads |= r_
            bounds |= b_
            ports |= p_
            ok = ok and ok_
            todo.extend(c_)
        i = self._info[key] = ChainInfo(reads, sorted(bounds), sorted(ports), ok)
        return i

    def whole(self) -> ChainInfo:
        """One ChainInfo for the whole ruleset and the routing decision between the hooks."""
        if self._whole is None:
            reads: set[str] = {"dst"}
            bounds: set[int] = set(_bounds_of_routing(self.ctx))
            ports: set[int] = set()
            ok = True
            for key in self.chains:
                r_, b_, p_, ok_, _ = self.direct(key)
                reads |= r_
                bounds |= b_
                ports |= p_
                ok = ok and ok_
            self._whole = ChainInfo(reads, sorted(bounds), sorted(ports), ok)
        return self._whole


def _bounds_of_routing(ctx: NodeContext) -> list[int]:
    """What the routing decision between the hooks reads: the destination against the node's
    addresses, loopback, pod networks and routes."""
    nets = [*(ipaddress.ip_network(a) for a in ctx.addresses), ctx.loopback, *ctx.pod_cidrs,
            *ctx.local_pod_cidrs, *(r.dst for r in ctx.routes)]  # fmt: skip
    return _bounds(nets)


def state_key(info: ChainInfo, s: PacketState) -> tuple[object, ...]:
    """The projection of ``s`` that decides what the chain does."""
    k: list[object] = []
    ab = info.addr_bounds
    pb = info.port_bounds
    exact = "recent" in info.reads  # recent lists store the address itself
    for f in info.reads:
        if f in ADDR_FIELDS and exact:
            k.append(getattr(s, f))
        elif f in ADDR_FIELDS:
            k.append(bisect.bisect_right(ab, int(getattr(s, f))))
        elif f in PORT_FIELDS:
            k.append(bisect.bisect_right(pb, getattr(s, f)))
        elif f == "recent":
            k.append(tuple(sorted(s.recent.items())) if s.recent else ())
        else:
            k.append(getattr(s, f))
    return tuple(k)


Delta = tuple[Fraction, tuple[tuple[str, object], ...], tuple, tuple, dict | None, str, tuple[str, ...]]


def capture(before: PacketState, results: list[tuple[PacketState, str]]) -> list[Delta]:
    n = len(before.path)
    w = len(before.wlog)
    out: list[Delta] = []
    for s, v in results:
        # only targets write packet fields, and every write is logged: replay exactly those
        # (even a write that kept the value), plus the reason an inconclusive walk gives
        written = dict.fromkeys(s.wlog[w:])
        changed = tuple((f, getattr(s, f)) for f in written)
        if s.reason != before.reason:
            changed = (*changed, ("reason", s.reason))
        added = tuple(k for k in s.recent_set if k not in before.recent_set)
        recent = s.recent if s.recent is not before.recent else None
        # the walk started from probability 1 (Interpreter._call): the result's is the factor
        out.append((s.prob, changed, s.path[n:], added, recent, v, s.wlog[w:]))
    return out


def apply(s: PacketState, deltas: list[Delta]) -> list[tuple[PacketState, str]]:
    out = []
    for factor, changed, path, added, recent, v, wlog in deltas:
        n = s.copy()
        if factor.numerator != factor.denominator:
            n.prob = s.prob * factor
        for f, val in changed:
            setattr(n, f, val)
        if path:
            n.path = s.path + path
        if added:
            n.recent_set = s.recent_set + tuple(k for k in added if k not in s.recent_set)
        if recent is not None:
            n.recent = recent
        if wlog:
            n.wlog = s.wlog + wlog
        out.append((n, v))
    return out
