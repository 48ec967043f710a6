"""One self-contained HTML page: inline CSS and SVG, no scripts, nothing loaded from elsewhere.

Every value taken from the report (and so from dumps and manifests) passes through ``esc``:
HTML-escaped, with its control characters made visible. The page has no JavaScript, so an
injected string has nothing to talk to. Colour classes (``st-*``) sit only on the words and
numbers they colour, never on a card or a block, so "expected" never reads like "actual". The
layout fits a phone: tables wrap their text, the wide results table scrolls inside its own box,
and the pictures scale with the page.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nat_verify.report import catalogue as cat
from nat_verify.report.flow import flow
from nat_verify.report.svg import esc, path_svg, shares_svg
from nat_verify.report.words import (
    LEGEND,
    LEGEND_HEAD,
    STATUSES,
    assumption_texts,
    finding_word,
    findings_cell,
    packet_json_text,
    value_lines,
    where,
)

_CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5em auto;
       max-width: 72em; padding: 0 1em; color: #1f2328; background: #fff;
       overflow-wrap: anywhere; }
h1 { font-size: 1.6em; margin-bottom: .2em; }
code, .mono { font: 13px ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: .8em 0; }
th, td { border: 1px solid #d0d7de; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #f6f8fa; white-space: nowrap; }
th, td { overflow-wrap: normal; }
td.title, td.wrap, .t-narrow { overflow-wrap: break-word; }
.t-narrow { display: none; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.st-proved, .st-holds, .st-ok { color: #1a7f37; font-weight: 600; }
.st-violated, .st-error { color: #cf222e; font-weight: 600; }
.st-inconclusive { color: #8250df; font-weight: 600; }
.st-warning { color: #9a6700; font-weight: 600; }
.st-note { color: #0969da; }
.zero { color: #8c959f; }
th .short { display: none; }
p.legend-head { color: #57606a; font-size: .92em; margin-bottom: 0; }
dl.legend { display: grid; grid-template-columns: max-content 1fr; gap: .1em .8em;
            font-size: .92em; color: #57606a; margin: .3em 0 1em; }
dl.legend dt { font-weight: 600; }
section.finding { border: 1px solid #d0d7de; border-left: 4px solid #cf222e; border-radius: 6px;
                  padding: .6em 1em; margin: 1em 0; }
section.card-warning { border-left-color: #bf8700; }
section.card-note { border-left-color: #0969da; }
section.card-inconclusive { border-left-color: #8250df; }
section.finding h3 { margin: .2em 0 .4em; font-size: 1.05em; }
dl.facts { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: .2em 1em;
           margin: .5em 0; }
dl.facts dt { font-weight: 600; } dl.facts dd { margin: 0; }
ol.path { margin: .3em 0; padding-left: 2em; }
ol.path .rule { display: block; color: #57606a; }
.facts-line span { margin-right: 1.5em; }
figure { margin: .6em 0; }
figcaption { font-size: .9em; color: #57606a; }
svg.path, svg.shares { width: 100%; max-width: 640px; height: auto; display: block; }
svg text { font: 12px system-ui, sans-serif; fill: #1f2328; }
svg .l-t { font-size: 14px; font-weight: 600; }
svg .l-f { fill: #cf222e; font-weight: 600; }
svg .l-n { fill: #57606a; }
svg .l-w, svg .l-r { font: 10.5px ui-monospace, Menlo, Consolas, monospace; }
svg .l-r { fill: #57606a; }
svg .edge { font: 11px ui-monospace, Menlo, Consolas, monospace; fill: #953800; }
svg rect.box { stroke: #8c959f; stroke-width: 1; }
svg rect.fault { stroke: #cf222e; stroke-width: 3; fill: #ffebe9; }
svg line.arrow { stroke: #57606a; stroke-width: 1.5; }
@media (max-width: 640px) {
  body { font-size: 14px; padding: 0 .6em; }
  th, td { padding: .25em .35em; }
  th .long { display: none; } th .short { display: inline; }
  .empty, .title { display: none; }
  .t-narrow { display: block; font-size: .92em; margin-top: .15em; }
  table.summary { width: 100%; table-layout: fixed; }
  table.summary th.n, table.summary td.n { width: 4em; }
  table.summary th.f { width: 4.8em; }
  table.summary td, table.summary th { white-space: normal; overflow-wrap: break-word; }
}
"""

_SHORT = {"violated": "viol.", "inconclusive": "inc.", "holds": "holds", "proved": "proved"}


def _word(word: str) -> str:
    return f'<span class="st-{esc(word)}">{esc(word)}</span>'


