"""A ruleset compiled for one node: the one description every consumer reads.

``Program`` holds, per chain, the rules compiled through the registry: each rule's predicates
(``predicate``), their evaluator, and its target (a registry entry with parsed options, or a
jump to a chain). The interpreter walks it, chain summaries read what its rules read and
compare, the exhaustive classes collect its source constants, and the equivalence of two
rulesets its destination constants; none of them looks at a rule's options again.

Chains compile on first use: a packet meets a handful of the thousands of chains of a large
dump, and ``nat-verify trace`` on a 10,000-Service node should not compile them all. A rule
that does not compile (a malformed option, an extension Linux does not have) keeps the error:
``validate.validate_ruleset`` refuses such a dump at load; a caller that skipped it gets an
inconclusive walk naming the line.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from nat_verify.model.cluster import IPAddress, IPNetwork
from nat_verify.model.outcome import Step
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.predicate import (
    FALSE,
    TRUE,
    Evaluator,
    Pred,
    Unknown,
    address_constants,
    conjunction,
    evaluator,
    port_constants,
    reads,
)
from nat_verify.netfilter.registry import (
    NoSuchExtension,
    compile_core,
    compile_match,
    compile_target,
)
from nat_verify.netfilter.ruleset import Match, Rule, Ruleset, Target
from nat_verify.netfilter.spec import Given, RuleError, TargetSpec

_EMPTY: dict[str, Given] = {}


def _test(preds: tuple[Pred, ...]) -> Evaluator:
    """The evaluator of a rule's conjunction, without the parts that always hold."""
    live = tuple(p for p in preds if p != TRUE)
    if FALSE in live:
        return lambda st: False
    if not live:
        return lambda st: True
    if len(live) == 1:
        return evaluator(live[0])
    return conjunction(tuple(evaluator(p) for p in live))


class CompiledRule:
    """One rule: its predicates, their evaluator, and what fires."""

    __slots__ = ("rule", "index", "preds", "test", "spec", "opts", "jump", "error", "step", "_reads")

    def __init__(
        self, rule: Rule, index: int, preds: tuple[Pred, ...], spec: TargetSpec | None, opts: dict[str, Given],
        jump: str, error: str, step: Step,
    ) -> None:  # fmt: skip
        self.rule = rule
        self.index = index  # 1-based
        self.preds = preds
        self.test: Evaluator = _test(preds)
        self.spec = spec  # the target's entry; None for a jump, no target, or a rule in error
        self.opts = opts
        self.jump = jump  # the chain it jumps (or goes) to, "" otherwise
        self.error = error  # why the rule does not compile ("" when it does)
        self.step = step  # what the path records when the rule fires
        self._reads: frozenset[str] | None = None

    @property
    def reads(self) -> frozenset[str]:
        """The walk-state fields this rule's matches and target read."""
        if self._reads is None:
            out: set[str] = set()
            for p in self.preds:
                out |= reads(p)
            if self.spec is not None:
                out |= self.spec.reads
            self._reads = frozenset(out)
        return self._reads

    def address_constants(self, fields: tuple[str, ...] | None = None) -> Iterator[IPNetwork]:
        for p in self.preds:
            yield from address_constants(p, fields)

    def port_constants(self, fields: tuple[str, ...] | None = None) -> Iterator[int]:
        for p in self.preds:
            yield from port_constants(p, fields)


