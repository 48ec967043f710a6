"""The planted bugs themselves, checked without the invariant checker.

A quality suite is only meaningful if every mutation really plants the defect it claims:
the edit applies to the dump it was written for, the result still loads (or, for a jump to a
missing chain, is refused at the right line), and the witness packet's outcomes in the
netfilter model differ from those of the correct dump in the way the docstring says.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from nat_verify.check.nodectx import node_context
from nat_verify.model.outcome import Trace
from nat_verify.netfilter.interpreter import Interpreter, RecentState
from nat_verify.netfilter.parse import DumpError, parse
from tests.quality.bugs import BUGS, PlantedBug, by_name, cluster_of, dumps

IDS = [b.name for b in BUGS]


def _trace(bug: PlantedBug, text: str) -> Trace:
    assert bug.witness is not None
    ctx = node_context(cluster_of(bug.cluster), bug.node, bug.family)
    recent = RecentState(bug.witness_recent) if bug.witness_recent else None
    return Interpreter(parse(text, family=bug.family), ctx).trace(bug.witness, recent)


Summary = tuple[Fraction, str, str, str, bool, int, tuple[tuple[str, str], ...]]


def _summary(tr: Trace) -> list[Summary]:
    # what a packet experiences; rule numbers and dump lines are left out on purpose (an edit
    # shifts them without changing behaviour)
    return sorted(
        (o.probability, o.verdict, o.destination, o.source, o.masquerade, o.mark, o.recent_set)
        for o in tr.outcomes
    )


def test_registry_is_large_and_names_are_unique() -> None:
    assert len(BUGS) >= 25
    assert len(set(IDS)) == len(IDS)
    for b in BUGS:
        assert b.mutate.__doc__, f"{b.name}: the mutation must say what real-world bug it stands for"
        for entry in b.expected:
            for inv in entry.split("|"):
                assert inv.startswith("NV") and len(inv) == 5, (b.name, inv)


@pytest.mark.parametrize("bug", BUGS, ids=IDS)
def test_mutation_applies(bug: PlantedBug) -> None:
    good, bad = dumps(bug)
    if bug.mutate.__name__ == "unchanged":
        assert bad == good
        return
    assert bad != good
    parse(good, family=bug.family)
    if bug.parse_error:
        with pytest.raises(DumpError):
            parse(bad, family=bug.family)
    else:
        parse(bad, family=bug.family)


@pytest.mark.parametrize("bug", [b for b in BUGS if b.witness is not None], ids=lambda b: b.name)
def test_witness_shows_the_defect(bug: PlantedBug) -> None:
    good, bad = dumps(bug)
    before, after = _summary(_trace(bug, good)), _summary(_trace(bug, bad))
    assert before != after
    assert not any(o[1] == "inconclusive" for o in before + after)


def test_jump_to_missing_chain_is_refused_at_the_jump() -> None:
    # iptables-restore refuses a table with a jump to an undeclared chain, and so does the
    # parser: the error names the line of the KUBE-SVC rule that still jumps there.
    bug = by_name("jump-to-missing-chain")
    _, bad = dumps(bug)
    with pytest.raises(DumpError) as e:
        parse(bad, source="node-1.rules")
    line = bad.split("\n")[e.value.line - 1]
    assert line.startswith("-A KUBE-SVC-") and "-> 10.42.2.3:8080" in line


def test_five_decimal_shares_are_off_by_thousands_of_kernel_steps() -> None:
    # The reason the 0.33333 cascade is a bug and 0.3333333333 is not: the kernel stores
    # round(p * 2^31); 1/3 is within one step of the exact share, 0.33333 about 7000 away.
    bug = by_name("five-decimal-probabilities")
    good, bad = dumps(bug)
    step = Fraction(1, 2**31)
    first = "10.42.1.31:8080"
    p_good = next(o.probability for o in _trace(bug, good).outcomes if o.destination == first)
    p_bad = next(o.probability for o in _trace(bug, bad).outcomes if o.destination == first)
    assert abs(p_good - Fraction(1, 3)) < step
    assert abs(p_bad - Fraction(1, 3)) > 7000 * step
