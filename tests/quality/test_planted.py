"""The quality suite: nat-verify must find every planted bug, with the right invariant ID.

For each ``PlantedBug`` (``bugs.py``): ``check_ruleset`` on the mutated dump reports an error
(or, where the bug is a hygiene issue, a warning) for every expected invariant, each with a
concrete counterexample packet where the invariant is about packets; the correct dump of the
same cluster and node reports no error at all (no false positive), and by-design behaviour is
not flagged.
"""

from __future__ import annotations

import ipaddress
from fractions import Fraction

import pytest

from nat_verify.check import check_ruleset
from nat_verify.check.nodectx import node_context
from nat_verify.model.outcome import Finding, Trace
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.parse import parse
from tests.quality.bugs import BUGS, PlantedBug, alternatives, by_name, cluster_of, dumps

IDS = [b.name for b in BUGS]
CHECKED = [b for b in BUGS if not b.parse_error]

# Invariants about the ruleset as a whole (structure, drift): their findings need not carry a
# packet. Every other invariant is a statement about packets and must name one.
WHOLE_RULESET = frozenset({"NV014", "NV015"})
# Affinity is about a second connection after the first: one packet alone cannot show it.
STATEFUL = frozenset({"NV011"})
MARTIAN_V4 = (
    ipaddress.ip_network("0.0.0.0/8"),
    ipaddress.ip_network("224.0.0.0/4"),
    ipaddress.ip_network("255.255.255.255/32"),
)


def _summary(tr: Trace) -> list[tuple[Fraction, str, str, str, bool, int]]:
    return sorted((o.probability, o.verdict, o.destination, o.source, o.masquerade, o.mark) for o in tr.outcomes)


def _findings(bug: PlantedBug, text: str) -> tuple[Finding, ...]:
    report = check_ruleset(cluster_of(bug.cluster), bug.node, parse(text, family=bug.family))
    return report.findings


def _describe(findings: tuple[Finding, ...]) -> str:
    return "\n".join(f"  {f.severity} {f.invariant} {f.service}: {f.message}" for f in findings) or "  (none)"


@pytest.mark.parametrize("bug", [b for b in CHECKED if b.expected], ids=lambda b: b.name)
def test_planted_bug_is_caught(bug: PlantedBug) -> None:
    _, bad = dumps(bug)
    findings = _findings(bug, bad)
    caught = [f for f in findings if f.severity in bug.severities]
    for entry in bug.expected:
        wanted = alternatives(entry)
        hits = [f for f in caught if f.invariant in wanted]
        assert hits, f"{bug.name}: expected {entry} ({'/'.join(bug.severities)}), got:\n{_describe(findings)}"
        if not wanted <= WHOLE_RULESET:
            with_packet = [f for f in hits if f.packet is not None and f.invariant not in WHOLE_RULESET]
            assert with_packet, f"{bug.name}: {entry} reported without a counterexample packet"
            if bug.service:
                assert any(f.service == bug.service for f in with_packet), (
                    f"{bug.name}: {entry} names {sorted({f.service for f in with_packet})}, not {bug.service}"
                )


@pytest.mark.parametrize(
    "bug", [b for b in CHECKED if any(not alternatives(e) <= STATEFUL | WHOLE_RULESET for e in b.expected)],
    ids=lambda b: b.name,
)
def test_counterexample_shows_the_defect(bug: PlantedBug) -> None:
    # Every counterexample packet of an expected packet invariant is a real witness: traced
    # through the correct dump and the mutated one, it has different outcomes.
    good, bad = dumps(bug)
    wanted = set().union(*(alternatives(e) for e in bug.expected)) - STATEFUL - WHOLE_RULESET
    hits = [f for f in _findings(bug, bad) if f.invariant in wanted and f.packet is not None]
    assert hits
    ctx = node_context(cluster_of(bug.cluster), bug.node, bug.family)
    before = Interpreter(parse(good, family=bug.family), ctx)
    after = Interpreter(parse(bad, family=bug.family), ctx)
    for f in hits:
        assert f.packet is not None
        assert _summary(before.trace(f.packet)) != _summary(after.trace(f.packet)), (
            f"{bug.name}: {f.invariant} counterexample {f.packet} behaves the same in the correct dump"
        )


@pytest.mark.parametrize("bug", [b for b in CHECKED if b.expected], ids=lambda b: b.name)
def test_counterexample_sources_are_routable(bug: PlantedBug) -> None:
    # A counterexample must be replayable on a real node (the kernel oracle). Linux drops, after
    # nat PREROUTING, packets whose source is a martian: 0.0.0.0/8, multicast, limited
    # broadcast (ip_route_input_slow), and loopback arriving on a non-loopback interface.
    _, bad = dumps(bug)
    for f in _findings(bug, bad):
        if f.packet is None or f.packet.origin == "host":
            continue
        src = f.packet.src
        assert not (src.is_multicast or src.is_loopback or src.is_unspecified), (bug.name, str(f.packet))
        if isinstance(src, ipaddress.IPv4Address):
            assert not any(src in net for net in MARTIAN_V4), f"{bug.name}: {f.invariant} counterexample {f.packet} has a martian source"


@pytest.mark.parametrize("bug", CHECKED, ids=lambda b: b.name)
def test_correct_dump_has_no_error(bug: PlantedBug) -> None:
    good, _ = dumps(bug)
    errors = [f for f in _findings(bug, good) if f.severity == "error"]
    assert not errors, f"{bug.cluster} {bug.node}: false positives:\n{_describe(tuple(errors))}"


@pytest.mark.parametrize("bug", [b for b in CHECKED if b.not_flagged], ids=lambda b: b.name)
def test_by_design_behaviour_is_not_flagged(bug: PlantedBug) -> None:
    _, bad = dumps(bug)
    flagged = [f for f in _findings(bug, bad) if f.invariant in bug.not_flagged]
    assert not flagged, f"{bug.name}: flagged by design behaviour:\n{_describe(tuple(flagged))}"


def test_counterexample_of_a_packet_bug_reproduces_in_the_model() -> None:
    # The packet a finding names must really show the defect: traced through the mutated
    # dump it reaches the wrong place (here: the Service port instead of the targetPort).
    bug = by_name("dnat-to-service-port")
    _, bad = dumps(bug)
    finding = next(f for f in _findings(bug, bad) if f.invariant == "NV001" and f.severity == "error")
    assert finding.packet is not None
    ctx = node_context(cluster_of(bug.cluster), bug.node, bug.family)
    trace = Interpreter(parse(bad), ctx).trace(finding.packet)
    assert any(o.destination == "10.42.1.7:80" for o in trace.outcomes)
