"""One self-contained HTML page: inline CSS, no scripts, no fonts or styles from elsewhere.

Every value taken from the report (and so from dumps and manifests) passes through ``esc``;
the page has no JavaScript at all, so there is nothing for an injected string to talk to.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from nat_verify.report import catalogue as cat
from nat_verify.report.document import STATUSES
from nat_verify.report.words import packet_json_text, where

_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto;
       max-width: 70em; padding: 0 1em; color: #1f2328; background: #fff; }
h1 { font-size: 1.6em; margin-bottom: .2em; }
code, .mono { font: 13px ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
table { border-collapse: collapse; margin: .8em 0; }
th, td { border: 1px solid #d0d7de; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.proved, .holds, .ok { color: #1a7f37; font-weight: 600; }
.violated, .error { color: #cf222e; font-weight: 600; }
.inconclusive, .warning { color: #9a6700; font-weight: 600; }
.note { color: #0969da; }
.zero { color: #8c959f; }
section.finding { border: 1px solid #d0d7de; border-left: 4px solid #cf222e; border-radius: 6px;
                  padding: .6em 1em; margin: 1em 0; }
section.finding.inconclusive { border-left-color: #9a6700; font-weight: normal; }
dl { display: grid; grid-template-columns: max-content auto; gap: .2em 1em; margin: .5em 0; }
dt { font-weight: 600; } dd { margin: 0; }
ol.path { margin: .3em 0; }
.facts span { margin-right: 1.5em; }
"""


def esc(value: object) -> str:
    """Text for HTML content or a quoted attribute."""
    return html.escape(str(value), quote=True)


def _status(status: str) -> str:
    return f'<span class="{esc(status)}">{esc(status)}</span>'


def _summary(report: Mapping[str, Any]) -> list[str]:
    titles = cat.from_report(report)
    summary = report.get("summary", {})
    out = ["<table>", "<thead><tr><th>invariant</th><th>title</th>"]
    out += [f"<th>{esc(s)}</th>" for s in STATUSES]
    out.append("</tr></thead><tbody>")
    for inv, counts in summary.get("invariants", {}).items():
        cells = [f"<td><code>{esc(inv)}</code></td><td>{esc(cat.info(inv, titles).title)}</td>"]
        for s in STATUSES:
            n = int(counts.get(s, 0))
            cells.append(f'<td class="n {esc(s) if n else "zero"}">{n}</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    totals = summary.get("statuses", {})
    out.append("</tbody><tfoot><tr><th>total</th><th></th>")
    out += [f'<th class="n">{int(totals.get(s, 0))}</th>' for s in STATUSES]
    out.append("</tr></tfoot></table>")
    return out


def _finding(f: Mapping[str, Any]) -> list[str]:
    status = str(f.get("status", "violated"))
    severity = str(f.get("severity", "error"))
    out = [
        f'<section class="finding {esc(status)}">',
        f"<h3><code>{esc(f.get('invariant', ''))}</code> {_status(status)} "
        f'<span class="mono">{esc(where(f.get("service", ""), f.get("node", "")))}</span> '
        f'<span class="{esc(severity)}">[{esc(severity)}]</span></h3>',
        f"<p>{esc(f.get('message', ''))}</p>",
        "<dl>",
    ]
    for label, value, mono in (
        ("packet", packet_json_text(f.get("counterexample")), True),
        ("expected", f.get("expected", ""), False),
        ("actual", f.get("actual", ""), False),
        ("location", f.get("location", ""), True),
    ):
        if value:
            body = f"<code>{esc(value)}</code>" if mono else esc(value)
            out.append(f"<dt>{esc(label)}</dt><dd>{body}</dd>")
    out.append("</dl>")
    path = list(f.get("path", []))
    if path:
        nums = list(f.get("lines", []))
        out.append('<div>rule path:</div><ol class="path">')
        for i, step in enumerate(path):
            line = nums[i] if i < len(nums) else 0
            at = f' <span class="zero">(line {esc(line)})</span>' if line else ""
            out.append(f"<li><code>{esc(step)}</code>{at}</li>")
        out.append("</ol>")
    out.append("</section>")
    return out


def _results(report: Mapping[str, Any]) -> list[str]:
    cols = ("invariant", "service", "node", "status", "engine", "checked", "cluster")
    out = ["<details><summary>every (invariant, service, node) checked</summary>", "<table>"]
    out.append("<thead><tr>" + "".join(f"<th>{c}</th>" for c in cols) + "</tr></thead><tbody>")
    for r in report.get("results", []):
        cells = []
        for c in cols:
            v = r.get(c, "")
            if c == "status":
                cells.append(f"<td>{_status(str(v))}</td>")
            elif c == "checked":
                cells.append(f'<td class="n">{esc(v)}</td>')
            else:
                cells.append(f"<td><code>{esc(v)}</code></td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></details>")
    return out


def render_html(report: Mapping[str, Any]) -> str:
    """The report as a single HTML5 document (UTF-8, inline CSS, no external resources)."""
    summary = report.get("summary", {})
    outcome = str(summary.get("outcome", "?"))
    tool = report.get("tool", {})
    findings = list(report.get("findings", []))
    facts = [
        f"<span>outcome: {_status(outcome)} (exit code {esc(summary.get('exit_code', '?'))})</span>"
    ]
    if report.get("command"):
        facts.append(f"<span>command: <code>{esc(report['command'])}</code></span>")
    if report.get("clusters"):
        names = ", ".join(f"<code>{esc(c)}</code>" for c in report["clusters"])
        facts.append(f"<span>clusters: {names}</span>")
    if tool:
        facts.append(f"<span>{esc(tool.get('name', ''))} {esc(tool.get('version', ''))}</span>")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>nat-verify report: {esc(outcome)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        f"<h1>nat-verify report: {_status(outcome)}</h1>",
        f'<p class="facts">{"".join(facts)}</p>',
        "<h2>Summary</h2>",
        *_summary(report),
        f"<h2>Findings ({len(findings)})</h2>",
    ]
    if not findings:
        parts.append("<p>No findings.</p>")
    for f in findings:
        parts += _finding(f)
    parts += [f"<h2>Results ({len(report.get('results', []))})</h2>", *_results(report)]
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)
