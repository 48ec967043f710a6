"""The form the kernel keeps a ruleset in, so that rulesets read from different forms compare.

Loading a script and listing it back changes its spelling but not its meaning: a one-element
anonymous set becomes the element (``ip daddr { 10.0.0.0/8 }`` lists as ``ip daddr
10.0.0.0/8``), a dynamic set that a rule updates gets the default size 65535 (nft 1.0.6 adds
it when it reads the ``update``; a dynamic set no rule writes keeps no size), and elements come
back in the kernel's order. ``kernel_form`` applies the first two; ``same_ruleset`` also ignores element
order, which is what two readings of one ruleset can still differ in.
"""

from __future__ import annotations

import attrs

from nat_verify.nftables.expr import (
    DEFAULT_REJECT,
    AnonSet,
    MapItem,
    Match,
    Meta,
    Payload,
    Reject,
    SetUpdate,
    Stmt,
    Value,
)
from nat_verify.nftables.model import Rule, Ruleset, Set, Table

DYNAMIC_SET_SIZE = 65535


def _stmt(s: Stmt) -> Stmt:
    if isinstance(s, Match) and isinstance(s.right, AnonSet) and len(s.right.items) == 1:
        only = s.right.items[0]
        if not isinstance(only, MapItem):
            return attrs.evolve(s, right=only)
    return s


def _l3(stmts: tuple[Stmt, ...]) -> str:
    """``ip``/``ip6`` when the rule matches only that family's packets, else ``""``."""
    for s in stmts:
        if isinstance(s, Match) and s.op == "==":
            if isinstance(s.left, Payload) and s.left.protocol in ("ip", "ip6"):
                return s.left.protocol
            if isinstance(s.left, Meta) and s.left.key == "nfproto" and s.right in (Value("ipv4"), Value("ipv6")):
                return "ip" if s.right == Value("ipv4") else "ip6"
    return ""


def _rule(r: Rule, family: str) -> Rule:
    stmts = tuple(_stmt(s) for s in r.stmts)
    if family in ("inet", "bridge", "netdev") and Reject() in stmts and (l3 := _l3(stmts)):
        # a family-neutral reject in a rule that only sees IPv4 (IPv6) packets is the ICMP
        # (ICMPv6) one: nft lists it so
        explicit = Reject(DEFAULT_REJECT[l3], "port-unreachable")
        stmts = tuple(explicit if s == Reject() else s for s in stmts)
    return r if stmts == r.stmts else attrs.evolve(r, stmts=stmts)


def _set(s: Set, updated: set[str]) -> Set:
    if "dynamic" in s.flags and s.size is None and s.name in updated:
        return attrs.evolve(s, size=DYNAMIC_SET_SIZE)
    return s


def kernel_form(ruleset: Ruleset) -> Ruleset:
    tables = []
    for t in ruleset.tables:
        chains = tuple(attrs.evolve(c, rules=tuple(_rule(r, t.family) for r in c.rules)) for c in t.chains)
        updated = {s.set for c in t.chains for r in c.rules for s in r.stmts if isinstance(s, SetUpdate)}
        tables.append(attrs.evolve(t, chains=chains, sets=tuple(_set(s, updated) for s in t.sets)))
    return attrs.evolve(ruleset, tables=tuple(tables))


def json_form(ruleset: Ruleset) -> Ruleset:
    """What survives nft 1.0.6's JSON listing: no table or chain comments, no ``dynamic`` flag,
    no table flags (it prints the family in their place)."""
    tables = []
    for t in kernel_form(ruleset).tables:
        chains = tuple(attrs.evolve(c, comment="") for c in t.chains)
        sets = tuple(attrs.evolve(s, flags=tuple(f for f in s.flags if f != "dynamic")) for s in t.sets)
        tables.append(attrs.evolve(t, comment="", flags=(), chains=chains, sets=sets))
    return attrs.evolve(ruleset, tables=tuple(tables))


def _unordered(t: Table) -> tuple[object, ...]:
    chains = tuple(sorted(((c.name, c) for c in t.chains), key=lambda x: x[0]))
    sets = tuple(
        sorted(((s.name, attrs.evolve(s, elements=()), frozenset(s.elements)) for s in t.sets), key=lambda x: x[0])
    )
    return (t.family, t.name, t.comment, t.flags, chains, sets)


def same_ruleset(a: Ruleset, b: Ruleset) -> bool:
    """``a`` and ``b`` are one ruleset: equal in kernel form up to the order of objects and
    elements (rule order within a chain counts)."""
    ka, kb = kernel_form(a), kernel_form(b)
    return sorted(map(_unordered, ka.tables), key=repr) == sorted(map(_unordered, kb.tables), key=repr)


__all__ = ["json_form", "kernel_form", "same_ruleset"]
