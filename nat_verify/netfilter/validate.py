"""Refuse at load what no kernel would load: one message with the dump's file and line.

Every command that reads a dump calls ``validate_ruleset`` right after parsing it, so a
malformed option (``-m recent --seconds 1h``, ``-j MARK --set-xmark junk``), an extension
Linux does not have (``-m frobnicate``), or a rule the kernel would refuse where it stands
(``placement``) is bad input everywhere alike (exit code 2), never a traceback in one command
and an inconclusive trace in another.
"""

from __future__ import annotations

from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.parse import DumpError
from nat_verify.netfilter.placement import refusals
from nat_verify.netfilter.registry import compile_core, compile_match, compile_target
from nat_verify.netfilter.ruleset import Match, Ruleset
from nat_verify.netfilter.spec import RuleError


def validate_ruleset(ruleset: Ruleset, ctx: NodeContext | None = None) -> None:
    """Raise DumpError (file:line) for the first rule the kernel would refuse."""
    ctx = ctx or NodeContext(family=ruleset.family, addresses=())
    seen: set[Match] = set()  # the parser interns matches: check each once
    cores: set[object] = set()
    for t in ruleset.tables:
        names = t.by_name
        for c in t.chains:
            for r in c.rules:
                try:
                    if r.core not in cores:
                        compile_core(r.core, ctx)
                        cores.add(r.core)
                    for m in r.matches:
                        if m not in seen:
                            compile_match(m, ctx)
                            seen.add(m)
                    if r.target.name and r.target.name not in names:
                        compile_target(r.target, ruleset.family)
                except RuleError as e:
                    raise DumpError(ruleset.source, r.line, str(e)) from None
    for refusal in refusals(ruleset):
        raise DumpError(ruleset.source, refusal.line, refusal.message)
