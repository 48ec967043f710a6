"""Terminal output: the one-line trace form, its verbose form, the report summary; and graphs."""

from __future__ import annotations

import json
from fractions import Fraction
from ipaddress import ip_address
from pathlib import Path

import pytest

from nat_verify.model.outcome import Outcome, Step, Trace
from nat_verify.model.packet import Packet
from nat_verify.report import (
    outcome_dot,
    outcome_mermaid,
    render_text,
    render_trace_text,
    want_color,
)
from nat_verify.report.path import segments, walk

SAMPLE = Path(__file__).parent / "data" / "report" / "sample_report.json"

# The NodePort path kube-proxy writes for externalTrafficPolicy=Cluster (see the corpus dump
# current__TestTracePacket: KUBE-EXT first jumps to KUBE-MARK-MASQ, then to KUBE-SVC).
HEAD = (
    Step("nat", "PREROUTING", 1, 53, "KUBE-SERVICES"),
    Step("nat", "KUBE-SERVICES", 9, 70, "KUBE-NODEPORTS"),
    Step("nat", "KUBE-NODEPORTS", 1, 60, "KUBE-EXT-AAA"),
    Step("nat", "KUBE-EXT-AAA", 1, 75, "KUBE-MARK-MASQ"),
    Step("nat", "KUBE-MARK-MASQ", 1, 59, "MARK"),
    Step("nat", "KUBE-EXT-AAA", 2, 76, "KUBE-SVC-BBB"),
)
TAIL = (
    Step("filter", "FORWARD", 1, 5, "KUBE-FORWARD"),
    Step("filter", "KUBE-FORWARD", 2, 8, "ACCEPT"),
    Step("nat", "POSTROUTING", 1, 54, "KUBE-POSTROUTING"),
    Step("nat", "KUBE-POSTROUTING", 3, 58, "MASQUERADE"),
)


def nodeport_trace() -> Trace:
    pkt = Packet("203.0.113.9", "192.168.0.2", dport=30080)
    first = Outcome(
        Fraction(1, 2), "forward", ip_address("10.42.1.7"), 8080, ip_address("192.168.0.2"),
        61000, dnat=True, masquerade=True,
        path=(*HEAD, Step("nat", "KUBE-SVC-BBB", 2, 90, "KUBE-SEP-CCC"),
              Step("nat", "KUBE-SEP-CCC", 2, 92, "DNAT"), *TAIL),
    )
    second = Outcome(
        Fraction(1, 2), "forward", ip_address("10.42.2.8"), 8080, ip_address("192.168.0.2"),
        61000, dnat=True, masquerade=True,
        path=(*HEAD, Step("nat", "KUBE-SVC-BBB", 3, 91, "KUBE-SEP-DDD"),
              Step("nat", "KUBE-SEP-DDD", 2, 94, "DNAT"), *TAIL),
    )
    return Trace(pkt, (first, second))


def test_one_line_form_of_a_nodeport_trace() -> None:
    # written by hand from the form in the brief: packet | main chain line | DNAT (p) | source;
    # KUBE-MARK-MASQ is a side trip (it returns), filter FORWARD only accepted, and the
    # masquerade done in nat POSTROUTING is the last part
    expected = (
        "external 203.0.113.9 -> 192.168.0.2:30080 | nat PREROUTING -> KUBE-SERVICES -> "
        "KUBE-NODEPORTS -> KUBE-EXT-AAA -> KUBE-SVC-BBB -> KUBE-SEP-CCC | DNAT 10.42.1.7:8080 "
        "(p=0.5000) | masquerade\n"
        "external 203.0.113.9 -> 192.168.0.2:30080 | nat PREROUTING -> KUBE-SERVICES -> "
        "KUBE-NODEPORTS -> KUBE-EXT-AAA -> KUBE-SVC-BBB -> KUBE-SEP-DDD | DNAT 10.42.2.8:8080 "
        "(p=0.5000) | masquerade\n"
    )
    assert render_trace_text(nodeport_trace()) == expected


def _one(pkt: Packet, outcome: Outcome) -> str:
    return render_trace_text(Trace(pkt, (outcome,)))


