"""Parse nft's input language: ``nft list ruleset`` output and ``nft -f`` scripts, including the
``add table/chain/set/map/rule/element`` batch lines kube-proxy's fake prints.

Both forms are one language to nft (a listing is a valid script), so one parser reads them:
top-level commands (``add``, ``create``, ``insert``, ``flush``, ``delete``, ``destroy``) and
``table FAMILY NAME { ... }`` blocks, applied in order to a ruleset under construction.
References are resolved when the whole file is read (kube-proxy's own test literals declare
chains after the rules that jump to them); a jump, a ``goto`` or an ``@set`` that names nothing
in its table, and elements of a set the file never declares, are errors with their line.

Anything malformed raises ``DumpError`` (``file:line: message``); nothing is half loaded.
"""

from __future__ import annotations

import attrs

from nat_verify.netfilter.parse import DumpError
from nat_verify.nftables import grammar
from nat_verify.nftables.expr import MapItem, Reject
from nat_verify.nftables.lexer import (
    COMMENT,
    NEWLINE,
    PUNCT,
    STRING,
    WORD,
    LexError,
    Token,
    tokenize,
)
from nat_verify.nftables.model import (
    CHAIN_TYPES,
    FAMILIES,
    HOOKS,
    BaseHook,
    Chain,
    Element,
    Rule,
    Ruleset,
    Set,
    Table,
)
from nat_verify.nftables.priority import value_of
from nat_verify.nftables.refs import check_references

COMMANDS = frozenset({"add", "create", "insert", "replace", "delete", "destroy", "flush"})
OBJECTS = frozenset({"table", "chain", "rule", "set", "map", "element", "ruleset"})
# stateful objects and flowtables: read past, not modelled (rules that use them stay opaque)
SKIPPED_OBJECTS = frozenset({"counter", "quota", "flowtable", "limit", "secmark", "synproxy", "ct"})


class _ChainB:
    def __init__(self, name: str, line: int) -> None:
        self.name = name
        self.line = line
        self.base: BaseHook | None = None
        self.comment = ""
        self.rules: list[Rule] = []


class _SetB:
    def __init__(self, name: str, kind: str, line: int) -> None:
        self.name = name
        self.kind = kind
        self.line = line
        self.spec: dict[str, object] = {}
        self.elements: dict[tuple[object, ...], Element] = {}


class _TableB:
    def __init__(self, family: str, name: str, line: int) -> None:
        self.family = family
        self.name = name
        self.line = line
        self.comment = ""
        self.flags: tuple[str, ...] = ()
        self.chains: dict[str, _ChainB] = {}
        self.sets: dict[str, _SetB] = {}


def _split(tokens: list[Token], start: int, end: int) -> list[list[Token]]:
    """Statements of ``tokens[start:end]``: separated by newlines and ``;`` outside braces."""
    out: list[list[Token]] = []
    cur: list[Token] = []
    depth = 0
    for t in tokens[start:end]:
        if t.kind == PUNCT and t.text == "{":
            depth += 1
        elif t.kind == PUNCT and t.text == "}":
            depth -= 1
        if depth == 0 and (t.kind == NEWLINE or (t.kind == PUNCT and t.text == ";")):
            if cur:
                out.append(cur)
            cur = []
            continue
        if t.kind == COMMENT and depth == 0 and not (t.text.startswith("handle ") and cur):
            continue
        cur.append(t)
    if cur:
        out.append(cur)
    return out


def _close(tokens: list[Token], i: int) -> int:
    """Index of the ``}`` matching the ``{`` at ``i``."""
    depth = 0
    for j in range(i, len(tokens)):
        t = tokens[j]
        if t.kind == PUNCT and t.text == "{":
            depth += 1
        elif t.kind == PUNCT and t.text == "}":
            depth -= 1
            if depth == 0:
                return j
    raise grammar.GrammarError(tokens[i].line, "'{' without its '}'")


def _body(stmt: list[Token], i: int) -> tuple[list[list[Token]], int]:
    """The statements inside the braces that open at ``stmt[i]``, and the index after them."""
    end = _close(stmt, i)
    return _split(stmt, i + 1, end), end + 1


