"""Write a ``Ruleset`` back as text that ``iptables-restore`` accepts.

The layout is canonical: built-in chains first (kernel order), then user chains in the
order they were declared; rules chain by chain; in each rule the core options in the order
iptables-save prints them (``-s -d -i -o -p -f``), then the matches as given, then the
target. ``parse(render(r)) == r`` for every ruleset (a property test checks it).
"""

from __future__ import annotations

import re

from nat_verify.netfilter.parse import STRING_OPTIONS
from nat_verify.netfilter.ruleset import BUILTIN_CHAINS, Option, Rule, Ruleset

_PLAIN = re.compile(r"^[A-Za-z0-9_\-]+$")
_SAFE = re.compile(r'^[^\s"\\]+$')
# options whose value iptables-save prints with xtables_save_string (quoted unless plain)
_STRING_OPTIONS = STRING_OPTIONS


def quote(arg: str, *, string_option: bool = False) -> str:
    plain = _PLAIN if string_option else _SAFE
    if arg and plain.match(arg) and not arg.startswith(("!", "-")):
        return arg
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _option(o: Option) -> str:
    parts = ["!"] if o.negated else []
    parts.append(o.name)
    s = o.name in _STRING_OPTIONS
    if s and o.args:
        parts.append(quote(" ".join(o.args), string_option=True))
    else:
        parts.extend(quote(a) for a in o.args)
    return " ".join(parts)


def render_rule(rule: Rule) -> str:
    out = [f"-A {rule.chain}"]
    out.extend(_option(o) for o in rule.core)
    for m in rule.matches:
        out.append(f"-m {m.module}")
        out.extend(_option(o) for o in m.options)
    if rule.target.name:
        out.append(f"{'-g' if rule.target.goto else '-j'} {rule.target.name}")
        out.extend(_option(o) for o in rule.target.options)
    return " ".join(out)


def render(ruleset: Ruleset, *, counters: bool = False, header: str = "") -> str:
    lines: list[str] = []
    if header:
        lines.append(f"# {header}")
    for table in ruleset.tables:
        lines.append(f"*{table.name}")
        builtin = BUILTIN_CHAINS[table.name]
        chains = sorted(
            table.chains,
            key=lambda c: (0, builtin.index(c.name)) if c.name in builtin else (1, 0),
        )
        for c in chains:
            cnt = c.counters if (counters and c.counters) else (0, 0)
            lines.append(f":{c.name} {c.policy or '-'} [{cnt[0]}:{cnt[1]}]")
        for c in chains:
            for r in c.rules:
                text = render_rule(r)
                if counters and r.counters:
                    text = f"[{r.counters[0]}:{r.counters[1]}] {text}"
                lines.append(text)
        lines.append("COMMIT")
    return "\n".join(lines) + "\n"
