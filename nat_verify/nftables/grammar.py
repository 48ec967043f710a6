"""Rule statements, expressions and set elements from tokens: the part of nft's grammar that the
text listing, ``nft -f`` scripts and kube-proxy's batch lines share.

Design
------
A rule is read statement by statement. A statement starts with a keyword (a verdict,
``reject``, ``dnat``, ``counter``, ``comment``...) or with a selector (``ip daddr``,
``meta mark``, ``ct state``, ``fib daddr type``, ``numgen random mod 2``); after a selector
comes what makes it a statement: a relational operator and a value (``Match``; the operator
may be implicit), ``set`` (``Mangle``) or ``vmap`` (``VerdictMap``). Values on the right are
constants, prefixes, ranges, ``@set`` references, anonymous sets and maps, concatenations,
and comma lists of flags (``ct state established,related``).

Nothing is guessed: a statement whose keyword the model does not know (``limit``, ``quota``,
``queue``, ``tproxy``...) is kept as an ``Opaque`` statement up to the next statement the
grammar knows, so the verdict after it still counts and the rule is ``inconclusive`` when
evaluated. Malformed input (an operator with no value, an unbalanced brace) raises
``GrammarError`` with the line.
"""

from __future__ import annotations

import re

from nat_verify.nftables.expr import (
    AnonSet,
    Binop,
    Concat,
    Counter,
    Ct,
    Elem,
    Expr,
    Fib,
    Flags,
    Log,
    Mangle,
    MapItem,
    MapLookup,
    Match,
    Meta,
    Nat,
    Notrack,
    Numgen,
    Opaque,
    OpaqueExpr,
    Payload,
    Prefix,
    Range,
    Reject,
    SetRef,
    SetUpdate,
    Stmt,
    Value,
    Verdict,
    VerdictMap,
)
from nat_verify.nftables.lexer import COMMENT, NEWLINE, PUNCT, STRING, WORD, Token

PAYLOAD_PROTOCOLS = frozenset(
    ["ip", "ip6", "tcp", "udp", "udplite", "sctp", "dccp", "th", "icmp", "icmpv6", "igmp", "ether", "vlan", "arp", "ah", "esp", "comp", "gre", "geneve", "vxlan", "ipcomp"]
)
# meta keys that may be written without ``meta`` (and nft prints without it: the first group)
UNQUALIFIED_META = frozenset(["iif", "oif", "iifname", "oifname", "iifgroup", "oifgroup"])
BARE_META = UNQUALIFIED_META | frozenset(
    ["mark", "iiftype", "oiftype", "skuid", "skgid", "nftrace", "rtclassid", "ibrname", "obrname", "ibrvproto", "ibrpvid", "pkttype", "cpu", "cgroup", "random", "ipsec", "iifkind", "oifkind", "time", "day", "hour"]
)
STRING_KEYS = frozenset(["iifname", "oifname", "ibrname", "obrname", "iifkind", "oifkind", "helper"])
CT_DIRS = ("original", "reply")
FIB_FLAGS = frozenset({"saddr", "daddr", "mark", "iif", "oif"})
FIB_RESULTS = frozenset({"oif", "oifname", "type"})
BINOPS = {"&": "&", "|": "|", "^": "^", "<<": "<<", ">>": ">>", "and": "&", "or": "|", "xor": "^"}
RELOPS = frozenset({"==", "!=", "<", ">", "<=", ">=", "eq", "ne", "lt", "gt", "le", "ge"})
_WORD_OPS = {"eq": "==", "ne": "!=", "lt": "<", "gt": ">", "le": "<=", "ge": ">="}
# selectors whose values are bit masks: an implicit operator means "has one of these bits"
BITMASK_KEYS = frozenset({("ct", "state"), ("ct", "status"), ("tcp", "flags")})
VERDICT_WORDS = frozenset({"accept", "drop", "continue", "return", "jump", "goto"})
NAT_WORDS = frozenset({"dnat", "snat", "masquerade", "redirect"})
NAT_FLAGS = frozenset({"random", "fully-random", "persistent", "netmap"})
OPAQUE_STATEMENTS = frozenset(
    ["limit", "quota", "queue", "tproxy", "dup", "fwd", "synproxy", "flow", "xt", "secmark", "osf", "meter", "synproxy", "last"]
)
# statements that end an opaque run (the grammar knows where they start)
_STATEMENT_STARTS = VERDICT_WORDS | NAT_WORDS | {"comment", "counter", "log", "reject", "notrack"}

_NOT_VALUES = VERDICT_WORDS | {"comment", "counter", "log"}

