"""The shape of a registry entry: option kinds, match modules and targets as values.

A ``MatchSpec`` or ``TargetSpec`` says everything nat-verify knows about one iptables
extension (see ``registry`` for the design): the options it takes and how each is spelled and
parsed (an option *kind* below), the packet fields it reads, the node facts it needs, and its
meaning (match predicates, or a target's effect on the walk state). Option kinds parse and
validate a value the same way wherever it appears, so ``--seconds 1h`` or ``--set-xmark junk``
is refused at load with one message, whatever the command.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import attrs

from nat_verify.model.cluster import IPAddress, IPNetwork
from nat_verify.netfilter.constants import parse_network
from nat_verify.netfilter.context import ADDRESSES, ROUTES
from nat_verify.netfilter.predicate import PROTO_NUMBERS, Pred
from nat_verify.netfilter.saveform import P31, stored_probability

if TYPE_CHECKING:
    from nat_verify.netfilter.context import NodeContext, Route
    from nat_verify.netfilter.state import PacketState


# Node facts a registry entry declares it reads (``NodeContext.knows`` tells which were given):
FACT_ADDRESSES = ADDRESSES  # the node's own addresses (addrtype, REDIRECT)
FACT_ROUTES = ROUTES  # the routes (MASQUERADE's source, the output interface)
FACT_INTERFACES = "interface names"  # which interface a packet arrives on or leaves by (-i/-o):
# carried by the walk state itself, "?<fact>" when not known (``context.iface_verdict``)
FACT_IPSETS = "ipset members"  # per set: ``NodeContext.ipset_named``
FACTS = frozenset({FACT_ADDRESSES, FACT_ROUTES, FACT_INTERFACES, FACT_IPSETS})


class RuleError(ValueError):
    """A rule the kernel (or iptables-restore) would refuse: a malformed option, a module or
    target Linux does not have, a target where it is not allowed. ``str()`` is the message."""


# -- option kinds: parse a value (``args`` as the dump gives them) or raise ValueError ----------


@attrs.frozen
class Flag:
    """No argument (``--syn``, ``--set``)."""

    def parse(self, args: tuple[str, ...], family: int) -> object:
        if args:
            raise ValueError(f"takes no argument, received {' '.join(args)!r}")
        return True


def _one(args: tuple[str, ...]) -> str:
    if len(args) != 1:
        raise ValueError(f"needs one argument, received {len(args)}")
    return args[0]


@attrs.frozen
class Addrs:
    """``ADDR[/MASK][,ADDR[/MASK]...]`` of the rule's family."""

    def parse(self, args: tuple[str, ...], family: int) -> tuple[IPNetwork, ...]:
        text = _one(args)
        out = []
        for part in text.split(","):
            try:
                net = parse_network(part)
            except ValueError:
                raise ValueError(f"expected an address or CIDR, received {part!r}") from None
            if family and net.version != family:
                raise ValueError(f"IPv{net.version} address {part!r} in an IPv{family} rule")
            out.append(net)
        return tuple(out)


@attrs.frozen
class AddrRange:
    """``ADDR[-ADDR]`` (iprange), as the CIDRs covering it."""

    def parse(self, args: tuple[str, ...], family: int) -> tuple[IPNetwork, ...]:
        text = _one(args)
        lo_s, _, hi_s = text.partition("-")
        try:
            lo, hi = ipaddress.ip_address(lo_s), ipaddress.ip_address(hi_s or lo_s)
        except ValueError:
            raise ValueError(f"expected ADDR-ADDR, received {text!r}") from None
        if lo.version != hi.version or (family and lo.version != family):
            raise ValueError(f"addresses of the wrong family in {text!r}")
        if int(hi) < int(lo):
            return ()  # an empty range matches nothing (the kernel compares lo <= a <= hi)
        return tuple(ipaddress.summarize_address_range(lo, hi))


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise ValueError
    return int(text)


