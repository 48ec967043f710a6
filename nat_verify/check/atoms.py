"""Exhaustive source enumeration: every packet to one destination, one per equivalence class.

Why this is a proof and not a sample
------------------------------------
For a fixed destination (address, port, protocol) the only packet fields left free are the
source address, the source port and where the packet enters. The interpreter and the intent
look at the source address only through a finite set of constants: the CIDRs of ``-s`` and
``iprange``/``ipset`` matches in the rules the packet can reach, and the addresses intent
distinguishes (node addresses, loopback, pod networks, endpoint IPs, loadBalancerSourceRanges,
LB IPs). Every one of those tests is membership in a CIDR, so two sources that lie in exactly
the same set of constants (the same "signature") satisfy the same matches and get the same
expectation: checking one representative per signature checks them all. (The constants cut
the address space into intervals; intervals with equal signatures, such as the gaps between
endpoint addresses, are one class.) The same holds for source ports (``--sport``
constants) and the origin, which follows from the address (a node address is the host, this
node's pod CIDR is a pod, anything else arrives from outside).

The constants are the source-address and source-port constants of the compiled predicates
(``netfilter.program``), whatever module wrote them (``-s``, ``iprange``, ipset members,
``addrtype``'s node addresses, ``--ctorigsrc``), collected over-approximately: those of every
rule reachable from the nat PREROUTING/OUTPUT hooks by rules whose predicates can hold for the
destination, port and protocol (``predicate.decide``), plus those of every rule in every other
table and in nat POSTROUTING/INPUT (those run after DNAT, when the destination has changed).
More constants only make more atoms.
A rule the model cannot evaluate still makes the result inconclusive (the interpreter says so).
"""

from __future__ import annotations

import bisect
import ipaddress
from collections.abc import Iterable

import attrs

from nat_verify.model.cluster import IPAddress, IPNetwork
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.hooks import IPTABLES, OUTPUT, PREROUTING, HookTable
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.predicate import decide
from nat_verify.netfilter.program import CompiledRule, Program

SPORT_DEFAULT = 40000


@attrs.frozen
class Partition:
    """The cuts of one destination's source space: two sources with the same ``signature``
    (the set of constant CIDRs they lie in) and source ports in the same interval between
    ``sport_bounds`` are in one class (when ``sport_cut`` is false, all ports are)."""

    family: int
    spans: tuple[tuple[int, int], ...]  # [first, last + 1) of every constant CIDR
    sport_bounds: tuple[int, ...]
    sport_cut: bool

    def signature(self, addr: int) -> frozenset[int]:
        return frozenset(i for i, (a, b) in enumerate(self.spans) if a <= addr < b)

    def sport_class(self, port: int) -> int:
        return bisect.bisect_right(self.sport_bounds, port) if self.sport_cut else 0
SRC_FIELDS = ("src", "orig_src")
SPORT_FIELDS = ("sport", "orig_sport")


def dnat_roots(hooks: HookTable) -> set[tuple[str, str]]:
    """The base chains that decide a connection's destination NAT: the NAT entries at
    PREROUTING and OUTPUT (iptables' nat PREROUTING/OUTPUT, nftables' type nat chains there)."""
    return {e.key for e in hooks.entries if e.nat and e.hook in (PREROUTING, OUTPUT)}


def may_match_destination(rule: CompiledRule, dst: IPAddress, dport: int, proto: str) -> bool:
    """Whether some packet to (dst, dport, proto) can match ``rule``: no predicate of it is
    false for every such packet."""
    known = {"dst": dst, "dport": dport, "proto": proto}
    return all(decide(p, known) is not False for p in rule.preds)


