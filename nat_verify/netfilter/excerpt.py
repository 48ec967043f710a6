"""Read an excerpt of a node's rules (``--partial``): what people paste, not what iptables-save wrote.

Accepted, line by line: ``iptables-save`` sections with or without their ``*table`` header and
``COMMIT``; ``iptables -S`` / ``iptables -t nat -S`` output (``-P``, ``-N``, ``-A``); rules with
``[packets:bytes]`` or ``-c`` counters; ``> `` quote marks, backticks and code fences around a
paste; shell prompt lines (``root@node:~# iptables -t nat -S``: the command says which table the
lines after it belong to, and a ``| grep`` that they are a selection); comments and blank lines.
Every other line, and every rule that does not parse, is *unusable*: listed with its number and
why, never dropped silently.

What the excerpt does not show is *unseen*, and unseen is never guessed:

* a rule without a table header goes to ``--table``, else to the table its command line named,
  else to the one table its target and chain names allow (``DNAT``/``KUBE-SVC-*`` mean nat,
  ``REJECT``/``KUBE-FORWARD`` filter...); a rule no evidence places is unusable;
* a chain that is jumped to but not shown, the hook chains of a table the excerpt does not
  show, and a built-in chain whose policy is not shown become one *unseen marker* rule;
* a chain whose declaration is not shown (or any chain of a grep) may have more rules than the
  excerpt holds: a marker at its end; an unusable rule line leaves a marker where it stood.

A marker is a rule whose only match is the module ``UNSEEN_MODULE`` with the reason as its
``--reason``: the interpreter cannot evaluate it, so a packet that reaches it is
``inconclusive`` with that reason, and packets decided before it keep their answers. Results
read from an excerpt are at most ``holds``, never ``proved`` (the caller's duty: ``partial`` is
set on the ``Excerpt``).
"""

from __future__ import annotations

import functools
import re

import attrs

from nat_verify.netfilter.parse import KNOWN_TARGETS, DumpError, parse, without_gc
from nat_verify.netfilter.ruleargs import parse_rule
from nat_verify.netfilter.ruleset import (
    BUILTIN_CHAINS,
    UNSEEN_MODULE,
    Chain,
    Match,
    Option,
    Rule,
    Ruleset,
    Table,
    Target,
)

# The hooks the interpreter runs, per table (a table the excerpt lacks is unseen at each).
HOOK_CHAINS = BUILTIN_CHAINS

NAT_TARGETS = frozenset({"DNAT", "SNAT", "MASQUERADE", "REDIRECT", "NETMAP"})
TABLE_OF_TARGET = {
    **dict.fromkeys(NAT_TARGETS, "nat"),
    "REJECT": "filter",
    "NOTRACK": "raw",
    "CT": "raw",
    "TPROXY": "mangle",
    "TOS": "mangle",
    "TTL": "mangle",
    "HL": "mangle",
    "DSCP": "mangle",
    "CLASSIFY": "mangle",
}

