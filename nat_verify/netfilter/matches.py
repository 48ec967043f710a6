"""Match modules: one registry entry each (see ``registry`` for the design).

An entry lists the module's options with their kinds (how a value is spelled and checked), the
packet fields its predicate may read, the node facts it needs, and ``meaning``: the predicate
(``predicate``) the parsed options stand for on this node. Modules Linux has but the model does
not evaluate are listed at the end (``UNMODELLED``): their rules load and compile to
``Unknown`` naming the module, so nothing that depends on them is ever proved.

The packets the model walks are the first packet of a connection: a TCP packet is a bare SYN,
conntrack knows it as NEW (or UNTRACKED), no ICMP type, no payload. Meanings rely on that and
say so where they do.
"""

from __future__ import annotations

import ipaddress
from fractions import Fraction

from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.predicate import (
    FALSE,
    TRUE,
    AddrIn,
    All,
    CtStateIn,
    IfaceIs,
    MarkMasked,
    Not,
    PortIn,
    Pred,
    ProtoIs,
    Recent,
    Unknown,
    all_of,
    any_of,
    chance,
    negate,
)
from nat_verify.netfilter.ruleset import UNSEEN_MODULE
from nat_verify.netfilter.spec import (
    FACT_ADDRESSES,
    FACT_INTERFACES,
    FACT_IPSETS,
    AddrRange,
    Addrs,
    Anything,
    Choice,
    Flag,
    Given,
    Iface,
    Mark,
    MatchSpec,
    OptionSpec,
    Opts,
    Ports,
    Probability,
    Proto,
    Text,
    UInt,
    Words,
)

FULL_MASK = 0xFFFFFFFF
MULTICAST = {4: ipaddress.ip_network("224.0.0.0/4"), 6: ipaddress.ip_network("ff00::/8")}
BROADCAST4 = ipaddress.ip_network("255.255.255.255/32")


def missing(ctx: NodeContext, fact: str, what: str) -> Unknown | None:
    """``Unknown`` when the node fact ``fact`` was not given (``what`` reads it)."""
    if ctx.knows(fact):
        return None
    return Unknown(f"{what} reads the {fact}, which were not given")


def _addr(field: str, g: Given | None) -> Pred:
    if g is None:
        return TRUE
    return negate(AddrIn(field, g.value), g.negated)


def _ports(field: str, g: Given | None) -> Pred:
    if g is None:
        return TRUE
    return negate(PortIn(field, g.value), g.negated)


def _iface(field: str, g: Given | None) -> Pred:
    # the walk state carries the interface as far as it is known (an unknown name is
    # "?<fact>"): IfaceIs answers Unknown on it, so there is nothing to check here
    if g is None:
        return TRUE
    name, prefix = g.value
    if prefix and not name:
        return negate(TRUE, g.negated)  # "-i +" is any interface
    return negate(IfaceIs(field, name, prefix), g.negated)


def _proto(g: Given | None) -> Pred:
    if g is None:
        return TRUE
    number: int = g.value
    return negate(TRUE if number == 0 else ProtoIs(number), g.negated)


# -- the core IP-header options ---------------------------------------------------------------


def _core(o: Opts, ctx: NodeContext) -> Pred:
    return all_of([
        _addr("src", o.get("-s")),
        _addr("dst", o.get("-d")),
        _iface("in_iface", o.get("-i")),
        _iface("out_iface", o.get("-o")),
        _proto(o.get("-p")),
        # the first packet of a connection is never a non-first fragment
        negate(FALSE, o["-f"].negated) if "-f" in o else TRUE,
    ])  # fmt: skip


CORE = MatchSpec(
    "",
    _core,
    (
        OptionSpec("-s", Addrs(), ("--source", "--src")),
        OptionSpec("-d", Addrs(), ("--destination", "--dst")),
        OptionSpec("-p", Proto(), ("--protocol",)),
        OptionSpec("-i", Iface(), ("--in-interface",)),
        OptionSpec("-o", Iface(), ("--out-interface",)),
        OptionSpec("-f", Flag(), ("--fragment",)),
    ),
    reads=frozenset({"src", "dst", "proto", "in_iface", "out_iface"}),
    facts=frozenset({FACT_INTERFACES}),
)


