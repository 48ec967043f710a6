"""Hook order as data: which base chains a packet meets at each netfilter hook, in order.

The kernel runs, at each hook, every registered base chain in order of priority (lowest
first). iptables registers its tables' built-in chains at fixed priorities; nftables base
chains register at any (hook, priority) and interleave with them. The interpreter walks the
entries of ``HookTable.at(hook)`` in order, so adding nftables chains is adding entries.

``nat`` entries are conntrack's NAT: they see only the first packet of a connection, never an
untracked one (``NOTRACK``), and not a locally generated packet on its way back in through
``lo`` (its NAT was decided on the way out).
"""

from __future__ import annotations

import attrs

PREROUTING, INPUT, FORWARD, OUTPUT, POSTROUTING = "PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"
HOOKS = (PREROUTING, INPUT, FORWARD, OUTPUT, POSTROUTING)

# iptables' priorities (include/uapi/linux/netfilter_ipv4.h, the same for IPv6)
PRI_RAW, PRI_MANGLE, PRI_DSTNAT, PRI_FILTER, PRI_SECURITY, PRI_SRCNAT = -300, -150, -100, 0, 50, 100


@attrs.frozen(order=True)
class HookEntry:
    """The base chain ``(table, chain)`` registered at ``hook`` with ``priority``."""

    hook: str
    priority: int
    table: str
    chain: str
    nat: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.table, self.chain)


@attrs.frozen
class HookTable:
    entries: tuple[HookEntry, ...]

    def at(self, hook: str, *, nat: bool = True) -> tuple[HookEntry, ...]:
        """The entries at ``hook`` in the order the kernel runs them (``nat=False``: without
        the NAT chains)."""
        es = [e for e in self.entries if e.hook == hook and (nat or not e.nat)]
        # a stable sort: equal priorities run in registration order, as in the kernel
        return tuple(sorted(es, key=lambda e: e.priority))

    def hooks_of(self, table: str, chain: str) -> frozenset[str]:
        """The hooks at which base chain (table, chain) runs (empty: not a base chain)."""
        return frozenset(e.hook for e in self.entries if e.table == table and e.chain == chain)

    def with_entries(self, extra: tuple[HookEntry, ...]) -> HookTable:
        return HookTable(self.entries + extra)


def _iptables() -> HookTable:
    rows = [
        (PREROUTING, PRI_RAW, "raw"), (PREROUTING, PRI_MANGLE, "mangle"), (PREROUTING, PRI_DSTNAT, "nat"),
        (INPUT, PRI_MANGLE, "mangle"), (INPUT, PRI_FILTER, "filter"), (INPUT, PRI_SECURITY, "security"),
        (INPUT, PRI_SRCNAT, "nat"),
        (FORWARD, PRI_MANGLE, "mangle"), (FORWARD, PRI_FILTER, "filter"), (FORWARD, PRI_SECURITY, "security"),
        (OUTPUT, PRI_RAW, "raw"), (OUTPUT, PRI_MANGLE, "mangle"), (OUTPUT, PRI_DSTNAT, "nat"),
        (OUTPUT, PRI_FILTER, "filter"), (OUTPUT, PRI_SECURITY, "security"),
        (POSTROUTING, PRI_MANGLE, "mangle"), (POSTROUTING, PRI_SRCNAT, "nat"),
    ]  # fmt: skip
    return HookTable(tuple(HookEntry(h, p, t, h, nat=t == "nat") for h, p, t in rows))


IPTABLES = _iptables()