# chain names (exact, or a prefix ending in '-' or '_') that live in one table only
_CHAIN_TABLES: tuple[tuple[str, str], ...] = (
    ("KUBE-SVC-", "nat"), ("KUBE-SEP-", "nat"), ("KUBE-SVL-", "nat"), ("KUBE-EXT-", "nat"),
    ("KUBE-XLB-", "nat"), ("KUBE-FW-", "nat"), ("KUBE-NODEPORTS", "nat"), ("KUBE-POSTROUTING", "nat"),
    ("KUBE-MARK-MASQ", "nat"), ("KUBE-MARK-DROP", "nat"), ("KUBE-HOSTPORTS", "nat"), ("KUBE-HP-", "nat"),
    ("KUBE-LOAD-BALANCER", "nat"), ("KIND-MASQ-AGENT", "nat"), ("IP-MASQ-AGENT", "nat"),
    ("FLANNEL-POSTRTG", "nat"), ("cali-nat-", "nat"), ("cali-fip-", "nat"), ("CNI-HOSTPORT-", "nat"),
    ("CILIUM_POST_nat", "nat"), ("CILIUM_PRE_nat", "nat"), ("CILIUM_OUTPUT_nat", "nat"),
    ("KUBE-FORWARD", "filter"), ("KUBE-FIREWALL", "filter"), ("KUBE-EXTERNAL-SERVICES", "filter"),
    ("KUBE-PROXY-FIREWALL", "filter"), ("KUBE-NODE-PORT", "filter"), ("DOCKER-USER", "filter"),
    ("DOCKER-ISOLATION", "filter"), ("WEAVE-NPC", "filter"), ("WEAVE-EXPOSE", "filter"),
    ("FLANNEL-FWD", "filter"), ("cali-fw-", "filter"), ("cali-tw-", "filter"), ("cali-pri-", "filter"),
    ("cali-pro-", "filter"), ("cali-from-", "filter"), ("cali-to-", "filter"), ("KUBE-ROUTER-", "filter"),
    ("CILIUM_FORWARD", "filter"), ("CILIUM_INPUT", "filter"), ("CILIUM_OUTPUT", "filter"),
    ("CILIUM_PRE_mangle", "mangle"), ("CILIUM_POST_mangle", "mangle"), ("KUBE-IPTABLES-HINT", "mangle"),
    ("CILIUM_PRE_raw", "raw"), ("CILIUM_OUTPUT_raw", "raw"),
)  # fmt: skip


def table_of_chain(name: str) -> str | None:
    """The one table a chain of this name lives in, when the name says (None: it does not)."""
    for prefix, table in _CHAIN_TABLES:
        if name == prefix or (prefix[-1] in "-_" and name.startswith(prefix)):
            return table
    return None


@attrs.frozen
class Unusable:
    """A line of the excerpt that could not be used, and why."""

    line: int
    text: str
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"line": self.line, "text": self.text, "reason": self.reason}


@attrs.frozen
class Excerpt:
    """What was read from an excerpt: the ruleset (with unseen markers) and what it lacks."""

    ruleset: Ruleset
    unusable: tuple[Unusable, ...] = ()
    unseen: tuple[str, ...] = ()  # "nat KUBE-SVC-X", "raw table": what answers may depend on
    complete: bool = False  # the text was a whole dump (it read strictly)
    assumed: tuple[str, ...] = ()  # how lines without a table were placed

    def notes(self) -> list[str]:
        """One line per unusable line and unseen part, for stderr."""
        out = [f"{self.ruleset.source}:{u.line}: not used: {u.reason}" for u in self.unusable]
        out += [f"{self.ruleset.source}: assumed: {a}" for a in self.assumed]
        if self.unseen:
            shown = ", ".join(self.unseen[:12]) + (f" and {len(self.unseen) - 12} more" if len(self.unseen) > 12 else "")
            out.append(f"{self.ruleset.source}: not in the excerpt (answers that need them are inconclusive): {shown}")
        return out

    def to_json(self) -> dict[str, object]:
        return {
            "partial": True,
            "complete": self.complete,
            "unusable": [u.to_json() for u in self.unusable],
            "unseen": list(self.unseen),
            "assumed": list(self.assumed),
        }


def refuse_line(ex: Excerpt, line: int, reason: str) -> Excerpt:
    """``ex`` with the rule of ``line`` not used: listed with ``reason``, a marker where it stood.

    For a rule the reader took but the model refuses (a malformed option, an extension Linux
    does not have): in an excerpt that line is unusable, the rest is still read.
    """
    rs = ex.ruleset
    text = ""
    tables = []
    for t in rs.tables:
        chains = []
        for c in t.chains:
            rules = []
            for r in c.rules:
                if r.line == line and r.module(UNSEEN_MODULE) is None:
                    text = r.raw
                    r = marker(c.name, f"line {line} of the excerpt could not be read ({reason})", line)
                rules.append(r)
            chains.append(Chain(c.name, c.policy, tuple(rules), c.line, c.counters))
        tables.append(Table(t.name, tuple(chains), t.line))
    if not text:
        raise ValueError(f"no rule of the excerpt is at line {line}")
    unusable = tuple(sorted((*ex.unusable, Unusable(line, text[:200], reason)), key=lambda u: u.line))
    return attrs.evolve(ex, ruleset=Ruleset(rs.family, tuple(tables), rs.source), unusable=unusable, complete=False)


