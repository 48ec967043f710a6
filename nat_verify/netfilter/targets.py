"""Targets: one registry entry each (see ``registry`` for the design).

An entry gives the target's options, its effect on the walk state (a verdict, or ``None`` to
go on with the next rule), what it reads and writes, and where the kernel accepts it: the
tables and hooks below were read off the real kernel (``tests/kernel/test_target_placement.py``
loads every entry into every built-in chain with both iptables backends and compares).

Effects write through ``PacketState.write`` so chain summaries replay exactly what a walk
wrote. An effect raises ``ValueError`` for a case the model does not evaluate (NAT to a
range); the walk then ends inconclusive with that reason.
"""

from __future__ import annotations

import ipaddress

from nat_verify.netfilter.spec import (
    FACT_ADDRESSES,
    FACT_ROUTES,
    Choice,
    Env,
    Flag,
    Mark,
    NatTo,
    OptionSpec,
    Opts,
    TargetSpec,
    Text,
    UInt,
)
from nat_verify.netfilter.state import PacketState

ACCEPT, DROP, REJECT, RETURN = "ACCEPT", "DROP", "REJECT", "RETURN"
FULL_MASK = 0xFFFFFFFF

PREROUTING, INPUT, FORWARD, OUTPUT, POSTROUTING = "PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"


def _set(*names: str) -> frozenset[str]:
    return frozenset(names)


def _accept(env: Env, table: str, s: PacketState, o: Opts) -> str | None:
    return ACCEPT


def _drop(env: Env, table: str, s: PacketState, o: Opts) -> str | None:
    return DROP


def _return(env: Env, table: str, s: PacketState, o: Opts) -> str | None:
    return RETURN


_REJECT_TYPES = _set(
    "icmp-net-unreachable", "net-unreach", "icmp-host-unreachable", "host-unreach", "icmp-port-unreachable",
    "port-unreach", "icmp-proto-unreachable", "proto-unreach", "icmp-net-prohibited", "net-prohib",
    "icmp-host-prohibited", "host-prohib", "icmp-admin-prohibited", "admin-prohib", "tcp-reset", "tcp-rst",
    "icmp6-no-route", "no-route", "icmp6-adm-prohibited", "adm-prohibited", "icmp6-addr-unreachable",
    "addr-unreach", "icmp6-port-unreachable", "icmp6-policy-fail", "policy-fail", "icmp6-reject-route",
    "reject-route",
)  # fmt: skip


def _reject(env: Env, table: str, s: PacketState, o: Opts) -> str | None:
    g = o.get("--reject-with")
    default = "icmp6-port-unreachable" if env.ctx.family == 6 else "icmp-port-unreachable"
    s.write("reject_with", g.text if g else default)
    return REJECT


def _nat_target(o: Opts, name: str) -> tuple[object, object]:
    addr, port, unmodelled = o[name].value
    if unmodelled:
        raise ValueError(unmodelled)
    return addr, port


def _dnat(env: Env, table: str, s: PacketState, o: Opts) -> str | None:
    addr, port = _nat_target(o, "--to-destination")
    if addr is not None:
        s.write("dst", addr)
    if port is not None:
        s.write("dport", port)
    s.write("dnat", True)
    return ACCEPT


def _snat(env: Env, table: str, s: PacketState, o: Opts) -> str | None:
    addr, port = _nat_target(o, "--to-source")
    if addr is not None:
        s.write("src", addr)
    if port is not None:
        s.write("sport", port)
    s.write("snat_done", True)
    return ACCEPT


def _ports_text(o: Opts) -> str | None:
    g = o.get("--to-ports")
    return g.text if g else None


def _masquerade(env: Env, table: str, s: PacketState, o: Opts) -> str | None:
    s.write("src", env.route(s.dst).src)
    ports = _ports_text(o)
    if ports is not None and "-" not in ports:
        s.write("sport", int(ports))
    s.write("snat_done", True)
    s.write("masq", True)
    return ACCEPT


def _redirect(env: Env, table: str, s: PacketState, o: Opts) -> str | None:
    ports = _ports_text(o)
    if ports is not None:
        if "-" in ports:
            raise ValueError("REDIRECT to a port range is not modelled")
        s.write("dport", int(ports))
    ctx = env.ctx
    if not ctx.knows(FACT_ADDRESSES):
        raise ValueError("REDIRECT sends to the node's own address, and the node addresses were not given")
    if s.in_iface in ("", "lo"):
        s.write("dst", ipaddress.ip_address("::1" if ctx.family == 6 else "127.0.0.1"))
    else:
        addr = next((a for a in ctx.addresses if a.version == ctx.family), None)
        if addr is None:
            raise ValueError("REDIRECT on a node with no address of this family")
        s.write("dst", addr)
    s.write("dnat", True)
    return ACCEPT