def _summary(report: Mapping[str, Any]) -> list[str]:
    titles = cat.from_report(report)
    summary = report.get("summary", {})
    totals = summary.get("statuses", {})
    found = summary.get("findings", {})
    empty = {s for s in STATUSES if not int(totals.get(s, 0))}

    def cls(s: str, base: str = "n") -> str:
        return f"{base} empty" if s in empty else base

    out = ['<div class="scroll"><table class="summary">', '<thead><tr><th>invariant</th><th class="title">title</th>']
    out += [
        f'<th class="{cls(s)}"><span class="long">{esc(s)}</span><span class="short">{esc(_SHORT[s])}</span></th>'
        for s in STATUSES
    ]
    out.append('<th class="f">findings</th></tr></thead><tbody>')
    for inv, counts in summary.get("invariants", {}).items():
        title = esc(cat.info(inv, titles).title)
        cells = [
            f'<td><code>{esc(inv)}</code><span class="t-narrow" aria-hidden="true">{title}</span></td>'
            f'<td class="title">{title}</td>'
        ]
        for s in STATUSES:
            n = int(counts.get(s, 0))
            cells.append(f'<td class="{cls(s)} {"st-" + s if n else "zero"}">{n}</td>')
        mine = found.get(inv, {})
        word = "error" if mine.get("error") else "warning" if mine.get("warning") else "note"
        cells.append(f'<td class="st-{word}">{esc(findings_cell(mine))}</td>')
        out.append("<tr>" + "".join(cells) + "</tr>")
    all_found = {k: sum(int(c.get(k, 0)) for c in found.values()) for k in ("error", "warning", "note")}
    out.append('</tbody><tfoot><tr><th>total</th><th class="title"></th>')
    out += [f'<th class="{cls(s)}">{int(totals.get(s, 0))}</th>' for s in STATUSES]
    out.append(f"<th>{esc(findings_cell(all_found))}</th></tr></tfoot></table></div>")
    out.append(f'<p class="legend-head">{esc(LEGEND_HEAD)}</p><dl class="legend">')
    out += [f"<dt>{esc(c)}</dt><dd>{esc(m)}</dd>" for c, m in LEGEND]
    out.append("</dl>")
    return out


def _value(value: object, mono: bool) -> str:
    lines = value_lines(value)
    if mono or len(lines) > 1:
        return "<br>".join(f"<code>{esc(line)}</code>" for line in lines)
    return esc(lines[0])


def _finding(n: int, f: Mapping[str, Any]) -> list[str]:
    word = finding_word(f)
    severity = str(f.get("severity", "error"))
    sev = f' <span class="st-{esc(severity)}">[{esc(severity)}]</span>' if severity != word else ""
    out = [
        f'<section class="finding card-{esc(word)}" id="finding-{n}">',
        f"<h3><code>{esc(f.get('invariant', ''))}</code> {_word(word)} "
        f'<span class="mono">{esc(where(f.get("service", ""), f.get("node", "")))}</span>{sev}</h3>',
        f"<p>{esc(f.get('message', ''))}</p>",
        '<dl class="facts">',
    ]
    for label, value, mono in (
        ("packet", packet_json_text(f.get("counterexample")), True),
        ("expected", f.get("expected", ""), False),
        ("actual", f.get("actual", ""), False),
        ("location", f.get("location", ""), True),
    ):
        if value:
            out.append(f"<dt>{esc(label)}</dt><dd>{_value(value, mono)}</dd>")
    out.append("</dl>")
    hops = flow(f)
    if hops:
        caption = "The packet's path through this node's rules, top to bottom"
        if any(h.fault for h in hops):
            caption += "; the box outlined in red is where the rules part from what Kubernetes promises"
        out += [
            "<figure>",
            path_svg(hops, title=f"path of {packet_json_text(f.get('counterexample'))}"),
            f"<figcaption>{esc(caption)}.</figcaption>",
            "</figure>",
        ]
    path = list(f.get("path", []))
    if path:
        nums = list(f.get("lines", []))
        texts = list(f.get("rules", []))
        out.append('<details><summary>rule path</summary><ol class="path">')
        for i, step in enumerate(path):
            line = nums[i] if i < len(nums) else 0
            at = f' <span class="zero">(line {esc(line)})</span>' if line else ""
            rule = f'<code class="rule">{esc(texts[i])}</code>' if i < len(texts) and texts[i] else ""
            out.append(f"<li><code>{esc(step)}</code>{at}{rule}</li>")
        out.append("</ol></details>")
    out.append("</section>")
    return out


