"""The defects a new user met in the reports (issue: reports a person reads in a minute).

Each test reproduces one defect as it was found and fails on the code before its fix. The
broken node is the README's: node-1 of ``specs/web-svc.yaml`` without the rule of KUBE-EXT that
marks external NodePort traffic for masquerade. By the README's reasoning (web-svc: ClusterIP
10.43.0.15:80 -> targetPort 8080, NodePort 30080, pods 10.42.1.7 on node-1 and 10.42.2.3 on
node-2), a client's packet to 192.168.1.10:30080 is DNATed to either pod with probability 1/2 and
now keeps its client IP, which NV004 forbids; NV015 names the missing rule.
"""

from __future__ import annotations

import json
import os
import re
import stat
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from nat_verify.model.outcome import Finding, Result, Step
from nat_verify.model.packet import Packet
from nat_verify.report import build_report, render, render_html, render_markdown, render_sarif
from nat_verify.report.text import render_text
from tests.unit.test_cli import run

SPECS = Path(__file__).resolve().parents[2] / "specs"
WEB = str(SPECS / "web-svc.yaml")
MASQ_RULE = "masquerade traffic for default/web-svc:http external destinations"



@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    code, out, _ = run("compile", WEB, "--node", "node-1", "--style", "save")
    assert code == 0
    lines = [line for line in out.splitlines(keepends=True) if MASQ_RULE not in line]
    assert len(lines) == len(out.splitlines()) - 1  # exactly the one rule is gone
    p = tmp_path_factory.mktemp("broken") / "broken.save"
    p.write_text("".join(lines))
    return p


@pytest.fixture(scope="module")
def broken_report(broken: Path) -> dict[str, Any]:
    code, out, _ = run("check", str(broken), "--cluster", WEB, "--node", "node-1", "--format", "json")
    assert code == 1
    doc: dict[str, Any] = json.loads(out)
    return doc


# --- HTML: a finding card is not red and bold all over --------------------------------------


def _css_rules(html: str) -> list[tuple[list[str], str]]:
    css = re.search(r"<style>(.*?)</style>", html, re.S)
    assert css
    return [
        ([s.strip() for s in sel.split(",")], body)
        for sel, body in re.findall(r"([^{}]+)\{([^}]*)\}", css.group(1))
    ]


def test_html_colour_classes_do_not_colour_whole_finding_cards(broken_report: dict[str, Any]) -> None:
    # the defect: <section class="finding violated"> picked up `.violated {color: red; bold}`,
    # so "expected" read as alarming as "actual". No bare class selector that sets a colour or
    # a weight may match a class that a block element (section, div, dl, p) carries.
    html = render_html(broken_report)
    block_classes = set()
    for _tag, classes in re.findall(r'<(section|div|dl|dd|p|ol|li)\b[^>]*class="([^"]*)"', html):
        block_classes |= set(classes.split())
    for selectors, body in _css_rules(html):
        if not re.search(r"(^|;)\s*(color|font-weight)\s*:", body):
            continue
        for sel in selectors:
            m = re.fullmatch(r"\.([\w-]+)", sel)
            if m:
                assert m.group(1) not in block_classes, (sel, body)


# --- one vocabulary: warnings, counts, columns -----------------------------------------------

NV010 = "default/web:80"


def _warning_report() -> dict[str, Any]:
    # NV010 proved for the Service and node, with a warning finding (the configuration chose
    # no masquerade to remote endpoints): the checker gives this combination
    results = [Result("NV010", NV010, "n1", "proved", "exhaustive", 4)]
    findings = [
        Finding("NV010", NV010, "n1", "no masquerade to a remote endpoint", severity="warning",
                packet=Packet("203.0.113.9", "192.168.0.2", dport=30080, sport=40000),
                expected="masqueraded", actual="client IP kept"),
    ]  # fmt: skip
    return build_report(results, findings, command="verify", clusters=["c"])