def _check_to_ports(o: Opts) -> None:
    g = o.get("--to-ports")
    if g is None:
        return
    lo, _, hi = g.text.partition("-")
    if not all(p.isdigit() and int(p) <= 65535 for p in (lo, hi) if p) or not lo:
        raise ValueError(f"--to-ports: expected PORT[-PORT], received {g.text!r}")


def apply_mark(cur: int, o: Opts) -> int:
    """The new mark after MARK's (or CONNMARK's) operation on ``cur``."""
    for name in ("--set-xmark", "--set-mark"):
        g = o.get(name)
        if g is not None:
            v, m = g.value
            keep = cur & ~(FULL_MASK if m is None else m) & FULL_MASK
            return keep ^ v if name == "--set-xmark" else keep | v
    if "--or-mark" in o:
        return cur | o["--or-mark"].value
    if "--and-mark" in o:
        return cur & o["--and-mark"].value
    if "--xor-mark" in o:
        return cur ^ o["--xor-mark"].value
    raise ValueError("no mark operation")


def _mark(env: Env, table: str, s: PacketState, o: Opts) -> str | None:
    s.write("mark", apply_mark(s.mark, o))
    return None


def _masks(o: Opts) -> tuple[int, int]:
    both = o.get("--mask")
    nf = o.get("--nfmask") or both
    ct = o.get("--ctmask") or both
    return (nf.value if nf else FULL_MASK), (ct.value if ct else FULL_MASK)


def _connmark(env: Env, table: str, s: PacketState, o: Opts) -> str | None:
    if "--save-mark" in o:
        nf, ct = _masks(o)
        s.write("ctmark", (s.ctmark & ~ct & FULL_MASK) ^ (s.mark & nf))
    elif "--restore-mark" in o:
        nf, ct = _masks(o)
        s.write("mark", (s.mark & ~nf & FULL_MASK) ^ (s.ctmark & ct))
    else:
        s.write("ctmark", apply_mark(s.ctmark, o))
    return None


def _notrack(env: Env, table: str, s: PacketState, o: Opts) -> str | None:
    s.write("untracked", True)
    return None


def _ct(env: Env, table: str, s: PacketState, o: Opts) -> str | None:
    if "--notrack" in o:
        s.write("untracked", True)
    return None


_HEX = UInt(base=0)
_MARK_OPS = (
    OptionSpec("--set-xmark", Mark(), negatable=False),
    OptionSpec("--set-mark", Mark(), negatable=False),
    OptionSpec("--and-mark", _HEX, negatable=False),
    OptionSpec("--or-mark", _HEX, negatable=False),
    OptionSpec("--xor-mark", _HEX, negatable=False),
)
_MARK_NAMES = tuple(o.name for o in _MARK_OPS)
_NAT = _set("nat")
_RAW = _set("raw")
_MANGLE = _set("mangle")
_NOT_NAT = _set("raw", "mangle", "filter", "security")


def _flags(*names: str) -> tuple[OptionSpec, ...]:
    return tuple(OptionSpec(n, Flag(), negatable=False) for n in names)


MODELLED = (
    TargetSpec("ACCEPT", _accept, terminal=True),
    # iptables-restore refuses DROP in the nat table ("not intended for filtering")
    TargetSpec("DROP", _drop, terminal=True, tables=_NOT_NAT),
    TargetSpec("RETURN", _return, terminal=True),
    TargetSpec(
        "REJECT", _reject, (OptionSpec("--reject-with", Choice(_REJECT_TYPES, lower=True), negatable=False),),
        terminal=True, tables=_set("filter"), hooks=_set(INPUT, FORWARD, OUTPUT), writes=_set("reject_with"),
    ),  # fmt: skip
    TargetSpec(
        "DNAT", _dnat, (OptionSpec("--to-destination", NatTo(), negatable=False), *_flags("--random", "--persistent")),
        terminal=True, tables=_NAT, hooks=_set(PREROUTING, OUTPUT), writes=_set("dst", "dport", "dnat"),
        required=(("--to-destination",),),
    ),  # fmt: skip
    TargetSpec(
        "SNAT", _snat,
        (OptionSpec("--to-source", NatTo(), negatable=False), *_flags("--random", "--random-fully", "--persistent")),
        terminal=True, tables=_NAT, hooks=_set(INPUT, POSTROUTING), writes=_set("src", "sport", "snat_done"),
        required=(("--to-source",),),
    ),  # fmt: skip
    TargetSpec(
        "MASQUERADE", _masquerade,
        (OptionSpec("--to-ports", Text(), negatable=False), *_flags("--random", "--random-fully")),
        terminal=True, tables=_NAT, hooks=_set(POSTROUTING), reads=_set("dst"),
        writes=_set("src", "sport", "snat_done", "masq"), facts=_set(FACT_ROUTES), check=_check_to_ports,
    ),  # fmt: skip
    TargetSpec(
        "REDIRECT", _redirect, (OptionSpec("--to-ports", Text(), negatable=False), *_flags("--random")),
        terminal=True, tables=_NAT, hooks=_set(PREROUTING, OUTPUT), reads=_set("in_iface"),
        writes=_set("dst", "dport", "dnat"), facts=_set(FACT_ADDRESSES), check=_check_to_ports,
    ),  # fmt: skip
    TargetSpec("MARK", _mark, _MARK_OPS, reads=_set("mark"), writes=_set("mark"), required=(_MARK_NAMES,)),
    TargetSpec(
        "CONNMARK", _connmark,
        (*_MARK_OPS, *_flags("--save-mark", "--restore-mark"),
         *(OptionSpec(n, _HEX, negatable=False) for n in ("--nfmask", "--ctmask", "--mask"))),
        reads=_set("mark", "ctmark"), writes=_set("mark", "ctmark"),
        required=((*_MARK_NAMES, "--save-mark", "--restore-mark"),),
    ),  # fmt: skip
    TargetSpec("NOTRACK", _notrack, tables=_RAW, writes=_set("untracked")),
    TargetSpec(
        "CT", _ct,
        (*_flags("--notrack"), *(OptionSpec(n, Text(), negatable=False) for n in (
            "--helper", "--ctevents", "--expevents", "--zone", "--zone-orig", "--zone-reply", "--timeout"))),
        tables=_RAW, writes=_set("untracked"),
    ),  # fmt: skip
)