_INT = re.compile(r"^(?:\d+|0x[0-9a-fA-F]+)$")
_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?$")
_ADDRISH = re.compile(r"^[0-9a-fA-F:.]+$")


class GrammarError(ValueError):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


def duration(text: str) -> int:
    """Seconds of ``10800s``, ``3h``, ``1d2h3m4s``, ``996ms`` (milliseconds are dropped)."""
    m = _DURATION.match(text)
    if not text or m is None or not any(m.groups()):
        if text.isdigit():
            return int(text)
        raise ValueError(f"expected a duration such as 30s, 3h or 1d2h, received {text!r}")
    d, h, mi, s, _ms = (int(g) if g else 0 for g in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + s


def constant(word: str) -> Expr:
    """A constant from one word: a number, ``@set``, a prefix, a range, or a symbol/address."""
    if word.startswith("@"):
        return SetRef(word[1:])
    if _INT.match(word):
        return Value(int(word, 0))
    if "/" in word:
        addr, _, length = word.partition("/")
        if length.isdigit() and _ADDRISH.match(addr) and ("." in addr or ":" in addr):
            return Prefix(addr, int(length))
        return Value(word)
    if "-" in word and not word.startswith("-"):
        lo, _, hi = word.partition("-")
        if (_INT.match(lo) and _INT.match(hi)) or (_ADDRISH.match(lo) and _ADDRISH.match(hi) and ("." in lo or ":" in lo)):
            return Range(constant(lo), constant(hi))
    return Value(word)


class Cursor:
    """Tokens of one statement list (a rule, an element list) and a position in them."""

    def __init__(self, tokens: list[Token], line: int) -> None:
        self.toks = [t for t in tokens if t.kind != NEWLINE]
        self.pos = 0
        self.line = line

    def err(self, message: str) -> GrammarError:
        tok = self.peek()
        return GrammarError(tok.line if tok else self.line, message)

    def peek(self, k: int = 0) -> Token | None:
        i = self.pos + k
        return self.toks[i] if i < len(self.toks) else None

    def at(self, *texts: str, k: int = 0) -> bool:
        t = self.peek(k)
        return t is not None and t.kind in (WORD, PUNCT) and t.text in texts

    def word(self, k: int = 0) -> str:
        t = self.peek(k)
        return t.text if t is not None and t.kind == WORD else ""

    def next(self) -> Token:
        t = self.peek()
        if t is None:
            raise self.err("unexpected end of the rule")
        self.pos += 1
        return t

    def expect(self, text: str) -> None:
        t = self.peek()
        if t is None or t.text != text or t.kind == STRING:
            got = "the end of the rule" if t is None else repr(t.text)
            raise self.err(f"expected {text!r}, received {got}")
        self.pos += 1

    def take_word(self, what: str) -> str:
        t = self.peek()
        if t is None or t.kind not in (WORD, STRING):
            got = "the end of the rule" if t is None else repr(t.text)
            raise self.err(f"expected {what}, received {got}")
        self.pos += 1
        return t.text

    def take_int(self, what: str) -> int:
        text = self.take_word(what)
        if not _INT.match(text):
            raise self.err(f"expected {what} (a number), received {text!r}")
        return int(text, 0)

    def done(self) -> bool:
        return self.pos >= len(self.toks)


# -- selectors --------------------------------------------------------------------------------


def is_selector_start(c: Cursor) -> bool:
    w = c.word()
    if not w:
        return False
    if w in PAYLOAD_PROTOCOLS:
        # "ip daddr", not the value "tcp" of "meta l4proto tcp" (callers only ask at a start)
        return bool(c.word(1)) or c.at("(", k=1)
    return w in ("meta", "ct", "fib", "numgen", "jhash", "symhash", "rt", "socket", "exthdr", "ipsec") or w in BARE_META


def selector(c: Cursor) -> Expr:
    w = c.take_word("a selector")
    if w in PAYLOAD_PROTOCOLS:
        return Payload(w, c.take_word(f"a field of {w}"))
    if w == "meta":
        return Meta(c.take_word("a meta key"))
    if w in BARE_META:
        return Meta(w)
    if w == "ct":
        d = ""
        fam = ""
        if c.word() in CT_DIRS:
            d = c.take_word("a direction")
            if c.word() in ("ip", "ip6"):
                fam = c.take_word("a family")
        return Ct(c.take_word("a conntrack key"), d, fam)
    if w == "fib":
        flags = [c.take_word("a fib flag")]
        while c.at("."):
            c.next()
            flags.append(c.take_word("a fib flag"))
        result = c.take_word("a fib result (oif, oifname or type)")
        if result not in FIB_RESULTS or not set(flags) <= FIB_FLAGS:
            raise c.err(f"unknown fib lookup {'.'.join(flags)} {result}")
        return Fib(tuple(flags), result)
    if w == "numgen":
        mode = c.take_word("random or inc")
        if mode not in ("random", "inc"):
            raise c.err(f"numgen mode must be random or inc, received {mode!r}")
        c.expect("mod")
        mod = c.take_int("the modulus")
        offset = 0
        if c.at("offset"):
            c.next()
            offset = c.take_int("the offset")
        if mod <= 0:
            raise c.err("numgen mod must be at least 1")
        return Numgen(mode, mod, offset)
    # jhash, symhash, rt, socket, exthdr, ipsec: kept, not modelled
    parts = [w]
    while not c.done() and c.peek().kind == WORD and not c.at(*_STATEMENT_STARTS, "set", "vmap", "map") and not _is_value_after(c):  # type: ignore[union-attr]
        parts.append(c.next().text)
    return OpaqueExpr(" ".join(parts))


def _is_value_after(c: Cursor) -> bool:
    # an opaque selector ends where a relational operator or a value begins
    t = c.peek()
    return t is None or t.kind != WORD or t.text in RELOPS


def _key_of(e: Expr) -> tuple[str, str] | None:
    if isinstance(e, Ct):
        return ("ct", e.key)
    if isinstance(e, Payload):
        return (e.protocol, e.field)
    return None


# -- values -----------------------------------------------------------------------------------


def value_word(c: Cursor) -> Expr:
    t = c.next()
    if t.kind == STRING:
        return Value(t.text)
    if t.kind != WORD:
        raise GrammarError(t.line, f"expected a value, received {t.text!r}")
    return constant(t.text)


def set_item(c: Cursor, *, elements: bool = False) -> Expr | MapItem:
    """One item of ``{ ... }``: a key (a concatenation of values), its attributes, ``: value``."""
    key = concat_value(c)
    timeout = expires = None
    comment = ""
    while True:
        if c.at("timeout"):
            c.next()
            timeout = _duration(c)
        elif c.at("expires"):
            c.next()
            expires = _duration(c)
        elif c.at("comment"):
            c.next()
            comment = c.take_word("a comment")
        elif c.at("counter") and elements:
            c.next()
            while c.at("packets", "bytes"):
                c.next()
                c.take_int("a count")
        else:
            break
    if timeout is not None or expires is not None or comment:
        key = Elem(key, timeout, expires, comment)
    if c.at(":"):
        c.next()
        return MapItem(key, map_value(c))
    return key


def _duration(c: Cursor) -> int:
    text = c.take_word("a duration")
    try:
        return duration(text)
    except ValueError as e:
        raise c.err(str(e)) from None


def map_value(c: Cursor) -> Expr | Verdict:
    if c.word() in VERDICT_WORDS:
        return verdict(c)
    return concat_value(c)


def concat_value(c: Cursor) -> Expr:
    items = [value_word(c)]
    while c.at("."):
        c.next()
        items.append(value_word(c))
    return items[0] if len(items) == 1 else Concat(tuple(items))


def anon_set(c: Cursor, *, elements: bool = False) -> AnonSet:
    c.expect("{")
    items: list[Expr | MapItem] = []
    while not c.at("}"):
        if c.done():
            raise c.err("'{' without its '}'")
        items.append(set_item(c, elements=elements))
        if c.at(","):
            c.next()
        elif not c.at("}"):
            t = c.peek()
            raise c.err(f"expected ',' or '}}' in a set, received {t.text if t else 'the end'!r}")
    c.expect("}")
    return AnonSet(tuple(items))


def rhs(c: Cursor) -> Expr:
    """The right side of a relation."""
    if c.at("{"):
        return anon_set(c)
    if c.at("("):
        return _paren_flags(c)
    first = concat_value(c)
    if c.at(",") and isinstance(first, Value):
        items: list[str | int] = [first.value]
        while c.at(","):
            c.next()
            v = value_word(c)
            if not isinstance(v, Value) or isinstance(v.value, bool):
                raise c.err("a comma list holds plain values")
            items.append(v.value)
        return Flags(tuple(items))
    return first


def _paren_flags(c: Cursor) -> Flags:
    c.expect("(")
    items: list[str | int] = []
    while True:
        v = value_word(c)
        if not isinstance(v, Value) or isinstance(v.value, bool):
            raise c.err("expected a flag")
        items.append(v.value)
        if c.at("|"):
            c.next()
            continue
        break
    c.expect(")")
    return Flags(tuple(items))


def term(c: Cursor) -> Expr:
    """A selector or a value (the operands of ``set``, of ``dnat to``, of binary operators)."""
    if c.at("("):
        c.next()
        e = value_expr(c)
        c.expect(")")
        return e
    if c.at("{"):
        return anon_set(c)
    if is_selector_start(c):
        e = selector(c)
        while c.at("."):
            c.next()
            nxt = selector(c) if is_selector_start(c) else value_word(c)
            e = Concat((*e.items, nxt)) if isinstance(e, Concat) else Concat((e, nxt))
        return e
    return concat_value(c)


def value_expr(c: Cursor) -> Expr:
    e = term(c)
    while True:
        if c.word() in BINOPS or c.at("&", "|", "^", "<<", ">>"):
            op = BINOPS[c.next().text]
            e = Binop(op, e, term(c))
        elif c.at("map"):
            c.next()
            data = anon_set(c) if c.at("{") else value_word(c)
            e = MapLookup(e, data)
        else:
            return e


# -- statements -------------------------------------------------------------------------------


def verdict(c: Cursor) -> Verdict:
    w = c.take_word("a verdict")
    if w in ("jump", "goto"):
        return Verdict(w, c.take_word("a chain name"))
    if w not in VERDICT_WORDS:
        raise c.err(f"expected a verdict, received {w!r}")
    return Verdict(w)


def _lhs(c: Cursor) -> Expr:
    e = selector(c)
    if c.at("."):
        items = [e]
        while c.at("."):
            c.next()
            items.append(selector(c) if is_selector_start(c) else value_word(c))
        e = Concat(tuple(items))
    while c.word() in BINOPS or c.at("&", "|", "^", "<<", ">>"):
        op = BINOPS[c.next().text]
        operand = _paren_flags(c) if c.at("(") else value_word(c)
        e = Binop(op, e, operand)
    return e


def _selector_statement(c: Cursor) -> Stmt:
    left = _lhs(c)
    if c.at("set"):
        c.next()
        return Mangle(left, value_expr(c))
    if c.at("vmap"):
        c.next()
        return VerdictMap(left, anon_set(c) if c.at("{") else value_word(c))
    op = "=="
    if c.word() in RELOPS or c.at("==", "!=", "<", ">", "<=", ">="):
        text = c.next().text
        op = _WORD_OPS.get(text, text)
    if c.done() or c.word() in _NOT_VALUES:
        raise c.err(f"expected a value after {_describe(left)}")
    right = rhs(c)
    # "tcp flags syn / fin,syn,rst,ack": the value under a mask
    if c.word() == "/":
        c.next()
        mask = rhs(c)
        return Match(Binop("&", left, mask), op, right)
    if op == "==" and (_key_of(left) in BITMASK_KEYS) and not isinstance(right, (AnonSet, SetRef)):
        op = "in"
    return Match(left, op, right)


def _describe(e: Expr) -> str:
    if isinstance(e, Payload):
        return f"{e.protocol} {e.field}"
    if isinstance(e, Meta):
        return f"meta {e.key}"
    if isinstance(e, Ct):
        return f"ct {e.key}"
    return type(e).__name__.lower()


def _reject(c: Cursor) -> Reject:
    if not c.at("with"):
        return Reject()
    c.next()
    kind = c.take_word("icmp, icmpv6, icmpx or tcp")
    if kind == "tcp":
        c.expect("reset")
        return Reject("tcp reset")
    if kind not in ("icmp", "icmpv6", "icmpx"):
        raise c.err(f"reject with {kind!r}: expected icmp, icmpv6, icmpx or tcp reset")
    if c.at("type"):
        c.next()
    return Reject(kind, c.take_word("an ICMP code"))


def _nat_target(text: str) -> tuple[Expr | None, Expr | None]:
    """``ADDR``, ``ADDR:PORT``, ``[ADDR6]:PORT``, ``:PORT``, with ranges, as (addr, port)."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif text.startswith(":"):
        host, port = "", text[1:]
    elif text.count(":") == 1:
        host, _, port = text.partition(":")
    else:
        host, port = text, ""
    return (constant(host) if host else None, constant(port) if port else None)


def _nat(c: Cursor, kind: str) -> Nat:
    family = ""
    addr: Expr | None = None
    port: Expr | None = None
    if kind in ("dnat", "snat") and c.word() in ("ip", "ip6") and c.word(1) == "to":
        family = c.take_word("a family")
    if c.at("to"):
        c.next()
        if is_selector_start(c) or c.at("{", "("):
            addr = value_expr(c)
            if c.at(":"):
                c.next()
                port = value_word(c)
        else:
            addr, port = _nat_target(c.take_word("an address or :port"))
            if kind in ("masquerade", "redirect") and addr is not None:
                raise c.err(f"{kind} takes only a port ('to :PORT')")
    elif kind in ("dnat", "snat"):
        raise c.err(f"{kind} needs 'to ADDRESS'")
    flags: list[str] = []
    while c.word() in NAT_FLAGS:
        flags.append(c.next().text)
        if c.at(","):
            c.next()
    return Nat(kind, family, addr, port, tuple(flags))


def _log(c: Cursor) -> Log:
    opts: list[tuple[str, str | int]] = []
    while c.word() in ("prefix", "level", "group", "snaplen", "queue-threshold", "flags"):
        k = c.next().text
        if k == "flags":
            v = c.take_word("log flags")
            while c.at(","):
                c.next()
                v += "," + c.take_word("log flags")
            opts.append((k, v))
        elif k in ("group", "snaplen", "queue-threshold"):
            opts.append((k, c.take_int(k)))
        else:
            opts.append((k, c.take_word(k)))
    return Log(tuple(opts))


def _counter(c: Cursor) -> Counter:
    if c.at("name"):
        c.next()
        return Counter(name=c.take_word("a counter name"))
    packets = bytes_ = None
    while c.at("packets", "bytes"):
        k = c.next().text
        n = c.take_int(k)
        if k == "packets":
            packets = n
        else:
            bytes_ = n
    return Counter(packets, bytes_)


def _opaque(c: Cursor) -> Opaque:
    parts: list[str] = []
    while not c.done() and not (c.peek().kind == WORD and c.word() in _STATEMENT_STARTS and parts):  # type: ignore[union-attr]
        t = c.next()
        parts.append(f'"{t.text}"' if t.kind == STRING else t.text)
    return Opaque(" ".join(parts))


def statement(c: Cursor) -> Stmt | str:
    """One statement; a rule comment is returned as a ``str``."""
    w = c.word()
    t = c.peek()
    if t is not None and t.kind == STRING:
        raise c.err(f"unexpected string {t.text!r}")
    if t is not None and t.kind == PUNCT:
        raise c.err(f"unexpected {t.text!r}")
    if w in VERDICT_WORDS:
        return verdict(c)
    if w == "comment":
        c.next()
        return c.take_word("a comment")
    if w == "counter":
        c.next()
        return _counter(c)
    if w == "log":
        c.next()
        return _log(c)
    if w == "reject":
        c.next()
        return _reject(c)
    if w in NAT_WORDS:
        c.next()
        return _nat(c, w)
    if w == "notrack":
        c.next()
        return Notrack()
    if w in ("update", "add", "delete") and c.word(1).startswith("@"):
        c.next()
        name = c.next().text[1:]
        c.expect("{")
        elem = set_item_expr(c)
        c.expect("}")
        return SetUpdate(w, name, elem)
    if is_selector_start(c):
        return _selector_statement(c)
    if w in OPAQUE_STATEMENTS or w:
        return _opaque(c)
    raise c.err("expected a statement")


def set_item_expr(c: Cursor) -> Expr:
    """``{ ip saddr [timeout T] }`` in ``update @set``: an expression of the packet."""
    e = term(c)
    timeout = None
    if c.at("timeout"):
        c.next()
        timeout = _duration(c)
    return Elem(e, timeout) if timeout is not None else e


def rule(tokens: list[Token], line: int) -> tuple[tuple[Stmt, ...], str, int | None]:
    """(statements, comment, handle) of one rule's tokens."""
    handle = None
    toks = []
    for t in tokens:
        if t.kind == COMMENT:
            m = re.match(r"handle (\d+)", t.text)
            if m:
                handle = int(m.group(1))
            continue
        toks.append(t)
    c = Cursor(toks, line)
    stmts: list[Stmt] = []
    comment = ""
    while not c.done():
        s = statement(c)
        if isinstance(s, str):
            comment = s
        else:
            stmts.append(s)
    return tuple(stmts), comment, handle


def elements(tokens: list[Token], line: int) -> list[Expr | MapItem]:
    """The items of ``{ ... }`` in ``add element`` / ``elements = { ... }``."""
    c = Cursor([t for t in tokens if t.kind != COMMENT], line)
    s = anon_set(c, elements=True)
    if not c.done():
        raise c.err(f"unexpected {c.peek().text!r} after the element list")  # type: ignore[union-attr]
    return list(s.items)