@attrs.frozen
class Ports:
    """``PORT[:PORT]`` (``many``: a comma list of those, at most ``limit`` ports as multiport
    counts them: a range counts two)."""

    many: bool = False
    limit: int = 15

    def parse(self, args: tuple[str, ...], family: int) -> tuple[tuple[int, int], ...]:
        text = _one(args)
        parts = text.split(",")
        if len(parts) > 1 and not self.many:
            raise ValueError(f"expected a port or PORT:PORT, received {text!r}")
        out = []
        count = 0
        try:
            for part in parts:
                lo, sep, hi = part.partition(":")
                a = _port(lo) if lo else 0
                b = _port(hi) if (sep and hi) else (65535 if sep else a)
                if a > b:
                    raise ValueError
                out.append((a, b))
                count += 2 if sep else 1
        except ValueError:
            raise ValueError(f"expected a port, port range{' or list' if self.many else ''}, received {text!r}") from None
        if self.many and count > self.limit:
            raise ValueError(f"too many ports in {text!r} (at most {self.limit})")
        return tuple(out)


def _u32(text: str) -> int:
    v = int(text, 0)
    if not 0 <= v <= 0xFFFFFFFF:
        raise ValueError
    return v


@attrs.frozen
class Mark:
    """``VALUE[/MASK]``, 32-bit; the mask is None when not given."""

    def parse(self, args: tuple[str, ...], family: int) -> tuple[int, int | None]:
        text = _one(args)
        v, sep, m = text.partition("/")
        try:
            return _u32(v), (_u32(m) if sep else None)
        except ValueError:
            raise ValueError(f"expected VALUE[/MASK] (32-bit), received {text!r}") from None


@attrs.frozen
class UInt:
    """A non-negative integer up to ``maximum`` (decimal, or hex with 0x where ``base`` is 0)."""

    maximum: int = 0xFFFFFFFF
    base: int = 10

    def parse(self, args: tuple[str, ...], family: int) -> int:
        text = _one(args)
        try:
            v = int(text, self.base)
        except ValueError:
            v = -1
        if not 0 <= v <= self.maximum:
            raise ValueError(f"expected an integer from 0 to {self.maximum}, received {text!r}")
        return v


@attrs.frozen
class Probability:
    """``statistic --probability``: the threshold the kernel stores, as an exact fraction."""

    def parse(self, args: tuple[str, ...], family: int) -> Fraction:
        text = _one(args)
        try:
            return Fraction(stored_probability(text), P31)
        except ValueError:
            raise ValueError(f"expected a probability from 0 to 1, received {text!r}") from None


@attrs.frozen
class Choice:
    """One of ``choices`` (``many``: a comma list of them), case-insensitive; parsed upper-case
    unless ``lower``."""

    choices: frozenset[str]
    many: bool = False
    lower: bool = False

    def parse(self, args: tuple[str, ...], family: int) -> frozenset[str]:
        text = _one(args)
        items = text.split(",") if self.many else [text]
        norm = {(i.lower() if self.lower else i.upper()) for i in items}
        bad = sorted(norm - self.choices)
        if bad or not norm:
            allowed = ", ".join(sorted(self.choices))
            raise ValueError(f"unknown value {bad[0] if bad else text!r} (expected {allowed})")
        return frozenset(norm)


@attrs.frozen
class Text:
    """Free text (one argument: a comment, a name, a prefix)."""

    def parse(self, args: tuple[str, ...], family: int) -> str:
        return " ".join(args)


@attrs.frozen
class Words:
    """Exactly ``count`` arguments (``--match-set NAME FLAGS``, ``--tcp-flags MASK COMP``)."""

    count: int

    def parse(self, args: tuple[str, ...], family: int) -> tuple[str, ...]:
        if len(args) != self.count:
            raise ValueError(f"needs {self.count} arguments, received {len(args)}")
        return args


