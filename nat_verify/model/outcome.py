"""What happens to a packet: an exact distribution over terminal outcomes.

Flow -> Trace -> Outcome -> Step, after pybatfish: a ``Trace`` is the result of one packet,
holding ``Outcome`` s whose probabilities (exact ``Fraction`` s) sum to 1; each outcome lists
the rules that fired (``Step``) with the dump line they came from, and shows NAT as a field
diff (``destination`` / ``source`` after translation, ``dnat``, ``masquerade``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

import attrs

from nat_verify.model.cluster import IPAddress
from nat_verify.model.packet import Packet, format_endpoint

Verdict = Literal["accept", "forward", "drop", "reject", "inconclusive"]


@attrs.frozen(cache_hash=True)
class Step:
    """One rule that fired (or a chain policy, with ``rule`` 0)."""

    table: str
    chain: str
    rule: int  # 1-based position in the chain; 0 = the chain's policy
    line: int = 0  # line in the dump, 0 when unknown
    target: str = ""

    def __str__(self) -> str:
        return f"{self.table} {self.chain} {self.rule if self.rule else 'policy'}"


@attrs.frozen
class Outcome:
    probability: Fraction
    verdict: Verdict
    dst: IPAddress
    dport: int
    src: IPAddress
    sport: int
    dnat: bool = False
    masquerade: bool = False  # source rewritten by MASQUERADE (or SNAT: see ``snat``)
    snat: bool = False
    reject_with: str = ""  # e.g. icmp-port-unreachable
    path: tuple[Step, ...] = ()
    reason: str = ""  # why inconclusive, or a note
    recent_set: tuple[tuple[str, str], ...] = ()  # (list name, source address) added by --set
    mark: int = 0

    @property
    def destination(self) -> str:
        return format_endpoint(self.dst, self.dport)

    @property
    def source(self) -> str:
        return format_endpoint(self.src, self.sport)

    def to_json(self) -> dict[str, object]:
        d: dict[str, object] = {
            "probability": _frac(self.probability),
            "verdict": self.verdict,
            "destination": self.destination,
            "source": self.source,
            "dnat": self.dnat,
            "masquerade": self.masquerade,
            "path": [str(s) for s in self.path],
            "lines": [s.line for s in self.path],
        }
        if self.reject_with:
            d["reject_with"] = self.reject_with
        if self.snat:
            d["snat"] = True
        if self.reason:
            d["reason"] = self.reason
        return d


def _frac(p: Fraction) -> str:
    return str(p.numerator) if p.denominator == 1 else f"{p.numerator}/{p.denominator}"


@attrs.frozen
class Trace:
    packet: Packet
    outcomes: tuple[Outcome, ...]

    @property
    def inconclusive(self) -> bool:
        return any(o.verdict == "inconclusive" for o in self.outcomes)

    def to_json(self) -> dict[str, object]:
        return {
            "format": "nat_verify.trace/v1",
            "packet": self.packet.to_json(),
            "outcomes": [o.to_json() for o in self.outcomes],
        }


Status = Literal["proved", "holds", "violated", "inconclusive"]


@attrs.frozen
class Finding:
    """A counterexample (or an inconclusive case) for one invariant."""

    invariant: str
    service: str  # ns/name:port (or ns/name) or "" for node-wide findings
    node: str
    message: str
    severity: Literal["error", "warning", "note"] = "error"
    packet: Packet | None = None
    expected: str = ""
    actual: str = ""
    path: tuple[Step, ...] = ()
    location: str = ""  # file:line of the object or rule at fault

    def to_json(self) -> dict[str, object]:
        return {
            "invariant": self.invariant,
            "service": self.service,
            "node": self.node,
            "severity": self.severity,
            "message": self.message,
            "counterexample": self.packet.to_json() if self.packet else None,
            "expected": self.expected,
            "actual": self.actual,
            "path": [str(s) for s in self.path],
            "lines": [s.line for s in self.path],
            "location": self.location,
        }


@attrs.frozen
class Result:
    invariant: str
    service: str
    node: str
    status: Status
    engine: Literal["z3", "hypothesis", "concrete", "exhaustive"]
    checked: int = 0  # packets (or packet classes) examined
    cluster: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "invariant": self.invariant,
            "service": self.service,
            "node": self.node,
            "status": self.status,
            "engine": self.engine,
            "checked": self.checked,
            "cluster": self.cluster,
        }
