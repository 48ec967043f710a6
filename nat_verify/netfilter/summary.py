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

Which fields a rule reads, and which constants it compares them with, come from its compiled
predicates (``predicate.reads``, ``address_constants``, ``port_constants``) and its target's
registry entry (``MASQUERADE`` reads the destination against the node's routes, ``recent`` its
lists...): the same description the interpreter evaluates, so a summary cannot miss a constant
a match compares (ipset members are ``AddrIn`` constants like any ``-s``). A target that reads
node facts (routes, addresses) adds the node's address constants.
"""

from __future__ import annotations

import bisect
import ipaddress
from collections.abc import Iterable
from fractions import Fraction
from typing import TYPE_CHECKING

from nat_verify.model.cluster import IPNetwork
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.spec import FACT_ADDRESSES, FACT_ROUTES
from nat_verify.netfilter.state import ADDR_FIELDS, PLAIN_FIELDS, PORT_FIELDS, STATE_FIELDS

if TYPE_CHECKING:
    from nat_verify.netfilter.program import Program
    from nat_verify.netfilter.state import PacketState

__all__ = ["ADDR_FIELDS", "PLAIN_FIELDS", "PORT_FIELDS", "STATE_FIELDS", "Analyser", "ChainInfo", "state_key"]

_NODE_FACTS = frozenset({FACT_ADDRESSES, FACT_ROUTES})
REACH_LIMIT = 4096  # chains one chain's own summary info may span (see Analyser.info)


class ChainInfo:
    """What one chain, with everything it can jump to, reads; and the constants that matter."""

    __slots__ = ("reads", "addr_bounds", "port_bounds", "ok")

    def __init__(self, reads: set[str], addr_bounds: list[int], port_bounds: list[int], ok: bool) -> None:
        self.reads = reads
        self.addr_bounds = addr_bounds
        self.port_bounds = port_bounds
        self.ok = ok


def _bounds(nets: Iterable[IPNetwork]) -> list[int]:
    b: set[int] = set()
    for n in nets:
        b.add(int(n.network_address))
        b.add(int(n.broadcast_address) + 1)
    return sorted(b)


def node_networks(ctx: NodeContext) -> list[IPNetwork]:
    """What the routing decision (and MASQUERADE, REDIRECT) compare an address with: the node's
    addresses, loopback, pod networks and routes."""
    return [*(ipaddress.ip_network(a) for a in ctx.addresses), ctx.loopback, *ctx.pod_cidrs,
            *ctx.local_pod_cidrs, *(r.dst for r in ctx.routes)]  # fmt: skip


_Direct = tuple[set[str], set[int], set[int], bool, set[tuple[str, str]]]


class Analyser:
    """ChainInfo per chain, computed on demand (transitively through jumps and gotos).

    Lazy because a packet meets a handful of a large dump's chains; ``whole()`` (every chain,
    for replaying whole traces) is computed only when asked for.
    """

    def __init__(self, program: Program) -> None:
        self.program = program
        self.ctx = program.ctx
        self.ctx_bounds = set(_bounds(node_networks(program.ctx)))
        self._direct: dict[tuple[str, str], _Direct] = {}
        self._info: dict[tuple[str, str], ChainInfo] = {}
        self._whole: ChainInfo | None = None

    def direct(self, key: tuple[str, str]) -> _Direct:
        d = self._direct.get(key)
        if d is not None:
            return d
        reads: set[str] = set()
        bounds: set[int] = set()
        ports: set[int] = set()
        calls: set[tuple[str, str]] = set()
        for cr in self.program.chains[key].rules:
            reads |= cr.reads
            for n in cr.address_constants():
                bounds.add(int(n.network_address))
                bounds.add(int(n.broadcast_address) + 1)
            ports.update(cr.port_constants())
            if cr.jump:
                calls.add((key[0], cr.jump))
            if cr.spec is not None and cr.spec.facts & _NODE_FACTS:
                bounds |= self.ctx_bounds
        # every construct has declared reads (unknown ones read nothing and decide nothing):
        # every chain can be summarised
        d = self._direct[key] = (reads, bounds, ports, True, calls)
        return d

    def info(self, key: tuple[str, str]) -> ChainInfo:
        """What ``key`` and every chain it reaches read. A chain that reaches more than
        ``REACH_LIMIT`` chains (kube-proxy's KUBE-SERVICES on a large node, a hostile
        100,000-deep jump chain) is not summarised (``ok`` false: walked rule by rule, the
        chains below it summarised on their own): collecting its reads would cost more than
        the summary saves, and would be paid again at every depth it is called from."""
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
            if len(seen) > REACH_LIMIT:
                i = self._info[key] = ChainInfo(set(), [], [], False)
                return i
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
            bounds: set[int] = set(self.ctx_bounds)
            ports: set[int] = set()
            ok = True
            for key in self.program.chains:
                r_, b_, p_, ok_, _ = self.direct(key)
                reads |= r_
                bounds |= b_
                ports |= p_
                ok = ok and ok_
            self._whole = ChainInfo(reads, sorted(bounds), sorted(ports), ok)
        return self._whole


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