# -- protocol modules -------------------------------------------------------------------------

_SPORT = OptionSpec("--sport", Ports(), ("--source-port",))
_DPORT = OptionSpec("--dport", Ports(), ("--destination-port",))
_TCP_FLAGS = ("FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR")


def _flag_set(text: str) -> frozenset[str]:
    t = text.upper()
    if t == "ALL":
        return frozenset(_TCP_FLAGS)
    if t == "NONE":
        return frozenset()
    flags = frozenset(t.split(","))
    if flags - set(_TCP_FLAGS):
        raise ValueError(f"unknown TCP flag {sorted(flags - set(_TCP_FLAGS))[0]!r}")
    return flags


def _ported(number: int, o: Opts, unknown: dict[str, str]) -> Pred:
    parts: list[Pred] = [ProtoIs(number), _ports("sport", o.get("--sport")), _ports("dport", o.get("--dport"))]
    for name, reason in unknown.items():
        if name in o:
            parts.append(Unknown(reason))
    return all_of(parts)


def _tcp(o: Opts, ctx: NodeContext) -> Pred:
    parts = [_ported(6, o, {"--tcp-option": "tcp --tcp-option: the model's packets carry no TCP options"})]
    syn = o.get("--syn")
    if syn is not None:
        # the first packet of a TCP connection is a bare SYN
        parts.append(negate(TRUE, syn.negated))
    flags = o.get("--tcp-flags")
    if flags is not None:
        mask_s, comp_s = flags.value
        mask, comp = _flag_set(mask_s), _flag_set(comp_s)
        parts.append(negate(TRUE if (mask & {"SYN"}) == comp else FALSE, flags.negated))
    return all_of(parts)


def _check_tcp_flags(args: tuple[str, ...], family: int) -> tuple[str, ...]:
    if len(args) != 2:
        raise ValueError(f"needs MASK COMP, received {' '.join(args)!r}")
    _flag_set(args[0]), _flag_set(args[1])
    return args


class _TcpFlags(Words):
    def parse(self, args: tuple[str, ...], family: int) -> tuple[str, ...]:
        return _check_tcp_flags(args, family)


_PORT_READS = frozenset({"proto", "sport", "dport"})

TCP = MatchSpec(
    "tcp",
    _tcp,
    (_SPORT, _DPORT, OptionSpec("--syn"), OptionSpec("--tcp-flags", _TcpFlags(2)), OptionSpec("--tcp-option", UInt(255))),
    reads=_PORT_READS,
)
UDP = MatchSpec("udp", lambda o, ctx: _ported(17, o, {}), (_SPORT, _DPORT), reads=_PORT_READS)
UDPLITE = MatchSpec("udplite", lambda o, ctx: _ported(136, o, {}), (_SPORT, _DPORT), reads=_PORT_READS)
SCTP = MatchSpec(
    "sctp",
    lambda o, ctx: _ported(132, o, {"--chunk-types": "sctp --chunk-types: the model's packets carry no chunks"}),
    (_SPORT, _DPORT, OptionSpec("--chunk-types", Anything())),
    reads=_PORT_READS,
)
DCCP = MatchSpec(
    "dccp",
    lambda o, ctx: _ported(33, o, {"--dccp-types": "dccp --dccp-types", "--dccp-option": "dccp --dccp-option"}),
    (_SPORT, _DPORT, OptionSpec("--dccp-types", Anything()), OptionSpec("--dccp-option", UInt(255))),
    reads=_PORT_READS,
)


def _multiport(o: Opts, ctx: NodeContext) -> Pred:
    both = o.get("--ports")
    if both is not None:
        ranges = both.value
        return negate(any_of([PortIn("dport", ranges), PortIn("sport", ranges)]), both.negated)
    return all_of([_ports("sport", o.get("--sports")), _ports("dport", o.get("--dports"))])