def test_local_policy_keeps_client_ip_and_p1_is_not_shown() -> None:
    pkt = Packet("203.0.113.9", "192.168.0.2", dport=30081)
    o = Outcome(
        Fraction(1), "forward", ip_address("10.42.1.9"), 8080, ip_address("203.0.113.9"), 40000,
        dnat=True,
        path=(
            Step("nat", "PREROUTING", 1, 53, "KUBE-SERVICES"),
            Step("nat", "KUBE-SERVICES", 9, 70, "KUBE-NODEPORTS"),
            Step("nat", "KUBE-NODEPORTS", 2, 61, "KUBE-EXT-DDD"),
            Step("nat", "KUBE-EXT-DDD", 3, 80, "KUBE-SVL-DDD"),
            Step("nat", "KUBE-SVL-DDD", 1, 99, "KUBE-SEP-EEE"),
            Step("nat", "KUBE-SEP-EEE", 2, 101, "DNAT"),
        ),
    )
    assert _one(pkt, o) == (
        "external 203.0.113.9 -> 192.168.0.2:30081 | nat PREROUTING -> KUBE-SERVICES -> "
        "KUBE-NODEPORTS -> KUBE-EXT-DDD -> KUBE-SVL-DDD -> KUBE-SEP-EEE | DNAT 10.42.1.9:8080 "
        "| client IP kept\n"
    )


def test_reject_in_filter_after_nat_found_nothing() -> None:
    # a Service without endpoints: nat KUBE-SERVICES has no rule for it, filter KUBE-SERVICES
    # rejects (corpus current__TestTracePacket, flow "REJECT")
    pkt = Packet("10.0.0.2", "172.30.0.46", dport=80, origin="pod")
    o = Outcome(
        Fraction(1), "reject", ip_address("172.30.0.46"), 80, ip_address("10.0.0.2"), 40000,
        reject_with="icmp-port-unreachable",
        path=(
            Step("nat", "PREROUTING", 1, 53, "KUBE-SERVICES"),
            Step("filter", "FORWARD", 2, 4, "KUBE-SERVICES"),
            Step("filter", "KUBE-SERVICES", 1, 16, "REJECT"),
        ),
    )
    assert _one(pkt, o) == (
        "pod 10.0.0.2 -> 172.30.0.46:80 | filter FORWARD -> KUBE-SERVICES | "
        "REJECT (icmp-port-unreachable)\n"
    )


def test_drop_names_the_protocol_when_not_tcp() -> None:
    pkt = Packet("203.0.113.2", "192.168.99.22", dport=80, proto="udp")
    o = Outcome(
        Fraction(1), "drop", ip_address("192.168.99.22"), 80, ip_address("203.0.113.2"), 40000,
        path=(
            Step("nat", "PREROUTING", 1, 53, "KUBE-SERVICES"),
            Step("filter", "FORWARD", 3, 6, "KUBE-EXTERNAL-SERVICES"),
            Step("filter", "KUBE-EXTERNAL-SERVICES", 1, 19, "DROP"),
        ),
    )
    assert _one(pkt, o) == (
        "external udp 203.0.113.2 -> 192.168.99.22:80 | filter FORWARD -> "
        "KUBE-EXTERNAL-SERVICES | DROP\n"
    )


def test_no_nat_shows_the_chains_entered_in_the_first_hook() -> None:
    # KUBE-SERVICES is entered (PREROUTING rule 1 jumps to it) but no rule in it fires
    pkt = Packet("10.0.0.2", "10.0.0.3", dport=80, origin="pod")
    o = Outcome(
        Fraction(1), "forward", ip_address("10.0.0.3"), 80, ip_address("10.0.0.2"), 40000,
        path=(
            Step("nat", "PREROUTING", 1, 53, "KUBE-SERVICES"),
            Step("filter", "FORWARD", 1, 3, "KUBE-FORWARD"),
            Step("nat", "POSTROUTING", 1, 54, "KUBE-POSTROUTING"),
            Step("nat", "KUBE-POSTROUTING", 1, 56, "RETURN"),
        ),
    )
    assert _one(pkt, o) == (
        "pod 10.0.0.2 -> 10.0.0.3:80 | nat PREROUTING -> KUBE-SERVICES | no NAT | client IP kept\n"
    )


def test_accept_without_nat_and_ipv6_and_inconclusive() -> None:
    host = Packet("192.168.0.2", "192.168.0.2", dport=30000, origin="host")
    accept = Outcome(
        Fraction(1), "accept", ip_address("192.168.0.2"), 30000, ip_address("192.168.0.2"), 1,
        path=(
            Step("nat", "OUTPUT", 1, 55, "KUBE-SERVICES"),
            Step("filter", "INPUT", 2, 2, "KUBE-NODEPORTS"),
            Step("filter", "KUBE-NODEPORTS", 1, 17, "ACCEPT"),
        ),
    )
    assert _one(host, accept) == (
        "host 192.168.0.2 -> 192.168.0.2:30000 | nat OUTPUT -> KUBE-SERVICES | ACCEPT "
        "| client IP kept\n"
    )
    v6 = Packet("2001:db8::9", "fd00::10", dport=443)
    unsure = Outcome(
        Fraction(1, 3), "inconclusive", ip_address("fd00::10"), 443, ip_address("2001:db8::9"),
        1, reason="match socket is not modelled",
        path=(
            Step("nat", "PREROUTING", 1, 10, "KUBE-SERVICES"),
            Step("nat", "KUBE-SERVICES", 2, 20, ""),
        ),
    )
    assert _one(v6, unsure) == (
        "external 2001:db8::9 -> [fd00::10]:443 | nat PREROUTING -> KUBE-SERVICES | "
        "inconclusive (match socket is not modelled) (p=0.3333)\n"
    )


