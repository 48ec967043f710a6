"""Every name a ruleset uses must exist in its table: chains jumped to, sets and maps looked up."""

from __future__ import annotations

from nat_verify.netfilter.parse import DumpError
from nat_verify.nftables.expr import Verdict
from nat_verify.nftables.model import Ruleset
from nat_verify.nftables.walk import chain_targets, set_refs


def check_references(ruleset: Ruleset) -> None:
    """Raise ``DumpError`` at the first rule or element naming a chain or set its table lacks."""
    for t in ruleset.tables:
        for c in t.chains:
            for r in c.rules:
                for target in chain_targets(r.stmts):
                    if t.chain(target) is None:
                        raise DumpError(ruleset.source, r.line, f"rule in chain {c.name} goes to chain {target!r}, which table {t.family} {t.name} does not declare")
                    tc = t.chain(target)
                    if tc is not None and tc.base is not None:
                        raise DumpError(ruleset.source, r.line, f"rule in chain {c.name} jumps to base chain {target!r}")
                for name in set_refs(r.stmts):
                    if t.set(name) is None:
                        raise DumpError(ruleset.source, r.line, f"rule in chain {c.name} uses @{name}, which table {t.family} {t.name} does not declare")
        for s in t.sets:
            for el in s.elements:
                v = el.value
                if isinstance(v, Verdict) and v.target and t.chain(v.target) is None:
                    raise DumpError(ruleset.source, el.line or s.line, f"element of map {s.name} goes to chain {v.target!r}, which table {t.family} {t.name} does not declare")