@attrs.frozen
class Iface:
    """An interface name, at most 15 characters, ``+`` at the end for a prefix."""

    def parse(self, args: tuple[str, ...], family: int) -> tuple[str, bool]:
        text = _one(args)
        if not text or len(text) > 15 or any(c in text for c in "/ \t"):
            raise ValueError(f"expected an interface name (at most 15 characters), received {text!r}")
        return (text[:-1], True) if text.endswith("+") else (text, False)


@attrs.frozen
class NatTo:
    """``[ADDR[-ADDR]][:PORT[-PORT]]`` (``[ADDR]:PORT`` for IPv6); a range is kept as text."""

    def parse(self, args: tuple[str, ...], family: int) -> tuple[IPAddress | None, int | None, str]:
        text = _one(args)
        host, port = split_hostport(text)
        if not host and not port:
            raise ValueError(f"expected ADDR[:PORT], received {text!r}")
        try:
            lo, _, hi = host.partition("-")
            addrs = [ipaddress.ip_address(a) for a in (lo, hi) if a]
            if any(family and a.version != family for a in addrs):
                raise ValueError
            plo, _, phi = port.partition("-")
            ports = [_port(p) for p in (plo, phi) if p]
        except ValueError:
            raise ValueError(f"expected ADDR[-ADDR][:PORT[-PORT]], received {text!r}") from None
        if "-" in host or "-" in port:
            return None, None, f"NAT to a range ({text!r}) picks an address or port by hash: not modelled"
        return (addrs[0] if addrs else None), (ports[0] if ports else None), ""


@attrs.frozen
class Proto:
    """``-p``: a protocol name, a number, or ``all``; parsed to its number (0: all, -1: a named
    protocol none of the model's packets carries)."""

    def parse(self, args: tuple[str, ...], family: int) -> int:
        text = _one(args).lower()
        if text == "all":
            return 0
        if text.isdigit():
            if int(text) > 255:
                raise ValueError(f"expected a protocol number from 0 to 255, received {text!r}")
            return int(text)
        if text in PROTO_NUMBERS:
            return PROTO_NUMBERS[text]
        if not text.replace("-", "").replace(".", "").isalnum():
            raise ValueError(f"expected a protocol name or number, received {text!r}")
        return -1


@attrs.frozen
class Anything:
    """Any arguments (an option the model does not read and does not check)."""

    def parse(self, args: tuple[str, ...], family: int) -> tuple[str, ...]:
        return args


Kind: TypeAlias = Flag | Addrs | AddrRange | Ports | Mark | UInt | Probability | Choice | Text | Words | Iface | NatTo | Proto | Anything


def split_hostport(text: str) -> tuple[str, str]:
    """``ADDR:PORT``, ``[ADDR6]:PORT``, ``ADDR``, ``:PORT`` -> (host, port)."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, rest[1:] if rest.startswith(":") else ""
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        return host, port
    return text, ""


@attrs.frozen
class OptionSpec:
    """One option of a module or target: its canonical name, other spellings, its kind."""

    name: str
    kind: Kind = Flag()
    aliases: tuple[str, ...] = ()
    negatable: bool = True


@attrs.frozen
class Given:
    """An option as a rule gives it, parsed by its kind."""

    value: Any  # what the option's kind parsed (each kind documents its type)
    negated: bool = False
    text: str = ""


Opts = Mapping[str, Given]  # canonical option name -> what the rule gives




MatchMeaning = Callable[[Opts, "NodeContext"], Pred]


@attrs.frozen
class MatchSpec:
    """A match module (``-m NAME``), or the core IP-header options (``name == ""``).

    ``meaning`` builds the predicate from the parsed options and the node (None: Linux has the
    module but the model does not evaluate it, so it compiles to ``Unknown``); ``options`` None
    means any options are taken unchecked (only for modules the model does not evaluate).
    ``reads`` and ``facts`` are declarations the registry tests hold the meaning to.
    """

    name: str
    meaning: MatchMeaning | None = None
    options: tuple[OptionSpec, ...] | None = None
    reads: frozenset[str] = frozenset()
    facts: frozenset[str] = frozenset()
    families: frozenset[int] = frozenset({4, 6})
    aliases: tuple[str, ...] = ()
    required: tuple[tuple[str, ...], ...] = ()  # for each group, exactly one of its options
    note: str = ""  # what the model does not evaluate (the reason an Unknown gives)


class Env(Protocol):
    """What a target's effect may ask of the interpreter."""

    @property
    def ctx(self) -> NodeContext: ...

    def route(self, dst: IPAddress) -> Route: ...


