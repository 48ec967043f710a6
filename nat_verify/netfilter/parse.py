"""Parse ``iptables-save`` / ``ip6tables-save`` output and ``iptables-restore`` input.

Accepted: every table, ``# Generated/Completed`` comments, chain lines with policies and
``[packets:bytes]`` counters, ``[p:b] -A ...`` and ``-c p b`` rule counters, double-quoted
strings with backslash escapes (as iptables prints them), ``!`` before an option (current
spelling) or before its argument (old spelling), and kube-proxy's restore-input spelling
(``--or-mark``, unquoted comments, 10-decimal probabilities). Options are grouped the way
iptables groups them: core options, then one group per ``-m MODULE``, then the target
(``ruleargs``, which decides the grouping once per rule shape).

Anything malformed raises ``DumpError`` naming the file and line; the dump is never half
loaded. Excerpts (a grep, ``iptables -S``, a paste) are read by ``excerpt`` instead.
"""

from __future__ import annotations

import contextlib
import gc
import ipaddress
import re
from collections.abc import Iterator

from nat_verify import dumpformat
from nat_verify.netfilter.ruleargs import (
    CORE_OPTIONS,
    STRING_OPTIONS,
    parse_rule,
    parse_rule_args,
    tokenize,
)
from nat_verify.netfilter.ruleset import (
    BUILTIN_CHAINS,
    Chain,
    Option,
    Rule,
    Ruleset,
    Table,
)

__all__ = [
    "CORE_OPTIONS",
    "KNOWN_TARGETS",
    "STRING_OPTIONS",
    "DumpError",
    "parse",
    "parse_file",
    "parse_rule_args",
    "tokenize",
]

MAX_LINE = 65536

# Targets that are not chains. Anything else must be a chain of the same table.
KNOWN_TARGETS = frozenset(
    ["ACCEPT", "DROP", "REJECT", "RETURN", "QUEUE", "NFQUEUE", "DNAT", "SNAT", "MASQUERADE", "REDIRECT", "NETMAP", "MARK", "CONNMARK", "LOG", "NFLOG", "ULOG", "TRACE", "CT", "NOTRACK", "CLASSIFY", "DSCP", "TOS", "TTL", "HL", "TCPMSS", "TPROXY", "CHECKSUM", "SET", "AUDIT", "SECMARK", "CONNSECMARK", "IDLETIMER", "LED", "RATEEST", "SYNPROXY", "TEE", "HMARK", "CLUSTERIP", "ECN", "MIRROR"]
)


class DumpError(Exception):
    """A dump that cannot be read. ``str()`` is ``file:line: message``."""

    def __init__(self, file: str, line: int, message: str) -> None:
        super().__init__(f"{file}:{line}: {message}")
        self.file = file
        self.line = line
        self.message = message


_CONTROL_ANY = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # \r at a line end is allowed (CRLF files)
# a dotted quad with an optional prefix length, exactly as ipaddress accepts it (no leading
# zeros): the common case checked without building an address object
_IPV4 = re.compile(r"(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:/(?:3[0-2]|[12]?\d))?")
_ADDR_FAMILY: dict[str, int] = {}
_INTERN_LIMIT = 1 << 20


def _parse_counters(text: str) -> tuple[int, int]:
    inner = text.strip()
    if not (inner.startswith("[") and inner.endswith("]")) or ":" not in inner:
        raise ValueError(f"expected counters '[packets:bytes]', received {text!r}")
    a, _, b = inner[1:-1].partition(":")
    if not (a.isascii() and b.isascii() and a.isdigit() and b.isdigit() and len(a) <= 20 and len(b) <= 20):
        # the kernel's counters are 64-bit: more than 20 digits is not a counter
        raise ValueError(f"expected counters '[packets:bytes]' of two 64-bit integers, received {text[:60]!r}")
    return int(a), int(b)


def _unexpected(text: str, line: str) -> str:
    kind = dumpformat.detect(text)
    if dumpformat.is_nftables(kind):
        return f"this is an nftables ruleset ({kind} form), not iptables-save output"
    return f"expected '*table', ':CHAIN', '-A CHAIN ...' or 'COMMIT', received {line[:60]!r}"


def parse(text: str | bytes, *, source: str = "<memory>", family: int | None = None) -> Ruleset:
    """Parse a whole dump. ``family`` is inferred from the header or addresses when None."""
    if isinstance(text, bytes):
        data = text
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data[: e.start].count(b"\n") + 1
            raise DumpError(source, line, f"not text: invalid UTF-8 byte 0x{data[e.start]:02x}") from None
    with without_gc():
        return _Parser(source, family).run(text.split("\n"))


