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


def probability_text(p: Fraction) -> str:
    """A probability as a person reads it: ``0.5000``, ``0.1000``; the exact value is for JSON.

    kube-proxy's cascade gives the kernel thresholds in steps of 2^-31, so the exact shares are
    fractions with 30-digit terms; four decimals show a skew that matters and hide the rounding.
    """
    if p == 0 or p >= Fraction(1, 10_000):
        return f"{float(p):.4f}"
    return f"{float(p):.1e}"


@attrs.frozen
class Trace:
    packet: Packet
    outcomes: tuple[Outcome, ...]

    @property
    def inconclusive(self) -> bool:
        return any(o.verdict == "inconclusive" for o in self.outcomes)

    def to_json(self) -> dict[str, object]:
        """The ``nat_verify.trace/v1`` document.

        Where the packet is DNATed to more than one endpoint, each DNAT outcome also says what a
        uniform choice would give (``uniform``: the DNAT mass split n ways) and how far its exact
        probability is from that (``from_uniform``), so a skewed cascade shows without arithmetic.
        """
        outcomes = [o.to_json() for o in self.outcomes]
        dnat = [i for i, o in enumerate(self.outcomes) if o.dnat]
        if len(dnat) > 1:
            uniform = sum((self.outcomes[i].probability for i in dnat), Fraction(0)) / len(dnat)
            for i in dnat:
                outcomes[i]["uniform"] = _frac(uniform)
                outcomes[i]["from_uniform"] = _frac(self.outcomes[i].probability - uniform)
        return {
            "format": "nat_verify.trace/v1",
            "packet": self.packet.to_json(),
            "outcomes": outcomes,
        }


Status = Literal["proved", "holds", "violated", "inconclusive"]

# How much a finding matters: an error fails the run (exit code 1); a warning is a risk the
# configuration chose or allowed; a note is information (a construct the model skipped ...).
Severity = Literal["error", "warning", "note"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "note")


@attrs.frozen
class Finding:
    """A counterexample (or an inconclusive case) for one invariant."""

    invariant: str
    service: str  # ns/name:port (or ns/name) or "" for node-wide findings
    node: str
    message: str
    severity: Severity = "error"
    packet: Packet | None = None
    expected: str = ""
    actual: str = ""
    path: tuple[Step, ...] = ()
    location: str = ""  # file:line of the object or rule at fault
    # evidence for the reader, added where the ruleset is at hand (nat_verify.report.evidence):
    rules: tuple[str, ...] = ()  # the text of each step's rule, as the dump has it ("" unknown)
    outcome: Outcome | None = None  # the outcome of ``packet`` that took ``path``

    def to_json(self) -> dict[str, object]:
        d = self._core_json()
        if any(s.target for s in self.path):
            d["targets"] = [s.target for s in self.path]
        if any(self.rules):
            d["rules"] = list(self.rules)
        if self.outcome is not None:
            o = self.outcome.to_json()
            del o["path"], o["lines"]
            d["outcome"] = o
        return d

    def _core_json(self) -> dict[str, object]:
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
    reason: str = ""  # inconclusive: what the model could not decide (a rule, a missing fact)

    def to_json(self) -> dict[str, object]:
        doc: dict[str, object] = {
            "invariant": self.invariant,
            "service": self.service,
            "node": self.node,
            "status": self.status,
            "engine": self.engine,
            "checked": self.checked,
            "cluster": self.cluster,
        }
        if self.reason:
            doc["reason"] = self.reason
        return doc