def marker(chain: str, reason: str, line: int = 0) -> Rule:
    """A rule the interpreter cannot evaluate: reaching it makes the answer inconclusive."""
    return Rule(chain, (), (Match(UNSEEN_MODULE, (Option("--reason", (reason,)),)),), Target(""), line, "")


# ---- line forms ---------------------------------------------------------------------------

_QUOTE = re.compile(r"^(?:>\s?)+")
_FENCE = re.compile(r"^(?:```|~~~)")
_COUNTERS = re.compile(r"^\[(\d+):(\d+)\]\s*")
_COMMAND = re.compile(
    r"(?:^|[#$%>]\s*)((?:sudo\s+(?:-\S+\s+)*)?(?:/\S*/)?(?:ip6?tables(?:-legacy|-nft)?(?:-save)?|cat|grep|egrep|kubectl|docker|which)\b.*)$"
)
_TARGETLESS = re.compile(r"^(?:\[\d+:\d+\]\s*)?-A\s(?!.*\s-[jg]\s+\S)")
_TABLE_OPT = re.compile(r"(?:^|\s)(?:-t\s*|--table[=\s]\s*)(\w+)")


def looks_like_excerpt(text: str) -> bool:
    """True when ``text`` reads like a pasted excerpt rather than a whole iptables-save dump."""
    head = [ln.strip() for ln in text.split("\n", 200)[:200] if ln.strip()]
    if not head:
        return False
    if not any(ln.startswith("*") for ln in head):
        return True
    return any(_QUOTE.match(ln) or _FENCE.match(ln) or ln.startswith(("-P ", "-N ")) or _prompt(ln) for ln in head)


def _prompt(line: str) -> str | None:
    """The command of a shell prompt line (``root@n:~# iptables -S``), or None."""
    if line.startswith("#") and not re.match(r"#\s*(?:sudo\s|ip6?tables|cat\s|grep\s|kubectl\s)", line):
        return None  # a comment such as '# Generated by iptables-save'
    m = _COMMAND.search(line)
    if m is None or re.match(r"ip6?tables\S* v\d", m.group(1)):
        return None  # 'iptables v1.8.7 (nf_tables)' is what --version prints
    return m.group(1)


@attrs.define
class _Section:
    """Chains of one table as read so far."""

    name: str
    policies: dict[str, str] = attrs.Factory(dict)
    declared: dict[str, int] = attrs.Factory(dict)  # chain -> line of its declaration
    rules: dict[str, list[Rule]] = attrs.Factory(dict)

    def chain_rules(self, name: str) -> list[Rule]:
        return self.rules.setdefault(name, [])


def read_excerpt(
    text: str | bytes, *, source: str = "<memory>", family: int | None = None, table: str | None = None
) -> Excerpt:
    """Read an excerpt (see the module docstring). Raises DumpError only for unreadable files."""
    if table is not None and table not in BUILTIN_CHAINS:
        raise DumpError(source, 0, f"--table {table!r}: expected one of {', '.join(BUILTIN_CHAINS)}")
    unusable: list[Unusable] = []
    if isinstance(text, bytes):
        lines = []
        for no, raw in enumerate(text.split(b"\n"), 1):
            try:
                lines.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                unusable.append(Unusable(no, raw.decode("utf-8", "replace")[:200], "not UTF-8 text"))
                lines.append("")
        text = "\n".join(lines)
    if not unusable:
        try:
            return Excerpt(parse(text, source=source, family=family), complete=True)
        except DumpError:
            pass
    with without_gc():
        return _Reader(source, family, table, unusable).run(text)