@contextlib.contextmanager
def without_gc() -> Iterator[None]:
    """Building 400,000 rules allocates millions of objects and no cycles; the cyclic collector
    would walk the growing heap again and again (a third of the time), for nothing."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def parse_file(path: str, *, family: int | None = None) -> Ruleset:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise DumpError(path, 0, f"cannot read: {e.strerror}") from None
    return parse(data, source=path, family=family)


class _Parser:
    def __init__(self, source: str, family: int | None) -> None:
        self.source = source
        self.family = family
        self.tables: dict[str, Table] = {}
        self.cur: str | None = None
        self.cur_line = 0
        self.chain_decl: dict[str, tuple[str | None, int, tuple[int, int] | None]] = {}
        self.rules: dict[str, list[Rule]] = {}
        self.jumps: list[Rule] = []  # rules of the open table whose target may be a chain

    def err(self, line: int, msg: str) -> DumpError:
        return DumpError(self.source, line, msg)

    def run(self, lines: list[str]) -> Ruleset:
        # whole-text checks first (C speed); the per-line loop then only dispatches
        if lines and max(map(len, lines)) > MAX_LINE:
            no = next(i for i, ln in enumerate(lines, 1) if len(ln) > MAX_LINE)
            raise self.err(no, f"line is {len(lines[no - 1]):,} characters long; the limit is {MAX_LINE:,}")
        text = "\n".join(lines)
        for m in _CONTROL_ANY.finditer(text):
            if m.group() == "\r" and (m.end() == len(text) or text[m.end()] == "\n"):
                continue  # CRLF line ends are fine
            no = text.count("\n", 0, m.start()) + 1
            raise self.err(no, f"not text: control character 0x{ord(m.group()):02x}")
        last = 1
        for no, raw in enumerate(lines, 1):
            s = raw.strip()
            if not s:
                continue
            last = no
            c = s[0]
            if c == "-" or c == "[":
                self.add_rule(no, s)
            elif c == "#":
                if self.family is None and "ip6tables" in s:
                    self.family = 6
            elif c == "*":
                self.open_table(no, s[1:].strip())
            elif s == "COMMIT":
                self.commit(no)
            elif c == ":":
                self.declare_chain(no, s[1:])
            else:
                raise self.err(no, _unexpected(text, s))
        if self.cur is not None:
            raise self.err(
                last, f"truncated dump: table '{self.cur}' opened at line {self.cur_line} has no COMMIT"
            )
        if not self.tables:
            raise self.err(last, "no table found: expected a '*table' header (is this iptables-save output?)")
        fam = self.family or self._infer_family()
        order = [t for t in BUILTIN_CHAINS if t in self.tables]
        return Ruleset(fam, tuple(self.tables[t] for t in order), self.source)

    def _infer_family(self) -> int:
        for t in self.tables.values():
            for c in t.chains:
                for r in c.rules:
                    for o in r.core:
                        if o.name in ("-s", "-d") and o.args:
                            return 6 if ":" in o.args[0] else 4
        return 4

    def open_table(self, no: int, name: str) -> None:
        if self.cur is not None:
            raise self.err(no, f"table '{name}' starts before table '{self.cur}' (line {self.cur_line}) got its COMMIT")
        if name not in BUILTIN_CHAINS:
            raise self.err(no, f"unknown table {name!r}; expected one of {', '.join(BUILTIN_CHAINS)}")
        if name in self.tables:
            raise self.err(no, f"table '{name}' appears twice")
        self.cur, self.cur_line = name, no
        self.chain_decl = {}
        self.rules = {}
        self.jumps = []

    def declare_chain(self, no: int, text: str) -> None:
        if self.cur is None:
            raise self.err(no, "chain line before any '*table' header")
        if text.endswith(" - [0:0]") and " " not in text[:-8]:
            # the common user chain line, ':KUBE-SEP-... - [0:0]', without splitting
            parts = [text[:-8], "-", "[0:0]"]
        else:
            parts = text.split(None, 2)
        name = parts[0] if parts else ""
        if not name:
            raise self.err(no, "chain line without a name")
        policy_s = parts[1] if len(parts) > 1 else "-"
        counters = None
        if len(parts) > 2:
            try:
                counters = _parse_counters(parts[2])
            except ValueError as e:
                raise self.err(no, str(e)) from None
        builtin = name in BUILTIN_CHAINS[self.cur]
        if builtin:
            if policy_s == "-":
                # restore input: "-" keeps the current policy, which is ACCEPT in a fresh table
                policy_s = "ACCEPT"
            if policy_s not in ("ACCEPT", "DROP"):
                raise self.err(no, f"built-in chain {name} needs policy ACCEPT or DROP, received {policy_s!r}")
            policy: str | None = policy_s
        else:
            if policy_s != "-":
                raise self.err(no, f"user chain {name} cannot have a policy (received {policy_s!r})")
            policy = None
        if name in self.chain_decl:
            raise self.err(no, f"chain {name} declared twice in table '{self.cur}'")
        if len(name) > 28:
            raise self.err(no, f"chain name {name!r} is {len(name)} characters; iptables allows 28")
        self.chain_decl[name] = (policy, no, counters)
        self.rules[name] = []

    def add_rule(self, no: int, text: str) -> None:
        if self.cur is None:
            raise self.err(no, "rule before any '*table' header")
        counters = None
        body = text
        if text.startswith("["):
            end = text.find("]")
            if end < 0:
                raise self.err(no, "unterminated '[packets:bytes]' counters")
            try:
                counters = _parse_counters(text[: end + 1])
            except ValueError as e:
                raise self.err(no, str(e)) from None
            body = text[end + 1 :].strip()
        if not body.startswith(("-A ", "--append ")):
            raise self.err(no, (f"only '-A' rules can be loaded, received {body.split(None, 1)[0]!r}" if body else "counters with no rule after them"))
        try:
            chain, core, matches, target, c2 = parse_rule(body)
        except ValueError as e:
            raise self.err(no, str(e)) from None
        if chain not in self.rules:
            if chain in BUILTIN_CHAINS[self.cur]:
                # iptables-restore input may append to a built-in chain it did not declare
                self.chain_decl[chain] = ("ACCEPT", 0, None)
                self.rules[chain] = []
            else:
                raise self.err(no, f"rule appends to chain {chain!r}, which table '{self.cur}' does not declare")
        self._check_addresses(no, core)
        rule = Rule(chain, core, matches, target, no, text, counters or c2)
        self.rules[chain].append(rule)
        if target.name and target.name not in KNOWN_TARGETS:
            self.jumps.append(rule)

    def _check_addresses(self, no: int, core: tuple[Option, ...]) -> None:
        for o in core:
            if o.name in ("-s", "-d"):
                value = o.value
                fam = _ADDR_FAMILY.get(value)
                if fam is not None and fam == self.family:
                    continue
                if self.family != 6 and _IPV4.fullmatch(value):
                    self.family = 4
                    continue
                for part in value.split(","):
                    try:
                        net = ipaddress.ip_network(part, strict=False)
                    except ValueError:
                        raise self.err(no, f"{o.name} expects an address or CIDR, received {part!r}") from None
                    if self.family is None:
                        self.family = net.version
                    elif net.version != self.family:
                        raise self.err(no, f"IPv{net.version} address {part!r} in an IPv{self.family} dump")
                if len(_ADDR_FAMILY) < _INTERN_LIMIT and self.family is not None:
                    _ADDR_FAMILY[o.value] = self.family

    def commit(self, no: int) -> None:
        if self.cur is None:
            raise self.err(no, "COMMIT without a '*table' header")
        table = self.cur
        chains = []
        builtin = BUILTIN_CHAINS[table]
        # canonical order: built-in chains in kernel order, then user chains as declared
        names = sorted(self.chain_decl, key=lambda n: (0, builtin.index(n)) if n in builtin else (1, 0))
        for name in names:
            policy, line, counters = self.chain_decl[name]
            chains.append(Chain(name, policy, tuple(self.rules[name]), line, counters))
        # Every jump must name a chain of this table or a known target.
        declared = self.chain_decl
        for r in sorted(self.jumps, key=lambda r: r.line):
            t = r.target.name
            if t in declared:
                continue
            if t in BUILTIN_CHAINS[table]:
                raise self.err(r.line, f"jump to built-in chain {t!r} is not allowed")
            if "-" in t or not t.isupper():
                raise self.err(r.line, f"jump to chain {t!r}, which table '{table}' does not declare")
            # else: an extension target we do not know; kept opaque, makes outcomes inconclusive
        self.tables[table] = Table(table, tuple(chains), self.cur_line)
        self.cur = None
