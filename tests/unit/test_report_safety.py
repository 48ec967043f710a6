"""No report format can be broken, or made to carry control characters, by text from the inputs.

Names (Node, Service, namespace), rule comments and annotations reach reports as finding
fields, rule text and messages. Each test plants terminal controls (ESC sequences, BEL, C1 CSI,
DEL, NUL) and format breakers (HTML tags, Markdown headings, table pipes, code fences, XML
CDATA ends, quotes, newlines) in all of them and checks one format: no raw control character
is left, and the document still parses with the structure it should have.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from typing import Any

import pytest

from nat_verify.model.outcome import Finding, Result, Step
from nat_verify.model.packet import Packet
from nat_verify.report import build_report, render
from nat_verify.report import schema as sch

ESC = "\x1b[31m\x1b]0;pwned\x07"
NODE = f"node-{ESC}1\x9b2J\x7f\x00"
SERVICE = f"de{ESC}fault/web</code><script>x</script>:80"
COMMENT = f"evil {ESC} | `` ``` \n# Heading\n]]><x/> \"quoted\" \x9b1m"
CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def planted() -> dict[str, Any]:
    path = (
        Step("nat", "PREROUTING", 1, 3, "KUBE-SERVICES"),
        Step("nat", "KUBE-SERVICES", 1, 5, "KUBE-SVC-X"),
        Step("nat", "KUBE-SVC-X", 1, 7, "KUBE-SEP-Y"),
        Step("nat", "KUBE-SEP-Y", 1, 9, "DNAT"),
    )
    findings = [
        Finding(
            "NV001", SERVICE, NODE, f"wrong endpoint for a rule commented {COMMENT}",
            packet=Packet("10.0.0.9", "10.43.0.1", dport=80), expected=f"DNAT to {COMMENT}",
            actual=f"DNAT 10.9.9.9:80\n{COMMENT}", path=path, location=f"a{ESC}.yaml:3",
            rules=tuple(f'-A {s.chain} -m comment --comment "{COMMENT}" -j {s.target}' for s in path),
        ),
        Finding("NV010", SERVICE, NODE, f"annotation says {COMMENT}", severity="warning"),
    ]  # fmt: skip
    results = [
        Result("NV001", SERVICE, NODE, "violated", "exhaustive", 1, f"cluster{ESC}"),
        Result("NV010", SERVICE, NODE, "proved", "exhaustive", 1, f"cluster{ESC}"),
    ]
    return build_report(results, findings, command="check", clusters=[f"cluster{ESC}"])


def _no_controls(out: str, allowed: str = "\n") -> None:
    bad = {c for c in CONTROLS.findall(out) if c not in allowed}
    assert not bad, sorted(map(hex, map(ord, bad)))


def test_text() -> None:
    from nat_verify.report.text import render_text

    out = render_text(planted(), width=100)
    _no_controls(out)
    assert "\\x1b[31m" in out  # shown, not acted on
    # a newline in a name cannot start a line of its own
    assert not any(line.startswith("# Heading") for line in out.splitlines())


def test_json_keeps_the_data_and_escapes_every_control() -> None:
    report = planted()
    out = render(report, "json")
    _no_controls(out)
    back = json.loads(out)
    assert back["findings"][0]["node"] == NODE  # escaped in the text, intact in the data
    assert not sch.errors(back, sch.load_schema("report"))


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)


def test_html() -> None:
    out = render(planted(), "html")
    _no_controls(out)
    p = _Tags()
    p.feed(out)
    assert "script" not in p.tags and "x" not in p.tags
    assert p.tags.count("section") == 2
    assert "&lt;script&gt;" in out


def test_markdown() -> None:
    out = render(planted(), "md")
    _no_controls(out)
    lines = out.splitlines()
    # no heading of the planted text's own, and every table row keeps its cells
    assert not any(line.startswith("# Heading") or line == "Heading" for line in lines)
    assert [ln for ln in lines if ln.startswith("#")] == [ln for ln in lines if re.match(r"#+ ", ln)]
    rows = [ln for ln in lines if ln.startswith("| ")]
    for ln in rows:
        cells = re.split(r"(?<!\\)\|", ln)
        assert len(cells) in (4, 9, 10), ln  # facts, results, summary rows
    # code fences: every ``` line opens or closes the one mermaid block per path
    fences = [ln for ln in lines if ln.startswith("```")]
    assert fences == ["```mermaid", "```"]
    # a tag can stand only inside a code span (shown literally), never as Markdown's raw HTML
    outside = [re.sub(r"(`+)(.+?)\1", "", ln) for ln in lines if not ln.startswith("  h")]
    assert not any("<script" in ln for ln in outside)


def test_sarif_is_valid_and_carries_no_controls() -> None:
    out = render(planted(), "sarif")
    _no_controls(out)
    doc = json.loads(out)
    texts = [r["message"]["text"] for r in doc["runs"][0]["results"]]
    assert any(NODE in t for t in texts)  # the data survives, escaped only in the text


def test_junit() -> None:
    out = render(planted(), "junit")
    _no_controls(out, allowed="\n")
    root = ET.fromstring(out)
    assert root.get("tests") == "2" and root.get("failures") == "1"
    case = root.find("testsuite[@name='NV001']/testcase")
    assert case is not None and "\\x1b" in (case.get("name") or "")


@pytest.mark.parametrize("fmt", ["md", "html"])
def test_node_name_with_esc_and_bel_is_escaped(fmt: str) -> None:
    # the defect as found: Markdown and HTML carried raw ESC/BEL from a Node name
    report = build_report([Result("NV001", "a/b:80", "n\x1b[2J\x07", "proved", "exhaustive")], [],
                          command="verify", clusters=["c"])  # fmt: skip
    out = render(report, fmt)
    assert "\x1b" not in out and "\x07" not in out
    assert "n\\x1b[2J\\x07" in out.replace("\\\\", "\\").replace("\\[", "[")
