"""Expressions, statements and rules as nft text, spelled as ``nft list`` prints them.

Numbers compared with a mark print as ``0x%08x`` and interface names are quoted, as nft does;
an operator is printed only where nft prints one (``!=``, orderings, and ``==`` after a binary
operation, where leaving it out would be ambiguous).
"""

from __future__ import annotations

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
from nat_verify.nftables.grammar import STRING_KEYS, UNQUALIFIED_META
from nat_verify.nftables.model import Rule

_PLAIN = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-:*[]@$")
MARK_TYPES = frozenset({"mark"})
STRING_TYPES = frozenset({"ifname", "string"})


def duration(seconds: int) -> str:
    """``10800`` -> ``3h``, ``93784`` -> ``1d2h3m4s``, as nft lists time values."""
    if seconds <= 0:
        return "0s"
    d, rest = divmod(seconds, 86400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((d, "d"), (h, "h"), (m, "m"), (s, "s")) if v)


def quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _hint(e: Expr) -> str:
    """The type of the values compared with ``e``: ``mark``, ``string`` or ``""``."""
    if isinstance(e, (Meta, Ct)) and e.key == "mark":
        return "mark"
    if isinstance(e, Meta) and e.key in STRING_KEYS:
        return "string"
    if isinstance(e, Ct) and e.key == "helper":
        return "string"
    if isinstance(e, Binop):
        return _hint(e.left)
    return ""


def _value(v: str | int | bool, hint: str) -> str:
    if isinstance(v, bool):
        return "exists" if v else "missing"
    if isinstance(v, int):
        return f"0x{v:08x}" if hint == "mark" else str(v)
    if hint == "string" or not v or not set(v) <= _PLAIN:
        return quote(v)
    return v


def expr(e: Expr | Verdict, hint: str = "") -> str:
    if isinstance(e, Value):
        return _value(e.value, hint)
    if isinstance(e, Verdict):
        return f"{e.kind} {e.target}" if e.target else e.kind
    if isinstance(e, Payload):
        return f"{e.protocol} {e.field}"
    if isinstance(e, Meta):
        return e.key if e.key in UNQUALIFIED_META else f"meta {e.key}"
    if isinstance(e, Ct):
        return " ".join(p for p in ("ct", e.dir, e.family, e.key) if p)
    if isinstance(e, Fib):
        return f"fib {' . '.join(e.flags)} {e.result}"
    if isinstance(e, Numgen):
        return f"numgen {e.mode} mod {e.mod}" + (f" offset {e.offset}" if e.offset else "")
    if isinstance(e, Prefix):
        return f"{e.addr}/{e.length}"
    if isinstance(e, Range):
        return f"{expr(e.lo, hint)}-{expr(e.hi, hint)}"
    if isinstance(e, SetRef):
        return "@" + e.name
    if isinstance(e, AnonSet):
        return "{ " + ", ".join(expr(i, hint) for i in e.items) + " }"
    if isinstance(e, MapItem):
        return f"{expr(e.key, hint)} : {expr(e.value)}"
    if isinstance(e, Concat):
        return " . ".join(expr(i) for i in e.items)
    if isinstance(e, Flags):
        return ",".join(str(i) for i in e.items)
    if isinstance(e, Binop):
        right = e.right
        if isinstance(right, Flags):
            r = "(" + "|".join(str(i) for i in right.items) + ")"
        else:
            r = expr(right, _hint(e.left))
        return f"{expr(e.left)} {e.op} {r}"
    if isinstance(e, MapLookup):
        return f"{expr(e.key)} map {expr(e.data)}"
    if isinstance(e, Elem):
        out = expr(e.val, hint)
        if e.timeout is not None:
            out += f" timeout {duration(e.timeout)}"
        if e.expires is not None:
            out += f" expires {duration(e.expires)}"
        if e.comment:
            out += f" comment {quote(e.comment)}"
        return out
    if isinstance(e, OpaqueExpr):
        if not e.text:
            raise ValueError(f"expression {e.json} has no text form")
        return e.text
    raise TypeError(f"not an expression: {e!r}")


def _nat_target(s: Nat) -> str:
    if s.addr is None:
        return f":{expr(s.port)}" if s.port is not None else ""
    a = expr(s.addr)
    if s.port is None:
        return a
    v6 = isinstance(s.addr, (Value, Prefix, Range)) and ":" in a
    return f"[{a}]:{expr(s.port)}" if v6 else f"{a}:{expr(s.port)}"


def stmt(s: Stmt) -> str:
    if isinstance(s, Match):
        hint = _hint(s.left)
        left = expr(s.left)
        right = expr(s.right, hint)
        if s.op in ("==", "in"):
            return f"{left} == {right}" if isinstance(s.left, Binop) and s.op == "==" else f"{left} {right}"
        return f"{left} {s.op} {right}"
    if isinstance(s, Verdict):
        return expr(s)
    if isinstance(s, VerdictMap):
        return f"{expr(s.key)} vmap {expr(s.data)}"
    if isinstance(s, Mangle):
        return f"{expr(s.key)} set {expr(s.value, _hint(s.key))}"
    if isinstance(s, Counter):
        if s.name:
            return f"counter name {quote(s.name)}"
        return f"counter packets {s.packets or 0} bytes {s.bytes or 0}"
    if isinstance(s, Reject):
        if not s.type:
            return "reject"
        return f"reject with {s.type}" + (f" {s.code}" if s.code else "")
    if isinstance(s, Nat):
        parts = [s.kind]
        if s.family:
            parts.append(s.family)
        target = _nat_target(s)
        if target:
            parts += ["to", target]
        if s.flags:
            parts.append(",".join(s.flags))
        return " ".join(parts)
    if isinstance(s, SetUpdate):
        return f"{s.op} @{s.set} {{ {expr(s.elem)} }}"
    if isinstance(s, Log):
        parts = ["log"]
        for k, v in s.options:
            parts += [k, quote(v) if k == "prefix" and isinstance(v, str) else str(v)]
        return " ".join(parts)
    if isinstance(s, Notrack):
        return "notrack"
    if isinstance(s, Opaque):
        if not s.text:
            raise ValueError(f"statement {s.json} has no text form")
        return s.text
    raise TypeError(f"not a statement: {s!r}")


def rule_text(r: Rule) -> str:
    out = " ".join(stmt(s) for s in r.stmts)
    if r.comment:
        out += f" comment {quote(r.comment)}"
    return out
