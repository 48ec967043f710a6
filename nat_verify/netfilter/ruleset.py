"""A netfilter ruleset as iptables-save describes it: tables, chains, rules.

Rules keep their raw text and dump line next to typed fields (as knftables and kube-proxy's
test parser do), so that every outcome can point back at the line that produced it.

The typed form is deliberately generic, mirroring how iptables itself is built: a rule is a
list of *matches* (the core ``-s/-d/-p/-i/-o/-f`` options, then one ``Match`` per ``-m MODULE``
with the options that followed it) and one *target* with its options. The interpreter gives
meaning to the modules it knows; a module it does not know stays an opaque ``Match`` so the
dump still loads, and any outcome that depends on it becomes ``inconclusive``.
"""

from __future__ import annotations

from functools import cached_property

import attrs

BUILTIN_CHAINS: dict[str, tuple[str, ...]] = {
    "raw": ("PREROUTING", "OUTPUT"),
    "mangle": ("PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"),
    "nat": ("PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"),
    "filter": ("INPUT", "FORWARD", "OUTPUT"),
    "security": ("INPUT", "FORWARD", "OUTPUT"),
}
TABLES = tuple(BUILTIN_CHAINS)

UNSEEN_MODULE = "nat-verify-unseen"
"""The match module of an *unseen marker*: a rule standing for what an excerpt does not show
(``netfilter.excerpt``). Its one option ``--reason`` says what is missing. No evaluator can
decide it, so a packet that reaches one is inconclusive with that reason."""


@attrs.frozen
class Option:
    """``[!] --name arg...``; ``name`` keeps its dashes (``-s``, ``--dport``)."""

    name: str
    args: tuple[str, ...] = ()
    negated: bool = False

    @property
    def value(self) -> str:
        return " ".join(self.args)


@attrs.frozen
class Match:
    """One ``-m MODULE`` and its options. ``module`` is ``""`` for the core options."""

    module: str
    options: tuple[Option, ...] = ()

    def get(self, name: str) -> Option | None:
        for o in self.options:
            if o.name == name:
                return o
        return None


@attrs.frozen
class Target:
    """``-j NAME`` (or ``-g NAME``) and its options; ``name`` is ``""`` for a rule with no target."""

    name: str = ""
    options: tuple[Option, ...] = ()
    goto: bool = False

    def get(self, name: str) -> Option | None:
        for o in self.options:
            if o.name == name:
                return o
        return None


@attrs.frozen
class Rule:
    chain: str
    core: tuple[Option, ...]
    matches: tuple[Match, ...]
    target: Target
    line: int = attrs.field(default=0, eq=False)
    raw: str = attrs.field(default="", eq=False)
    counters: tuple[int, int] | None = attrs.field(default=None, eq=False)

    def core_option(self, name: str) -> Option | None:
        for o in self.core:
            if o.name == name:
                return o
        return None

    def module(self, name: str) -> Match | None:
        for m in self.matches:
            if m.module == name:
                return m
        return None

    @property
    def comment(self) -> str:
        m = self.module("comment")
        if m is None:
            return ""
        o = m.get("--comment")
        return o.value if o else ""


@attrs.frozen
class Chain:
    name: str
    policy: str | None  # ACCEPT/DROP for built-in chains, None for user chains
    rules: tuple[Rule, ...] = ()
    line: int = attrs.field(default=0, eq=False)
    counters: tuple[int, int] | None = attrs.field(default=None, eq=False)

    @property
    def builtin(self) -> bool:
        return self.policy is not None


@attrs.frozen
class Table:
    name: str
    chains: tuple[Chain, ...]
    line: int = attrs.field(default=0, eq=False)

    @cached_property
    def by_name(self) -> dict[str, Chain]:
        return {c.name: c for c in self.chains}

    def chain(self, name: str) -> Chain | None:
        return self.by_name.get(name)


@attrs.frozen
class Ruleset:
    family: int  # 4 or 6
    tables: tuple[Table, ...]
    source: str = attrs.field(default="<memory>", eq=False)
    # the iptables backend that wrote the dump ("legacy", "nft"), from its header; "" unknown
    backend: str = attrs.field(default="", eq=False)

    @cached_property
    def by_name(self) -> dict[str, Table]:
        return {t.name: t for t in self.tables}

    def table(self, name: str) -> Table | None:
        return self.by_name.get(name)

    def rule_count(self) -> int:
        return sum(len(c.rules) for t in self.tables for c in t.chains)