MULTIPORT = MatchSpec(
    "multiport",
    _multiport,
    (
        OptionSpec("--sports", Ports(many=True), ("--source-ports",)),
        OptionSpec("--dports", Ports(many=True), ("--destination-ports",)),
        OptionSpec("--ports", Ports(many=True)),
    ),
    reads=frozenset({"sport", "dport"}),
    required=(("--sports", "--dports", "--ports"),),
)

_ICMP_UNKNOWN = Unknown("icmp type of the packet")
# the model's packets carry no ICMP type: an icmp match on an ICMP packet cannot be decided
_ICMP_MEANING = All((any_of([ProtoIs(1), ProtoIs(58)]), _ICMP_UNKNOWN))
ICMP = MatchSpec(
    "icmp", lambda o, ctx: _ICMP_MEANING, (OptionSpec("--icmp-type", Text()),), reads=frozenset({"proto"}),
    families=frozenset({4}),
)  # fmt: skip
ICMP6 = MatchSpec(
    "icmp6", lambda o, ctx: _ICMP_MEANING, (OptionSpec("--icmpv6-type", Text()),), reads=frozenset({"proto"}),
    families=frozenset({6}), aliases=("icmpv6", "ipv6-icmp"),
)  # fmt: skip


# -- addresses ----------------------------------------------------------------------------------

_ADDRTYPES = frozenset({"LOCAL", "UNICAST", "BROADCAST", "MULTICAST", "ANYCAST", "BLACKHOLE", "UNREACHABLE", "PROHIBIT", "THROW", "NAT", "XRESOLVE", "UNSPEC"})  # fmt: skip
_DECIDABLE_TYPES = frozenset({"LOCAL", "UNICAST", "BROADCAST", "MULTICAST"})


def addrtype_classes(field: str, ctx: NodeContext) -> dict[str, Pred]:
    """The address types the model decides, as disjoint predicates: an address of the node (or
    loopback) is LOCAL, else multicast, else the limited broadcast, else UNICAST."""
    fam = ctx.family
    local = AddrIn(field, (*(ipaddress.ip_network(a) for a in ctx.addresses if a.version == fam), ctx.loopback))
    mc = AddrIn(field, (MULTICAST[fam],))
    bc: Pred = AddrIn(field, (BROADCAST4,)) if fam == 4 else FALSE
    return {
        "LOCAL": local,
        "MULTICAST": All((mc, Not(local))),
        "BROADCAST": all_of([bc, Not(local)]),
        "UNICAST": Not(any_of([local, mc, bc])),
    }


def _addrtype(o: Opts, ctx: NodeContext) -> Pred:
    parts: list[Pred] = []
    for name, field in (("--src-type", "src"), ("--dst-type", "dst")):
        g = o.get(name)
        if g is None:
            continue
        types: frozenset[str] = g.value
        if types - _DECIDABLE_TYPES:
            parts.append(Unknown(f"addrtype {','.join(sorted(types - _DECIDABLE_TYPES))} depends on routes the model does not know"))
            continue
        unknown = missing(ctx, FACT_ADDRESSES, "addrtype")
        if unknown is not None:
            parts.append(unknown)
            continue
        classes = addrtype_classes(field, ctx)
        parts.append(negate(any_of([classes[t] for t in sorted(types)]), g.negated))
    for name in ("--limit-iface-in", "--limit-iface-out"):
        if name in o:
            parts.append(Unknown(f"addrtype {name} (per-interface address types)"))
    return all_of(parts)


ADDRTYPE = MatchSpec(
    "addrtype",
    _addrtype,
    (
        OptionSpec("--src-type", Choice(_ADDRTYPES, many=True)),
        OptionSpec("--dst-type", Choice(_ADDRTYPES, many=True)),
        OptionSpec("--limit-iface-in", negatable=False),
        OptionSpec("--limit-iface-out", negatable=False),
    ),
    reads=frozenset({"src", "dst"}),
    facts=frozenset({FACT_ADDRESSES}),
)

IPRANGE = MatchSpec(
    "iprange",
    lambda o, ctx: all_of([_addr("src", o.get("--src-range")), _addr("dst", o.get("--dst-range"))]),
    (OptionSpec("--src-range", AddrRange()), OptionSpec("--dst-range", AddrRange())),
    reads=frozenset({"src", "dst"}),
)


