"""Upstream's canonical order for iptables-restore text (``sortIPTablesRules``).

kube-proxy visits Services in Go map order, so its output order changes from sync to sync;
upstream's tests sort both sides before comparing. This is that sort, for any restore text:

* tables by name; in each, every chain line first, then the rules grouped by chain;
* chains ordered ``KUBE-NODEPORTS``, ``KUBE-SERVICES``, other ``KUBE-*`` alphabetically, then
  the rest alphabetically;
* rules of ``KUBE-NODEPORTS`` and ``KUBE-SERVICES`` (both tables) stable-sorted by the service
  name in their comment (text up to the first space or colon); in nat ``KUBE-SERVICES`` the
  "must be the last rule" rules stay last. Other chains keep their order.

Lines are kept verbatim; ``#`` comments and blank lines are dropped.
"""

from __future__ import annotations

import re

_COMMENT = re.compile(r'--comment (?:"([^"]*)"|(\S+))')


def _chain_key(name: str) -> tuple[int, str]:
    if name == "KUBE-NODEPORTS":
        return (0, name)
    if name == "KUBE-SERVICES":
        return (1, name)
    return (2 if name.startswith("KUBE-") else 3, name)


def _comment(rule: str) -> str | None:
    m = _COMMENT.search(rule)
    if m is None:
        return None
    return m.group(1) if m.group(1) is not None else m.group(2)


def _service_name(rule: str) -> str:
    c = _comment(rule) or ""
    return re.split(r"[ :]", c, maxsplit=1)[0]


def canonical_order(text: str) -> str:
    """``text`` rewritten in upstream's canonical order (see the module docstring)."""
    tables: dict[str, tuple[list[str], dict[str, list[str]]]] = {}
    current: tuple[list[str], dict[str, list[str]]] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("*"):
            current = tables.setdefault(line[1:], ([], {}))
        elif current is None:
            raise ValueError(f"line outside a table: {line!r}")
        elif line == "COMMIT":
            current = None
        elif line.startswith(":"):
            name = line[1:].split()[0]
            current[0].append(line)
            current[1].setdefault(name, [])
        elif line.startswith("-A "):
            name = line.split()[1]
            current[1].setdefault(name, []).append(line)
        else:
            current[1].setdefault("", []).append(line)  # e.g. -X: kept, at the end
    out: list[str] = []
    for table in sorted(tables):
        decls, chains = tables[table]
        by_name = {d[1:].split()[0]: d for d in decls}
        names = sorted((n for n in chains if n), key=_chain_key)
        out.append(f"*{table}")
        out.extend(by_name[n] for n in names if n in by_name)
        for name in names:
            rules = chains[name]
            if name in ("KUBE-NODEPORTS", "KUBE-SERVICES"):
                last = [r for r in rules if "must be the last rule" in (_comment(r) or "")]
                rest = [r for r in rules if r not in last] if table == "nat" else rules
                rules = sorted(rest, key=_service_name) + (last if table == "nat" else [])
            out.extend(rules)
        out.extend(chains.get("", []))
        out.append("COMMIT")
    return "\n".join(out) + "\n"