# Non-terminating targets that change nothing the model reads: the walk goes on past them.
PASSIVE = (
    TargetSpec("LOG", options=tuple(OptionSpec(n, Text(), negatable=False) for n in ("--log-level", "--log-prefix"))
               + _flags("--log-tcp-sequence", "--log-tcp-options", "--log-ip-options", "--log-uid", "--log-macdecode"),
               passive=True),  # fmt: skip
    TargetSpec("NFLOG", options=tuple(OptionSpec(n, Text(), negatable=False) for n in (
        "--nflog-group", "--nflog-prefix", "--nflog-range", "--nflog-size", "--nflog-threshold")), passive=True),
    TargetSpec("ULOG", options=None, passive=True, backends=_set("legacy"), note="removed from Linux in 3.17"),
    # the nf_tables backend turns TRACE into "meta nftrace set 1", valid in every chain
    TargetSpec("TRACE", passive=True, tables=_RAW, nft_anywhere=True),
    TargetSpec("AUDIT", options=None, passive=True),
    TargetSpec("TCPMSS", options=None, passive=True, option_hooks=(("--clamp-mss-to-pmtu", _set(FORWARD, OUTPUT, POSTROUTING)),)),
    TargetSpec("TCPOPTSTRIP", options=None, passive=True, tables=_MANGLE),
    TargetSpec("TOS", options=None, passive=True, tables=_MANGLE),
    TargetSpec("DSCP", options=None, passive=True, tables=_MANGLE),
    TargetSpec("TTL", options=None, passive=True, tables=_MANGLE, families=frozenset({4})),
    TargetSpec("HL", options=None, passive=True, tables=_MANGLE, families=frozenset({6})),
    TargetSpec("ECN", options=None, passive=True, tables=_MANGLE, families=frozenset({4})),
    TargetSpec("CHECKSUM", options=None, passive=True, tables=_MANGLE),
    TargetSpec("CLASSIFY", options=None, passive=True, hooks=_set(FORWARD, OUTPUT, POSTROUTING)),
    TargetSpec("SECMARK", options=None, passive=True, tables=_set("mangle", "security")),
    TargetSpec("CONNSECMARK", options=None, passive=True, tables=_set("mangle", "security")),
    TargetSpec("IDLETIMER", options=None, passive=True),
    TargetSpec("LED", options=None, passive=True),
    TargetSpec("RATEEST", options=None, passive=True),
    # SET changes ipset members, which the model takes as fixed inputs for the first packet
    TargetSpec("SET", options=None, passive=True),
    TargetSpec("TEE", options=None, passive=True),
)

# Targets Linux has whose effect the model does not evaluate: a walk reaching one ends
# inconclusive, naming it.
UNMODELLED = (
    TargetSpec("QUEUE", backends=_set("legacy")),
    TargetSpec("NFQUEUE", options=None),
    TargetSpec("NETMAP", options=None, tables=_NAT),
    TargetSpec("TPROXY", options=None, tables=_MANGLE, hooks=_set(PREROUTING)),
    TargetSpec("SYNPROXY", options=None, hooks=_set(INPUT, FORWARD)),
    TargetSpec("HMARK", options=None),
    TargetSpec("CLUSTERIP", options=None, tables=_MANGLE, families=frozenset({4}), note="removed from Linux in 6.3"),
    TargetSpec("DNPT", options=None, tables=_MANGLE, hooks=_set(PREROUTING, OUTPUT), families=frozenset({6})),
    TargetSpec("SNPT", options=None, tables=_MANGLE, hooks=_set(INPUT, POSTROUTING), families=frozenset({6})),
)

ALL = (*MODELLED, *PASSIVE, *UNMODELLED)
