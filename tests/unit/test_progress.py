"""Progress on stderr: a bar with a rate and an estimate on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io

from nat_verify.check import check_ruleset
from nat_verify.kube.loader import load_cluster
from nat_verify.kubeproxy import compile_node
from nat_verify.netfilter.parse import parse
from nat_verify.progress import Progress
from tests.unit.test_fleet import CLUSTER


def test_plain_lines_count_rate_and_estimate() -> None:
    out = io.StringIO()
    with Progress(out, terminal=False, interval=0) as p:
        t = p.task("checking node-1", 10, "Services")
        for _ in range(3):
            t.advance()
    lines = out.getvalue().splitlines()
    assert len(lines) == 3
    assert lines[-1].startswith("checking node-1: 3/10 Services (30%), ")
    assert "Services/s" in lines[-1] and "left" in lines[-1]


def test_plain_lines_wait_for_the_interval() -> None:
    out = io.StringIO()
    with Progress(out, terminal=False, interval=3600) as p:
        t = p.task("checking", 5)
        for _ in range(5):
            t.advance()
    assert out.getvalue() == ""  # short work prints nothing


def test_the_terminal_bar_shows_count_rate_and_time_left() -> None:
    out = io.StringIO()
    with Progress(out, terminal=True) as p:
        t = p.task("checking node-1", 10, "Services")
        for _ in range(4):
            t.advance()
        assert p._bar is not None
        p._bar.refresh()
        shown = out.getvalue()
    assert "checking node-1" in shown and "4/10" in shown and "Services" in shown
    assert "/s" in shown and "left" in shown


def test_disabled_progress_writes_nothing() -> None:
    out = io.StringIO()
    with Progress(out, terminal=True, enabled=False, interval=0) as p:
        p.task("x", 3).advance()
    assert out.getvalue() == ""


def test_the_check_callback_counts_services_not_destinations() -> None:
    cluster = load_cluster([CLUSTER])
    rs = parse(compile_node(cluster, "node-1", 4), family=4)
    seen: list[str] = []
    out = io.StringIO()
    with Progress(out, terminal=False, interval=3600) as p:
        t = p.task("checking", 2)
        step = p.services(t)
        check_ruleset(cluster, "node-1", rs, progress=lambda d: (seen.append(d), step(d)))
    # web has one destination (ClusterIP); edge has ClusterIP, NodePort addresses and its LB IP
    assert len(seen) > 2
    assert t.done == 2
