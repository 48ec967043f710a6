"""Load an nftables ruleset (any of its three forms) into the node namespace with ``nft -f``.

What is loaded is the user's own text, not a re-rendering of it: the listing as it is
(``nft -f``), kube-proxy's batch lines reordered into knftables ``Fake.Dump()`` order (table,
chains, sets, maps, rules, elements), and a JSON listing's items with chains first (``nft -j
-f``), because nft resolves chain and set references in order while kube-proxy's test literals
use chains before declaring them and nft's own JSON lists maps (whose elements name chains)
before chains. No line or item is changed; errors point at the line of the original text.

Each load first deletes the tables the previous load created and the tables the new ruleset
declares (``add table`` + ``delete table`` succeeds whether or not it exists), so the node holds
exactly the new ruleset next to whatever iptables rules it has; the conntrack keeper table is
re-created last in case the ruleset starts with ``flush ruleset``.
"""

from __future__ import annotations

import json
import re

from nat_verify import dumpformat
from nat_verify.netfilter.parse import DumpError
from nat_verify.nftables import Ruleset, parse_ruleset
from nat_verify.oracle.loader import CONNTRACK_KEEPER, RestoreError
from nat_verify.oracle.netns import run_in

KEEPER = ("ip", "nat_verify_conntrack")
_RANK = {"table": 0, "chain": 1, "set": 2, "map": 3, "rule": 4, "element": 5}
_ADD = re.compile(r"^\s*(?:add|create)\s+(table|chain|set|map|rule|element)\b")
_NFT_LINE = re.compile(r"^(?:<stdin>|/dev/stdin|[^:\s]+):(\d+):")


def dump_order(text: str) -> tuple[str, list[int]] | None:
    """``text``'s lines in dump order, and the original line number of each; None when the
    text is not made of ``add``/``create`` lines only (then it is loaded as it is)."""
    keyed: list[tuple[int, int, str]] = []
    for no, line in enumerate(text.split("\n"), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        m = _ADD.match(s)
        if m is None:
            return None
        kind = m.group(1)
        # sets before maps, set elements before map elements: keep declaration order otherwise
        keyed.append((_RANK[kind], no, line))
    keyed.sort(key=lambda x: (x[0], x[1]))
    return "\n".join(line for _, _, line in keyed) + "\n", [no for _, no, _ in keyed]


_JSON_RANK = {"metainfo": 0, "table": 1, "chain": 2, "set": 3, "map": 3, "rule": 4, "element": 5}


def json_dump_order(text: str) -> str:
    """The items of a JSON listing with chains before the sets and maps whose elements name
    them (nft lists sets first, and its JSON reader resolves names in order); other
    documents, and command lists, as they are."""
    try:
        doc = json.loads(text)
        items = doc["nftables"]
        ranks = [_JSON_RANK[next(iter(item))] for item in items]
    except (ValueError, KeyError, TypeError, StopIteration):
        return text
    order = sorted(range(len(items)), key=lambda i: (ranks[i], i))
    return json.dumps({"nftables": [items[i] for i in order]})


class NftLoader:
    """Loads rulesets into one namespace and remembers the tables it created."""

    def __init__(self, node_fd: int) -> None:
        self.fd = node_fd
        self.loaded: list[tuple[str, str]] = []

    def load(self, text: str, *, source: str = "<nft>") -> Ruleset:
        """Make the node's nftables tables exactly those of ``text``; returns the parsed ruleset.

        Raises ``DumpError`` if the text does not parse, ``RestoreError`` (with the line of
        ``text``) if the kernel refuses it.
        """
        # The kernel judges first: a ruleset nat-verify cannot read still loads, then the
        # parse error is raised (the kernel accepting what the parser refuses is a parser bug).
        parse_error: DumpError | None = None
        try:
            ruleset = parse_ruleset(text, source=source)
        except DumpError as e:
            parse_error, ruleset = e, Ruleset(())
        kind = dumpformat.detect(text)
        script, lines = text, None
        if kind == dumpformat.NFT_BATCH:
            ordered = dump_order(text)
            if ordered is not None:
                script, lines = ordered
        elif kind == dumpformat.NFT_JSON:
            script = json_dump_order(text)
        tables = [(t.family, t.name) for t in ruleset.tables] if parse_error is None else _table_names(text)
        clear = "".join(f"add table {f} {n}\ndelete table {f} {n}\n" for f, n in dict.fromkeys(self.loaded + tables))
        if clear:
            self._nft(["nft", "-f", "-"], clear, source, None, clear)
        self.loaded = []
        argv = ["nft", "-j", "-f", "-"] if kind == dumpformat.NFT_JSON else ["nft", "-f", "-"]
        self._nft(argv, script, source, lines, text)
        self.loaded = tables
        self._nft(["nft", "-f", "-"], _keeper_script(), source, None, "")
        if parse_error is not None:
            raise parse_error
        return ruleset

    def flush_dynamic_sets(self, ruleset: Ruleset) -> None:
        """Empty the sets rules fill at run time (affinity): the next probe starts fresh."""
        cmds = "".join(
            f"flush set {t.family} {t.name} {s.name}\n" for t in ruleset.tables for s in t.sets if s.dynamic
        )
        if cmds:
            self._nft(["nft", "-f", "-"], cmds, "<flush>", None, cmds)

    def _nft(self, argv: list[str], script: str, source: str, lines: list[int] | None, original: str) -> None:
        res = run_in(self.fd, argv, script)
        if res.returncode == 0:
            return
        err = res.stderr.strip()
        line = 0
        for ln in err.splitlines():
            m = _NFT_LINE.match(ln)
            if m:
                line = int(m.group(1))
                break
        if lines is not None and 0 < line <= len(lines):
            line = lines[line - 1]
        orig = original.split("\n")
        offending = orig[line - 1] if 0 < line <= len(orig) else ""
        raise RestoreError(f"nft -f failed: {err.splitlines()[0] if err else 'exit ' + str(res.returncode)}", source=source, line=line, text=offending, stderr=err)


_TABLE = re.compile(r"^\s*(?:(?:add|create)\s+)?table\s+(?:(ip6?|inet|arp|bridge|netdev)\s+)?(\S+)", re.M)


def _table_names(text: str) -> list[tuple[str, str]]:
    """The tables a script creates, found without parsing it (JSON: ``"table": {...}``)."""
    found = [(f or "ip", n.strip('"{')) for f, n in _TABLE.findall(text)]
    found += re.findall(r'"table":\s*\{\s*"family":\s*"(\w+)",\s*"name":\s*"([^"]+)"', text)
    return list(dict.fromkeys(found))


def _keeper_script() -> str:
    f, n = KEEPER
    return f"add table {f} {n}\ndelete table {f} {n}\n" + CONNTRACK_KEEPER