def test_a_warning_never_reads_violated() -> None:
    report = _warning_report()
    assert report["summary"]["outcome"] == "ok"
    assert report["findings"][0]["status"] == "warning"
    text = render_text(report, width=100)
    head = next(line for line in text.splitlines() if line.startswith("NV010"))
    assert "warning" in head and "violated" not in head
    md = render_markdown(report)
    head = next(line for line in md.splitlines() if line.startswith("### 1."))
    assert "warning" in head and "violated" not in head
    html = render_html(report)
    card = html[html.index('<section class="finding') : html.index("</section>")]
    assert "violated" not in card and "warning" in card
    junit = render(report, "junit")
    assert "<failure" not in junit
    sarif = json.loads(render_sarif(report))
    (result,) = sarif["runs"][0]["results"]
    assert result["level"] == "warning" and result["properties"]["status"] == "warning"


def test_table_counts_the_findings_it_lists(broken_report: dict[str, Any]) -> None:
    summary = broken_report["summary"]
    per_invariant = summary["findings"]
    findings = broken_report["findings"]
    for inv, counts in per_invariant.items():
        listed = [f for f in findings if f["invariant"] == inv]
        assert sum(counts.values()) == len(listed)
        assert counts["error"] == sum(f["severity"] == "error" for f in listed)
    assert sum(sum(c.values()) for c in per_invariant.values()) == len(findings)
    text = render_text(broken_report, width=100)
    assert f"Findings ({len(findings)})" in text
    nv004 = [f for f in findings if f["invariant"] == "NV004"]
    row = next(line for line in text.splitlines() if line.strip().startswith("NV004"))
    assert f"{len(nv004)} error" in row


def test_every_format_explains_the_columns(broken_report: dict[str, Any]) -> None:
    for fmt in ("text", "md", "html"):
        out = render(broken_report, fmt)
        plain = re.sub(r"<[^>]+>|\*\*", "", out)
        if fmt == "text":  # at 80 columns the table shows only the status columns some result has
            header = next(line for line in plain.splitlines() if "invariant" in line and "title" in line)
            header = header.replace("viol.", "violated").replace("inc.", "inconclusive")
            columns = [w for w in ("violated", "inconclusive", "holds", "proved", "findings") if w in header]
        else:
            columns = ["violated", "inconclusive", "holds", "proved", "findings"]
        assert "findings" in columns and "violated" in columns, fmt
        for word in columns:
            if fmt == "html":
                assert re.search(rf"<dt>{word}</dt><dd>\w", out), word
            else:
                assert re.search(rf"\b{word}\b[^\n]{{0,3}}: *\S", plain, re.I), (fmt, word)


# --- identical findings ----------------------------------------------------------------------


def test_identical_findings_are_reported_once(broken_report: dict[str, Any]) -> None:
    seen = [json.dumps(f, sort_keys=True) for f in broken_report["findings"]]
    assert len(seen) == len(set(seen))
    f = Finding("NV004", "a/b:80", "n", "m", packet=Packet("1.2.3.4", "5.6.7.8", dport=80))
    doc = build_report([], [f, f], command="check", clusters=[])
    assert len(doc["findings"]) == 1


# --- several lines in one value --------------------------------------------------------------


def _drift_report() -> dict[str, Any]:
    missing = ["nat -A KUBE-EXT-X -j KUBE-MARK-MASQ", "nat -A KUBE-SVC-X -j KUBE-SEP-Y"]
    f = Finding("NV015", "default/web:80", "n1", "2 rule(s) kube-proxy would write are missing",
                expected="\n".join(missing), actual="(nothing)")  # fmt: skip
    return build_report([Result("NV015", "", "n1", "violated", "exhaustive")], [f],
                        command="check", clusters=["c"])  # fmt: skip


