"""``ipset save`` -> the node's ipsets and their members.

The format is one command a line: ``create NAME TYPE [OPTIONS]`` then ``add NAME ENTRY
[OPTIONS]`` for each member (the same text ``ipset restore`` reads). Entries of address sets
are an address, a CIDR or a range ``A-B`` (``bitmap:ip`` saves ranges as single addresses); the
option ``nomatch`` makes a ``hash:net`` entry an exception. ``timeout``, ``comment``,
``counters``, ``skbinfo`` options do not change membership. Multi-dimension sets
(``hash:ip,port``...) are kept with their type and no address members: a match on them stays
unknown. ``list:set`` members are set names.
"""

from __future__ import annotations

import ipaddress
import shlex

from nat_verify.model.cluster import IPNetwork
from nat_verify.netfilter.context import IPSet
from nat_verify.node.errors import FactError


def parse_ipset_save(text: str, source: str = "<ipset save>") -> tuple[IPSet, ...]:
    sets: dict[str, dict[str, object]] = {}
    order: list[str] = []
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            words = shlex.split(line)
        except ValueError as e:
            raise FactError(source, no, f"cannot split the line: {e}") from None
        cmd = words[0]
        if cmd in ("create", "-N", "-exist") and len(words) >= 3:
            name, kind = words[1], words[2]
            if name in sets:
                raise FactError(source, no, f"set {name!r} is created twice")
            family = 6 if _option(words[3:], "family") == "inet6" else 4
            sets[name] = {"type": kind, "family": family, "members": [], "nomatch": [], "children": []}
            order.append(name)
        elif cmd in ("add", "-A") and len(words) >= 3:
            name, entry = words[1], words[2]
            s = sets.get(name)
            if s is None:
                raise FactError(source, no, f"add to set {name!r}, which no earlier line creates")
            _add(s, entry, words[3:], source, no)
        else:
            raise FactError(source, no, f"expected `create NAME TYPE ...` or `add NAME ENTRY ...` (ipset save output), received {line[:60]!r}")
    if not sets:
        raise FactError(source, 0, "no set: expected `ipset save` output (create/add lines)")
    out = []
    for name in order:
        s = sets[name]
        out.append(IPSet(
            name, str(s["type"]), int(s["family"]),  # type: ignore[call-overload]
            tuple(s["members"]), tuple(s["nomatch"]), tuple(s["children"]),  # type: ignore[arg-type]
        ))  # fmt: skip
    return tuple(out)


def _option(words: list[str], name: str) -> str | None:
    for i, w in enumerate(words[:-1]):
        if w == name:
            return words[i + 1]
    return None


def _add(s: dict[str, object], entry: str, opts: list[str], source: str, no: int) -> None:
    kind = str(s["type"])
    if kind.startswith("list:"):
        s["children"].append(entry)  # type: ignore[attr-defined]
        return
    if "," in kind.partition(":")[2]:
        return  # a multi-dimension entry: not an address member
    try:
        nets = _entry_networks(entry)
    except ValueError:
        raise FactError(source, no, f"bad {kind} entry {entry!r}") from None
    key = "nomatch" if "nomatch" in opts else "members"
    s[key].extend(nets)  # type: ignore[attr-defined]


def _entry_networks(entry: str) -> list[IPNetwork]:
    if "-" in entry and "/" not in entry:
        lo, _, hi = entry.partition("-")
        a, b = ipaddress.ip_address(lo), ipaddress.ip_address(hi)
        if a.version != b.version or int(b) < int(a):
            raise ValueError(entry)
        return list(ipaddress.summarize_address_range(a, b))
    return [ipaddress.ip_network(entry, strict=False)]
