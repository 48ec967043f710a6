"""The walk state: what the interpreter knows about one branch of one packet's walk.

``PacketState`` is the only mutable object of the model, and deliberately so: it is copied
whenever the walk forks (a random match) and written by targets as the packet moves through
the hooks. Match predicates (``predicate``) read it, target entries (``targets``) write it
through ``write`` so that chain summaries (``summary``) replay exactly the fields a walk
wrote. ``RecentState`` is the frozen value the caller hands in for ``xt_recent`` lists.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

import attrs

from nat_verify.model.cluster import IPAddress
from nat_verify.model.outcome import Step


@attrs.frozen
class RecentState:
    """``xt_recent`` lists: (list name, address) -> seconds since the address was last set."""

    entries: tuple[tuple[tuple[str, str], float], ...] = ()

    def as_dict(self) -> dict[tuple[str, str], float]:
        return dict(self.entries)

    @classmethod
    def of(cls, d: Mapping[tuple[str, str], float]) -> RecentState:
        return cls(tuple(sorted(d.items())))


class PacketState:
    """The mutable walk state of one branch; copied when the walk forks."""

    __slots__ = (
        "src", "sport", "dst", "dport", "proto", "mark", "ctmark", "in_iface", "out_iface",
        "prob", "path", "dnat", "snat_done", "masq", "untracked", "recent", "recent_set",
        "orig_src", "orig_dst", "orig_sport", "orig_dport", "reject_with", "reason", "wlog",
    )  # fmt: skip

    src: IPAddress
    sport: int
    dst: IPAddress
    dport: int
    proto: str
    mark: int
    ctmark: int
    in_iface: str
    out_iface: str
    prob: Fraction
    path: tuple[Step, ...]
    dnat: bool
    snat_done: bool
    masq: bool
    untracked: bool
    recent: dict[tuple[str, str], float]
    recent_set: tuple[tuple[str, str], ...]
    orig_src: IPAddress
    orig_dst: IPAddress
    orig_sport: int
    orig_dport: int
    reject_with: str
    reason: str
    wlog: tuple[str, ...]  # the fields targets wrote (chain summaries replay them)

    def copy(self) -> PacketState:
        # spelled out: this is the interpreter's hottest function (every fork, every replay)
        n = PacketState.__new__(PacketState)
        n.src, n.sport, n.dst, n.dport, n.proto = self.src, self.sport, self.dst, self.dport, self.proto
        n.mark, n.ctmark, n.in_iface, n.out_iface = self.mark, self.ctmark, self.in_iface, self.out_iface
        n.prob, n.path, n.dnat, n.snat_done, n.masq = self.prob, self.path, self.dnat, self.snat_done, self.masq
        n.untracked, n.recent, n.recent_set = self.untracked, self.recent, self.recent_set
        n.orig_src, n.orig_dst, n.orig_sport, n.orig_dport = self.orig_src, self.orig_dst, self.orig_sport, self.orig_dport
        n.reject_with, n.reason, n.wlog = self.reject_with, self.reason, self.wlog
        return n

    def scaled(self, p: Fraction) -> PacketState:
        n = self.copy()
        n.prob = self.prob * p
        return n

    def write(self, field: str, value: object) -> None:
        """Write a packet field and log it (chain summaries replay exactly the logged writes).

        The log holds each field once per summarised walk (a walk starts with an empty log,
        see ``Interpreter._replay``): a chain of 10,000 MARK rules logs "mark" once."""
        setattr(self, field, value)
        if field not in self.wlog:
            self.wlog = (*self.wlog, field)

    def recent_add(self, key: tuple[str, str]) -> None:
        self.recent = {**self.recent, key: 0.0}
        if key not in self.recent_set:
            self.recent_set = (*self.recent_set, key)

    def recent_remove(self, key: tuple[str, str]) -> None:
        self.recent = {k: v for k, v in self.recent.items() if k != key}

    def recent_age(self, key: tuple[str, str]) -> float | None:
        return self.recent.get(key)


# the fields of a walk state, by kind (the predicate language and the summaries use these names)
ADDR_FIELDS = ("src", "dst", "orig_src", "orig_dst")
PORT_FIELDS = ("sport", "dport", "orig_sport", "orig_dport")
MARK_FIELDS = ("mark", "ctmark")
IFACE_FIELDS = ("in_iface", "out_iface")
CT_FIELDS = ("dnat", "snat_done", "untracked")
PLAIN_FIELDS = ("proto", *MARK_FIELDS, *IFACE_FIELDS, *CT_FIELDS, "masq")
# fields a walk may change (besides prob, path, recent and recent_set, handled apart)
STATE_FIELDS = ADDR_FIELDS + PORT_FIELDS + PLAIN_FIELDS + ("reject_with", "reason")