def test_verbose_lists_every_step_with_its_dump_line() -> None:
    trace = nodeport_trace()
    dump = [f"rule text {i}" for i in range(1, 121)]
    out = render_trace_text(trace, verbose=True, source_lines=dump).splitlines()
    # per outcome: the one-liner, then one line per step (6 head + 2 svc/sep + 4 tail)
    assert len(out) == 2 * (1 + 12)
    step_lines = out[1:13]
    assert step_lines[4].split()[:3] == ["nat", "KUBE-MARK-MASQ", "1"]
    assert "-> MARK" in step_lines[4]
    assert step_lines[4].endswith("line 59: rule text 59")
    assert step_lines[7].split()[:3] == ["nat", "KUBE-SEP-CCC", "2"]
    assert step_lines[7].endswith("line 92: rule text 92")


def test_verbose_shows_policy_and_reason() -> None:
    pkt = Packet("10.0.0.2", "10.0.0.3", dport=80, origin="pod")
    o = Outcome(Fraction(1), "drop", ip_address("10.0.0.3"), 80, ip_address("10.0.0.2"), 1,
                path=(Step("filter", "FORWARD", 0, 0, "DROP"),), reason="policy DROP")
    lines = render_trace_text(Trace(pkt, (o,)), verbose=True).splitlines()
    assert lines[0] == "pod 10.0.0.2 -> 10.0.0.3:80 | filter FORWARD | DROP"
    assert lines[1].split() == ["filter", "FORWARD", "policy", "->", "DROP"]
    assert lines[2].strip() == "reason: policy DROP"


def test_colour_only_when_asked() -> None:
    trace = nodeport_trace()
    assert "\x1b[" not in render_trace_text(trace)
    coloured = render_trace_text(trace, color=True)
    assert "\x1b[" in coloured
    # the words are the same once the escape sequences are gone
    import re

    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == render_trace_text(trace)


def test_rich_markup_in_names_is_printed_as_is() -> None:
    pkt = Packet("10.0.0.2", "10.0.0.3", dport=80, origin="pod")
    o = Outcome(Fraction(1), "drop", ip_address("10.0.0.3"), 80, ip_address("10.0.0.2"), 1,
                path=(Step("filter", "FORWARD", 1, 3, "[red]EVIL[/red]"),
                      Step("filter", "[red]EVIL[/red]", 1, 9, "DROP")))
    assert "filter FORWARD -> [red]EVIL[/red] | " in render_trace_text(Trace(pkt, (o,)), color=True)


# --- report in a terminal ------------------------------------------------------------------


def test_render_text_summary_and_findings() -> None:
    report = json.loads(SAMPLE.read_text())
    out = render_text(report, width=120)
    lines = out.splitlines()
    assert lines[0] == "nat-verify check: VIOLATED (exit code 1)  clusters: specs/web.yaml"
    row = next(ln for ln in lines if ln.lstrip().startswith("NV002"))
    # columns violated inconclusive holds proved, then findings (the sample's NV002 counts)
    assert row.split()[-6:] == ["1", "0", "0", "0", "1", "error"]
    row = next(ln for ln in lines if ln.lstrip().startswith("NV011"))
    assert row.split()[-6:] == ["0", "1", "0", "0", "1", "note"]
    total = next(ln for ln in lines if ln.lstrip().startswith("total"))
    assert total.split()[:6] == ["total", "1", "1", "1", "0", "1"]  # then "error, 1 note", wrapped
    assert "Findings (2)" in out
    assert "NV002 violated  default/web:80 on node-a  [error]" in out
    assert "packet:   external tcp 203.0.113.9:40000 -> 192.168.0.2:30080" in out
    assert "expected: DNAT to one of 10.42.1.7:8080, 10.42.2.8:8080" in out
    assert " 6. nat KUBE-SEP-ZZZ 2  (line 120)" in out
    assert "NV011 inconclusive  default/sticky:443 on node-a  [note]" in out
    assert "\x1b[" not in out
    assert "\x1b[" in render_text(report, color=True)