def _pkttype(o: Opts, ctx: NodeContext) -> Pred:
    g = o["--pkt-type"]
    (kind,) = g.value
    mc = AddrIn("dst", (MULTICAST[ctx.family],))
    # the link-layer type of a routed packet follows its destination here; no broadcast frames
    preds: dict[str, Pred] = {"multicast": mc, "unicast": Not(mc), "broadcast": FALSE}
    pred = preds[kind]
    return negate(pred, g.negated)


PKTTYPE = MatchSpec(
    "pkttype",
    _pkttype,
    (OptionSpec("--pkt-type", Choice(frozenset({"unicast", "broadcast", "multicast"}), lower=True)),),
    reads=frozenset({"dst"}),
    required=(("--pkt-type",),),
)


def set_members(ctx: NodeContext, name: str, field: str, seen: frozenset[str] = frozenset()) -> Pred:
    """Membership of ``field`` in ipset ``name`` as far as the node's sets are known: the
    addresses it matches (its members minus the more specific ``nomatch`` entries), for a
    ``list:set`` any of its sets, else Unknown."""
    s = ctx.ipset_named(name)
    if s is None:
        return Unknown(f"ipset {name!r}: its members are not known (give --ipset with `ipset save` output)")
    if s.type.startswith("list:"):
        if name in seen:
            return Unknown(f"ipset {name!r} contains itself")
        return any_of([set_members(ctx, c, field, seen | {name}) for c in s.children])
    if not s.by_address:
        return Unknown(f"ipset {name!r} is {s.type}: a match on it depends on more than the address")
    if s.family != ctx.family:
        return FALSE
    return AddrIn(field, s.matching_networks())


def _set(o: Opts, ctx: NodeContext) -> Pred:
    g = o["--match-set"]
    name, flags = g.value
    parts: list[Pred] = []
    if "," in flags:
        parts.append(Unknown(f"ipset {name!r} ({flags}): a match on more than one address"))
    else:
        parts.append(negate(set_members(ctx, name, "src" if flags == "src" else "dst"), g.negated))
    for counter in ("--packets-eq", "--packets-lt", "--packets-gt", "--bytes-eq", "--bytes-lt", "--bytes-gt"):
        if counter in o:
            parts.append(Unknown(f"set {counter} depends on the set's counters"))
    return all_of(parts)


def _set_flags(args: tuple[str, ...], family: int) -> tuple[str, ...]:
    if len(args) != 2:
        raise ValueError(f"needs NAME FLAGS, received {' '.join(args)!r}")
    flags = args[1].split(",")
    if not 1 <= len(flags) <= 6 or set(flags) - {"src", "dst"}:
        raise ValueError(f"expected FLAGS as src/dst separated by commas, received {args[1]!r}")
    return args


class _SetRef(Words):
    def parse(self, args: tuple[str, ...], family: int) -> tuple[str, ...]:
        return _set_flags(args, family)


SET = MatchSpec(
    "set",
    _set,
    (
        OptionSpec("--match-set", _SetRef(2), ("--set",)),
        OptionSpec("--return-nomatch", negatable=False),
        OptionSpec("--update-counters"),
        OptionSpec("--update-subcounters"),
        *(OptionSpec(f"--{w}-{c}", UInt((1 << 64) - 1)) for w in ("packets", "bytes") for c in ("eq", "lt", "gt")),
    ),
    reads=frozenset({"src", "dst"}),
    facts=frozenset({FACT_IPSETS}),
    required=(("--match-set",),),
)


# -- marks and conntrack ------------------------------------------------------------------------


def _mark(field: str) -> MatchSpec:
    def meaning(o: Opts, ctx: NodeContext) -> Pred:
        g = o["--mark"]
        value, mask = g.value
        return negate(MarkMasked(field, value, FULL_MASK if mask is None else mask), g.negated)

    return MatchSpec(
        "mark" if field == "mark" else "connmark",
        meaning,
        (OptionSpec("--mark", Mark()),),
        reads=frozenset({field}),
        required=(("--mark",),),
    )


