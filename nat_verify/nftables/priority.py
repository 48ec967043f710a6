"""Base-chain priorities: names to numbers and back, as nft spells them.

nft accepts a standard name (``filter``, ``dstnat``...), optionally with an offset
(``dstnat - 10``), and lists a number under the name when one applies to the family and hook
and the number is within 10 of it (checked against nft 1.0.6: ``-110`` on prerouting lists as
``dstnat - 10``, on output as ``-110``; ``-111`` and ``-89`` stay numbers).
"""

from __future__ import annotations

# (name, value, hooks it applies to; None = every hook)
_INET: tuple[tuple[str, int, frozenset[str] | None], ...] = (
    ("raw", -300, None),
    ("mangle", -150, None),
    ("dstnat", -100, frozenset({"prerouting"})),
    ("filter", 0, None),
    ("security", 50, None),
    ("srcnat", 100, frozenset({"postrouting"})),
)
_BRIDGE: tuple[tuple[str, int, frozenset[str] | None], ...] = (
    ("dstnat", -300, frozenset({"prerouting"})),
    ("filter", -200, None),
    ("out", 100, frozenset({"output"})),
    ("srcnat", 300, frozenset({"postrouting"})),
)
_OTHER: tuple[tuple[str, int, frozenset[str] | None], ...] = (("filter", 0, None),)


def _table(family: str) -> tuple[tuple[str, int, frozenset[str] | None], ...]:
    if family in ("ip", "ip6", "inet"):
        return _INET
    if family == "bridge":
        return _BRIDGE
    return _OTHER


def value_of(name: str, family: str, hook: str) -> int | None:
    """The number a standard priority name stands for on this family and hook, or None."""
    for n, v, hooks in _table(family):
        if n == name and (hooks is None or hook in hooks):
            return v
    return None


def names(family: str, hook: str) -> list[str]:
    return [n for n, _, hooks in _table(family) if hooks is None or hook in hooks]


def spell(priority: int, family: str, hook: str) -> str:
    """How ``nft list`` prints a base chain's priority."""
    for n, v, hooks in _table(family):
        if hooks is not None and hook not in hooks:
            continue
        off = priority - v
        if off == 0:
            return n
        if 0 < off <= 10:
            return f"{n} + {off}"
        if -10 <= off < 0:
            return f"{n} - {-off}"
    return str(priority)