def _share_groups(report: Mapping[str, Any]) -> list[tuple[str, list[str], Mapping[str, Any]]]:
    """(service, nodes, share) with the nodes whose shares are the same drawn once."""
    groups: dict[tuple[str, str], tuple[list[str], Mapping[str, Any]]] = {}
    for s in report.get("shares", []) or []:
        key = (str(s.get("service", "")), repr([(e.get("destination"), e.get("probability"), e.get("observed")) for e in s.get("endpoints", [])]))
        if key in groups:
            groups[key][0].append(str(s.get("node", "")))
        else:
            groups[key] = ([str(s.get("node", ""))], s)
    return [(svc, nodes, share) for (svc, _), (nodes, share) in groups.items()]


def _shares(report: Mapping[str, Any]) -> list[str]:
    groups = _share_groups(report)
    if not groups:
        return []
    out = [
        "<h2>Endpoint shares</h2>",
        "<p>Where a pod's new connection to each Service's ClusterIP goes: each endpoint's "
        "probability as the rules give it (exact in the JSON report), against the uniform 1/n "
        "Kubernetes promises.</p>",
    ]
    for service, nodes, share in groups:
        eps: Sequence[Mapping[str, Any]] = share.get("endpoints", [])
        dnat = [e for e in eps if e.get("verdict", "forward") in ("forward", "accept")]
        title = f"{service} on {', '.join(nodes)}"
        if not dnat:
            verdicts = ", ".join(sorted({str(e.get("verdict", "")) for e in eps}))
            out.append(f"<p><code>{esc(service)}</code> on {esc(', '.join(nodes))}: {esc(verdicts)} (no endpoint)</p>")
            continue
        out += [
            "<figure>",
            shares_svg(dnat, probes=int(share.get("probes", 0) or 0), title=f"endpoint shares of {title}"),
            f"<figcaption><code>{esc(service)}</code> on {esc(', '.join(nodes))}</figcaption>",
            "</figure>",
        ]
    return out


def _premises(report: Mapping[str, Any]) -> list[str]:
    lines = assumption_texts(report.get("assumptions"))
    if not lines:
        return []
    return [f"<h2>What the results rest on ({len(lines)})</h2><ul>", *(f"<li>{esc(x)}</li>" for x in lines), "</ul>"]


def _results(report: Mapping[str, Any]) -> list[str]:
    cols = ["invariant", "service", "node", "status", "engine", "checked", "cluster"]
    rows = list(report.get("results", []))
    extra = sorted({k for r in rows for k in r} - set(cols))  # what newer engines add
    cols += extra
    out = ["<details><summary>every (invariant, service, node) checked</summary>", '<div class="scroll"><table>']
    out.append("<thead><tr>" + "".join(f"<th>{esc(c)}</th>" for c in cols) + "</tr></thead><tbody>")
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c, "")
            if c == "status":
                cells.append(f"<td>{_word(str(v))}</td>")
            elif c == "checked":
                cells.append(f'<td class="n">{esc(v)}</td>')
            elif isinstance(v, list):
                cells.append("<td>" + "<br>".join(esc(x) for x in v) + "</td>")
            else:
                cells.append(f"<td><code>{esc(v)}</code></td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div></details>")
    return out


def render_html(report: Mapping[str, Any]) -> str:
    """The report as a single HTML5 document (UTF-8, inline CSS and SVG, no external resources)."""
    summary = report.get("summary", {})
    outcome = str(summary.get("outcome", "?"))
    tool = report.get("tool", {})
    findings = list(report.get("findings", []))
    severities = summary.get("severities", {})
    extra = ""
    if outcome == "ok" and (severities.get("warning") or severities.get("note")):
        extra = f", {esc(findings_cell({**severities, 'error': 0}))}"
    facts = [f"<span>outcome: {_word(outcome)}{extra} (exit code {esc(summary.get('exit_code', '?'))})</span>"]
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
        f"<h1>nat-verify report: {_word(outcome)}</h1>",
        f'<p class="facts-line">{"".join(facts)}</p>',
        "<h2>Summary</h2>",
        *_summary(report),
        *_premises(report),
        f"<h2>Findings ({len(findings)})</h2>",
    ]
    if not findings:
        parts.append("<p>No findings.</p>")
    for n, f in enumerate(findings, 1):
        parts += _finding(n, f)
    parts += _shares(report)
    parts += [f"<h2>Results ({len(report.get('results', []))})</h2>", *_results(report)]
    parts += ["</body>", "</html>", ""]
    return "\n".join(parts)
