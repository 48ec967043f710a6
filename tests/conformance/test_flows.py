"""kube-proxy's own packet-flow tests, run through the netfilter model.

Expected values come from two places: the flows' ``output``/``masq`` fields (what upstream's
test tracer expects) and ``kernel/observations.json`` (what the real kernel did with the same
rules and packets). Where upstream's simplified tracer and the kernel would differ, the model
follows the kernel, and the test says so explicitly:

* upstream's tracer never matches ``--rcheck``, ``--mark`` or ``--ctstate`` and runs filter
  chains directly; the model walks the real hooks (INPUT/FORWARD/OUTPUT with their
  ``--ctstate NEW`` guards), which is why REJECT/DROP/ACCEPT are reached the kernel's way;
* upstream's ``masq`` flag means "jumped to KUBE-MARK-MASQ"; the model reports real
  MASQUERADE in nat POSTROUTING. For a dropped or rejected packet there is no POSTROUTING,
  so the flag is compared with the masquerade mark still on the packet;
* the legacy tracer ignores the protocol; the model (like the kernel) does not;
* a pod's packet to 127.0.0.1 never reaches the node (it stays on the pod's loopback): the
  model says so, which agrees with "no rule matched".
"""

from __future__ import annotations

from typing import Any

import pytest

from nat_verify.model.outcome import Outcome
from nat_verify.netfilter.interpreter import Interpreter, RecentState
from nat_verify.netfilter.parse import parse
from nat_verify.netfilter.render import render_rule
from nat_verify.netfilter.saveform import to_save_form
from tests.conformance import corpus

FLOWS = corpus.flows()
IDS = [f"{c['_file'].split('__', 1)[1]}::{f['name']}" for c, f in FLOWS]
OBS = corpus.observations()
MASQ_MARK = 0x4000


def _trace(case: dict[str, Any], flow: dict[str, Any], recent: RecentState | None = None) -> tuple[Interpreter, tuple[Outcome, ...]]:
    rs = parse(corpus.dump_with_implicit_rules(case), source=case["_file"])
    it = Interpreter(rs, corpus.node_context(case))
    return it, it.trace(corpus.packet(case, flow), recent).outcomes


def test_corpus_is_complete() -> None:
    assert len({c["_file"] for c, _ in FLOWS}) == 29
    assert len(FLOWS) == 78
    assert len(OBS) == 78


@pytest.mark.parametrize(("case", "flow"), FLOWS, ids=IDS)
def test_flow_matches_upstream_expectation(case: dict[str, Any], flow: dict[str, Any]) -> None:
    _, outcomes = _trace(case, flow)
    exp = corpus.expected(flow)
    assert outcomes, "no outcome"
    assert sum(o.probability for o in outcomes) == 1
    assert not [o for o in outcomes if o.verdict == "inconclusive"], [o.reason for o in outcomes]
    if exp.kind == "dnat":
        assert {o.destination for o in outcomes} == exp.endpoints
        for o in outcomes:
            assert o.dnat and o.verdict in ("forward", "accept")
            assert o.masquerade == exp.masq, o.path
    elif exp.kind in ("REJECT", "DROP"):
        for o in outcomes:
            assert o.verdict == exp.kind.lower()
            assert bool(o.mark & MASQ_MARK) == exp.masq
            if exp.kind == "REJECT":
                # kube-proxy's REJECT has no --reject-with: the default, ICMP port unreachable
                assert o.reject_with == "icmp-port-unreachable"
    elif exp.kind == "ACCEPT":
        for o in outcomes:
            assert o.verdict == "accept"
            assert any(s.table == "filter" and s.target == "ACCEPT" for s in o.path)
    else:
        for o in outcomes:
            assert not o.dnat
            assert o.verdict in ("forward", "accept")
            assert o.masquerade is False


