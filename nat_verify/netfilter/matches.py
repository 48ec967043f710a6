"""Match semantics: each rule is compiled once into predicates over a packet state.

A predicate returns ``True``/``False``, a ``Fraction`` (a random match such as
``statistic --mode random``: the probability that it matches), or an ``Unknown`` carrying
the reason the model cannot decide (an opaque module, state the model does not have).
Nothing is guessed: ``Unknown`` makes the outcome ``inconclusive``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING

import attrs

from nat_verify.netfilter.constants import parse_network
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.ruleset import UNSEEN_MODULE, Match, Option, Rule
from nat_verify.netfilter.saveform import P31, stored_probability

if TYPE_CHECKING:
    from nat_verify.netfilter.interpreter import PacketState


@attrs.frozen
class Unknown:
    reason: str


Verdict = bool | Fraction | Unknown
Pred = Callable[["PacketState"], Verdict]

PROTO_NUMBERS = {"tcp": 6, "udp": 17, "sctp": 132, "icmp": 1, "icmpv6": 58, "ipv6-icmp": 58, "udplite": 136}


class RuleError(ValueError):
    """A rule whose options are malformed for the module (bad address, bad port...)."""


def _neg(pred: Pred, negated: bool) -> Pred:
    if not negated:
        return pred

    def p(st: PacketState) -> Verdict:
        v = pred(st)
        if isinstance(v, bool):
            return not v
        if isinstance(v, Fraction):
            return 1 - v
        return v

    return p


def _networks(text: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    try:
        return tuple(parse_network(p) for p in text.split(","))
    except ValueError:
        raise RuleError(f"expected an address or CIDR, received {text!r}") from None


def _addr_pred(field: str, text: str) -> Pred:
    nets = _networks(text)
    if len(nets) == 1:
        net = nets[0]
        if net.prefixlen == net.max_prefixlen:
            a = net.network_address
            return lambda st: getattr(st, field) == a
        return lambda st: getattr(st, field) in net
    return lambda st: any(getattr(st, field) in n for n in nets)


def _iface_pred(field: str, name: str) -> Pred:
    if name.endswith("+"):
        prefix = name[:-1]
        return lambda st: getattr(st, field).startswith(prefix)
    return lambda st: getattr(st, field) == name


def _ports(text: str) -> list[tuple[int, int]]:
    out = []
    try:
        for part in text.split(","):
            lo, sep, hi = part.partition(":")
            a = int(lo) if lo else 0
            b = int(hi) if (sep and hi) else (65535 if sep else a)
            if not (0 <= a <= b <= 65535):
                raise ValueError
            out.append((a, b))
    except ValueError:
        raise RuleError(f"expected a port, port range or list, received {text!r}") from None
    return out


def _port_pred(field: str, text: str) -> Pred:
    ranges = _ports(text)
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        v = ranges[0][0]
        return lambda st: getattr(st, field) == v
    return lambda st: any(a <= getattr(st, field) <= b for a, b in ranges)


def _mark_pred(field: str, text: str) -> Pred:
    v, sep, m = text.partition("/")
    try:
        val = int(v, 0)
        mask = int(m, 0) if sep else 0xFFFFFFFF
    except ValueError:
        raise RuleError(f"expected VALUE[/MASK], received {text!r}") from None
    return lambda st: (getattr(st, field) & mask) == val


def core_pred(o: Option, ctx: NodeContext) -> Pred:
    if o.name == "-s":
        return _neg(_addr_pred("src", o.value), o.negated)
    if o.name == "-d":
        return _neg(_addr_pred("dst", o.value), o.negated)
    if o.name == "-p":
        proto = o.value.lower()
        if proto in ("all", "0"):
            return _neg(lambda st: True, o.negated)
        if proto.isdigit():
            num = int(proto)
            return _neg(lambda st: PROTO_NUMBERS.get(st.proto) == num, o.negated)
        if proto == "ipv6-icmp":
            proto = "icmpv6"
        return _neg(lambda st: st.proto == proto, o.negated)
    if o.name == "-i":
        return _neg(_iface_pred("in_iface", o.value), o.negated)
    if o.name == "-o":
        return _neg(_iface_pred("out_iface", o.value), o.negated)
    if o.name == "-f":
        # the first packet of a connection is never a non-first fragment
        return _neg(lambda st: False, o.negated)
    return lambda st: Unknown(f"core option {o.name}")


def _const(v: bool) -> Pred:
    return lambda st: v


def _either(a: Pred, b: Pred) -> Pred:
    def p(st: PacketState) -> Verdict:
        return bool(a(st)) or bool(b(st))

    return p


def _field_equals(field: str, value: object) -> Pred:
    def p(st: PacketState) -> Verdict:
        return bool(getattr(st, field) == value)

    return p


def _in_range(field: str, lo: object, hi: object) -> Pred:
    def p(st: PacketState) -> Verdict:
        return bool(lo <= getattr(st, field) <= hi)

    return p


def _in_any(field: str, nets: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]) -> Pred:
    def p(st: PacketState) -> Verdict:
        return any(getattr(st, field) in n for n in nets)

    return p


def _icmp_type(st: PacketState) -> Verdict:
    # the model's packets carry no ICMP type: an icmp match on an ICMP packet cannot be decided
    return Unknown("icmp type of the packet") if st.proto in ("icmp", "icmpv6") else False


def _unknown(reason: str) -> Pred:
    u = Unknown(reason)
    return lambda st: u


_ADDRTYPES = {"LOCAL", "UNICAST", "BROADCAST", "MULTICAST", "ANYCAST", "BLACKHOLE", "UNREACHABLE", "PROHIBIT", "THROW", "NAT", "XRESOLVE", "UNSPEC"}


def _addrtype_of(addr: ipaddress.IPv4Address | ipaddress.IPv6Address, ctx: NodeContext) -> str:
    if ctx.is_local(addr):
        return "LOCAL"
    if addr.is_multicast:
        return "MULTICAST"
    if addr.version == 4 and int(addr) == 0xFFFFFFFF:
        return "BROADCAST"
    return "UNICAST"


def _addrtype_pred(field: str, o: Option, ctx: NodeContext) -> Pred:
    types = {t.upper() for t in o.value.split(",")}
    bad = types - _ADDRTYPES
    if bad:
        raise RuleError(f"unknown address type {sorted(bad)[0]!r}")
    decidable = {"LOCAL", "UNICAST", "BROADCAST", "MULTICAST"}
    if types - decidable:
        return _unknown(f"addrtype {','.join(sorted(types - decidable))} depends on routes the model does not know")
    return _neg(lambda st: _addrtype_of(getattr(st, field), ctx) in types, o.negated)


_CT_STATES = {"NEW", "ESTABLISHED", "RELATED", "INVALID", "UNTRACKED", "SNAT", "DNAT"}


def _ctstate_pred(o: Option) -> Pred:
    states = {s.upper() for s in o.value.split(",")}
    if states - _CT_STATES:
        raise RuleError(f"unknown conntrack state {sorted(states - _CT_STATES)[0]!r}")

    def p(st: PacketState) -> Verdict:
        have = {"UNTRACKED"} if st.untracked else {"NEW"}
        if st.dnat and not st.untracked:
            have.add("DNAT")
        if st.snat_done and not st.untracked:
            have.add("SNAT")
        return bool(states & have)

    return _neg(p, o.negated)


def _module_preds(m: Match, rule: Rule, ctx: NodeContext) -> list[Pred]:
    mod = m.module
    preds: list[Pred] = []
    if mod in ("comment", "nfacct"):
        return preds
    if mod in ("tcp", "udp", "sctp", "udplite", "dccp"):
        for o in m.options:
            if o.name in ("--dport", "--destination-port"):
                preds.append(_neg(_port_pred("dport", o.value), o.negated))
            elif o.name in ("--sport", "--source-port"):
                preds.append(_neg(_port_pred("sport", o.value), o.negated))
            elif o.name == "--syn" or (o.name == "--tcp-flags" and o.args == ("FIN,SYN,RST,ACK", "SYN")):
                # the first packet of a TCP connection is a SYN
                preds.append(_neg(lambda st: True, o.negated))
            else:
                preds.append(_unknown(f"{mod} {o.name}"))
        # the protocol module only matches its own protocol (xt_tcpudp checks the header)
        proto = mod
        preds.insert(0, lambda st: st.proto == proto)
        return preds
    if mod == "multiport":
        for o in m.options:
            if o.name in ("--dports", "--destination-ports"):
                preds.append(_neg(_port_pred("dport", o.value), o.negated))
            elif o.name in ("--sports", "--source-ports"):
                preds.append(_neg(_port_pred("sport", o.value), o.negated))
            elif o.name == "--ports":
                preds.append(_neg(_either(_port_pred("dport", o.value), _port_pred("sport", o.value)), o.negated))
            else:
                preds.append(_unknown(f"multiport {o.name}"))
        return preds
    if mod == "addrtype":
        for o in m.options:
            if o.name == "--src-type":
                preds.append(_addrtype_pred("src", o, ctx))
            elif o.name == "--dst-type":
                preds.append(_addrtype_pred("dst", o, ctx))
            else:
                preds.append(_unknown(f"addrtype {o.name} (per-interface address types)"))
        return preds
    if mod == "mark":
        for o in m.options:
            if o.name == "--mark":
                preds.append(_neg(_mark_pred("mark", o.value), o.negated))
            else:
                preds.append(_unknown(f"mark {o.name}"))
        return preds
    if mod == "connmark":
        for o in m.options:
            if o.name == "--mark":
                preds.append(_neg(_mark_pred("ctmark", o.value), o.negated))
            else:
                preds.append(_unknown(f"connmark {o.name}"))
        return preds
    if mod in ("conntrack", "state"):
        for o in m.options:
            if o.name in ("--ctstate", "--state"):
                preds.append(_ctstate_pred(o))
            elif o.name == "--ctorigdst":
                preds.append(_neg(_addr_pred("orig_dst", o.value), o.negated))
            elif o.name == "--ctorigsrc":
                preds.append(_neg(_addr_pred("orig_src", o.value), o.negated))
            elif o.name == "--ctorigdstport":
                preds.append(_neg(_port_pred("orig_dport", o.value), o.negated))
            elif o.name == "--ctorigsrcport":
                preds.append(_neg(_port_pred("orig_sport", o.value), o.negated))
            elif o.name == "--ctproto":
                preds.append(_neg(_field_equals("proto", o.value.lower()), o.negated))
            elif o.name == "--ctdir":
                # the first packet travels in the original direction
                preds.append(_neg(_const(o.value.upper() == "ORIGINAL"), o.negated))
            else:
                preds.append(_unknown(f"conntrack {o.name}"))
        return preds
    if mod == "statistic":
        mode = m.get("--mode")
        if mode is None or mode.value != "random":
            return [_unknown(f"statistic mode {mode.value if mode else '?'} depends on a packet counter")]
        prob = m.get("--probability")
        if prob is None:
            raise RuleError("statistic --mode random needs --probability")
        try:
            thr = stored_probability(prob.value)
        except ValueError as e:
            raise RuleError(str(e)) from None
        frac = Fraction(thr, P31)
        val: Verdict = True if frac == 1 else (False if frac == 0 else frac)
        return [_neg(lambda st: val, prob.negated)]
    if mod == "recent":
        return [_recent_pred(m)]
    if mod == "iprange":
        for o in m.options:
            field = {"--src-range": "src", "--dst-range": "dst"}.get(o.name)
            if field is None:
                preds.append(_unknown(f"iprange {o.name}"))
                continue
            lo_s, _, hi_s = o.value.partition("-")
            try:
                lo, hi = ipaddress.ip_address(lo_s), ipaddress.ip_address(hi_s or lo_s)
            except ValueError:
                raise RuleError(f"expected ADDR-ADDR, received {o.value!r}") from None
            preds.append(_neg(_in_range(field, lo, hi), o.negated))
        return preds
    if mod == "pkttype":
        pt = m.get("--pkt-type")
        if pt is None:
            return [_unknown("pkttype without --pkt-type")]
        t = pt.value.lower()
        return [_neg(lambda st: t == ("multicast" if st.dst.is_multicast else "unicast"), pt.negated)]
    if mod == "set":
        for o in m.options:
            if o.name != "--match-set":
                if o.name in ("--return-nomatch", "--update-counters", "--update-subcounters"):
                    continue
                preds.append(_unknown(f"set {o.name}"))
                continue
            if len(o.args) != 2:
                raise RuleError(f"--match-set needs NAME FLAGS, received {o.value!r}")
            name, flags = o.args
            members = ctx.ipset(name)
            first = flags.split(",")[0]
            if members is None or "," in flags:
                preds.append(_unknown(f"ipset {name!r} ({flags}): its members are not known"))
                continue
            field = "src" if first == "src" else "dst"
            preds.append(_neg(_in_any(field, members), o.negated))
        return preds
    if mod in ("icmp", "icmp6", "icmpv6"):
        return [_icmp_type]
    if mod == UNSEEN_MODULE:  # what an excerpt does not show (netfilter.excerpt)
        why = m.get("--reason")
        return [_unknown(why.value if why else "not in the excerpt")]
    return [_unknown(f"match module {mod!r} is not modelled")]


def _recent_pred(m: Match) -> Pred:
    name_o = m.get("--name")
    name = name_o.value if name_o else "DEFAULT"
    rdest = m.get("--rdest") is not None
    mask = m.get("--mask")
    if mask is not None and mask.value not in ("255.255.255.255", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"):
        return _unknown("recent --mask other than a full mask")
    if m.get("--hitcount") or m.get("--rttl"):
        return _unknown("recent --hitcount/--rttl needs hit history")
    seconds_o = m.get("--seconds")
    seconds = int(seconds_o.value) if seconds_o else None
    for verb in ("--set", "--rcheck", "--update", "--remove"):
        o = m.get(verb)
        if o is None:
            continue
        neg = o.negated

        def p(st: PacketState, verb: str = verb, neg: bool = neg) -> Verdict:
            key = (name, str(st.dst if rdest else st.src))
            if verb == "--set":
                st.recent_add(key)
                return not neg  # --set always matches
            age = st.recent_age(key)
            hit = age is not None and (seconds is None or age < seconds)
            if verb == "--update" and hit:
                st.recent_add(key)
            if verb == "--remove" and hit:
                st.recent_remove(key)
            return hit != neg

        return p
    raise RuleError("recent needs one of --set, --rcheck, --update, --remove")


def compile_matches(rule: Rule, ctx: NodeContext) -> list[Pred]:
    """Predicates for a rule in the order the kernel evaluates them (IP header first)."""
    preds = [core_pred(o, ctx) for o in rule.core]
    for m in rule.matches:
        preds.extend(_module_preds(m, rule, ctx))
    return preds
