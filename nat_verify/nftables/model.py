"""An nftables ruleset as frozen values: tables of every family, chains, sets, maps, rules.

Rules keep the line they were read from and their raw text next to the typed statements, as
the iptables model does, so an outcome can point back at the dump. ``Ruleset`` is what every
parser returns and every renderer reads.
"""

from __future__ import annotations

from functools import cached_property

import attrs

from nat_verify.nftables.expr import Elem, Expr, Stmt, Verdict

FAMILIES = ("ip", "ip6", "inet", "arp", "bridge", "netdev")
HOOKS = ("prerouting", "input", "forward", "output", "postrouting", "ingress", "egress")
CHAIN_TYPES = ("filter", "nat", "route")


@attrs.frozen
class BaseHook:
    """What makes a chain a base chain: ``type T hook H [device D] priority P; [policy X;]``."""

    type: str
    hook: str
    priority: int
    policy: str = "accept"
    device: str = ""


@attrs.frozen
class Rule:
    chain: str
    stmts: tuple[Stmt, ...]
    comment: str = ""
    handle: int | None = attrs.field(default=None, eq=False)
    line: int = attrs.field(default=0, eq=False)
    raw: str = attrs.field(default="", eq=False)

    @property
    def verdict(self) -> Verdict | None:
        """The rule's verdict statement, if it has one."""
        for s in self.stmts:
            if isinstance(s, Verdict):
                return s
        return None


@attrs.frozen
class Chain:
    name: str
    base: BaseHook | None = None
    rules: tuple[Rule, ...] = ()
    comment: str = ""
    line: int = attrs.field(default=0, eq=False)


@attrs.frozen
class Element:
    """One element of a named set (``value`` None) or map: key, value and attributes."""

    key: Expr
    value: Expr | Verdict | None = None
    comment: str = ""
    timeout: int | None = None
    expires: int | None = attrs.field(default=None, eq=False)  # run-time state of the kernel
    line: int = attrs.field(default=0, eq=False)

    @classmethod
    def of(cls, key: Expr, value: Expr | Verdict | None = None, line: int = 0) -> Element:
        """An element from an expression that may carry attributes (``Elem``)."""
        if isinstance(key, Elem):
            return cls(key.val, value, key.comment, key.timeout, key.expires, line)
        return cls(key, value, line=line)


@attrs.frozen
class Set:
    """A named set (``kind == "set"``) or map (``"map"``).

    ``key`` holds the type names (``("ipv4_addr", "inet_proto", "inet_service")``) or, with
    ``typeof``, the expressions' text; ``data`` is the map's value type (``verdict``,
    ``ipv4_addr``...), ``""`` for a set. ``timeout`` and ``gc_interval`` are seconds.
    """

    name: str
    kind: str
    key: tuple[str, ...]
    data: str = ""
    typeof: bool = False
    flags: tuple[str, ...] = ()
    timeout: int | None = None
    gc_interval: int | None = None
    size: int | None = None
    policy: str = ""
    auto_merge: bool = False
    comment: str = ""
    elements: tuple[Element, ...] = ()
    line: int = attrs.field(default=0, eq=False)

    @property
    def is_map(self) -> bool:
        return self.kind == "map"

    @property
    def dynamic(self) -> bool:
        """Filled at run time (``update @set``): its elements are state, not configuration."""
        return "dynamic" in self.flags or "timeout" in self.flags


@attrs.frozen
class Table:
    family: str
    name: str
    chains: tuple[Chain, ...] = ()
    sets: tuple[Set, ...] = ()
    comment: str = ""
    flags: tuple[str, ...] = ()
    line: int = attrs.field(default=0, eq=False)

    @cached_property
    def _chains(self) -> dict[str, Chain]:
        return {c.name: c for c in self.chains}

    @cached_property
    def _sets(self) -> dict[str, Set]:
        return {s.name: s for s in self.sets}

    def chain(self, name: str) -> Chain | None:
        return self._chains.get(name)

    def set(self, name: str) -> Set | None:
        return self._sets.get(name)

    @property
    def key(self) -> tuple[str, str]:
        return (self.family, self.name)


@attrs.frozen
class Ruleset:
    tables: tuple[Table, ...]
    source: str = attrs.field(default="<memory>", eq=False)

    def table(self, family: str, name: str) -> Table | None:
        for t in self.tables:
            if t.family == family and t.name == name:
                return t
        return None

    def rule_count(self) -> int:
        return sum(len(c.rules) for t in self.tables for c in t.chains)

    def element_count(self) -> int:
        return sum(len(s.elements) for t in self.tables for s in t.sets)

    def base_chains(self) -> list[tuple[Table, Chain]]:
        return [(t, c) for t in self.tables for c in t.chains if c.base is not None]
