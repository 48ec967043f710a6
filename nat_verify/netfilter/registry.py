"""The registry: everything nat-verify knows about netfilter's match modules and targets.

Design
------
A netfilter rule is a list of matches and one target, and each match module or target is an
extension with its own options and meaning. Before the registry, every consumer of a rule
restated those meanings: the interpreter had an if-chain of closures, the chain summaries a
table of the fields each module reads, the exhaustive classes a table of the options that
carry addresses and ports, and five lists of target names, kept in step by hand. When they
drifted apart nothing failed; the proofs just stopped covering what they claimed (ipset members
were matched by the interpreter but were no constants of the classes or the summaries, so the
memoised interpreter and the exhaustive checker silently disagreed with the rules).

So every extension is described once, as data (``spec``): one ``MatchSpec`` per module
(``matches``) and one ``TargetSpec`` per target (``targets``), each with

* its **options**, each with a *kind* that parses and validates the value (``--seconds 1h``
  is refused at load, with the dump's file and line, by every command alike);
* the **packet fields** it reads and, for targets, writes;
* the **node facts** it needs (interface names, the node's addresses, routes, ipset
  members): an entry whose fact the user did not give compiles to ``Unknown`` naming it;
* its **meaning**: for a match, a predicate of the predicate language (``predicate``) built
  from the parsed options and the node; for a target, its effect on the walk state;
* for targets, **where the kernel accepts it** (tables, hooks, backends), read off the
  kernel by a test, so a ruleset the kernel would refuse is refused here too
  (``placement``).

Everything else is derived. The constants that cut the packet space into classes (addresses
and ports) are the constants inside the compiled predicates, so a module cannot compare a
field with a constant the classes do not know about: the ipset members *are* an ``AddrIn``.
What a chain reads is the union of what its predicates and targets read. The Z3 encoding is
one formula per predicate value, not per module.

Three kinds of entries, and a fourth kind of name:

1. modelled: a meaning the model evaluates exactly (``tcp``, ``mark``, ``DNAT``, ...);
2. partly modelled: the meaning returns ``Unknown`` for the options it cannot decide (``tcp
   --tcp-option``, ``addrtype --limit-iface-in``), exact for the rest;
3. not modelled: Linux has it, the model does not evaluate it (``u32``, ``NFQUEUE``): its rules
   load (options unchecked) and compile to ``Unknown`` naming it, or for targets that change
   nothing the model reads (``LOG``), are stepped over;
4. anything else (``-m frobnicate``, ``-j FROBNICATE``): Linux has no such extension, so no
   kernel would have loaded the dump; it is bad input, refused at load (``RuleError``).

Adding a module is one entry and its tests: ``tests/unit/test_registry.py`` holds every entry
to its declarations (a predicate reads only the fields declared; its verdict is constant
between its constants) and the property tests draw random rulesets from the registry to check
that the fast interpreter, the rule-by-rule walk and the exhaustive classes agree.
"""

from __future__ import annotations

from collections.abc import Mapping

from nat_verify.netfilter import matches as _matches
from nat_verify.netfilter import targets as _targets
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.predicate import Pred, Unknown
from nat_verify.netfilter.ruleset import Match, Option, Rule, Target
from nat_verify.netfilter.spec import Given, MatchSpec, RuleError, TargetSpec, parse_options

CORE: MatchSpec = _matches.CORE


def _by_name(specs: tuple[MatchSpec, ...]) -> dict[str, MatchSpec]:
    out: dict[str, MatchSpec] = {}
    for s in specs:
        for n in (s.name, *s.aliases):
            assert n not in out, f"match module {n} registered twice"
            out[n] = s
    return out


MATCHES: Mapping[str, MatchSpec] = _by_name(_matches.ALL)
TARGETS: Mapping[str, TargetSpec] = {t.name: t for t in _targets.ALL}
assert len(TARGETS) == len(_targets.ALL), "a target registered twice"

MATCH_NAMES: frozenset[str] = frozenset(MATCHES)
TARGET_NAMES: frozenset[str] = frozenset(TARGETS)
# targets that end the chain whenever they fire
TERMINAL_TARGETS: frozenset[str] = frozenset(t.name for t in _targets.ALL if t.terminal)


class NoSuchExtension(RuleError):
    """A match module or target that Linux does not have."""


def match_spec(name: str) -> MatchSpec | None:
    return MATCHES.get(name)


def target_spec(name: str) -> TargetSpec | None:
    return TARGETS.get(name)


def _family_check(where: str, families: frozenset[int], family: int) -> None:
    if family and family not in families:
        raise RuleError(f"{where} does not exist in ip{'6' if family == 6 else ''}tables (IPv{family})")


def _meaning(spec: MatchSpec, where: str, given: tuple[Option, ...], ctx: NodeContext) -> Pred:
    _family_check(where, spec.families, ctx.family)
    opts = parse_options(where, spec.options, given, ctx.family, spec.required)
    if spec.meaning is None:
        what = f"match module {spec.name!r}"
        return Unknown(f"{what} ({spec.note}) is not modelled" if spec.note else f"{what} is not modelled")
    try:
        return spec.meaning(opts, ctx)
    except ValueError as e:
        raise RuleError(f"{where}: {e}") from None


def compile_core(core: tuple[Option, ...], ctx: NodeContext) -> Pred:
    """The predicate of a rule's IP-header options (``-s -d -p -i -o -f``)."""
    return _meaning(CORE, "rule", core, ctx)


def compile_match(m: Match, ctx: NodeContext) -> Pred:
    """The predicate of one ``-m MODULE ...``; RuleError when Linux has no such module or an
    option is malformed."""
    spec = MATCHES.get(m.module)
    if spec is None:
        raise NoSuchExtension(f"-m {m.module}: Linux has no match module {m.module!r}")
    return _meaning(spec, f"-m {m.module}", m.options, ctx)


def compile_matches(rule: Rule, ctx: NodeContext) -> tuple[Pred, ...]:
    """The rule's predicates in the order the kernel evaluates them (IP header first)."""
    return (compile_core(rule.core, ctx), *(compile_match(m, ctx) for m in rule.matches))


def compile_target(t: Target, family: int) -> tuple[TargetSpec, dict[str, Given]]:
    """The entry and parsed options of a target that is not a chain; RuleError when Linux has
    no such target or an option is malformed."""
    spec = TARGETS.get(t.name)
    where = f"-j {t.name}"
    if spec is None:
        raise NoSuchExtension(f"{where}: Linux has no target {t.name!r} (and the table has no such chain)")
    _family_check(where, spec.families, family)
    opts = parse_options(where, spec.options, t.options, family, spec.required)
    if spec.check is not None:
        try:
            spec.check(opts)
        except ValueError as e:
            raise RuleError(f"{where}: {e}") from None
    return spec, opts
