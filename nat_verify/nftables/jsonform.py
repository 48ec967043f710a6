"""``nft -j list ruleset`` (libnftables JSON, schema version 1): parse and render.

The list form (``{"nftables": [{"metainfo": ...}, {"table": ...}, {"chain": ...}, {"set": ...},
{"map": ...}, {"rule": ...}]}``) and the command form nft also reads (``{"add": {"rule": ...}}``,
``insert``, ``flush``, ``delete``) are accepted. Parsing uses the C decoder; only when an
object is malformed is the file decoded again with line tracking, so the error can name the
line of that object.

What nft 1.0.6 leaves out of its JSON (table and chain comments, the ``dynamic`` set flag) is
simply absent from a ruleset read from it; rendering includes them when the ruleset has them
(newer nft prints them and every version reads them).
"""

from __future__ import annotations

import json
from typing import Any

from nat_verify.kube.errors import KubeInputError
from nat_verify.kube.jsontext import parse_json
from nat_verify.netfilter.parse import DumpError
from nat_verify.nftables.expr import (
    DEFAULT_REJECT,
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
from nat_verify.nftables.model import BaseHook, Chain, Element, Rule, Ruleset, Set, Table
from nat_verify.nftables.refs import check_references

SCHEMA_VERSION = 1
_BINOPS = ("&", "|", "^", "<<", ">>")
_VERDICT_KEYS = ("accept", "drop", "continue", "return", "jump", "goto")
_TABLE_FLAGS = frozenset({"dormant", "owner", "persist"})
# fib results whose JSON value is a boolean: "oif missing" is false
_FIB_BOOL = {False: "missing", True: "exists"}


class _Bad(ValueError):
    pass


# -- parse ------------------------------------------------------------------------------------


def _expr(j: Any) -> Expr:
    if isinstance(j, bool):
        return Value(j)
    if isinstance(j, int):
        return Value(j)
    if isinstance(j, str):
        return SetRef(j[1:]) if j.startswith("@") else Value(j)
    if isinstance(j, list):
        items = []
        for x in j:
            if not isinstance(x, (str, int)) or isinstance(x, bool):
                raise _Bad(f"a flag list holds names or numbers, received {x!r}")
            items.append(x)
        return Flags(tuple(items))
    if not isinstance(j, dict) or len(j) != 1:
        raise _Bad(f"expected an expression object with one key, received {json.dumps(j)[:80]}")
    (k, v), = j.items()
    if k == "payload":
        if "protocol" in v:
            return Payload(str(v["protocol"]), str(v["field"]))
        return OpaqueExpr(json=json.dumps(j, sort_keys=True))
    if k == "meta":
        return Meta(str(v["key"]))
    if k == "ct":
        return Ct(str(v["key"]), str(v.get("dir", "")), str(v.get("family", "")))
    if k == "fib":
        flags = v.get("flags", [])
        return Fib(tuple([flags] if isinstance(flags, str) else flags), str(v["result"]))
    if k == "numgen":
        return Numgen(str(v["mode"]), int(v["mod"]), int(v.get("offset", 0)))
    if k == "prefix":
        return Prefix(str(v["addr"]), int(v["len"]))
    if k == "range":
        lo, hi = v
        return Range(_expr(lo), _expr(hi))
    if k == "set":
        return AnonSet(tuple(_item(x) for x in (v if isinstance(v, list) else [v])))
    if k == "concat":
        return Concat(tuple(_expr(x) for x in v))
    if k == "map":
        return MapLookup(_expr(v["key"]), _expr(v["data"]))
    if k == "elem":
        return Elem(_expr(v["val"]), v.get("timeout"), v.get("expires"), str(v.get("comment", "")))
    if k in _BINOPS:
        a, b = v
        return Binop(k, _expr(a), _expr(b))
    return OpaqueExpr(json=json.dumps(j, sort_keys=True))


def _item(x: Any) -> Expr | MapItem:
    if isinstance(x, list) and len(x) == 2:
        return MapItem(_expr(x[0]), _value(x[1]))
    return _expr(x)


def _value(x: Any) -> Expr | Verdict:
    if isinstance(x, dict) and len(x) == 1:
        (k, v), = x.items()
        if k in _VERDICT_KEYS:
            return Verdict(k, str(v["target"]) if isinstance(v, dict) and "target" in v else "")
    return _expr(x)


def _stmt(j: Any, family: str) -> Stmt:
    if not isinstance(j, dict) or len(j) != 1:
        raise _Bad(f"expected a statement object with one key, received {json.dumps(j)[:80]}")
    (k, v), = j.items()
    if k in _VERDICT_KEYS:
        return Verdict(k, str(v["target"]) if isinstance(v, dict) else "")
    if k == "match":
        left = _expr(v["left"])
        right = _expr(v["right"])
        if isinstance(left, Fib) and isinstance(right, Value) and isinstance(right.value, bool):
            right = Value(_FIB_BOOL[right.value])
        return Match(left, str(v["op"]), right)
    if k == "vmap":
        return VerdictMap(_expr(v["key"]), _expr(v["data"]))
    if k == "mangle":
        return Mangle(_expr(v["key"]), _expr(v["value"]))
    if k == "counter":
        if isinstance(v, str):
            return Counter(name=v)
        v = v or {}
        return Counter(v.get("packets"), v.get("bytes"))
    if k == "reject":
        v = v or {}
        return Reject(str(v.get("type", "")), str(v.get("expr", ""))).canonical(family)
    if k in ("dnat", "snat", "masquerade", "redirect"):
        v = v or {}
        flags = v.get("flags", ())
        return Nat(
            k,
            str(v.get("family", "")),
            _expr(v["addr"]) if "addr" in v else None,
            _expr(v["port"]) if "port" in v else None,
            tuple([flags] if isinstance(flags, str) else flags),
        )
    if k == "set":
        name = str(v["set"])
        return SetUpdate(str(v["op"]), name[1:] if name.startswith("@") else name, _expr(v["elem"]))
    if k == "log":
        return Log(tuple((str(a), b) for a, b in (v or {}).items()))
    if k == "notrack":
        return Notrack()
    return Opaque(_opaque_text(k, v), json.dumps(j, sort_keys=True))


def _opaque_text(k: str, v: Any) -> str:
    """The text form of the unmodelled statements that are common in real rulesets."""
    if k == "limit" and isinstance(v, dict) and "rate" in v:
        over = "over " if v.get("inv") else ""
        unit = "" if v.get("rate_unit", "packets") == "packets" else f" {v['rate_unit']}"
        burst = v.get("burst", 5)
        tail = f" burst {burst} {v.get('burst_unit', 'packets')}" if burst != 5 else ""
        return f"limit rate {over}{v['rate']}{unit}/{v.get('per', 'second')}{tail}"
    if k == "quota" and isinstance(v, dict) and "val" in v:
        over = "over " if v.get("inv") else ""
        return f"quota {over}{v['val']} {v.get('val_unit', 'bytes')}"
    if k == "queue" and isinstance(v, dict):
        num = f" num {v['num']}" if "num" in v else ""
        return f"queue{num}"
    return ""


def _elements(raw: Any, is_map: bool) -> list[Element]:
    out = []
    for x in raw if isinstance(raw, list) else [raw]:
        if is_map:
            if not (isinstance(x, list) and len(x) == 2):
                raise _Bad("a map element is [key, value]")
            out.append(Element.of(_expr(x[0]), _value(x[1])))
        else:
            out.append(Element.of(_expr(x)))
    return out


def _set(v: dict[str, Any], kind: str) -> Set:
    t = v["type"]
    key = tuple(t) if isinstance(t, list) else (str(t),)
    data = v.get("map", "")
    if isinstance(data, list):
        data = " . ".join(data)
    flags = v.get("flags", ())
    return Set(
        str(v["name"]),
        kind,
        key,
        str(data),
        False,
        tuple([flags] if isinstance(flags, str) else flags),
        v.get("timeout"),
        v.get("gc-interval"),
        v.get("size"),
        str(v.get("policy", "")),
        bool(v.get("auto-merge", False)),
        str(v.get("comment", "")),
        tuple(_elements(v["elem"], kind == "map")) if "elem" in v else (),
    )


class _Builder:
    def __init__(self) -> None:
        self.tables: dict[tuple[str, str], dict[str, Any]] = {}

    def table(self, fam: str, name: str) -> dict[str, Any]:
        t = self.tables.get((fam, name))
        if t is None:
            raise _Bad(f"table {fam} {name} is not declared before its objects")
        return t

    def add(self, kind: str, v: dict[str, Any], insert: bool = False) -> None:
        fam = str(v.get("family", "ip"))
        if kind == "table":
            t = self.tables.setdefault((fam, str(v["name"])), {"chains": {}, "sets": {}, "comment": "", "flags": ()})
            if "comment" in v:
                t["comment"] = str(v["comment"])
            flags = v.get("flags", ())
            flags = [flags] if isinstance(flags, str) else flags
            t["flags"] = tuple(f for f in flags if f in _TABLE_FLAGS)
            return
        t = self.table(fam, str(v["table"]))
        if kind == "chain":
            name = str(v["name"])
            base = None
            if "hook" in v:
                base = BaseHook(str(v["type"]), str(v["hook"]), int(v["prio"]), str(v.get("policy", "accept")), str(v.get("dev", "")))
            old = t["chains"].get(name)
            t["chains"][name] = Chain(name, base, old.rules if old else (), str(v.get("comment", "")))
        elif kind == "rule":
            chain = str(v["chain"])
            c = t["chains"].get(chain)
            if c is None:
                raise _Bad(f"rule for chain {chain!r}, which table {fam} {v['table']} does not declare")
            exprs = v.get("expr", [])
            r = Rule(chain, tuple(_stmt(s, fam) for s in exprs), str(v.get("comment", "")), v.get("handle"))
            rules = (r, *c.rules) if insert else (*c.rules, r)
            t["chains"][chain] = Chain(c.name, c.base, rules, c.comment)
        elif kind in ("set", "map"):
            t["sets"][str(v["name"])] = _set(v, kind)
        elif kind == "element":
            name = str(v["name"])
            s = t["sets"].get(name)
            if s is None:
                raise _Bad(f"elements of {name!r}, which table {fam} {v['table']} does not declare")
            new = _elements(v["elem"], s.is_map)
            keys = {e.key for e in new}
            t["sets"][name] = Set(
                s.name, s.kind, s.key, s.data, s.typeof, s.flags, s.timeout, s.gc_interval, s.size,
                s.policy, s.auto_merge, s.comment, tuple(e for e in s.elements if e.key not in keys) + tuple(new),
            )  # fmt: skip
        elif kind in ("counter", "quota", "flowtable", "ct helper", "limit", "secmark", "synproxy", "ct timeout", "ct expectation"):
            return
        else:
            raise _Bad(f"unknown object {kind!r}")

    def command(self, verb: str, body: Any) -> None:
        if not isinstance(body, dict) or len(body) != 1:
            raise _Bad(f"'{verb}' takes one object")
        (kind, v), = body.items()
        if verb in ("add", "create"):
            self.add(kind, v)
        elif verb == "insert":
            self.add(kind, v, insert=True)
        elif verb == "flush":
            if kind == "ruleset":
                self.tables = {}
            elif kind == "chain":
                t = self.table(str(v.get("family", "ip")), str(v["table"]))
                c = t["chains"][str(v["name"])]
                t["chains"][c.name] = Chain(c.name, c.base, (), c.comment)
            else:
                raise _Bad(f"'flush {kind}' is not supported in JSON input")
        elif verb in ("delete", "destroy"):
            fam = str(v.get("family", "ip"))
            if kind == "table":
                self.tables.pop((fam, str(v["name"])), None)
            elif kind in ("chain", "set", "map"):
                t = self.table(fam, str(v["table"]))
                t["chains" if kind == "chain" else "sets"].pop(str(v["name"]), None)
            else:
                raise _Bad(f"'delete {kind}' is not supported in JSON input")
        else:
            raise _Bad(f"unknown command {verb!r}")

    def build(self, source: str) -> Ruleset:
        return Ruleset(
            tuple(
                Table(fam, name, tuple(t["chains"].values()), tuple(t["sets"].values()), t["comment"], t["flags"])
                for (fam, name), t in self.tables.items()
            ),
            source,
        )


def _line_of_item(text: str, source: str, index: int) -> int:
    try:
        doc, _ = parse_json(text, source)
    except KubeInputError as e:
        return e.line
    items = doc.get("nftables") if isinstance(doc, dict) else None
    line_at = getattr(items, "line_at", None)
    return int(line_at(index)) if line_at is not None else 1


def parse_json_ruleset(text: str, source: str = "<memory>") -> Ruleset:
    """A ruleset from ``nft -j list`` output (or nft's JSON command form)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise DumpError(source, e.lineno, f"malformed JSON: {e.msg}") from None
    except RecursionError:
        raise DumpError(source, 1, "malformed JSON: nested too deeply") from None
    items = doc.get("nftables") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise DumpError(source, 1, 'expected {"nftables": [...]} (the output of nft -j list ruleset)')
    b = _Builder()
    for i, item in enumerate(items):
        try:
            if not isinstance(item, dict) or len(item) != 1:
                raise _Bad("each item is an object with one key")
            (kind, v), = item.items()
            if kind == "metainfo":
                version = v.get("json_schema_version", SCHEMA_VERSION) if isinstance(v, dict) else SCHEMA_VERSION
                if version != SCHEMA_VERSION:
                    raise _Bad(f"JSON schema version {version} (this reader knows version {SCHEMA_VERSION})")
                continue
            if kind in ("add", "create", "insert", "flush", "delete", "destroy"):
                b.command(kind, v)
            elif isinstance(v, dict):
                b.add(kind, v)
            else:
                raise _Bad(f"{kind}: expected an object")
        except (_Bad, KeyError, TypeError, ValueError) as e:
            what = f"missing field {e}" if isinstance(e, KeyError) else str(e)
            raise DumpError(source, _line_of_item(text, source, i), f"nftables[{i}]: {what}") from None
    ruleset = b.build(source)
    check_references(ruleset)
    return ruleset


# -- render -----------------------------------------------------------------------------------


def expr_json(e: Expr | Verdict) -> Any:
    if isinstance(e, Verdict):
        return {e.kind: {"target": e.target} if e.target else None}
    if isinstance(e, Value):
        return e.value
    if isinstance(e, SetRef):
        return "@" + e.name
    if isinstance(e, Payload):
        return {"payload": {"protocol": e.protocol, "field": e.field}}
    if isinstance(e, Meta):
        return {"meta": {"key": e.key}}
    if isinstance(e, Ct):
        d: dict[str, Any] = {"key": e.key}
        if e.family:
            d["family"] = e.family
        if e.dir:
            d["dir"] = e.dir
        return {"ct": d}
    if isinstance(e, Fib):
        return {"fib": {"result": e.result, "flags": list(e.flags)}}
    if isinstance(e, Numgen):
        return {"numgen": {"mode": e.mode, "mod": e.mod, "offset": e.offset}}
    if isinstance(e, Prefix):
        return {"prefix": {"addr": e.addr, "len": e.length}}
    if isinstance(e, Range):
        return {"range": [expr_json(e.lo), expr_json(e.hi)]}
    if isinstance(e, AnonSet):
        return {"set": [expr_json(i) for i in e.items]}
    if isinstance(e, MapItem):
        return [expr_json(e.key), expr_json(e.value)]
    if isinstance(e, Concat):
        return {"concat": [expr_json(i) for i in e.items]}
    if isinstance(e, Flags):
        return list(e.items)
    if isinstance(e, Binop):
        return {e.op: [expr_json(e.left), expr_json(e.right)]}
    if isinstance(e, MapLookup):
        return {"map": {"key": expr_json(e.key), "data": expr_json(e.data)}}
    if isinstance(e, Elem):
        d = {"val": expr_json(e.val)}
        if e.timeout is not None:
            d["timeout"] = e.timeout
        if e.expires is not None:
            d["expires"] = e.expires
        if e.comment:
            d["comment"] = e.comment
        return {"elem": d}
    if isinstance(e, OpaqueExpr):
        if not e.json:
            raise ValueError(f"expression {e.text!r} has no JSON form")
        return json.loads(e.json)
    raise TypeError(f"not an expression: {e!r}")


def stmt_json(s: Stmt, family: str) -> Any:
    if isinstance(s, Verdict):
        return expr_json(s)
    if isinstance(s, Match):
        right = expr_json(s.right)
        if isinstance(s.left, Fib) and isinstance(s.right, Value) and s.right.value in ("missing", "exists"):
            right = s.right.value == "exists"
        return {"match": {"op": s.op, "left": expr_json(s.left), "right": right}}
    if isinstance(s, VerdictMap):
        return {"vmap": {"key": expr_json(s.key), "data": expr_json(s.data)}}
    if isinstance(s, Mangle):
        return {"mangle": {"key": expr_json(s.key), "value": expr_json(s.value)}}
    if isinstance(s, Counter):
        if s.name:
            return {"counter": s.name}
        return {"counter": {"packets": s.packets or 0, "bytes": s.bytes or 0}}
    if isinstance(s, Reject):
        if not s.type:
            return {"reject": {"type": DEFAULT_REJECT.get(family, "icmpx"), "expr": "port-unreachable"}}
        return {"reject": {"type": s.type, "expr": s.code} if s.code else {"type": s.type}}
    if isinstance(s, Nat):
        d: dict[str, Any] = {}
        if s.family:
            d["family"] = s.family
        if s.addr is not None:
            d["addr"] = expr_json(s.addr)
        if s.port is not None:
            d["port"] = expr_json(s.port)
        if s.flags:
            d["flags"] = s.flags[0] if len(s.flags) == 1 else list(s.flags)
        return {s.kind: d or None}
    if isinstance(s, SetUpdate):
        return {"set": {"op": s.op, "elem": expr_json(s.elem), "set": "@" + s.set}}
    if isinstance(s, Log):
        return {"log": dict(s.options) or None}
    if isinstance(s, Notrack):
        return {"notrack": None}
    if isinstance(s, Opaque):
        if not s.json:
            raise ValueError(f"statement {s.text!r} has no JSON form")
        return json.loads(s.json)
    raise TypeError(f"not a statement: {s!r}")


def _element_json(el: Element, is_map: bool) -> Any:
    key = el.key
    if el.comment or el.timeout is not None:
        key = Elem(el.key, el.timeout, None, el.comment)
    k = expr_json(key)
    if is_map:
        assert el.value is not None
        return [k, expr_json(el.value)]
    return k


def ruleset_json(ruleset: Ruleset) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {"metainfo": {"version": "1.0.6", "release_name": "nat-verify", "json_schema_version": SCHEMA_VERSION}}
    ]
    for t in ruleset.tables:
        td: dict[str, Any] = {"family": t.family, "name": t.name}
        if t.comment:
            td["comment"] = t.comment
        if t.flags:
            td["flags"] = list(t.flags)
        items.append({"table": td})
        for s in t.sets:
            sd: dict[str, Any] = {"family": t.family, "name": s.name, "table": t.name}
            sd["type"] = s.key[0] if len(s.key) == 1 else list(s.key)
            if s.is_map:
                sd["map"] = s.data
            if s.policy:
                sd["policy"] = s.policy
            if s.size is not None:
                sd["size"] = s.size
            if s.flags:
                sd["flags"] = list(s.flags)
            if s.timeout is not None:
                sd["timeout"] = s.timeout
            if s.gc_interval is not None:
                sd["gc-interval"] = s.gc_interval
            if s.auto_merge:
                sd["auto-merge"] = True
            if s.comment:
                sd["comment"] = s.comment
            if s.elements:
                sd["elem"] = [_element_json(e, s.is_map) for e in s.elements]
            items.append({s.kind: sd})
        for c in t.chains:
            cd: dict[str, Any] = {"family": t.family, "table": t.name, "name": c.name}
            if c.base is not None:
                cd.update(type=c.base.type, hook=c.base.hook, prio=c.base.priority, policy=c.base.policy)
                if c.base.device:
                    cd["dev"] = c.base.device
            if c.comment:
                cd["comment"] = c.comment
            items.append({"chain": cd})
        for c in t.chains:
            for r in c.rules:
                rd: dict[str, Any] = {
                    "family": t.family,
                    "table": t.name,
                    "chain": c.name,
                    "expr": [stmt_json(s, t.family) for s in r.stmts],
                }
                if r.comment:
                    rd["comment"] = r.comment
                items.append({"rule": rd})
    return {"nftables": items}


def render_json(ruleset: Ruleset) -> str:
    return json.dumps(ruleset_json(ruleset), separators=(", ", ": ")) + "\n"