# the effect of a target: a verdict ("ACCEPT", "DROP", "REJECT", "RETURN") or None to go on
TargetEffect = Callable[[Env, str, "PacketState", Opts], str | None]


@attrs.frozen
class TargetSpec:
    """A target (``-j NAME``) that is not a user chain.

    ``effect`` None: Linux has the target, the model does not evaluate it; a walk that reaches
    it ends inconclusive, unless it is ``passive`` (it changes nothing the model reads and never
    ends the walk, like LOG: the walk goes on). ``tables``/``hooks`` (None: any) are where the
    kernel accepts it, ``nft_anywhere`` when the nf_tables backend translates it natively and
    accepts it in every chain, ``backends`` which iptables backends accept it at all.
    ``terminal``: it ends the chain whenever it fires (what follows an unconditional one is
    unreachable).
    """

    name: str
    effect: TargetEffect | None = None
    options: tuple[OptionSpec, ...] | None = ()
    passive: bool = False
    terminal: bool = False
    tables: frozenset[str] | None = None
    hooks: frozenset[str] | None = None
    option_hooks: tuple[tuple[str, frozenset[str]], ...] = ()  # an option that narrows the hooks
    nft_anywhere: bool = False
    backends: frozenset[str] = frozenset({"legacy", "nft"})
    families: frozenset[int] = frozenset({4, 6})
    reads: frozenset[str] = frozenset()
    writes: frozenset[str] = frozenset()
    facts: frozenset[str] = frozenset()
    required: tuple[tuple[str, ...], ...] = ()
    check: Callable[[Opts], None] | None = None  # further validation (raises ValueError)
    note: str = ""


def parse_options(
    where: str, specs: tuple[OptionSpec, ...] | None, given: tuple[object, ...], family: int,
    required: tuple[tuple[str, ...], ...] = (),
) -> dict[str, Given]:  # fmt: skip
    """Parse a module's or target's options by their kinds; RuleError names ``where``."""
    if specs is None:
        return {o.name: Given(o.args, o.negated, o.value) for o in given}  # type: ignore[attr-defined]
    by_name = _index(specs)
    out: dict[str, Given] = {}
    for o in given:
        name: str = o.name  # type: ignore[attr-defined]
        spec = by_name.get(name)
        if spec is None:
            raise RuleError(f"{where}: unknown option {name!r}")
        if spec.name in out:
            raise RuleError(f"{where}: option {spec.name} given twice")
        negated: bool = o.negated  # type: ignore[attr-defined]
        if negated and not spec.negatable:
            raise RuleError(f"{where}: option {spec.name} cannot be negated")
        try:
            value = spec.kind.parse(o.args, family)  # type: ignore[attr-defined]
        except ValueError as e:
            raise RuleError(f"{where} {spec.name}: {e}") from None
        out[spec.name] = Given(value, negated, o.value)  # type: ignore[attr-defined]
    for group in required:
        have = [g for g in group if g in out]
        if len(have) != 1:
            names = ", ".join(group)
            raise RuleError(f"{where}: needs exactly one of {names}" + (f" (received {', '.join(have)})" if have else ""))
    return out


_INDEX: dict[tuple[OptionSpec, ...], dict[str, OptionSpec]] = {}


def _index(specs: tuple[OptionSpec, ...]) -> dict[str, OptionSpec]:
    d = _INDEX.get(specs)
    if d is None:
        d = {}
        for s in specs:
            d[s.name] = s
            for a in s.aliases:
                d[a] = s
        _INDEX[specs] = d
    return d