def test_several_missing_rules_stay_separate_lines_in_every_format() -> None:
    report = _drift_report()
    a, b = "-A KUBE-EXT-X -j KUBE-MARK-MASQ", "-A KUBE-SVC-X -j KUBE-SEP-Y"
    text = render_text(report, width=120)
    assert "\\x0a" not in text
    lines = text.splitlines()
    assert any(a in line and b not in line for line in lines)
    assert any(b in line and a not in line for line in lines)
    md = render_markdown(report)
    assert re.search(re.escape(a) + r".*<br>.*" + re.escape(b), md)
    html = render_html(report)
    assert re.search(re.escape(a) + r"(</code>)?\s*(<br>|</li>\s*<li>)", html)


# --- the terminal table ----------------------------------------------------------------------


def test_text_fits_80_columns_and_uses_more_when_there_is(broken_report: dict[str, Any]) -> None:
    narrow = render_text(broken_report, width=80)
    assert max(len(line) for line in narrow.splitlines()) <= 80
    header = next(line for line in narrow.splitlines() if "invariant" in line)
    # the header is one line, not wrapped; at 80 columns the status columns no result has are
    # left out (this report has violated and proved results only)
    for col in ("viol.", "proved", "findings"):  # short names below 100 columns
        assert col in header
    assert "holds" not in header
    assert "viol. (violated): a packet breaks" in narrow
    wide_header = next(line for line in render_text(broken_report, width=100).splitlines() if "invariant" in line)
    for col in ("violated", "inconclusive", "holds", "proved", "findings"):
        assert col in wide_header
    wide = render_text(broken_report, width=200)
    # with room, every title is on one line
    for inv, entry in broken_report["catalogue"].items():
        if inv in broken_report["summary"]["invariants"]:
            assert entry["title"] in wide, inv


# --- writing report files --------------------------------------------------------------------