class Chain:
    """A chain's rules, compiled on first use, with an optional destination index.

    The index maps an exact destination address to the rules that can match it, plus the
    rules that match any destination, for chains that are long lists of exact-destination
    matches (kube-proxy's ``KUBE-SERVICES``); a packet visits only those, in rule order.
    """

    def __init__(self, program: Program, table: str, name: str, policy: str | None, raw: tuple[Rule, ...], index: bool) -> None:
        self.program = program
        self.table = table
        self.name = name
        self.policy = policy
        self.raw = raw
        self._rules: list[CompiledRule] | None = None
        self.by_dst: dict[IPAddress, list[int]] | None = None
        self.any_dst: list[int] = []
        self._cache: dict[IPAddress, list[int]] = {}
        if index and len(raw) >= 8:
            by_dst: dict[IPAddress, list[int]] = {}
            for i, r in enumerate(raw):
                d = r.core_option("-d")
                addr = _exact(d.value) if (d is not None and not d.negated) else None
                if addr is None:
                    self.any_dst.append(i)
                else:
                    by_dst.setdefault(addr, []).append(i)
            # index only when most rules are keyed by an exact destination
            if len(self.any_dst) * 4 <= len(raw):
                self.by_dst = by_dst

    @property
    def key(self) -> tuple[str, str]:
        return (self.table, self.name)

    @property
    def rules(self) -> list[CompiledRule]:
        if self._rules is None:
            self._rules = [self.program.compile_rule(self, i, r) for i, r in enumerate(self.raw, 1)]
        return self._rules

    def candidates(self, dst: IPAddress) -> list[int] | None:
        """Positions (0-based, in order) of the rules a packet to ``dst`` can match, or None
        when the chain has no index (every rule)."""
        if self.by_dst is None:
            return None
        c = self._cache.get(dst)
        if c is None:
            c = sorted(self.by_dst.get(dst, []) + self.any_dst)
            if len(self._cache) < 65536:
                self._cache[dst] = c
        return c

    def positions(self, dst: IPAddress | None) -> list[int] | range:
        c = None if dst is None else self.candidates(dst)
        return range(len(self.raw)) if c is None else c

    def jumps(self) -> Iterator[tuple[str, str]]:
        """The chains this chain's rules jump or go to (from the raw rules: no compiling)."""
        for r in self.raw:
            key = (self.table, r.target.name)
            if r.target.name and key in self.program.chains:
                yield key


def _exact(text: str) -> IPAddress | None:
    if "," in text:
        return None
    try:
        net = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None
    return net.network_address if net.prefixlen == net.max_prefixlen else None


class Program:
    """A ruleset compiled for one node (chains compile on first use)."""

    def __init__(self, ruleset: Ruleset, ctx: NodeContext, *, index: bool = True) -> None:
        self.ruleset = ruleset
        self.ctx = ctx
        self.chains: dict[tuple[str, str], Chain] = {
            (t.name, c.name): Chain(self, t.name, c.name, c.policy, c.rules, index)
            for t in ruleset.tables
            for c in t.chains
        }
        # matches repeat across rules (the parser interns them): compile each once
        self._matches: dict[Match, Pred] = {}
        self._core: dict[object, Pred] = {}
        self._targets: dict[Target, tuple[TargetSpec | None, dict[str, Given]]] = {}

    def chain(self, table: str, name: str) -> Chain | None:
        return self.chains.get((table, name))

    def predicates(self, rule: Rule) -> tuple[Pred, ...]:
        core = self._core.get(rule.core)
        if core is None:
            core = self._core[rule.core] = compile_core(rule.core, self.ctx)
        out = [core]
        for m in rule.matches:
            p = self._matches.get(m)
            if p is None:
                try:
                    p = compile_match(m, self.ctx)
                except NoSuchExtension as e:
                    # refused at load (validate); here, for a caller that skipped that, a
                    # module no kernel has decides nothing
                    p = Unknown(str(e))
                self._matches[m] = p
            out.append(p)
        return tuple(out)

    def compile_rule(self, chain: Chain, index: int, r: Rule) -> CompiledRule:
        step = Step(chain.table, chain.name, index, r.line, r.target.name)
        t = r.target
        try:
            preds = self.predicates(r)
            spec: TargetSpec | None = None
            opts = _EMPTY
            jump = ""
            if t.name and (chain.table, t.name) in self.chains:
                jump = t.name
            elif t.name:
                compiled = self._targets.get(t)
                if compiled is None:
                    try:
                        compiled = compile_target(t, self.ctx.family)
                    except NoSuchExtension:
                        compiled = (None, _EMPTY)  # firing it is inconclusive (refused at load by validate)
                    self._targets[t] = compiled
                spec, opts = compiled
        except RuleError as e:
            return CompiledRule(r, index, (), None, _EMPTY, "", f"line {r.line}: {e}", step)
        return CompiledRule(r, index, preds, spec, opts, jump, "", step)
