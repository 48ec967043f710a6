"""Render a ruleset in the ``add ...`` batch form kube-proxy's fake (knftables) prints.

Objects come in ``Fake.Dump()`` order: the table, chains by name, sets by name, maps by name,
then every chain's rules (chains by name, rules in order), set elements, map elements. That
order declares every object before its first use, so the text loads with ``nft -f`` as one
transaction; it is how the kernel oracle loads a ruleset read from any form.
"""

from __future__ import annotations

from nat_verify.nftables.listing import element_text
from nat_verify.nftables.model import Chain, Ruleset, Set, Table
from nat_verify.nftables.text import quote, rule_text


def _chain_line(t: Table, c: Chain) -> str:
    head = f"add chain {t.family} {t.name} {c.name}"
    parts = []
    if c.base is not None:
        b = c.base
        dev = f" device {quote(b.device)}" if b.device else ""
        parts.append(f"type {b.type} hook {b.hook}{dev} priority {b.priority} ;")
        if b.policy != "accept":
            parts.append(f"policy {b.policy} ;")
    if c.comment:
        parts.append(f"comment {quote(c.comment)} ;")
    return f"{head} {{ {' '.join(parts)} }}" if parts else head


def _set_line(t: Table, s: Set) -> str:
    key = " . ".join(s.key)
    parts = [f"{'typeof' if s.typeof else 'type'} {key}" + (f" : {s.data}" if s.is_map else "") + " ;"]
    if s.flags:
        parts.append(f"flags {','.join(s.flags)} ;")
    if s.timeout is not None:
        parts.append(f"timeout {s.timeout}s ;")
    if s.gc_interval is not None:
        parts.append(f"gc-interval {s.gc_interval}s ;")
    if s.size is not None:
        parts.append(f"size {s.size} ;")
    if s.policy:
        parts.append(f"policy {s.policy} ;")
    if s.auto_merge:
        parts.append("auto-merge ;")
    if s.comment:
        parts.append(f"comment {quote(s.comment)} ;")
    return f"add {s.kind} {t.family} {t.name} {s.name} {{ {' '.join(parts)} }}"


def table_lines(t: Table) -> list[str]:
    parts = []
    if t.comment:
        parts.append(f"comment {quote(t.comment)} ;")
    if t.flags:
        parts.append(f"flags {','.join(t.flags)} ;")
    lines = [f"add table {t.family} {t.name}" + (f" {{ {' '.join(parts)} }}" if parts else "")]
    chains = sorted(t.chains, key=lambda c: c.name)
    sets = sorted((s for s in t.sets if not s.is_map), key=lambda s: s.name)
    maps = sorted((s for s in t.sets if s.is_map), key=lambda s: s.name)
    lines += [_chain_line(t, c) for c in chains]
    lines += [_set_line(t, s) for s in sets + maps]
    for c in chains:
        lines += [f"add rule {t.family} {t.name} {c.name} {rule_text(r)}" for r in c.rules]
    for s in sets + maps:
        hint = "mark" if s.key == ("mark",) else ""
        lines += [f"add element {t.family} {t.name} {s.name} {{ {element_text(el, hint)} }}" for el in s.elements]
    return lines


def render_batch(ruleset: Ruleset) -> str:
    return "".join(line + "\n" for t in ruleset.tables for line in table_lines(t))