def _kernel_key(outcomes: tuple[Outcome, ...]) -> tuple[str, set[str], bool]:
    verdicts = {o.verdict for o in outcomes}
    assert len(verdicts) == 1
    v = verdicts.pop()
    if any(o.dnat for o in outcomes):
        kv = "DNAT"
    elif v == "reject":
        kv = "REJECT"
    elif v == "drop":
        kv = "DROP"
    elif any(s.table == "filter" and s.target == "ACCEPT" for o in outcomes for s in o.path):
        kv = "ACCEPT"
    elif any("never reaches the node" in o.reason for o in outcomes):
        kv = "NEVER_REACHED_NODE"
    else:
        kv = "NO_MATCH"
    dests = {o.destination for o in outcomes if o.dnat}
    masq = any(o.masquerade for o in outcomes)
    return kv, dests, masq


@pytest.mark.parametrize(("case", "flow"), FLOWS, ids=IDS)
def test_flow_matches_kernel_first_connection(case: dict[str, Any], flow: dict[str, Any]) -> None:
    """The real kernel's answer for a client's first connection (affinity lists empty)."""
    obs = OBS[(case["_file"], flow["name"])]
    kern = obs["kernel_with_affinity_reset_each_probe"] or obs["kernel"]
    _, outcomes = _trace(case, flow)
    verdict, dests, masq = _kernel_key(outcomes)
    assert verdict == kern["verdict"]
    if verdict == "DNAT":
        # 60 probes a flow: every endpoint of a 2- or 3-way cascade was seen
        kernel_dests = set(kern.get("destination_counts") or {}) or set(kern["destinations"])
        assert dests == kernel_dests
        assert masq == kern["masq"]


def _save_lines(case: dict[str, Any]) -> dict[tuple[str, int], str]:
    rs = to_save_form(parse(corpus.dump_with_implicit_rules(case), source=case["_file"]))
    return {(t.name, r.line): f"{t.name} {render_rule(r)}" for t in rs.tables for c in t.chains for r in c.rules}


def _kernel_hits(obs: dict[str, Any]) -> set[str]:
    hits = set()
    for h in obs["details"]["rules_hit_counters"]:
        table, rest = h.split(" [", 1)
        rule = rest.split("] ", 1)[1]
        # Counters also move for the packets the probe provoked: the node's own ICMP errors and
        # RSTs (filter OUTPUT, for probes that did not start on the node) and the replies of the
        # connection (ctstate RELATED,ESTABLISHED). The model traces the probe itself.
        if obs["details"]["origin"] != "node" and table == "filter" and rule.startswith("-A OUTPUT "):
            continue
        if "--ctstate RELATED,ESTABLISHED -j ACCEPT" in rule:
            continue
        hits.add(f"{table} {rule}")
    return hits


@pytest.mark.parametrize(("case", "flow"), FLOWS, ids=IDS)
def test_rule_path_matches_kernel_counters(case: dict[str, Any], flow: dict[str, Any]) -> None:
    """The rules the model says fired are exactly the rules whose kernel counters moved.

    With sessionAffinity the kernel's 60 probes came from one client: the first connection
    chose an endpoint at random and ran ``recent --set``; the other 59 matched that endpoint's
    ``--rcheck`` rule. The model replays exactly that: the first connection's branch to the
    endpoint the kernel chose, then a second connection with the list entry it set.
    """
    obs = OBS[(case["_file"], flow["name"])]
    lines = _save_lines(case)
    it, outcomes = _trace(case, flow)
    kernel = _kernel_hits(obs)
    sticky = obs["kernel"]["verdict"] == "DNAT" and any(o.recent_set for o in outcomes)
    if sticky:
        chosen = obs["kernel"]["destinations"]
        assert len(chosen) == 1
        first = [o for o in outcomes if o.destination == chosen[0]]
        assert len(first) == 1
        recent = RecentState.of({k: 1.0 for k in first[0].recent_set})
        second = it.trace(corpus.packet(case, flow), recent).outcomes
        assert {o.destination for o in second} == set(chosen)  # sticky, as the kernel was
        outcomes = (*first, *second)
    model = {lines[(s.table, s.line)] for o in outcomes for s in o.path if s.line}
    assert model == kernel