# --- graphs --------------------------------------------------------------------------------


def test_walk_skips_returns_and_adds_chains_entered_without_a_firing_rule() -> None:
    w = walk(nodeport_trace().outcomes[0].path)
    assert [c for _, c in w.nodes] == [
        "PREROUTING", "KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-EXT-AAA", "KUBE-MARK-MASQ",
        "KUBE-SVC-BBB", "KUBE-SEP-CCC", "FORWARD", "KUBE-FORWARD", "POSTROUTING",
        "KUBE-POSTROUTING",
    ]
    segs = segments(nodeport_trace().outcomes[0].path)
    assert [s.main_line[0] for s in segs] == [
        ("nat", "PREROUTING"), ("filter", "FORWARD"), ("nat", "POSTROUTING")
    ]
    assert segs[0].nat_targets == {"DNAT"}
    assert segs[2].nat_targets == {"MASQUERADE"}


def test_mermaid_of_one_outcome() -> None:
    pkt = Packet("10.0.0.2", "172.30.0.41", dport=80, origin="pod")
    o = Outcome(
        Fraction(1), "forward", ip_address("10.180.0.1"), 80, ip_address("10.0.0.2"), 1,
        dnat=True,
        path=(
            Step("nat", "PREROUTING", 1, 53, "KUBE-SERVICES"),
            Step("nat", "KUBE-SERVICES", 1, 63, "KUBE-SVC-XPGD"),
            Step("nat", "KUBE-SVC-XPGD", 2, 106, "KUBE-SEP-SXIV"),
            Step("nat", "KUBE-SEP-SXIV", 2, 93, "DNAT"),
        ),
    )
    # by hand: chains as boxes in order entered, jumps labelled with the rule that jumped,
    # the DNAT on the edge out of the chain that did it; ">" and quotes become entity codes
    assert outcome_mermaid(o, pkt) == (
        "flowchart LR\n"
        '  packet(["pod 10.0.0.2 -#62; 172.30.0.41:80"])\n'
        '  c0["nat PREROUTING"]\n'
        '  c1["KUBE-SERVICES"]\n'
        '  c2["KUBE-SVC-XPGD"]\n'
        '  c3["KUBE-SEP-SXIV"]\n'
        '  verdict(["DNAT 10.180.0.1:80"])\n'
        "  packet --> c0\n"
        '  c0 -->|"rule 1"| c1\n'
        '  c1 -->|"rule 1"| c2\n'
        '  c2 -->|"rule 2"| c3\n'
        '  c3 -->|"DNAT 10.180.0.1:80"| verdict\n'
    )
    dot = outcome_dot(o, pkt)
    assert dot.startswith('digraph "path" {\n')
    assert '  c3 -> verdict [label="DNAT 10.180.0.1:80"];\n' in dot
    assert '  packet [label="pod 10.0.0.2 -> 172.30.0.41:80", shape=ellipse];\n' in dot


def test_dot_and_mermaid_escape_names() -> None:
    pkt = Packet("10.0.0.2", "10.0.0.3", dport=80, origin="pod")
    o = Outcome(Fraction(1), "drop", ip_address("10.0.0.3"), 80, ip_address("10.0.0.2"), 1,
                path=(Step("filter", "FORWARD", 1, 3, 'X"];evil'),
                      Step("filter", 'X"];evil', 1, 9, "DROP")))
    assert 'label="X\\"];evil"' in outcome_dot(o, pkt)
    assert '"X#34;#93;#59;evil"' in outcome_mermaid(o, pkt)


def test_control_characters_from_the_dump_do_not_reach_the_terminal() -> None:
    trace = nodeport_trace()
    dump = ["x"] * 120
    dump[52] = '-A PREROUTING -m comment --comment "\x1b[2J\x07boom" -j KUBE-SERVICES'
    out = render_trace_text(trace, verbose=True, source_lines=dump)
    assert "\x1b" not in out and "\x07" not in out
    assert '--comment "\\x1b[2J\\x07boom"' in out


def test_report_text_prints_markup_and_escapes_literally() -> None:
    report = json.loads(SAMPLE.read_text())
    report["findings"][0]["message"] = "[bold red]fake[/] \x1b[31m"
    out = render_text(report, width=120)
    assert "[bold red]fake[/] \\x1b[31m" in out
    assert "\x1b" not in out


def test_want_color(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    assert want_color(io.StringIO()) is False
    assert want_color(Tty()) is True
    monkeypatch.setenv("NO_COLOR", "1")
    assert want_color(Tty()) is False
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert want_color(io.StringIO()) is True
