"""GitHub-flavoured Markdown: summary table, findings with a Mermaid drawing of each rule path.

Text from dumps and manifests is either in code spans (literal, only backticks and table
pipes matter) or backslash-escaped, so a comment cannot open a link, an HTML tag or a table
cell of its own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from nat_verify.report import catalogue as cat
from nat_verify.report.flow import flow
from nat_verify.report.graph import flow_mermaid
from nat_verify.report.path import steps_from_json
from nat_verify.report.words import (
    LEGEND,
    LEGEND_HEAD,
    STATUSES,
    assumption_texts,
    finding_word,
    findings_cell,
    packet_json_text,
    value_lines,
    visible,
)

_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~&])")
_STATUS_MARK = {
    "proved": "✅",
    "holds": "✅",
    "violated": "❌",
    "inconclusive": "❔",
    "ok": "✅",
    "warning": "⚠️",
    "note": "ℹ️",
}


def md_text(text: object) -> str:
    """Plain text for a Markdown paragraph or table cell: one line, specials escaped, control
    characters (a newline too) made visible."""
    return _SPECIAL.sub(r"\\\1", visible(" ".join(str(text).split())))


def md_lines(value: object) -> str:
    """A value of several lines in one table cell: each line escaped, joined by ``<br>``."""
    return "<br>".join(md_text(line) for line in value_lines(value))


def md_code(text: object, *, in_table: bool = False) -> str:
    """An inline code span holding ``text`` literally, whatever backticks it contains."""
    s = visible(" ".join(str(text).split()))
    if not s:
        return ""
    longest = max((len(run) for run in re.findall(r"`+", s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    if in_table:
        s = s.replace("|", "\\|")  # GFM splits cells before it parses code spans
    return f"{fence}{pad}{s}{pad}{fence}"


_RESULT_COLUMNS = ("invariant", "service", "node", "status", "engine", "checked", "cluster")


def _cell(value: object) -> str:
    if isinstance(value, list):
        return "<br>".join(md_text(v) for v in value)
    return md_text(value)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _summary(report: Mapping[str, Any]) -> list[str]:
    titles = cat.from_report(report)
    summary = report.get("summary", {})
    found = summary.get("findings", {})
    lines = [
        _row(["invariant", "title", *STATUSES, "findings"]),
        _row(["---", "---", *["---:"] * len(STATUSES), "---"]),
    ]
    for inv, counts in summary.get("invariants", {}).items():
        cells = [md_code(inv, in_table=True), md_text(cat.info(inv, titles).title)]
        cells += [
            f"**{counts.get(s, 0)}**"
            if s == "violated" and counts.get(s, 0)
            else str(counts.get(s, 0))
            for s in STATUSES
        ]
        cells.append(md_text(findings_cell(found.get(inv, {}))))
        lines.append(_row(cells))
    totals = summary.get("statuses", {})
    all_found = {k: sum(int(c.get(k, 0)) for c in found.values()) for k in ("error", "warning", "note")}
    lines.append(
        _row(["**total**", "", *[f"**{totals.get(s, 0)}**" for s in STATUSES], md_text(findings_cell(all_found))])
    )
    lines += ["", md_text(LEGEND_HEAD), ""]
    lines += [f"- **{md_text(c)}**: {md_text(m)}" for c, m in LEGEND]
    return lines


def _finding(n: int, f: Mapping[str, Any]) -> list[str]:
    status = finding_word(f)
    service, node = str(f.get("service", "")), str(f.get("node", ""))
    title = (
        f"### {n}. {_STATUS_MARK.get(status, '')} {md_text(f.get('invariant', ''))} "
        f"{md_text(status)}: {md_code(service) or md_text('(node-wide)')} on "
        f"{md_code(node) or md_text('(any node)')}"
    )
    lines = [
        title,
        "",
        f"**{md_text(f.get('severity', 'error'))}**: {md_text(f.get('message', ''))}",
        "",
    ]
    rows = [
        ("packet", md_code(packet_json_text(f.get("counterexample")), in_table=True)),
        ("expected", md_lines(f.get("expected", ""))),
        ("actual", md_lines(f.get("actual", ""))),
        ("location", md_code(f.get("location", ""), in_table=True)),
    ]
    rows = [(k, v) for k, v in rows if v]
    if rows:
        lines += [_row(["", ""]), _row(["---", "---"])]
        lines += [_row([f"**{k}**", v]) for k, v in rows]
        lines.append("")
    hops = flow(f)
    if hops:
        note = " (the red step is where the rules part from what Kubernetes promises)"
        lines += [
            f"Path of the packet{note if any(h.fault for h in hops) else ''}:",
            "",
            "```mermaid",
            flow_mermaid(hops).rstrip("\n"),
            "```",
            "",
        ]
    path = [str(p) for p in f.get("path", [])]
    if path:
        nums = [int(x) for x in f.get("lines", [])]
        steps = steps_from_json(path, nums)
        texts = [str(t) for t in f.get("rules", [])]
        lines.append("Rule path:")
        lines.append("")
        for i, step in enumerate(steps):
            at = f" (line {step.line})" if step.line else ""
            rule = f": {md_code(texts[i])}" if i < len(texts) and texts[i] else ""
            lines.append(f"{i + 1}. {md_code(str(step))}{at}{rule}")
        lines.append("")
    return lines


def render_markdown(report: Mapping[str, Any]) -> str:
    """The report as one GitHub-flavoured Markdown document."""
    summary = report.get("summary", {})
    outcome = str(summary.get("outcome", "?"))
    tool = report.get("tool", {})
    facts = [
        f"**outcome:** {_STATUS_MARK.get(outcome, '')} {md_text(outcome)} "
        f"(exit code {md_text(summary.get('exit_code', '?'))})",
    ]
    if report.get("command"):
        facts.append(f"**command:** {md_code(report['command'])}")
    if report.get("clusters"):
        facts.append("**clusters:** " + ", ".join(md_code(c) for c in report["clusters"]))
    facts.append(f"**results:** {md_text(summary.get('results', len(report.get('results', []))))}")
    if tool:
        facts.append(
            f"**tool:** {md_text(tool.get('name', ''))} {md_text(tool.get('version', ''))}"
        )
    lines = [f"# nat-verify report: {md_text(outcome)}", "", " · ".join(facts), ""]
    lines += ["## Summary", "", *_summary(report), ""]
    premises = assumption_texts(report.get("assumptions"))
    if premises:
        lines += [f"## What the results rest on ({len(premises)})", "", *(f"- {md_text(x)}" for x in premises), ""]
    findings = list(report.get("findings", []))
    lines += [f"## Findings ({len(findings)})", ""]
    if not findings:
        lines += ["No findings.", ""]
    for n, f in enumerate(findings, 1):
        lines += _finding(n, f)
    results = list(report.get("results", []))
    # what newer engines add to a result (assumptions, ...) gets a column of its own
    extra = sorted({k for r in results for k in r} - set(_RESULT_COLUMNS))
    lines += [
        f"## Results ({len(results)})",
        "",
        "<details><summary>every (invariant, service, node) checked</summary>",
        "",
        _row(["invariant", "service", "node", "status", "engine", "checked", "cluster", *extra]),
        _row(["---"] * 5 + ["---:", "---"] + ["---"] * len(extra)),
    ]
    for r in results:
        lines.append(
            _row(
                [
                    md_code(r.get("invariant", ""), in_table=True),
                    md_code(r.get("service", ""), in_table=True) or md_text("(node-wide)"),
                    md_code(r.get("node", ""), in_table=True),
                    f"{_STATUS_MARK.get(str(r.get('status')), '')} {md_text(r.get('status', ''))}",
                    md_text(r.get("engine", "")),
                    md_text(r.get("checked", "")),
                    md_code(r.get("cluster", ""), in_table=True),
                    *(_cell(r.get(k, "")) for k in extra),
                ]
            )
        )
    lines += ["", "</details>", ""]
    return "\n".join(lines)
