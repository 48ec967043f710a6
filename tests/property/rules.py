"""Hypothesis strategies for rules and rulesets drawn from the registry, not from kube-proxy.

Every match module and target the model evaluates can appear, with options drawn by their
kinds (``netfilter.spec``) from small pools of values, so that rules share constants and
packets drawn from the same pools hit their edges: a CIDR's first and last address, a port
range's ends, a mark under and outside its mask. Rulesets are drawn per table with user chains
jumped to in one direction only (no loops), then validated: a draw the kernel would refuse is
rejected, so every ruleset here is one a node could run.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

from hypothesis import assume
from hypothesis import strategies as st

from nat_verify.model.packet import Packet
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.parse import DumpError, parse
from nat_verify.netfilter.registry import CORE, MATCHES, TARGETS
from nat_verify.netfilter.ruleset import BUILTIN_CHAINS, Ruleset
from nat_verify.netfilter.spec import (
    AddrRange,
    Addrs,
    Anything,
    Choice,
    Flag,
    Iface,
    Mark,
    MatchSpec,
    NatTo,
    OptionSpec,
    Ports,
    Probability,
    Proto,
    TargetSpec,
    Text,
    UInt,
    Words,
)
from nat_verify.netfilter.validate import validate_ruleset

NODE = "192.168.1.10"
POD_CIDR = "10.42.0.0/16"
LOCAL_PODS = "10.42.1.0/24"
IPSET = "blocked"
IPSET_MEMBERS = ("203.0.113.0/25", "10.42.1.7/32")

ADDRESSES = (
    "10.42.1.7", "10.42.1.8", "10.42.2.9", "10.43.0.15", "10.43.0.16", "192.168.1.10", "192.168.1.11",
    "203.0.113.5", "203.0.113.200", "198.51.100.1", "127.0.0.1", "172.16.0.1",
)  # fmt: skip
NETWORKS = (
    "10.42.0.0/16", "10.42.1.0/24", "10.42.1.7/32", "10.43.0.15/32", "10.43.0.0/24", "203.0.113.0/24",
    "203.0.113.128/25", "192.168.1.10/32", "0.0.0.0/0", "127.0.0.0/8", "198.51.100.0/30",
)  # fmt: skip
PORTS = (1, 53, 79, 80, 81, 443, 1024, 8080, 30000, 40000, 65535)
MARKS = (0x0, 0x1, 0x4000, 0x8000, 0x4001, 0xFFFFFFFF)
IFACES = ("eth0", "eth+", "cni0", "cni+", "lo", "veth+", "+")
PROTOCOLS = ("tcp", "udp", "sctp", "icmp", "all", "6", "17")

# the modules and targets the strategies draw (every modelled entry: see test_registry)
MODULES = tuple(sorted(n for n, s in MATCHES.items() if s.meaning is not None and n == s.name and 4 in s.families))
TARGET_CHOICES = ("ACCEPT", "DROP", "RETURN", "REJECT", "DNAT", "SNAT", "MASQUERADE", "REDIRECT", "MARK",
                  "CONNMARK", "NOTRACK", "CT", "LOG", "NFLOG")  # fmt: skip


def context() -> NodeContext:
    """The node every drawn ruleset runs on (every fact known, the ipset's members too)."""
    return NodeContext(
        family=4, addresses=(NODE,), pod_cidrs=(POD_CIDR,), local_pod_cidrs=(LOCAL_PODS,),
        ipsets=((IPSET, IPSET_MEMBERS),), name="node-1",
    )  # fmt: skip


def _port_range() -> st.SearchStrategy[str]:
    single = st.sampled_from(PORTS).map(str)
    pair = st.tuples(st.sampled_from(PORTS), st.sampled_from(PORTS)).map(lambda t: f"{min(t)}:{max(t)}")
    return single | pair


def value(name: str, spec: OptionSpec, owner: str = "") -> st.SearchStrategy[str]:
    """Text for one option's argument(s), by its kind ("" for a flag); ``owner`` is the module
    or target the option belongs to."""
    k = spec.kind
    if name == "--to-ports":
        return st.sampled_from(("8080", "30000", "1024-2048"))
    if name == "--tcp-flags":
        return st.sampled_from(("FIN,SYN,RST,ACK SYN", "SYN,RST SYN", "SYN,ACK SYN,ACK", "ALL NONE", "ALL SYN"))
    if name == "--match-set":
        return st.sampled_from((f"{IPSET} src", f"{IPSET} dst", "unknown-set src", f"{IPSET} src,dst"))
    if name == "--mask" and owner == "recent":
        return st.sampled_from(("255.255.255.255", "255.255.255.0"))
    if isinstance(k, Flag):
        return st.just("")
    if isinstance(k, Addrs):
        return st.lists(st.sampled_from(NETWORKS), min_size=1, max_size=2, unique=True).map(",".join)
    if isinstance(k, AddrRange):
        return st.tuples(st.sampled_from(ADDRESSES), st.sampled_from(ADDRESSES)).map(
            lambda t: "-".join(sorted(t, key=lambda a: int(ipaddress.ip_address(a))))
        )
    if isinstance(k, Ports):
        if k.many:
            return st.lists(_port_range(), min_size=1, max_size=3).map(",".join)
        return _port_range()
    if isinstance(k, Mark):
        return st.tuples(st.sampled_from(MARKS), st.sampled_from(MARKS) | st.none()).map(
            lambda t: f"{t[0]:#x}" if t[1] is None else f"{t[0]:#x}/{t[1]:#x}"
        )
    if isinstance(k, UInt):
        return st.sampled_from((0, 1, 2, 10, 0x4000, 0xFFFF)).filter(lambda v: v <= k.maximum).map(
            lambda v: hex(v) if k.base == 0 else str(v)
        )
    if isinstance(k, Probability):
        return st.sampled_from(("0.5", "0.25", "0.3333333333", "0.99", "1.0", "0.0"))
    if isinstance(k, Choice):
        items = sorted(k.choices)
        if k.many:
            return st.lists(st.sampled_from(items), min_size=1, max_size=3, unique=True).map(",".join)
        return st.sampled_from(items)
    if isinstance(k, Iface):
        return st.sampled_from(IFACES)
    if isinstance(k, NatTo):
        return st.sampled_from(("10.42.1.7:8080", "10.42.1.8", "10.42.2.9:80", "192.168.1.10:30000", "127.0.0.1:80"))
    if isinstance(k, Proto):
        return st.sampled_from(PROTOCOLS)
    if isinstance(k, Words | Text | Anything):
        return st.just("x")
    raise AssertionError(f"no strategy for the option kind {k!r}: add one")


@st.composite
def options(draw: st.DrawFn, owner: str, specs: Sequence[OptionSpec], required: tuple[tuple[str, ...], ...]) -> str:
    """Some options of a module or target (exactly one of each required group), as text."""
    grouped = {n for g in required for n in g}
    chosen = [draw(st.sampled_from(g)) for g in required]
    free = [s.name for s in specs if s.name not in grouped]
    chosen += draw(st.lists(st.sampled_from(free), max_size=2, unique=True)) if free else []
    by_name = {s.name: s for s in specs}
    parts = []
    for name in chosen:
        spec = by_name[name]
        neg = "! " if spec.negatable and draw(st.booleans()) and draw(st.booleans()) else ""
        arg = draw(value(name, spec, owner))
        parts.append(f"{neg}{name} {arg}".rstrip())
    return " ".join(parts)


_PROBABILITY = st.sampled_from(("0.5", "0.25", "0.3333333333", "0.99"))


def module(spec: MatchSpec) -> st.SearchStrategy[str]:
    assert spec.options is not None
    if spec.name == "statistic":
        # the valid shapes: random with a probability, or nth with a counter
        random = st.tuples(st.sampled_from(("", "! ")), _PROBABILITY).map(lambda t: f"--mode random {t[0]}--probability {t[1]}")
        nth = st.just("--mode nth --every 2 --packet 0")
        return (random | nth).map(lambda o: f"-m statistic {o}")
    return options(spec.name, spec.options, spec.required).map(lambda o: f"-m {spec.name} {o}".rstrip())


def target(spec: TargetSpec) -> st.SearchStrategy[str]:
    if not spec.options:
        return st.just(f"-j {spec.name}")
    return options(spec.name, spec.options, spec.required).map(lambda o: f"-j {spec.name} {o}".rstrip())


def _placeable(name: str, table: str, chain: str) -> bool:
    """Whether target ``name`` may stand in ``table`` ``chain`` (a user chain: its table only)."""
    spec = TARGETS[name]
    if spec.tables is not None and table not in spec.tables:
        return False
    return spec.hooks is None or chain not in BUILTIN_CHAINS[table] or chain in spec.hooks


@st.composite
def rule(draw: st.DrawFn, table: str, chain: str, jumps: Sequence[str], random_left: list[int] | None = None) -> str:
    """One rule of ``chain`` (``random_left``: how many more random matches the ruleset may
    take; each one forks every walk that meets it)."""
    parts = [f"-A {chain}"]
    core_names = ["-s", "-d", "-p"]
    core_names += [] if chain in ("OUTPUT", "POSTROUTING") else ["-i"]
    core_names += [] if chain in ("PREROUTING", "INPUT") else ["-o"]
    core_opts = draw(st.lists(st.sampled_from(core_names), max_size=2, unique=True))
    by_name = {s.name: s for s in CORE.options or ()}
    for name in core_opts:
        neg = "! " if draw(st.booleans()) and draw(st.booleans()) else ""
        parts.append(f"{neg}{name} {draw(value(name, by_name[name]))}")
    for name in draw(st.lists(st.sampled_from(MODULES), max_size=2, unique=True)):
        if name == "statistic" and random_left is not None:
            if random_left[0] <= 0:
                continue
            random_left[0] -= 1
        parts.append(draw(module(MATCHES[name])))
    choices = [*(t for t in TARGET_CHOICES if _placeable(t, table, chain)), *jumps]
    t = draw(st.sampled_from(choices) | st.just(""))
    if t in TARGETS:
        parts.append(draw(target(TARGETS[t])))
    elif t:
        parts.append(f"-{draw(st.sampled_from('jg'))} {t}")
    return " ".join(parts)


@st.composite
def table_text(draw: st.DrawFn, table: str) -> str:
    builtin = BUILTIN_CHAINS[table]
    users = [f"U{i}" for i in range(draw(st.integers(0, 3)))]
    random_left = [2]
    lines = [f"*{table}"]
    for c in builtin:
        lines.append(f":{c} {draw(st.sampled_from(('ACCEPT', 'DROP')))} [0:0]")
    lines += [f":{u} - [0:0]" for u in users]
    for c in builtin:
        for _ in range(draw(st.integers(0, 3))):
            lines.append(draw(rule(table, c, users, random_left)))
    for i, u in enumerate(users):
        for _ in range(draw(st.integers(0, 4))):
            lines.append(draw(rule(table, u, users[i + 1 :], random_left)))  # jumps go one way: no loops
    lines.append("COMMIT")
    return "\n".join(lines) + "\n"


@st.composite
def rulesets(draw: st.DrawFn, tables: Sequence[str] = ("raw", "mangle", "nat", "filter")) -> Ruleset:
    """A valid IPv4 ruleset drawn from the registry (a draw the kernel would refuse is rejected)."""
    chosen = draw(st.lists(st.sampled_from(tables), min_size=1, max_size=len(tables), unique=True))
    text = "".join(draw(table_text(t)) for t in chosen)
    try:
        rs = parse("# Generated by iptables-nft-save v1.8.9 (nf_tables)\n" + text, family=4)
        validate_ruleset(rs, context())
    except DumpError:
        assume(False)
        raise
    return rs


def packets(origins: Sequence[str] = ("external", "pod", "host")) -> st.SearchStrategy[Packet]:
    """First packets whose fields come from the same pools as the rules' constants."""
    addrs = st.sampled_from(ADDRESSES) | st.integers(0, 2**32 - 1).map(lambda i: str(ipaddress.IPv4Address(i)))
    return st.builds(
        lambda src, dst, dport, sport, proto, origin, mark: Packet(
            src=src, dst=dst, dport=dport, sport=sport, proto=proto, origin=origin, mark=mark  # type: ignore[arg-type]
        ),
        addrs, st.sampled_from(ADDRESSES), st.sampled_from(PORTS), st.sampled_from(PORTS),
        st.sampled_from(("tcp", "udp", "sctp")), st.sampled_from(origins), st.sampled_from((0, 0x4000, 0x1)),
    )  # fmt: skip
