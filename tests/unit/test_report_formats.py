"""Markdown, HTML, SARIF and JUnit renderings of a report, parsed back and checked."""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from nat_verify.model.outcome import Result
from nat_verify.report import (
    FORMATS,
    build_report,
    load_report,
    render,
    render_html,
    render_junit,
    render_markdown,
    render_sarif,
)
from nat_verify.report.markdown import md_code, md_text

SAMPLE = Path(__file__).parent / "data" / "report" / "sample_report.json"
SCRIPT = "<script>alert(1)</script>"


@pytest.fixture
def report() -> dict[str, Any]:
    # one violated (NV002, with a counterexample whose text carries a <script> tag),
    # one holds (NV001), one inconclusive (NV011, with a note)
    return load_report(SAMPLE)


# --- dispatch -------------------------------------------------------------------------------


def test_render_dispatches_every_format(report: dict[str, Any]) -> None:
    for fmt in FORMATS:
        assert render(report, fmt)
    assert json.loads(render(report, "json")) == report
    assert render(report, "markdown") == render(report, "md")
    with pytest.raises(ValueError, match="unknown report format 'pdf'"):
        render(report, "pdf")


# --- HTML -----------------------------------------------------------------------------------


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(html_text: str) -> _Collect:
    p = _Collect()
    p.feed(html_text)
    p.close()
    return p


def test_html_escapes_text_from_the_dump(report: dict[str, Any]) -> None:
    out = render_html(report)
    parsed = _parse(out)
    tags = [t for t, _ in parsed.tags]
    assert "script" not in tags
    # the comment arrives as text, intact
    assert SCRIPT in "".join(parsed.text)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out


def test_html_escapes_attributes_and_service_names(report: dict[str, Any]) -> None:
    evil = '"><img src=x onerror=alert(1)>'
    report["findings"][0]["service"] = evil
    report["findings"][0]["status"] = evil
    report["results"][0]["status"] = evil
    parsed = _parse(render_html(report))
    assert "img" not in [t for t, _ in parsed.tags]
    assert all(name != "onerror" for _, attrs in parsed.tags for name, _ in attrs)


def test_html_is_self_contained(report: dict[str, Any]) -> None:
    out = render_html(report)
    parsed = _parse(out)
    tags = [t for t, _ in parsed.tags]
    assert tags[:2] == ["html", "head"]
    assert "style" in tags
    assert not {"link", "script", "img", "iframe"} & set(tags)
    assert "http://" not in out and "https://" not in out
    # one section per finding, and the summary table rows: 3 invariants
    sections = [a for t, a in parsed.tags if t == "section"]
    assert [dict(a)["class"] for a in sections] == ["finding card-violated", "finding card-inconclusive"]
    tbody_rows = out.split("<tbody>")[1].split("</tbody>")[0].count("<tr>")
    assert tbody_rows == 3


# --- Markdown -------------------------------------------------------------------------------


def test_markdown_summary_and_finding(report: dict[str, Any]) -> None:
    out = render_markdown(report)
    lines = out.splitlines()
    assert lines[0] == "# nat-verify report: violated"
    assert "| invariant | title | violated | inconclusive | holds | proved | findings |" in lines
    nv002 = next(ln for ln in lines if ln.startswith("| `NV002`"))
    assert nv002.endswith("| **1** | 0 | 0 | 0 | 1 error |")
    assert "| **total** |  | **1** | **1** | **1** | **0** | 1 error, 1 note |" in lines
    assert "## Findings (2)" in lines
    assert "| **packet** | `external tcp 203.0.113.9:40000 -> 192.168.0.2:30080` |" in lines
    assert "| **location** | `specs/web.yaml:14` |" in lines
    assert "6. `nat KUBE-SEP-ZZZ 2` (line 120)" in lines
    # the <script> of the comment is escaped, not raw HTML
    assert SCRIPT not in out
    assert "\\<script\\>alert\\(1\\)\\</script\\>" in out


def test_markdown_mermaid_block_for_each_rule_path(report: dict[str, Any]) -> None:
    out = render_markdown(report)
    blocks = out.split("```mermaid\n")[1:]
    assert len(blocks) == 1  # only the NV002 finding has a path
    body = blocks[0].split("\n```")[0].splitlines()
    assert body[0] == "flowchart TD"
    nodes = [ln for ln in body[1:] if "-->" not in ln and not ln.strip().startswith(("class", "classDef"))]
    # client, address, nat PREROUTING, the five KUBE chains, DNAT, routing, the end
    assert len(nodes) == 11
    assert nodes[2].startswith('  h2["nat PREROUTING<br>rule 1, line 53"]')
    assert nodes[8].startswith('  h8["DNAT')
    # NV002 is about where the packet goes: the DNAT step is the one marked
    assert "  class h8 fault" in body
    assert "  h7 --> h8" in body
    assert all("```" not in ln and "<" not in ln.replace("<br>", "") for ln in body)


def test_markdown_escaping_helpers() -> None:
    assert md_code("a`b") == "``a`b``"
    assert md_code("`x`") == "`` `x` ``"
    assert md_code("a|b", in_table=True) == "`a\\|b`"
    assert md_text("[link](http://x) *b* | <i>") == "\\[link\\]\\(http://x\\) \\*b\\* \\| \\<i\\>"
    assert md_text("two\nlines") == "two lines"