class _Reader:
    def __init__(self, source: str, family: int | None, table: str | None, unusable: list[Unusable]) -> None:
        self.source = source
        self.family = family
        self.forced = table
        self.unusable = unusable
        self.sections: dict[str, _Section] = {}
        self.header: str | None = None  # the open '*table', if any
        self.command_table: str | None = None
        self.grep = False
        self.headerless: list[tuple[int, str, Rule | None, str]] = []  # (line, raw, rule, chain)
        self.assumed: list[str] = []

    def skip(self, no: int, text: str, reason: str) -> None:
        self.unusable.append(Unusable(no, text[:200], reason))

    def section(self, name: str) -> _Section:
        return self.sections.setdefault(name, _Section(name))

    def run(self, text: str) -> Excerpt:
        lines = text.split("\n")
        # a last line without a line end may be cut anywhere (a port, an address): not used;
        # nor is a last rule without a target (kube-proxy's rules all have one; the cut took it)
        last_cut = bool(lines) and lines[-1].strip() != ""
        final = max((i for i, ln in enumerate(lines, 1) if ln.strip()), default=0)
        for no, raw in enumerate(lines, 1):
            s = _QUOTE.sub("", raw.strip()).strip().strip("`").strip()
            if not s:
                continue
            if len(s) > 65536:
                self.skip(no, s, f"line is {len(s):,} characters long")
                continue
            if re.search(r"[\x00-\x08\x0b-\x1f\x7f]", s):
                self.skip(no, s, "control characters: not text")
                continue
            if no == len(lines) and last_cut:
                self.skip(no, s, "the last line has no line end: it may be cut off")
                self._hole(no, s, "the last line may be cut off")
                continue
            if no == final and _TARGETLESS.match(s):
                self.skip(no, s, "the last line is a rule without a target: it may be cut off")
                self._hole(no, s, "the last line may be cut off")
                continue
            self.line(no, s)
        return self.finish()

    def line(self, no: int, s: str) -> None:
        if _FENCE.match(s):
            return
        # rules, chain and table lines are never prompts; anything else may be one
        cmd = None if s[0] in "-:*" or _COUNTERS.match(s) else _prompt(s)
        if cmd is not None:
            m = _TABLE_OPT.search(cmd)
            self.command_table = m.group(1) if m and m.group(1) in BUILTIN_CHAINS else ("filter" if re.search(r"\s(?:-S|--list-rules)\b", cmd) else None)
            self.grep = self.grep or "grep" in cmd
            if re.search(r"\s-L\b|--list\b", cmd) and not re.search(r"--list-rules", cmd):
                self.skip(no, s, "'iptables -L' output is not a rule format (use iptables-save or iptables -S)")
            return
        c = s[0]
        if c == "#":
            if self.family is None and "ip6tables" in s:
                self.family = 6
            return
        if c == "*":
            name = s[1:].strip()
            if name not in BUILTIN_CHAINS:
                self.skip(no, s, f"unknown table {name!r}")
                self.header = None
            else:
                self.header = name
                self.section(name)
            return
        if s == "COMMIT":
            self.header = None
            return
        if c == ":":
            self.declare(no, s)
            return
        if s.startswith(("-P ", "-N ")):
            self.declare_s(no, s)
            return
        if c in "-[":
            self.rule(no, s)
            return
        self.skip(no, s, "not a rule, chain or table line")

    def _table_now(self) -> str | None:
        return self.header or self.forced or self.command_table

    def declare(self, no: int, s: str) -> None:
        parts = s[1:].split()
        if not parts:
            self.skip(no, s, "chain line without a name")
            return
        name = parts[0]
        table = self._table_now() or table_of_chain(name)
        if table is None:
            # ':KUBE-SERVICES - [0:0]' outside a table: placed with its rules, if any
            self.headerless.append((no, s, None, name))
            return
        self._declare_in(table, name, parts[1] if len(parts) > 1 else "-", no)

    def _declare_in(self, table: str, name: str, policy: str, no: int) -> None:
        sec = self.section(table)
        sec.declared.setdefault(name, no)
        if name in BUILTIN_CHAINS[table] and policy in ("ACCEPT", "DROP"):
            sec.policies[name] = policy
        sec.chain_rules(name)

    def declare_s(self, no: int, s: str) -> None:
        parts = s.split()
        if len(parts) < 2 or (parts[0] == "-P" and len(parts) != 3):
            self.skip(no, s, "expected '-P CHAIN POLICY' or '-N CHAIN'")
            return
        name = parts[1]
        table = self._table_now() or table_of_chain(name)
        if table is None:
            self.headerless.append((no, s, None, name))
            return
        if parts[0] == "-P" and name not in BUILTIN_CHAINS[table]:
            self.skip(no, s, f"'-P' names {name!r}, not a built-in chain of table {table!r}")
            return
        self._declare_in(table, name, parts[2] if parts[0] == "-P" else "-", no)

    def _hole(self, no: int, s: str, reason: str) -> None:
        """Where an unusable rule line stood, a marker: what follows in its chain is unknown."""
        words = _COUNTERS.sub("", s).split()
        if len(words) >= 2 and words[0] in ("-A", "--append"):
            rule = marker(words[1], f"line {no} of the excerpt could not be read ({reason})", no)
            table = self._table_now()
            if table is not None:
                self.section(table).chain_rules(words[1]).append(rule)
            else:
                self.headerless.append((no, s, rule, words[1]))

    def rule(self, no: int, s: str) -> None:
        counters = None
        body = s
        m = _COUNTERS.match(s)
        if m:
            counters = (int(m.group(1)), int(m.group(2)))
            body = s[m.end() :]
        if not body.startswith(("-A ", "--append ")):
            self.skip(no, s, (f"only '-A' rules can be used, received {body.split(None, 1)[0]!r}" if body else "counters with no rule after them"))
            return
        try:
            chain, core, matches, target, c2 = parse_rule(body)
            self._check_addresses(core)
        except ValueError as e:
            self.skip(no, s, str(e))
            self._hole(no, s, str(e))
            return
        rule = Rule(chain, core, matches, target, no, s, counters or c2)
        table = self._table_now()
        if table is None:
            self.headerless.append((no, s, rule, chain))
        else:
            self.section(table).chain_rules(chain).append(rule)

    def _check_addresses(self, core: tuple[Option, ...]) -> None:
        from nat_verify.netfilter.constants import parse_network

        for o in core:
            if o.name in ("-s", "-d"):
                for part in o.value.split(","):
                    try:
                        net = parse_network(part)
                    except ValueError:
                        raise ValueError(f"{o.name} expects an address or CIDR, received {part!r}") from None
                    if self.family is None:
                        self.family = net.version
                    elif net.version != self.family:
                        raise ValueError(f"IPv{net.version} address {part!r} in an IPv{self.family} excerpt")

    # ---- placing headerless lines, then building the ruleset ---------------------------

    def _possible(self, rule: Rule | None, chain: str) -> set[str]:
        """The tables a rule (or a declaration, ``rule=None``) of ``chain`` can be in."""
        out = set(_chain_tables(chain))
        if rule is not None and rule.target.name:
            name = rule.target.name
            t = TABLE_OF_TARGET.get(name)
            if t is not None:
                out &= {t}
            elif name not in KNOWN_TARGETS:
                out &= _chain_tables(name)  # a jump stays inside its table
        return out

    def _s_table(self) -> str | None:
        """The table of headerless ``-P`` lines: the one whose built-in chains they list."""
        listed = {chain for _no, s, rule, chain in self.headerless if rule is None and s.startswith("-P ")}
        if not listed:
            return None
        exact = [t for t in ("filter", "nat", "mangle", "raw") if set(BUILTIN_CHAINS[t]) == listed]
        return exact[0] if len(exact) == 1 else None

    def _place_headerless(self) -> None:
        s_table = self._s_table()
        if s_table is not None:
            # 'iptables -S' prints '-P' for every built-in chain of the table, then '-N', '-A'
            self.assumed.append(
                f"the '-P' lines list the built-in chains of table {s_table}: the lines without a "
                f"table are taken as 'iptables -t {s_table} -S' output"
            )
            for no, s, rule, chain in self.headerless:
                if rule is None:
                    self._declare_in(s_table, chain, s.split()[2] if s.startswith("-P ") else "-", no)
                else:
                    self.section(s_table).chain_rules(chain).append(rule)
            return
        placed: dict[str, set[str]] = {}
        possible = [self._possible(rule, chain) for _no, _s, rule, chain in self.headerless]
        for (_no, _s, _rule, chain), ev in zip(self.headerless, possible, strict=True):
            if len(ev) == 1:
                placed.setdefault(chain, set()).update(ev)
        for (no, s, rule, chain), ev in zip(self.headerless, possible, strict=True):
            if len(ev) > 1 and len(placed.get(chain, ())) == 1 and placed[chain] <= ev:
                ev = placed[chain]  # the chain's other rules say where it is
            if len(ev) != 1:
                if rule is not None and rule.module(UNSEEN_MODULE) is not None:
                    continue  # an unusable line, listed already
                why = "no table allows it" if not ev else f"it could be in {', '.join(sorted(ev))}"
                self.skip(no, s, f"cannot tell which table chain {chain!r} is in ({why}); give --table")
                continue
            (table,) = ev
            if rule is None:
                parts = s.lstrip(":").split() if s.startswith(":") else s.split()[1:]
                policy = parts[1] if len(parts) > 1 else "-"
                self._declare_in(table, chain, policy, no)
            else:
                self.section(table).chain_rules(chain).append(rule)

    def finish(self) -> Excerpt:
        self._place_headerless()
        unseen: list[str] = []
        tables = []
        for tname in BUILTIN_CHAINS:
            sec = self.sections.get(tname)
            if sec is None:
                chains = tuple(
                    Chain(c, "ACCEPT", (marker(c, f"table {tname} is not in the excerpt"),)) for c in BUILTIN_CHAINS[tname]
                )
                unseen.append(f"{tname} table")
                tables.append(Table(tname, chains))
                continue
            chains_out: list[Chain] = []
            names = list(BUILTIN_CHAINS[tname]) + [c for c in sec.rules if c not in BUILTIN_CHAINS[tname]]
            jumps = {
                r.target.name
                for rules in sec.rules.values()
                for r in rules
                if r.target.name and r.target.name not in KNOWN_TARGETS
            }
            names += sorted(j for j in jumps if j not in sec.rules and j not in BUILTIN_CHAINS[tname])
            for name in names:
                builtin = name in BUILTIN_CHAINS[tname]
                rules = list(sec.rules.get(name, ()))
                shown = name in sec.rules
                if not shown:
                    what = f"{tname} {name}"
                    unseen.append(what)
                    rules = [marker(name, f"{what} is not in the excerpt")]
                elif self.grep or name not in sec.declared:
                    rules.append(marker(name, f"{tname} {name} may have rules after those the excerpt shows"))
                elif builtin and name not in sec.policies:
                    rules.append(marker(name, f"the policy of {tname} {name} is not in the excerpt"))
                policy = sec.policies.get(name, "ACCEPT") if builtin else None
                chains_out.append(Chain(name, policy, tuple(rules), sec.declared.get(name, 0)))
            tables.append(Table(tname, tuple(chains_out)))
        fam = self.family or 4
        return Excerpt(
            Ruleset(fam, tuple(tables), self.source),
            tuple(sorted(self.unusable, key=lambda u: u.line)),
            tuple(unseen),
            assumed=tuple(self.assumed),
        )


_ANY_TABLE = frozenset(BUILTIN_CHAINS)
# user chains that several tables hold under the same name
_SHARED_NAMES = {"KUBE-SERVICES": frozenset({"nat", "filter"}), "DOCKER": frozenset({"nat", "filter"})}


@functools.lru_cache(maxsize=1 << 16)
def _chain_tables(name: str) -> frozenset[str]:
    builtin = frozenset(t for t, cs in BUILTIN_CHAINS.items() if name in cs)
    if builtin:
        return builtin
    one = table_of_chain(name)
    if one is not None:
        return frozenset({one})
    return _SHARED_NAMES.get(name, _ANY_TABLE)