MARK = _mark("mark")
CONNMARK = _mark("ctmark")

_CT_STATES = frozenset({"NEW", "ESTABLISHED", "RELATED", "INVALID", "UNTRACKED", "SNAT", "DNAT"})


def _conntrack(o: Opts, ctx: NodeContext) -> Pred:
    parts: list[Pred] = []
    for name in ("--ctstate", "--state"):
        g = o.get(name)
        if g is not None:
            parts.append(negate(CtStateIn(g.value), g.negated))
    parts.append(_addr("orig_src", o.get("--ctorigsrc")))
    parts.append(_addr("orig_dst", o.get("--ctorigdst")))
    parts.append(_ports("orig_sport", o.get("--ctorigsrcport")))
    parts.append(_ports("orig_dport", o.get("--ctorigdstport")))
    if "--ctproto" in o:
        parts.append(_proto(o["--ctproto"]))
    d = o.get("--ctdir")
    if d is not None:
        # the first packet travels in the original direction
        parts.append(negate(TRUE if d.value == frozenset({"ORIGINAL"}) else FALSE, d.negated))
    for name in ("--ctreplsrc", "--ctrepldst", "--ctreplsrcport", "--ctrepldstport", "--ctstatus", "--ctexpire"):
        if name in o:
            parts.append(Unknown(f"conntrack {name}"))
    return all_of(parts)


CONNTRACK = MatchSpec(
    "conntrack",
    _conntrack,
    (
        OptionSpec("--ctstate", Choice(_CT_STATES, many=True)),
        OptionSpec("--ctproto", Proto()),
        *(OptionSpec(f"--ct{d}{s}", Addrs()) for d in ("orig", "repl") for s in ("src", "dst")),
        *(OptionSpec(f"--ct{d}{s}port", Ports()) for d in ("orig", "repl") for s in ("src", "dst")),
        OptionSpec("--ctstatus", Choice(frozenset({"NONE", "EXPECTED", "SEEN_REPLY", "ASSURED", "CONFIRMED"}), many=True)),
        OptionSpec("--ctexpire", Anything()),
        OptionSpec("--ctdir", Choice(frozenset({"ORIGINAL", "REPLY"})), negatable=False),
    ),
    reads=frozenset({"untracked", "dnat", "snat_done", "orig_src", "orig_dst", "orig_sport", "orig_dport", "proto"}),
)
STATE = MatchSpec(
    "state",
    _conntrack,
    (OptionSpec("--state", Choice(_CT_STATES, many=True)),),
    reads=frozenset({"untracked", "dnat", "snat_done"}),
    required=(("--state",),),
)


def _statistic(o: Opts, ctx: NodeContext) -> Pred:
    (mode,) = o["--mode"].value
    g = o.get("--probability")
    if mode != "random":
        if g is not None or "--every" not in o:
            raise ValueError("statistic --mode nth needs --every (and no --probability)")
        return Unknown(f"statistic mode {mode} depends on a packet counter")
    if g is None or "--every" in o or "--packet" in o:
        raise ValueError("statistic --mode random needs --probability (and no --every/--packet)")
    p: Fraction = g.value
    return negate(chance(p), g.negated)


STATISTIC = MatchSpec(
    "statistic",
    _statistic,
    (
        OptionSpec("--mode", Choice(frozenset({"random", "nth"}), lower=True), negatable=False),
        OptionSpec("--probability", Probability()),
        OptionSpec("--every", UInt()),
        OptionSpec("--packet", UInt(), negatable=False),
    ),
    required=(("--mode",),),
)

