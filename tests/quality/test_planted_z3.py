"""The quality suite with the Z3 engine: every planted bug is caught with the right invariant,
by a counterexample Z3 found and the interpreter replayed; no correct dump has an error.

Same bugs and expectations as ``test_planted`` (which runs the exhaustive engine).
"""

from __future__ import annotations

import pytest

from nat_verify.check.nodectx import node_context
from nat_verify.model.outcome import Finding
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.parse import parse
from nat_verify.symbolic.engine import check_ruleset_z3
from tests.quality.bugs import PlantedBug, alternatives, cluster_of, dumps
from tests.quality.test_planted import CHECKED, STATEFUL, WHOLE_RULESET, _describe, _summary


def _findings(bug: PlantedBug, text: str) -> tuple[Finding, ...]:
    report = check_ruleset_z3(cluster_of(bug.cluster), bug.node, parse(text, family=bug.family))
    assert all(r.engine == "z3" for r in report.results)
    return report.findings


@pytest.mark.parametrize("bug", [b for b in CHECKED if b.expected], ids=lambda b: b.name)
def test_planted_bug_is_caught_by_z3(bug: PlantedBug) -> None:
    good, bad = dumps(bug)
    findings = _findings(bug, bad)
    assert not [f for f in findings if "nat-verify bug" in f.message], _describe(findings)
    caught = [f for f in findings if f.severity in bug.severities]
    ctx = node_context(cluster_of(bug.cluster), bug.node, bug.family)
    before = Interpreter(parse(good, family=bug.family), ctx)
    after = Interpreter(parse(bad, family=bug.family), ctx)
    for entry in bug.expected:
        wanted = alternatives(entry)
        hits = [f for f in caught if f.invariant in wanted]
        assert hits, f"{bug.name}: expected {entry} ({'/'.join(bug.severities)}), got:\n{_describe(findings)}"
        if wanted <= WHOLE_RULESET:
            continue
        with_packet = [f for f in hits if f.packet is not None]
        assert with_packet, f"{bug.name}: {entry} reported without a counterexample packet"
        if bug.service:
            assert any(f.service == bug.service for f in with_packet), bug.name
        if not wanted & STATEFUL:
            # the packet Z3 found shows the defect: the correct dump treats it otherwise
            assert any(_summary(before.trace(f.packet)) != _summary(after.trace(f.packet)) for f in with_packet if f.packet)


@pytest.mark.parametrize("bug", CHECKED, ids=lambda b: b.name)
def test_correct_dump_has_no_error_with_z3(bug: PlantedBug) -> None:
    good, _ = dumps(bug)
    errors = [f for f in _findings(bug, good) if f.severity == "error"]
    assert not errors, f"{bug.cluster} {bug.node}: false positives:\n{_describe(tuple(errors))}"