def test_output_into_a_missing_directory_is_bad_input(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "report.html"
    code, out, err = run("verify", WEB, "--format", "html", "-o", str(target))
    assert code == 2
    assert out == ""
    assert str(target) in err and "Traceback" not in err
    assert not target.parent.exists()


def test_output_dash_is_stdout(tmp_path: Path) -> None:
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code, out, _ = run("verify", WEB, "--format", "json", "-o", "-")
    finally:
        os.chdir(cwd)
    assert code == 0
    assert json.loads(out)["format"] == "nat_verify.report/v1"
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_report_files_follow_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    old = os.umask(umask)
    try:
        code, _, _ = run("verify", WEB, "--format", "md", "-o", str(tmp_path / "r.md"))
    finally:
        os.umask(old)
    assert code == 0
    assert stat.S_IMODE((tmp_path / "r.md").stat().st_mode) == mode


# --- SARIF -----------------------------------------------------------------------------------


def test_sarif_one_fingerprint_per_distinct_finding(broken_report: dict[str, Any]) -> None:
    doc = json.loads(render_sarif(broken_report))
    results = doc["runs"][0]["results"]
    nv004 = [r for r in results if r["ruleId"] == "NV004"]
    # external -> either pod, pod -> 10.42.1.7, host (localhost NodePort) -> either pod
    assert len(nv004) >= 2
    prints = [r["partialFingerprints"]["natVerifyFinding/v1"] for r in results]
    assert len(set(prints)) == len(results) == len(broken_report["findings"])
    # and the file passes the official SARIF 2.1.0 schema
    from tests.unit.test_report_golden import _sarif_schema

    jsonschema = pytest.importorskip("jsonschema")
    assert not list(jsonschema.Draft4Validator(_sarif_schema()).iter_errors(doc))


def test_sarif_absolute_cluster_path_is_relative_to_the_working_directory(
    broken: Path,
) -> None:
    cwd = os.getcwd()
    os.chdir(SPECS.parent)
    try:
        code, out, _ = run("check", str(broken), "--cluster", WEB, "--node", "node-1",
                           "--format", "sarif")  # fmt: skip
    finally:
        os.chdir(cwd)
    assert code == 1
    doc = json.loads(out)
    uris = [
        loc["physicalLocation"]["artifactLocation"]
        for r in doc["runs"][0]["results"]
        for loc in r["locations"]
        if "physicalLocation" in loc
    ]
    assert {"uri": "specs/web-svc.yaml", "uriBaseId": "%SRCROOT%"} in uris
    assert not any(u["uri"].startswith("file:") for u in uris)


# --- probabilities ---------------------------------------------------------------------------


def ten_endpoints(tmp_path: Path) -> Path:
    eps = "\n".join(
        f"  - addresses: [10.42.1.{10 + i}]\n    conditions: {{ready: true}}\n    nodeName: node-1"
        for i in range(10)
    )
    text = f"""\
apiVersion: v1
kind: Service
metadata: {{name: ten, namespace: default}}
spec:
  clusterIP: 10.43.0.20
  selector: {{app: ten}}
  ports: [{{name: http, protocol: TCP, port: 80, targetPort: 8080}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ten-1
  namespace: default
  labels: {{kubernetes.io/service-name: ten}}
addressType: IPv4
ports: [{{name: http, protocol: TCP, port: 8080}}]
endpoints:
{eps}
---
apiVersion: v1
kind: Node
metadata: {{name: node-1}}
spec: {{podCIDR: 10.42.1.0/24}}
status: {{addresses: [{{type: InternalIP, address: 192.168.1.10}}]}}
---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: 10.42.0.0/16
"""
    p = tmp_path / "ten.yaml"
    p.write_text(text)
    return p


def test_probabilities_print_as_decimals_and_json_keeps_the_exact_value(tmp_path: Path) -> None:
    cluster = ten_endpoints(tmp_path)
    code, dump, _ = run("compile", str(cluster), "--node", "node-1", "--style", "save")
    assert code == 0
    (tmp_path / "ten.save").write_text(dump)
    args = ("trace", str(tmp_path / "ten.save"), "--cluster", str(cluster), "--node", "node-1",
            "--src", "10.42.1.50", "--dst", "10.43.0.20:80")  # fmt: skip
    code, text, _ = run(*args)
    assert code == 0
    # kube-proxy's cascade gives rule i the probability 1/(10-i), rounded by the kernel to a
    # multiple of 2^-31: each endpoint's share is within 10 * 2^-31 of 1/10, so 0.1000
    shares = re.findall(r"\(p=([^)]*)\)", text)
    assert shares == ["0.1000"] * 10
    code, out, _ = run(*args, "--format", "json")
    doc = json.loads(out)
    total = Fraction(0)
    for o in doc["outcomes"]:
        p = Fraction(o["probability"])
        total += p
        assert abs(p - Fraction(1, 10)) < Fraction(10, 2**31)
        assert o["uniform"] == "1/10"
        assert Fraction(o["from_uniform"]) == p - Fraction(1, 10)
    assert total == 1


# --- Markdown's mermaid ----------------------------------------------------------------------


def test_markdown_mermaid_runs_top_down_and_marks_the_faulty_step(
    broken_report: dict[str, Any],
) -> None:
    md = render_markdown(broken_report)
    charts = re.findall(r"```mermaid\n(.*?)```", md, re.S)
    assert charts
    for chart in charts:
        assert chart.startswith("flowchart TD")
    nv004 = md[md.index("NV004") :]
    chart = re.search(r"```mermaid\n(.*?)```", nv004, re.S)
    assert chart
    # NV004: the packet leaves nat POSTROUTING without masquerade; that step is the faulty one
    fault = re.search(r"^\s*class (\w+) fault$", chart.group(1), re.M)
    assert fault
    node = re.search(rf"^\s*{fault.group(1)}\[\"([^\"]*)\"\]", chart.group(1), re.M)
    assert node and "POSTROUTING" in node.group(1)


_ = Step  # the path type findings carry
