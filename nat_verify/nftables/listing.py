"""Render a ruleset as ``nft list ruleset`` prints it (nft 1.0.6), so compiled rules can be read
and diffed in the form users see on their nodes.

The output is the kernel form (``canonical.kernel_form``): what listing the loaded ruleset
shows, except that elements keep the ruleset's order where the kernel uses its own (hash)
order. It is also a valid ``nft -f`` script.
"""

from __future__ import annotations

from nat_verify.nftables.canonical import kernel_form
from nat_verify.nftables.model import Chain, Element, Ruleset, Set, Table
from nat_verify.nftables.priority import spell
from nat_verify.nftables.text import duration, expr, quote, rule_text

# how many elements nft prints per line, by key type (nft's calculate_delim)
_FIVE = frozenset({"nf_proto", "integer", "arp_op", "inet_proto", "inet_service", "tcp_flag", "dccp_pkttype", "mark", "iface_index", "classid", "uid", "gid", "ct_dir"})  # fmt: skip
_TWO = frozenset({"ipv4_addr", "ipv6_addr", "ct_state", "ct_status", "pkt_type"})
_NEWLINE = ",\n\t\t\t     "
_TYPEOF_TYPES = {"ip saddr": "ipv4_addr", "ip daddr": "ipv4_addr", "ip6 saddr": "ipv6_addr", "ip6 daddr": "ipv6_addr", "meta mark": "mark"}  # fmt: skip


def _per_line(s: Set) -> int:
    if len(s.key) != 1:
        return 1
    t = _TYPEOF_TYPES.get(s.key[0], "") if s.typeof else s.key[0]
    return 5 if t in _FIVE else 2 if t in _TWO else 1


def _hint(s: Set) -> str:
    return "mark" if s.key == ("mark",) else "string" if s.key == ("ifname",) else ""


def element_text(el: Element, hint: str = "") -> str:
    out = expr(el.key, hint)
    if el.timeout is not None:
        out += f" timeout {duration(el.timeout)}"
    if el.expires is not None:
        out += f" expires {duration(el.expires)}"
    if el.comment:
        out += f" comment {quote(el.comment)}"
    if el.value is not None:
        out += f" : {expr(el.value)}"
    return out


def _elements(s: Set) -> str:
    n = _per_line(s)
    hint = _hint(s)
    out = []
    for i, el in enumerate(s.elements):
        if i:
            out.append(", " if i % n else _NEWLINE)
        out.append(element_text(el, hint))
    return "{ " + "".join(out) + " }"


def _set(s: Set) -> list[str]:
    key = " . ".join(s.key)
    lines = [f"\t{s.kind} {s.name} {{", f"\t\t{'typeof' if s.typeof else 'type'} {key}" + (f" : {s.data}" if s.is_map else "")]
    if s.policy:
        lines.append(f"\t\tpolicy {s.policy}")
    if s.size is not None:
        lines.append(f"\t\tsize {s.size}")
    if s.flags:
        lines.append(f"\t\tflags {','.join(s.flags)}")
    if s.auto_merge:
        lines.append("\t\tauto-merge")
    if s.timeout is not None:
        lines.append(f"\t\ttimeout {duration(s.timeout)}")
    if s.gc_interval is not None:
        lines.append(f"\t\tgc-interval {duration(s.gc_interval)}")
    if s.comment:
        lines.append(f"\t\tcomment {quote(s.comment)}")
    if s.elements:
        lines.append(f"\t\telements = {_elements(s)}")
    lines.append("\t}")
    return lines


def _chain(t: Table, c: Chain) -> list[str]:
    lines = [f"\tchain {c.name} {{"]
    if c.comment:
        lines.append(f"\t\tcomment {quote(c.comment)}")
    if c.base is not None:
        b = c.base
        dev = f" device {quote(b.device)}" if b.device else ""
        lines.append(f"\t\ttype {b.type} hook {b.hook}{dev} priority {spell(b.priority, t.family, b.hook)}; policy {b.policy};")
    lines.extend(f"\t\t{rule_text(r)}" for r in c.rules)
    lines.append("\t}")
    return lines


def _table(t: Table) -> list[str]:
    lines = [f"table {t.family} {t.name} {{"]
    if t.flags:
        lines.append(f"\tflags {','.join(t.flags)}")
    if t.comment:
        lines.append(f"\tcomment {quote(t.comment)}")
    first = not t.flags
    for block in [_set(s) for s in t.sets] + [_chain(t, c) for c in t.chains]:
        if not first:
            lines.append("")
        first = False
        lines.extend(block)
    lines.append("}")
    return lines


def render_listing(ruleset: Ruleset) -> str:
    out: list[str] = []
    for t in kernel_form(ruleset).tables:
        out.extend(_table(t))
    return "\n".join(out) + "\n"