class ScriptParser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.tables: dict[tuple[str, str], _TableB] = {}
        self.lines: list[str] = []

    def err(self, line: int, message: str) -> DumpError:
        return DumpError(self.source, line, message)

    def run(self, text: str) -> Ruleset:
        self.lines = text.split("\n")
        try:
            tokens = tokenize(text)
            for stmt in _split(tokens, 0, len(tokens)):
                self.command(stmt)
        except (LexError, grammar.GrammarError) as e:
            raise self.err(e.line, str(e)) from None
        ruleset = self.build()
        check_references(ruleset)
        return ruleset

    # -- commands ---------------------------------------------------------------------------

    def command(self, stmt: list[Token]) -> None:
        head = stmt[0]
        if head.kind != WORD:
            raise self.err(head.line, f"expected a command or 'table', received {head.text!r}")
        verb = head.text
        rest = stmt[1:]
        if verb in ("define", "include"):
            raise self.err(head.line, f"'{verb}' is not supported: give the ruleset as 'nft list ruleset' prints it")
        if verb in OBJECTS:
            verb, rest = "add", stmt
        if verb not in COMMANDS:
            raise self.err(head.line, f"expected 'add', 'insert', 'flush', 'delete' or a 'table' block, received {verb!r}")
        if not rest or rest[0].kind != WORD or rest[0].text not in OBJECTS:
            got = rest[0].text if rest else "nothing"
            raise self.err(head.line, f"'{verb}' needs table, chain, rule, set, map or element, received {got!r}")
        obj = rest[0].text
        args = rest[1:]
        if obj == "ruleset":
            if verb != "flush":
                raise self.err(head.line, f"'{verb} ruleset' is not a ruleset change this parser applies")
            fam = args[0].text if args else ""
            self.tables = {k: v for k, v in self.tables.items() if fam and k[0] != fam}
            return
        fam, args = self._family(args)
        if obj == "table":
            self.table_cmd(verb, fam, args, head.line)
        elif obj == "chain":
            self.chain_cmd(verb, fam, args, head.line)
        elif obj == "rule":
            self.rule_cmd(verb, fam, args, head.line)
        elif obj in ("set", "map"):
            self.set_cmd(verb, obj, fam, args, head.line)
        else:
            self.element_cmd(verb, fam, args, head.line)

    def _family(self, args: list[Token]) -> tuple[str, list[Token]]:
        # "table ip" alone would be a table named ip: only a family when a name follows
        if args and args[0].kind == WORD and args[0].text in FAMILIES and len(args) > 1 and args[1].kind in (WORD, STRING):
            return args[0].text, args[1:]
        return "ip", args

    def _name(self, args: list[Token], i: int, what: str, line: int) -> str:
        if i >= len(args) or args[i].kind not in (WORD, STRING):
            raise self.err(line, f"expected {what}")
        return args[i].text

    def _table(self, fam: str, name: str, line: int, create: bool = False) -> _TableB:
        t = self.tables.get((fam, name))
        if t is None:
            if not create:
                raise self.err(line, f"table {fam} {name} does not exist")
            t = self.tables[(fam, name)] = _TableB(fam, name, line)
        return t

    def table_cmd(self, verb: str, fam: str, args: list[Token], line: int) -> None:
        name = self._name(args, 0, "a table name", line)
        if verb in ("delete", "destroy"):
            if self.tables.pop((fam, name), None) is None and verb == "delete":
                raise self.err(line, f"delete table {fam} {name}: no such table")
            return
        if verb == "flush":
            t = self._table(fam, name, line)
            for c in t.chains.values():
                c.rules = []
            for s in t.sets.values():
                s.elements = {}
            return
        t = self._table(fam, name, line, create=True)
        if len(args) > 1:
            if not (args[1].kind == PUNCT and args[1].text == "{"):
                raise self.err(args[1].line, f"expected '{{' after table {name}, received {args[1].text!r}")
            items, end = _body(args, 1)
            if end != len(args):
                raise self.err(args[end].line, f"unexpected {args[end].text!r} after the table block")
            for item in items:
                self.table_item(t, item)

    def table_item(self, t: _TableB, item: list[Token]) -> None:
        head = item[0]
        w = head.text if head.kind == WORD else ""
        if w == "comment":
            t.comment = self._name(item, 1, "a comment string", head.line)
        elif w == "flags":
            t.flags = tuple(x.text for x in item[1:] if x.kind == WORD)
        elif w == "chain":
            name = self._name(item, 1, "a chain name", head.line)
            c = self._chain_b(t, name, head.line)
            if len(item) > 2:
                self.chain_body(t, c, item, 2)
        elif w in ("set", "map"):
            name = self._name(item, 1, f"a {w} name", head.line)
            s = self._set_b(t, name, w, head.line)
            if len(item) > 2:
                self.set_body(t, s, item, 2)
        elif w in SKIPPED_OBJECTS:
            return
        else:
            raise self.err(head.line, f"expected chain, set, map, comment or flags in table {t.name}, received {head.text!r}")

    def _chain_b(self, t: _TableB, name: str, line: int) -> _ChainB:
        c = t.chains.get(name)
        if c is None:
            c = t.chains[name] = _ChainB(name, line)
        return c

    def chain_cmd(self, verb: str, fam: str, args: list[Token], line: int) -> None:
        tname = self._name(args, 0, "a table name", line)
        t = self._table(fam, tname, line, create=verb in ("add", "create"))
        name = self._name(args, 1, "a chain name", line)
        if verb in ("delete", "destroy"):
            if t.chains.pop(name, None) is None and verb == "delete":
                raise self.err(line, f"delete chain {name}: table {tname} has no such chain")
            return
        if verb == "flush":
            c = t.chains.get(name)
            if c is None:
                raise self.err(line, f"flush chain {name}: table {tname} has no such chain")
            c.rules = []
            return
        c = self._chain_b(t, name, line)
        if len(args) > 2:
            self.chain_body(t, c, args, 2)

    def chain_body(self, t: _TableB, c: _ChainB, toks: list[Token], i: int) -> None:
        if not (toks[i].kind == PUNCT and toks[i].text == "{"):
            raise self.err(toks[i].line, f"expected '{{' after chain {c.name}, received {toks[i].text!r}")
        items, end = _body(toks, i)
        if end != len(toks):
            raise self.err(toks[end].line, f"unexpected {toks[end].text!r} after the chain block")
        for item in items:
            head = item[0]
            w = head.text if head.kind == WORD else ""
            if w == "type" and len(item) > 1 and item[1].text in CHAIN_TYPES:
                c.base = self.base_spec(t, c, item)
            elif w == "policy" and len(item) == 2:
                if c.base is None:
                    raise self.err(head.line, f"chain {c.name} has a policy but no hook")
                if item[1].text not in ("accept", "drop"):
                    raise self.err(head.line, f"policy must be accept or drop, received {item[1].text!r}")
                c.base = attrs.evolve(c.base, policy=item[1].text)
            elif w == "comment" and len(item) == 2 and item[1].kind == STRING:
                c.comment = item[1].text
            elif w == "devices":
                continue
            else:
                c.rules.append(self.make_rule(t.family, c.name, item))

    def base_spec(self, t: _TableB, c: _ChainB, item: list[Token]) -> BaseHook:
        line = item[0].line
        words = [x.text for x in item]
        try:
            ctype = words[1]
            if words[2] != "hook":
                raise ValueError
            hook = words[3]
        except (IndexError, ValueError):
            raise self.err(line, "expected 'type TYPE hook HOOK priority PRIORITY'") from None
        if hook not in HOOKS:
            raise self.err(line, f"unknown hook {hook!r}; expected one of {', '.join(HOOKS)}")
        rest = words[4:]
        device = ""
        if rest[:1] == ["device"]:
            if len(rest) < 2:
                raise self.err(line, "expected a device name after 'device'")
            device, rest = rest[1], rest[2:]
        if rest[:1] != ["priority"] or len(rest) < 2:
            raise self.err(line, f"chain {c.name}: expected 'priority PRIORITY' after the hook")
        prio = self.priority(" ".join(rest[1:]), t.family, hook, line)
        policy = c.base.policy if c.base is not None else "accept"
        return BaseHook(ctype, hook, prio, policy, device)

    def priority(self, text: str, family: str, hook: str, line: int) -> int:
        s = text.replace(" ", "")
        try:
            return int(s)
        except ValueError:
            pass
        for sign in ("+", "-"):
            name, sep, off = s.partition(sign)
            if sep and name and off.isdigit():
                base = value_of(name, family, hook)
                if base is not None:
                    return base + int(off) if sign == "+" else base - int(off)
        base = value_of(s, family, hook)
        if base is None:
            raise self.err(line, f"unknown priority {text!r} for hook {hook} in family {family}")
        return base

    # -- rules ------------------------------------------------------------------------------

    def _raw(self, toks: list[Token]) -> str:
        """The rule's own text in the file (without a trailing ``# handle N``)."""
        body = [t for t in toks if t.kind != COMMENT] or toks
        first, last = body[0], body[-1]
        if first.line == last.line:
            return self.lines[first.line - 1][first.col - 1 : last.end - 1]
        lines = self.lines[first.line - 1 : last.line]
        lines[-1] = lines[-1][: last.end - 1]
        lines[0] = lines[0][first.col - 1 :]
        return " ".join(x.strip() for x in lines)

    def make_rule(self, family: str, chain: str, toks: list[Token]) -> Rule:
        stmts, comment, handle = grammar.rule(toks, toks[0].line)
        stmts = tuple(s.canonical(family) if isinstance(s, Reject) else s for s in stmts)
        return Rule(chain, stmts, comment, handle, toks[0].line, self._raw(toks))

    def rule_cmd(self, verb: str, fam: str, args: list[Token], line: int) -> None:
        tname = self._name(args, 0, "a table name", line)
        t = self._table(fam, tname, line)
        cname = self._name(args, 1, "a chain name", line)
        c = t.chains.get(cname)
        if c is None:
            raise self.err(line, f"rule for chain {cname!r}, which table {fam} {tname} does not declare")
        body = args[2:]
        if verb in ("delete", "destroy"):
            if len(body) != 2 or body[0].text != "handle" or not body[1].text.isdigit():
                raise self.err(line, "expected 'delete rule FAMILY TABLE CHAIN handle N'")
            h = int(body[1].text)
            c.rules = [r for r in c.rules if r.handle != h]
            return
        if body and body[0].kind == WORD and body[0].text in ("index", "position", "handle"):
            raise self.err(line, f"'{body[0].text}' in a rule command is not supported; list the rules in order")
        if not body:
            raise self.err(line, "a rule needs at least one statement")
        rule = self.make_rule(t.family, cname, body)
        if verb == "insert":
            c.rules.insert(0, rule)
        else:
            c.rules.append(rule)

    # -- sets and maps ----------------------------------------------------------------------

    def _set_b(self, t: _TableB, name: str, kind: str, line: int) -> _SetB:
        s = t.sets.get(name)
        if s is None:
            s = t.sets[name] = _SetB(name, kind, line)
        elif s.kind != kind:
            raise self.err(line, f"{name} is a {s.kind}, not a {kind}")
        return s

    def set_cmd(self, verb: str, kind: str, fam: str, args: list[Token], line: int) -> None:
        tname = self._name(args, 0, "a table name", line)
        t = self._table(fam, tname, line, create=verb in ("add", "create"))
        name = self._name(args, 1, f"a {kind} name", line)
        if verb in ("delete", "destroy"):
            if t.sets.pop(name, None) is None and verb == "delete":
                raise self.err(line, f"delete {kind} {name}: table {tname} has no such {kind}")
            return
        if verb == "flush":
            s = t.sets.get(name)
            if s is None:
                raise self.err(line, f"flush {kind} {name}: table {tname} has no such {kind}")
            s.elements = {}
            return
        s = self._set_b(t, name, kind, line)
        if len(args) > 2:
            self.set_body(t, s, args, 2)
        elif "key" not in s.spec:
            raise self.err(line, f"{kind} {name} needs a body with its type")

    def set_body(self, t: _TableB, s: _SetB, toks: list[Token], i: int) -> None:
        if not (toks[i].kind == PUNCT and toks[i].text == "{"):
            raise self.err(toks[i].line, f"expected '{{' after {s.kind} {s.name}")
        items, end = _body(toks, i)
        if end != len(toks):
            raise self.err(toks[end].line, f"unexpected {toks[end].text!r} after the {s.kind} block")
        for item in items:
            head = item[0]
            w = head.text
            vals = [x.text for x in item[1:]]
            try:
                if w in ("type", "typeof"):
                    self._set_type(s, item)
                elif w == "flags":
                    s.spec["flags"] = tuple(v for v in vals if v != ",")
                elif w in ("timeout", "gc-interval"):
                    s.spec[w] = grammar.duration(vals[0])
                elif w == "size":
                    s.spec["size"] = int(vals[0], 0)
                elif w == "policy":
                    s.spec["policy"] = vals[0]
                elif w == "auto-merge":
                    s.spec["auto-merge"] = True
                elif w == "comment":
                    s.spec["comment"] = vals[0]
                elif w == "elements":
                    if not vals or vals[0] != "=":
                        raise self.err(head.line, "expected 'elements = { ... }'")
                    self.add_elements(s, item[2:], head.line)
                elif w in ("counter", "quota"):
                    continue
                else:
                    raise self.err(head.line, f"unexpected {w!r} in {s.kind} {s.name}")
            except (IndexError, ValueError) as e:
                if isinstance(e, DumpError):
                    raise
                raise self.err(head.line, f"{s.kind} {s.name}: {w} needs a value") from None

    def _set_type(self, s: _SetB, item: list[Token]) -> None:
        typeof = item[0].text == "typeof"
        words: list[str] = []
        data: list[str] = []
        target = words
        for x in item[1:]:
            if x.kind == PUNCT and x.text == ":":
                target = data
                continue
            target.append(x.text)
        key = _split_dots(words)
        if not key:
            raise self.err(item[0].line, f"{s.kind} {s.name} needs a key type")
        if s.kind == "map" and not data:
            raise self.err(item[0].line, f"map {s.name} needs 'type KEY : VALUE'")
        if s.kind == "set" and data:
            raise self.err(item[0].line, f"set {s.name} has a value type: declare it as a map")
        s.spec["key"] = tuple(key)
        s.spec["data"] = " ".join(data)
        s.spec["typeof"] = typeof

    def element_cmd(self, verb: str, fam: str, args: list[Token], line: int) -> None:
        tname = self._name(args, 0, "a table name", line)
        t = self.tables.get((fam, tname))
        name = self._name(args, 1, "a set or map name", line)
        s = t.sets.get(name) if t is not None else None
        if s is None:
            raise self.err(line, f"elements of {name!r}, which table {fam} {tname} does not declare")
        rest = args[2:]
        if not rest or rest[0].text != "{":
            raise self.err(line, "expected '{ element, ... }'")
        if verb in ("delete", "destroy"):
            for item in grammar.elements(rest, line):
                key = item.key if isinstance(item, MapItem) else item
                s.elements.pop(_elem_key(Element.of(key)), None)
            return
        self.add_elements(s, rest, line)

    def add_elements(self, s: _SetB, toks: list[Token], line: int) -> None:
        for item in grammar.elements(toks, line):
            if isinstance(item, MapItem):
                if s.kind != "map":
                    raise self.err(line, f"set {s.name}: an element with a ': value' belongs in a map")
                el = Element.of(item.key, item.value, line)
            else:
                if s.kind == "map":
                    raise self.err(line, f"map {s.name}: element without ': value'")
                el = Element.of(item, None, line)
            s.elements[_elem_key(el)] = el

    # -- result -----------------------------------------------------------------------------

    def build(self) -> Ruleset:
        tables = []
        for t in self.tables.values():
            sets = []
            for s in t.sets.values():
                sp = s.spec
                if "key" not in sp:
                    raise self.err(s.line, f"{s.kind} {s.name} is never given a type")
                sets.append(
                    Set(
                        s.name,
                        s.kind,
                        sp["key"],  # type: ignore[arg-type]
                        str(sp.get("data", "")),
                        bool(sp.get("typeof", False)),
                        sp.get("flags", ()),  # type: ignore[arg-type]
                        sp.get("timeout"),  # type: ignore[arg-type]
                        sp.get("gc-interval"),  # type: ignore[arg-type]
                        sp.get("size"),  # type: ignore[arg-type]
                        str(sp.get("policy", "")),
                        bool(sp.get("auto-merge", False)),
                        str(sp.get("comment", "")),
                        tuple(s.elements.values()),
                        s.line,
                    )
                )
            chains = tuple(Chain(c.name, c.base, tuple(c.rules), c.comment, c.line) for c in t.chains.values())
            tables.append(Table(t.family, t.name, chains, tuple(sets), t.comment, t.flags, t.line))
        return Ruleset(tuple(tables), self.source)


def _split_dots(words: list[str]) -> list[str]:
    """``ipv4_addr . inet_proto`` -> the parts; with ``typeof`` the parts are expressions."""
    out: list[str] = []
    cur: list[str] = []
    for w in words:
        if w == ".":
            out.append(" ".join(cur))
            cur = []
        else:
            cur.append(w)
    if cur:
        out.append(" ".join(cur))
    return [p for p in out if p]


def _elem_key(el: Element) -> tuple[object, ...]:
    return (el.key,)