class SourceSpace:
    """Precomputed constants of one ruleset; ``classes(dst, ...)`` gives the atoms for one destination."""

    def __init__(self, source: Interpreter | Program, hooks: HookTable | None = None) -> None:
        self.program = source.program if isinstance(source, Interpreter) else source
        if hooks is None:
            hooks = source.hooks if isinstance(source, Interpreter) else IPTABLES
        self.roots = dnat_roots(hooks)
        self.global_src: set[IPNetwork] = set()
        self.global_sport: set[int] = set()
        # the chains that decide destination NAT see the original destination: their source
        # constants count per destination (``constants``); every other chain's count for all
        self.dnat_chains = self._reachable(self.roots, None)
        for key, ch in self.program.chains.items():
            if key in self.dnat_chains:
                continue
            for cr in ch.rules:
                self.global_src.update(cr.address_constants(SRC_FIELDS))
                self.global_sport.update(cr.port_constants(SPORT_FIELDS))

    def _reachable(
        self, roots: set[tuple[str, str]], dst: tuple[IPAddress, int, str] | None
    ) -> set[tuple[str, str]]:
        chains = self.program.chains
        seen: set[tuple[str, str]] = set()
        todo = [r for r in roots if r in chains]
        while todo:
            key = todo.pop()
            if key in seen:
                continue
            seen.add(key)
            ch = chains[key]
            rules = ch.rules
            for i in ch.positions(None if dst is None else dst[0]):
                cr = rules[i]
                if not cr.jump or (dst is not None and not may_match_destination(cr, *dst)):
                    continue
                nxt = (key[0], cr.jump)
                if nxt not in seen:
                    todo.append(nxt)
        return seen

    def constants(self, dst: IPAddress, dport: int, proto: str) -> tuple[set[IPNetwork], set[int]]:
        src = set(self.global_src)
        sport = set(self.global_sport)
        for key in self._reachable(self.roots, (dst, dport, proto)):
            ch = self.program.chains[key]
            rules = ch.rules
            for i in ch.positions(dst):
                cr = rules[i]
                if may_match_destination(cr, dst, dport, proto):
                    src.update(cr.address_constants(SRC_FIELDS))
                    sport.update(cr.port_constants(SPORT_FIELDS))
        return src, sport

    def partition(
        self, ctx: NodeContext, dst: IPAddress, dport: int, proto: str, extra: Iterable[IPNetwork | IPAddress]
    ) -> Partition:
        """The cuts of the source space for packets to ``dst``: CIDRs and source-port bounds."""
        src_consts, sport_consts = self.constants(dst, dport, proto)
        fam = dst.version
        nets: set[IPNetwork] = {n for n in src_consts if n.version == fam}
        for e in extra:
            n = e if isinstance(e, ipaddress.IPv4Network | ipaddress.IPv6Network) else ipaddress.ip_network(e)
            if n.version == fam:
                nets.add(n)
        nets.update(n for n in ctx.pod_cidrs if n.version == fam)
        nets.update(n for n in ctx.local_pod_cidrs if n.version == fam)
        nets.update(ipaddress.ip_network(a) for a in ctx.addresses if a.version == fam)
        nets.add(ctx.loopback)
        if fam == 4:
            nets.update({ipaddress.ip_network("224.0.0.0/4"), ipaddress.ip_network("255.255.255.255/32"),
                         ipaddress.ip_network("0.0.0.0/8")})  # fmt: skip
        else:
            nets.add(ipaddress.ip_network("ff00::/8"))
        nets.add(ipaddress.ip_network(dst))  # a pod addressing itself is its own case
        spans = tuple(sorted({(int(n.network_address), int(n.broadcast_address) + 1) for n in nets}))
        sports = tuple(sorted({0, 65536, *[p for p in sport_consts if 0 <= p <= 65536]}))
        return Partition(fam, spans, sports, bool(sport_consts))

    def classes(
        self,
        ctx: NodeContext,
        dst: IPAddress,
        dport: int,
        proto: str,
        extra: Iterable[IPNetwork | IPAddress],
        preferred: Iterable[IPAddress] = (),
    ) -> list[tuple[IPAddress, int, str]]:
        """One (source, source port, origin) per equivalence class of packets to ``dst``."""
        part = self.partition(ctx, dst, dport, proto, extra)
        fam, spans = part.family, part.spans
        top = 1 << (32 if fam == 4 else 128)
        bounds = {0, top}
        for a, b in spans:
            bounds.add(a)
            bounds.add(b)
        edges = sorted(b for b in bounds if b <= top)
        sports = part.sport_bounds
        # one port per interval the --sport constants cut out (port 0 is not a valid source)
        sport_reps = sorted({max(1, p) for p in sports[:-1]}) if part.sport_cut else [SPORT_DEFAULT]
        out: list[tuple[IPAddress, int, str]] = []
        to_ip = ipaddress.IPv4Address if fam == 4 else ipaddress.IPv6Address
        dst_is_loopback = dst in ctx.loopback
        preferred = list(preferred)
        liked = sorted(int(a) for a in preferred if a.version == fam)
        # Atoms inside exactly the same constants are one class, wherever they lie (every test
        # on the source is membership in one of these CIDRs): keep one atom per signature,
        # preferring one that holds a readable (preferred) address.
        chosen: dict[frozenset[int], tuple[int, int, int | None]] = {}
        for lo, hi in zip(edges, edges[1:], strict=False):
            sig = part.signature(lo)
            pick = next((a for a in liked if lo <= a < hi), None)
            if sig not in chosen or (pick is not None and chosen[sig][2] is None):
                chosen[sig] = (lo, hi, pick)
        for lo, hi, pick in sorted(chosen.values()):
            # any member stands for its class; show a readable one (a preferred address, or not
            # the network address) in counterexamples
            rep: IPAddress = to_ip(pick if pick is not None else (lo + 1 if hi - lo > 2 else lo))
            if rep in ctx.loopback:
                if not dst_is_loopback:
                    continue  # only loopback destinations are reached from loopback sources
                rep = to_ip(int(ctx.loopback.network_address) + 1)
                origin = "host"
            elif ctx.is_local(rep):
                if dst_is_loopback:
                    continue
                origin = "host"
            elif any(rep in n for n in ctx.local_pod_cidrs):
                origin = "pod"
            else:
                if rep.is_unspecified:
                    rep = to_ip(lo + 1) if lo + 1 < hi else rep
                origin = "external"
            if dst_is_loopback and origin != "host":
                continue  # a loopback destination is reached only from the node itself
            zeronet = fam == 4 and int(rep) < (1 << 24)
            if origin != "host" and (rep.is_multicast or (fam == 4 and int(rep) == 0xFFFFFFFF) or rep.is_unspecified or zeronet):
                # not a valid unicast source: routing drops such packets as martians
                # (ip_route_input_slow: multicast, limited broadcast, 0.0.0.0/8)
                continue
            for sp in sport_reps:
                out.append((rep, sp, origin))
        # classes whose representative is a preferred (readable) address first: they give the
        # counterexamples a person is shown
        rank = {a: i for i, a in reversed(list(enumerate(int(x) for x in preferred if x.version == fam)))}
        out.sort(key=lambda c: rank.get(int(c[0]), len(rank)))
        return out
