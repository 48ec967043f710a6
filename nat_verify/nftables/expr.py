"""nftables expressions and statements as frozen values.

The shapes follow nft's own JSON schema (libnftables-json): a rule is a list of statements,
a statement holds expressions, and an expression is a selector of the packet (``Payload``,
``Meta``, ``Ct``, ``Fib``, ``Numgen``), a constant (``Value``, ``Prefix``, ``Range``), a
collection (``AnonSet``, ``SetRef``, ``Concat``, ``MapItem``) or an operation (``Binop``,
``MapLookup``). Following the JSON schema means the three forms users have (``nft -j list``,
``nft list`` and the ``add ...`` batch form) parse into one representation and render back
from it.

Constants keep the spelling the user gave where it carries meaning (addresses, symbols such as
``tcp``, ``new`` or ``local``); numbers are ``int`` (so ``0x4000`` and ``16384`` are the same
value). Anything the parser does not model is an ``Opaque`` expression or statement that keeps
its text (or JSON): the ruleset still loads, and whatever depends on it is ``inconclusive``.
"""

from __future__ import annotations

import attrs

# -- expressions ------------------------------------------------------------------------------


@attrs.frozen
class Payload:
    """A header field: ``ip saddr``, ``ip6 daddr``, ``tcp dport``, ``th dport``, ``ip protocol``."""

    protocol: str
    field: str


@attrs.frozen
class Meta:
    """``meta KEY`` (``l4proto``, ``mark``, ``iifname``, ``nfproto``...)."""

    key: str


@attrs.frozen
class Ct:
    """``ct KEY`` or ``ct DIR KEY`` (``state``, ``status``, ``mark``; ``original saddr``)."""

    key: str
    dir: str = ""
    family: str = ""  # "ip"/"ip6" in ``ct original ip saddr``


@attrs.frozen
class Fib:
    """``fib FLAG[ . FLAG...] RESULT``: a routing lookup (``fib daddr type``, ``fib saddr . iif oif``)."""

    flags: tuple[str, ...]
    result: str


@attrs.frozen
class Numgen:
    """``numgen random|inc mod N [offset K]``: a number in ``[K, K + N)``."""

    mode: str
    mod: int
    offset: int = 0


@attrs.frozen
class Value:
    """A constant: an address, a number, a symbol (``tcp``, ``new``, ``local``) or a string."""

    value: str | int | bool


@attrs.frozen
class Prefix:
    """``ADDR/LEN``."""

    addr: str
    length: int


@attrs.frozen
class Range:
    """``LO-HI`` (inclusive)."""

    lo: Expr
    hi: Expr


@attrs.frozen
class SetRef:
    """``@name``: a named set or map of the same table."""

    name: str


@attrs.frozen
class MapItem:
    """``KEY : VALUE`` inside an anonymous map or verdict map."""

    key: Expr
    value: Expr | Verdict


@attrs.frozen
class Elem:
    """A set element with attributes: ``KEY [timeout T] [expires T] [comment "c"]``."""

    val: Expr
    timeout: int | None = None  # seconds
    expires: int | None = None
    comment: str = ""


@attrs.frozen
class AnonSet:
    """``{ a, b, ... }``: an anonymous set, or an anonymous map when its items are ``MapItem``."""

    items: tuple[Expr | MapItem, ...]


@attrs.frozen
class Flags:
    """``a,b,c`` without braces: a list of flag symbols (``ct state established,related``)."""

    items: tuple[str | int, ...]


@attrs.frozen
class Concat:
    """``a . b . c``."""

    items: tuple[Expr, ...]


@attrs.frozen
class Binop:
    """``left OP right`` with OP one of ``& | ^ << >>`` (``meta mark & 0x4000``)."""

    op: str
    left: Expr
    right: Expr


@attrs.frozen
class MapLookup:
    """``KEY map DATA``: the value a map gives for a key (``dnat to numgen inc mod 2 map {...}``)."""

    key: Expr
    data: Expr


@attrs.frozen
class OpaqueExpr:
    """An expression the parser keeps without modelling it (``jhash ...``, ``rt mtu``...)."""

    text: str = ""
    json: str = ""


Expr = (
    Payload | Meta | Ct | Fib | Numgen | Value | Prefix | Range | SetRef | MapItem | Elem | AnonSet
    | Flags | Concat | Binop | MapLookup | OpaqueExpr
)

# -- statements -------------------------------------------------------------------------------

VERDICTS = ("accept", "drop", "continue", "return", "jump", "goto", "queue")
RELATIONAL = ("==", "!=", "<", ">", "<=", ">=", "in")


@attrs.frozen
class Verdict:
    """``accept``, ``drop``, ``continue``, ``return``, ``jump CHAIN``, ``goto CHAIN``, ``queue``."""

    kind: str
    target: str = ""


@attrs.frozen
class Match:
    """A relational expression: ``LEFT [OP] RIGHT``.

    ``op`` is as in nft's JSON: ``==`` for plain equality (and membership of ``@set`` or
    ``{...}``), ``!=``, the orderings, and ``in`` for a bitmask test (``ct state new`` means
    "the state has one of these bits").
    """

    left: Expr
    op: str
    right: Expr


@attrs.frozen
class VerdictMap:
    """``KEY vmap DATA``: the verdict the map gives for the key; no match continues."""

    key: Expr
    data: Expr


@attrs.frozen
class Reject:
    """``reject [with TYPE CODE]``; ``type`` ``""`` is the family default (port unreachable)."""

    type: str = ""  # "", "icmp", "icmpv6", "icmpx", "tcp reset"
    code: str = ""

    def canonical(self, family: str) -> Reject:
        """The family's default spelled out is the default (``reject with icmp
        port-unreachable`` in an ``ip`` table is ``reject``, as nft lists it)."""
        if self.code == "port-unreachable" and self.type == DEFAULT_REJECT.get(family):
            return Reject()
        return self


DEFAULT_REJECT = {"ip": "icmp", "ip6": "icmpv6", "inet": "icmpx", "bridge": "icmpx", "netdev": "icmpx"}


@attrs.frozen
class Nat:
    """``dnat``/``snat``/``masquerade``/``redirect`` with its address, port and flags."""

    kind: str
    family: str = ""  # "ip"/"ip6" in ``dnat ip to ...`` (inet tables)
    addr: Expr | None = None
    port: Expr | None = None
    flags: tuple[str, ...] = ()


@attrs.frozen
class Mangle:
    """``KEY set VALUE`` (``meta mark set meta mark | 0x4000``, ``ct mark set meta mark``)."""

    key: Expr
    value: Expr


@attrs.frozen
class SetUpdate:
    """``add|update|delete @set { ELEM }``: a rule that writes a set at run time."""

    op: str
    set: str
    elem: Expr


@attrs.frozen
class Counter:
    """``counter``; the counts are the kernel's run-time state, not part of the rule's meaning."""

    packets: int | None = attrs.field(default=None, eq=False)
    bytes: int | None = attrs.field(default=None, eq=False)
    name: str = ""  # ``counter name X``: a named counter object


@attrs.frozen
class Log:
    """``log`` with its options in order (``prefix``, ``level``, ``group``...)."""

    options: tuple[tuple[str, str | int], ...] = ()


@attrs.frozen
class Notrack:
    pass


@attrs.frozen
class Opaque:
    """A statement the parser keeps without modelling it (``limit``, ``quota``, ``queue``...)."""

    text: str = ""
    json: str = ""


Stmt = Verdict | Match | VerdictMap | Reject | Nat | Mangle | SetUpdate | Counter | Log | Notrack | Opaque