# --- SARIF ----------------------------------------------------------------------------------


def test_sarif_required_properties(report: dict[str, Any]) -> None:
    log = json.loads(render_sarif(report))
    assert log["version"] == "2.1.0"
    assert log["$schema"].endswith("sarif-schema-2.1.0.json")
    (run,) = log["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "nat-verify"
    assert [r["id"] for r in driver["rules"]] == ["NV001", "NV002", "NV011"]
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"]
        assert rule["name"].isidentifier()
    assert len(run["results"]) == 2
    for res in run["results"]:
        assert driver["rules"][res["ruleIndex"]]["id"] == res["ruleId"]
        assert res["message"]["text"]
        assert res["locations"]
        assert res["partialFingerprints"]
    assert run["invocations"][0]["exitCode"] == 1


def test_sarif_violation_locations_and_code_flow(report: dict[str, Any]) -> None:
    run = json.loads(render_sarif(report))["runs"][0]
    res = next(r for r in run["results"] if r["ruleId"] == "NV002")
    assert res["level"] == "error"
    phys = res["locations"][0]["physicalLocation"]
    assert phys["artifactLocation"] == {"uri": "specs/web.yaml", "uriBaseId": "%SRCROOT%"}
    assert phys["region"] == {"startLine": 14}
    assert SCRIPT in res["message"]["text"]  # JSON carries it as data; viewers escape
    flow = res["codeFlows"][0]["threadFlows"][0]["locations"]
    assert [f["location"]["message"]["text"] for f in flow] == report["findings"][0]["path"]
    assert [f["location"]["physicalLocation"]["region"]["startLine"] for f in flow] == [
        53, 70, 60, 76, 95, 120
    ]
    assert {f["location"]["physicalLocation"]["artifactLocation"]["uri"] for f in flow} == {
        "dumps/node-a.rules"
    }
    note = next(r for r in run["results"] if r["ruleId"] == "NV011")
    assert note["level"] == "note"
    assert "physicalLocation" not in note["locations"][0]
    assert note["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] == "default/sticky:443"


def test_sarif_fingerprints_are_stable_and_distinct(report: dict[str, Any]) -> None:
    a = json.loads(render_sarif(report))["runs"][0]["results"]
    other = copy.deepcopy(report)
    other["findings"][0]["counterexample"]["src"] = "198.51.100.1:1234"  # another packet
    b = json.loads(render_sarif(other))["runs"][0]["results"]
    assert [r["partialFingerprints"] for r in a] == [r["partialFingerprints"] for r in b]
    assert a[0]["partialFingerprints"] != a[1]["partialFingerprints"]


def test_sarif_uris(report: dict[str, Any]) -> None:
    report["findings"][0]["location"] = "/repo/specs/my web.yaml:7"
    res = json.loads(render_sarif(report, root="/repo"))["runs"][0]["results"][0]
    art = res["locations"][0]["physicalLocation"]["artifactLocation"]
    assert art == {"uri": "specs/my%20web.yaml", "uriBaseId": "%SRCROOT%"}
    res = json.loads(render_sarif(report))["runs"][0]["results"][0]
    assert res["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "file:///repo/specs/my%20web.yaml"
    }
    # a relative path that leaves the working tree is no repository path: its file URI
    report["findings"][0]["location"] = "../outside/a.yaml:3"
    res = json.loads(render_sarif(report, root="/repo/sub"))["runs"][0]["results"][0]
    assert res["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "file:///repo/outside/a.yaml"}
    report["findings"][0]["location"] = "specs/../specs/a.yaml:3"
    res = json.loads(render_sarif(report, root="/repo"))["runs"][0]["results"][0]
    assert res["locations"][0]["physicalLocation"]["artifactLocation"] == {"uri": "specs/a.yaml", "uriBaseId": "%SRCROOT%"}
    # no manifest location: the deciding rule in the dump (the last step, line 120)
    report["findings"][0]["location"] = "<generated>"
    res = json.loads(render_sarif(report))["runs"][0]["results"][0]
    assert res["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "dumps/node-a.rules", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 120},
    }


def test_sarif_reports_results_without_findings() -> None:
    results = [
        Result("NV003", "default/a:80", "n", "violated", "concrete"),
        Result("NV007", "default/b:80", "n", "inconclusive", "z3"),
        Result("NV001", "default/c:80", "n", "holds", "hypothesis"),
    ]
    rep = build_report(results, [], command="verify", clusters=[])
    out = json.loads(render_sarif(rep))["runs"][0]["results"]
    assert [(r["ruleId"], r["level"]) for r in out] == [("NV003", "error"), ("NV007", "note")]


# --- JUnit ----------------------------------------------------------------------------------


def test_junit_counts_and_elements(report: dict[str, Any]) -> None:
    root = ET.fromstring(render_junit(report))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("skipped"), root.get("errors")) == (
        "3", "1", "1", "0"
    )
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert list(suites) == ["NV001", "NV002", "NV011"]
    for name, (tests, failures, skipped) in {
        "NV001": ("1", "0", "0"), "NV002": ("1", "1", "0"), "NV011": ("1", "0", "1")
    }.items():
        s = suites[name]
        assert (s.get("tests"), s.get("failures"), s.get("skipped")) == (tests, failures, skipped)
    (case,) = suites["NV002"].findall("testcase")
    assert case.get("name") == "default/web:80 @ node-a [specs/web.yaml]"
    assert case.get("classname") == "nat_verify.NV002"
    failure = case.find("failure")
    assert failure is not None
    assert failure.get("message") == report["findings"][0]["message"]
    text = failure.text or ""
    assert "external tcp 203.0.113.9:40000 -> 192.168.0.2:30080" in text
    assert "nat KUBE-SEP-ZZZ 2" in text and SCRIPT in text
    skipped = suites["NV011"].find("testcase/skipped")
    assert skipped is not None
    assert skipped.get("message") == "the recent match option --reap is not modelled"
    (ok,) = suites["NV001"].findall("testcase")
    assert list(ok) == []


def test_junit_survives_control_characters_and_orphan_findings(report: dict[str, Any]) -> None:
    report["findings"][0]["message"] = "bad\x01byte\nsecond line"
    report["findings"].append({
        "invariant": "NV014", "service": "", "node": "node-a", "severity": "error",
        "message": "jump to missing chain KUBE-SVC-GONE", "status": "violated",
    })
    root = ET.fromstring(render_junit(report))
    assert (root.get("tests"), root.get("failures")) == ("4", "2")
    msg = root.find("testsuite[@name='NV002']/testcase/failure")
    # a control character is shown as \\xNN, as in every other format
    assert msg is not None and msg.get("message") == "bad\\x01byte"
    orphan = root.find("testsuite[@name='NV014']/testcase")
    assert orphan is not None and orphan.get("name") == "(node-wide) @ node-a"


def test_fields_newer_engines_add_to_results_are_shown() -> None:
    # results may carry what a proof rests on ("assumptions", a list): HTML and Markdown show it
    report = build_report([Result("NV001", "a/b:80", "n", "proved", "exhaustive")], [],
                          command="verify", clusters=["c"])  # fmt: skip
    report["results"][0]["assumptions"] = ["route_localnet=1 (default)", "pod interface cni0"]
    md = render_markdown(report)
    header = next(ln for ln in md.splitlines() if ln.startswith("| invariant | service"))
    assert header.endswith("| assumptions |")
    assert "route\\_localnet=1 \\(default\\)<br>pod interface cni0" in md
    html = render_html(report)
    assert "<th>assumptions</th>" in html and "route_localnet=1 (default)<br>pod interface cni0" in html


def test_share_chart_shows_the_kernels_counts_and_destinations_the_model_lacks() -> None:
    from fractions import Fraction
    from ipaddress import ip_address

    from nat_verify.model.outcome import Outcome, Trace
    from nat_verify.model.packet import Packet
    from nat_verify.report.evidence import Share

    def dnat(ip: str) -> Outcome:
        return Outcome(Fraction(1, 2), "forward", ip_address(ip), 8080, ip_address("10.42.1.2"), 40000, dnat=True)

    trace = Trace(Packet("10.42.1.2", "10.43.0.15", dport=80, origin="pod"), (dnat("10.42.1.7"), dnat("10.42.2.3")))
    # 10 probes: 6 and 3 to the model's endpoints, 1 to an address no rule of the model names
    share = Share("a/web:80", "n1", trace, 10, (("10.42.1.7:8080", 6), ("10.42.2.3:8080", 3), ("10.9.9.9:80", 1)))
    doc = share.to_json()
    assert doc["probes"] == 10
    assert [(e["destination"], e["probability"], e["observed"]) for e in doc["endpoints"]] == [
        ("10.42.1.7:8080", "1/2", 6), ("10.42.2.3:8080", "1/2", 3), ("10.9.9.9:80", "0", 1)
    ]
    report = build_report([], [], command="check", clusters=[], shares=[share])
    html = render_html(report)
    assert html.count('<rect class="obs"') == 3 and "observed 1 of 10" in html


def test_what_the_results_rest_on_is_shown_in_every_format() -> None:
    # a report's "assumptions": facts the user did not give (the node facts work adds them)
    report = build_report([Result("NV001", "a/b:80", "n1", "proved", "exhaustive")], [],
                          command="check", clusters=["c"])  # fmt: skip
    report["assumptions"] = [
        {"node": "n1", "fact": "route_localnet", "value": "1", "basis": "assumed", "detail": "kube-proxy's default"},
        {"node": "n2", "fact": "route_localnet", "value": "1", "basis": "assumed", "detail": "kube-proxy's default"},
    ]
    line = "assumed: route_localnet = 1 [2 nodes] (kube-proxy's default)"
    from nat_verify.report.text import render_text

    assert line in render_text(report, width=100)
    assert line in render_html(report).replace("&#x27;", "'")
    assert md_text(line) in render_markdown(report)
    assert json.loads(render_sarif(report))["runs"][0]["properties"]["assumptions"] == [line]