_FULL_MASKS = ("255.255.255.255", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")
_VERBS = ("--set", "--rcheck", "--update", "--remove")


def _recent(o: Opts, ctx: NodeContext) -> Pred:
    name = str(o["--name"].value) if "--name" in o else "DEFAULT"
    field = "dst" if "--rdest" in o else "src"
    mask = o.get("--mask")
    if mask is not None and mask.text not in _FULL_MASKS:
        return Unknown("recent --mask other than a full mask")
    if "--hitcount" in o or "--rttl" in o:
        return Unknown("recent --hitcount/--rttl needs hit history")
    seconds = o.get("--seconds")
    for verb in _VERBS:
        g = o.get(verb)
        if g is not None:
            pred = Recent(name, field, verb[2:], seconds.value if seconds else None)  # type: ignore[arg-type]
            return negate(pred, g.negated)
    raise AssertionError("the registry requires one verb")


RECENT = MatchSpec(
    "recent",
    _recent,
    (
        OptionSpec("--name", Text(), negatable=False),
        *(OptionSpec(v) for v in _VERBS),
        OptionSpec("--rsource", negatable=False),
        OptionSpec("--rdest", negatable=False),
        OptionSpec("--mask", Text(), negatable=False),
        OptionSpec("--seconds", UInt(), negatable=False),
        OptionSpec("--reap", negatable=False),
        OptionSpec("--hitcount", UInt(), negatable=False),
        OptionSpec("--rttl", negatable=False),
    ),
    reads=frozenset({"src", "dst", "recent"}),
    required=(_VERBS,),
)

# what an excerpt does not show (``netfilter.excerpt``): a marker rule no evaluator can decide
UNSEEN = MatchSpec(
    UNSEEN_MODULE,
    lambda o, ctx: Unknown(o["--reason"].text if "--reason" in o else "not in the excerpt"),
    (OptionSpec("--reason", Text(), negatable=False),),
    note="nat-verify's own marker",
)
COMMENT = MatchSpec("comment", lambda o, ctx: TRUE, (OptionSpec("--comment", Text(), negatable=False),))
NFACCT = MatchSpec("nfacct", lambda o, ctx: TRUE, (OptionSpec("--nfacct-name", Text(), negatable=False),))


PHYSDEV = MatchSpec(
    "physdev",
    None,
    (
        OptionSpec("--physdev-in", Iface()),
        OptionSpec("--physdev-out", Iface()),
        OptionSpec("--physdev-is-in"),
        OptionSpec("--physdev-is-out"),
        OptionSpec("--physdev-is-bridged"),
    ),
    facts=frozenset({FACT_INTERFACES}),
    note="bridge ports",
)
SOCKET = MatchSpec(
    "socket",
    None,
    (OptionSpec("--transparent"), OptionSpec("--nowildcard"), OptionSpec("--restore-skmark")),
    note="local sockets",
)

MODELLED = (
    TCP, UDP, UDPLITE, SCTP, DCCP, MULTIPORT, ICMP, ICMP6, ADDRTYPE, IPRANGE, PKTTYPE, SET, MARK, CONNMARK,
    CONNTRACK, STATE, STATISTIC, RECENT, COMMENT, NFACCT, PHYSDEV, SOCKET, UNSEEN,
)  # fmt: skip

# Match modules Linux has (xt_*, ipt_*, ip6t_*) that the model does not evaluate: their options
# are not checked, their rules compile to Unknown. (A module outside Linux, such as those of
# xtables-addons, is not in this list: a dump using one is refused.)
_UNMODELLED_ANY = (
    "ah", "bpf", "cgroup", "cluster", "connbytes", "connlabel", "connlimit", "cpu", "devgroup", "dscp", "ecn", "esp",
    "hashlimit", "helper", "ipcomp", "ipvs", "l2tp", "length", "limit", "mac", "osf", "owner", "policy",
    "quota", "rateest", "rpfilter", "string", "tcpmss", "time", "tos", "u32",
)  # fmt: skip
_UNMODELLED_V4 = ("realm", "ttl")
_UNMODELLED_V6 = ("dst", "eui64", "frag", "hbh", "hl", "ipv6header", "mh", "rt", "srh")

UNMODELLED = (
    *(MatchSpec(n) for n in _UNMODELLED_ANY),
    *(MatchSpec(n, families=frozenset({4})) for n in _UNMODELLED_V4),
    *(MatchSpec(n, families=frozenset({6})) for n in _UNMODELLED_V6),
)

ALL = (*MODELLED, *UNMODELLED)
