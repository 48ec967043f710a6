"""Terminal output: the summary table and findings of a report, and traces in one line each.

Everything goes through ``rich`` ``Text`` objects, never markup strings, so a chain name or a
comment such as ``[red]`` from a dump is printed as it is. Colour is added only when asked for
(``color=True``); ``want_color`` decides that for a stream the usual way.
"""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from rich import box
from rich.console import Console, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from nat_verify.model.outcome import Outcome, Trace
from nat_verify.report import catalogue as cat
from nat_verify.report.path import BUILTIN_CHAINS, Node, Segment, segments, walk
from nat_verify.report.words import (
    LEGEND,
    LEGEND_HEAD,
    STATUSES,
    assumption_texts,
    finding_word,
    findings_cell,
    packet_json_text,
    packet_text,
    source_text,
    step_text,
    value_lines,
    verdict_text,
    visible,
    where,
)

STATUS_STYLE = {
    "proved": "bold green",
    "holds": "green",
    "violated": "bold red",
    "inconclusive": "yellow",
    "ok": "bold green",
    "warning": "yellow",
    "note": "cyan",
}
SEVERITY_STYLE = {"error": "red", "warning": "yellow", "note": "cyan"}
_DEST_NAT = frozenset({"DNAT", "REDIRECT", "NETMAP"})


def want_color(stream: TextIO) -> bool:
    """Colour for a terminal, unless NO_COLOR is set; FORCE_COLOR forces it."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def terminal_width(stream: TextIO) -> int:
    """The width to lay text out in: the terminal's (or $COLUMNS), 80 when it cannot be told."""
    isatty = getattr(stream, "isatty", None)
    if isatty and isatty():
        return max(40, shutil.get_terminal_size((80, 24)).columns)
    try:
        return max(40, int(os.environ.get("COLUMNS", "")))
    except ValueError:
        return 80


def _console(color: bool, width: int) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    console = Console(
        file=buf,
        width=width,
        force_terminal=color,
        color_system="standard" if color else None,
        no_color=not color,
        highlight=False,
        emoji=False,
        markup=False,
        legacy_windows=False,
    )
    return console, buf


def _print(
    items: Sequence[RenderableType], *, color: bool, width: int, soft_wrap: bool = True
) -> str:
    console, buf = _console(color, width)
    for item in items:
        # soft_wrap: long trace lines stay one line, as promised
        console.print(item, soft_wrap=soft_wrap and isinstance(item, Text))
    text = buf.getvalue()
    if soft_wrap:
        return text
    # tables and padding fill lines with spaces up to the width; a reader never needs them
    return "\n".join(line.rstrip(" ") for line in text.split("\n"))


# --- traces --------------------------------------------------------------------------------


def _chain_nodes(outcome: Outcome) -> list[Node]:
    """The chains the one-line form shows for an outcome.

    The main line (call stack at the deciding rule) of each hook that did destination NAT,
    then of the hook that dropped or rejected the packet; side trips that returned, such as
    KUBE-MARK-MASQ, and hooks that only accepted are left to the verbose form. With neither
    (no NAT, accepted), the chains entered in the first hook are shown.
    """
    segs = segments(outcome.path)
    chosen: list[Segment] = [s for s in segs if s.nat_targets & _DEST_NAT]
    if (
        outcome.verdict in ("drop", "reject", "inconclusive")
        and segs
        and not any(s is segs[-1] for s in chosen)
    ):
        chosen.append(segs[-1])
    if not chosen:
        return list(walk(segs[0].steps).nodes) if segs else []
    nodes: list[Node] = []
    for seg in chosen:
        nodes.extend(n for n in seg.main_line if not nodes or nodes[-1] != n)
    return nodes


def _chains_text(nodes: Sequence[Node]) -> str:
    if not nodes:
        return "no rules"
    parts = []
    table = ""
    for t, chain in nodes:
        parts.append(f"{t} {chain}" if (t != table or chain in BUILTIN_CHAINS) else chain)
        table = t
    return " -> ".join(parts)


_SGR = {
    "cyan": "36",
    "red": "1;31",
    "green": "1;32",
    "yellow": "1;33",
    "magenta": "35",
    "dim": "2",
    "bold": "1",
}
safe = visible  # text for a terminal: an ESC from a dump comment is shown as \x1b


def _paint(text: str, style: str, color: bool) -> str:
    return f"\x1b[{_SGR[style]}m{text}\x1b[0m" if color and style else text


# The one-line form is built as plain strings (no rich): ``trace --packets`` prints one per
# packet, and a rich Console per line would cost more than the trace itself.


def trace_line(trace: Trace, outcome: Outcome, *, color: bool = False) -> str:
    """One outcome as ``packet | chains | verdict (p) | source``."""
    verdict_style = {"drop": "red", "reject": "red", "inconclusive": "yellow"}.get(
        outcome.verdict, "green"
    )
    parts = [
        _paint(safe(packet_text(trace.packet)), "cyan", color),
        safe(_chains_text(_chain_nodes(outcome))),
        _paint(safe(verdict_text(outcome)), verdict_style, color),
    ]
    src = source_text(outcome, trace.packet)
    if src:
        parts.append(
            _paint(safe(src), "magenta" if outcome.masquerade or outcome.snat else "", color)
        )
    return " | ".join(parts)


def _step_lines(outcome: Outcome, source_lines: Sequence[str] | None, color: bool) -> list[str]:
    out = []
    for step in outcome.path:
        rule = step.rule if step.rule else "policy"
        target = step_text(step)[len(str(step)) :]
        line = f"    {safe(step.table):<7} {safe(step.chain):<30} {rule:>6}"
        line += _paint(f"{safe(target):<34}", "bold", color)
        if step.line:
            at = f" line {step.line}"
            if source_lines and 0 < step.line <= len(source_lines):
                at += f": {safe(source_lines[step.line - 1].rstrip(chr(10)))}"
            line += _paint(at, "dim", color)
        out.append(line.rstrip())
    if outcome.reason:
        out.append(_paint(f"    reason: {safe(outcome.reason)}", "yellow", color))
    return out


def render_trace_text(
    trace: Trace,
    *,
    verbose: bool = False,
    color: bool = False,
    source_lines: Sequence[str] | None = None,
) -> str:
    """The answer of ``nat-verify trace``: one line per outcome.

    ``verbose`` adds every step below its outcome (table, chain, rule number, target and dump
    line, with the line's text when ``source_lines``, the dump split in lines, is given).
    """
    lines: list[str] = []
    for outcome in trace.outcomes:
        lines.append(trace_line(trace, outcome, color=color))
        if verbose:
            lines.extend(_step_lines(outcome, source_lines, color))
    if not trace.outcomes:
        lines.append(f"{safe(packet_text(trace.packet))} | no outcome")
    return "\n".join(lines) + "\n"


# --- assumptions ---------------------------------------------------------------------------


def assumption_lines(items: Sequence[Mapping[str, Any]], *, color: bool = False, limit: int = 4) -> list[str]:
    """``assumed: FACT = VALUE (DETAIL)`` per premise a result rests on (``assumption_texts``),
    assumed ones in yellow."""
    return [
        _paint(safe(line), "yellow" if line.startswith("assumed") else "dim", color)
        for line in assumption_texts(items, limit=limit)
    ]


# --- reports -------------------------------------------------------------------------------


def _status_text(status: str) -> Text:
    return Text(safe(status), style=STATUS_STYLE.get(status, ""))


WIDE = 100  # from this width on, every status column is shown, under its full name
SHORT = {"violated": "viol.", "inconclusive": "inc."}


def shown_statuses(report: Mapping[str, Any], width: int) -> tuple[str, ...]:
    """The status columns of the table: all of them from ``WIDE`` columns on; below, only those
    some result has (so the titles keep room at 80 columns)."""
    totals = report.get("summary", {}).get("statuses", {})
    if width >= WIDE:
        return STATUSES
    return tuple(s for s in STATUSES if totals.get(s, 0)) or ("proved",)


def summary_table(report: Mapping[str, Any], width: int = WIDE) -> Table:
    """Invariant x status counts of results, and the findings each invariant has."""
    titles = {**cat.BUILTIN, **cat.from_report(report)}
    table = Table(box=box.SIMPLE_HEAVY, show_footer=True, pad_edge=False)
    summary = report.get("summary", {})
    totals = summary.get("statuses", {})
    found = summary.get("findings", {})
    statuses = shown_statuses(report, width)
    table.add_column("invariant", footer="total", no_wrap=True)
    table.add_column("title", ratio=1, overflow="fold")
    for status in statuses:
        head = status if width >= WIDE else SHORT.get(status, status)
        table.add_column(head, justify="right", footer=str(totals.get(status, 0)), no_wrap=True)
    all_found = {s: sum(int(c.get(s, 0)) for c in found.values()) for s in ("error", "warning", "note")}
    table.add_column("findings", footer=findings_cell(all_found), max_width=12, overflow="fold")
    for inv, counts in summary.get("invariants", {}).items():
        row: list[RenderableType] = [Text(safe(inv)), Text(safe(cat.info(inv, titles).title))]
        for status in statuses:
            n = counts.get(status, 0)
            row.append(Text(str(n), style=STATUS_STYLE[status] if n else "dim"))
        mine = found.get(inv, {})
        row.append(Text(findings_cell(mine), style="red" if mine.get("error") else "yellow"))
        table.add_row(*row)
    return table


def legend(columns: Sequence[str] = (), short: bool = False) -> list[RenderableType]:
    """What the table's columns count (those of ``columns``, or all)."""
    rows = [
        (f"{SHORT[c]} ({c})" if short and c in SHORT else c, [m])
        for c, m in LEGEND
        if not columns or c in columns
    ]
    return [Text(LEGEND_HEAD), Padding(_facts(rows, style=""), (0, 0, 0, 2))]


def _facts(rows: Sequence[tuple[str, list[str]]], style: str = "bold") -> Table:
    """Label/value lines with a hanging indent, so a wrapped value stays under itself."""
    grid = Table.grid(padding=(0, 1), pad_edge=False)
    grid.add_column(no_wrap=True, style=style)
    grid.add_column(ratio=1, overflow="fold")
    for label, values in rows:
        for i, value in enumerate(values):
            grid.add_row(f"{label}:" if i == 0 else "", value)
    return grid


def finding_lines(f: Mapping[str, Any]) -> list[RenderableType]:
    """A finding: its headline, message, packet, expected/actual, location and rule path."""
    head = Text()
    head.append(safe(f.get("invariant", "")), style="bold")
    head.append(" ")
    word = finding_word(f)
    head.append_text(_status_text(word))
    head.append(f"  {safe(where(f.get('service', ''), f.get('node', '')))}")
    severity = str(f.get("severity", "error"))
    if word != severity:
        head.append(f"  [{safe(severity)}]", style=SEVERITY_STYLE.get(severity, ""))
    items: list[RenderableType] = [head, Padding(Text(safe(f.get("message", ""))), (0, 0, 0, 2))]
    rows = []
    for label, value in (
        ("packet", packet_json_text(f.get("counterexample"))),
        ("expected", f.get("expected", "")),
        ("actual", f.get("actual", "")),
        ("location", f.get("location", "")),
    ):
        if value:
            rows.append((label, value_lines(value)))
    if rows:
        items.append(Padding(_facts(rows), (0, 0, 0, 2)))
    path = list(f.get("path", []))
    if path:
        nums = list(f.get("lines", []))
        texts = list(f.get("rules", []))
        steps = Table.grid(padding=(0, 1), pad_edge=False)
        steps.add_column(justify="right", no_wrap=True)
        steps.add_column(ratio=1, overflow="fold")
        for i, step in enumerate(path):
            line = nums[i] if i < len(nums) else 0
            t = Text(safe(step))
            if line:
                t.append(f"  (line {safe(line)})", style="dim")
            if i < len(texts) and texts[i]:
                t.append("\n")
                t.append(safe(texts[i]), style="dim")
            steps.add_row(f"{i + 1}.", t)
        items.append(Padding(Text("rule path:", style="bold"), (0, 0, 0, 2)))
        items.append(Padding(steps, (0, 0, 0, 4)))
    return items


def inconclusive_lines(results: Sequence[Mapping[str, Any]], *, limit: int = 8) -> list[str]:
    """One line per reason an inconclusive result gives, naming the results it covers."""
    by_reason: dict[str, list[str]] = {}
    for r in results:
        if r.get("status") == "inconclusive":
            what = f"{r.get('invariant', '')} {r.get('service', '')}".strip()
            by_reason.setdefault(str(r.get("reason") or "(no reason recorded)"), []).append(what)
    lines = [f"{safe(', '.join(dict.fromkeys(whats)))}: {safe(reason)}" for reason, whats in by_reason.items()]
    if len(lines) > limit:
        lines = [*lines[:limit], f"... and {len(lines) - limit} more (JSON: results[].reason)"]
    return lines


def render_text(report: Mapping[str, Any], *, color: bool = False, width: int = 80) -> str:
    """The summary table (invariant x status), what its columns mean, and every finding.

    Laid out for ``width`` columns (``terminal_width`` gives the terminal's): at 80 the titles
    wrap inside their column; with more room they take it.
    """
    summary = report.get("summary", {})
    outcome = str(summary.get("outcome", ""))
    head = Text()
    head.append(f"nat-verify {safe(report.get('command', ''))}".rstrip() + ": ")
    head.append(safe(outcome.upper()) or "?", style=STATUS_STYLE.get(outcome, "bold"))
    head.append(f" (exit code {safe(summary.get('exit_code', '?'))})")
    severities = summary.get("severities", {})
    if outcome == "ok" and (severities.get("warning") or severities.get("note")):
        head.append(", " + findings_cell({**severities, "error": 0}), style="yellow")
    clusters = report.get("clusters", [])
    if clusters:
        head.append(f"  clusters: {safe(', '.join(map(str, clusters)))}")
    columns = (*shown_statuses(report, width), "findings")
    items: list[RenderableType] = [head, summary_table(report, width), *legend(columns, short=width < WIDE), Text("")]
    lines = assumption_lines(report.get("assumptions", []), color=color)
    if lines:
        items.append(Text(f"What the results rest on ({len(lines)})", style="bold underline"))
    for line in lines:
        items.append(Padding(Text.from_ansi(line) if color else Text(line), (0, 0, 0, 2)))
    if lines:
        items.append(Text(""))
    why = inconclusive_lines(report.get("results", []))
    if why:
        items.append(Text(f"Why inconclusive ({len(why)})", style="bold underline"))
        items.extend(Padding(Text(line), (0, 0, 0, 2)) for line in why)
        items.append(Text(""))
    findings = list(report.get("findings", []))
    if findings:
        items.append(Text(f"Findings ({len(findings)})", style="bold underline"))
        for f in findings:
            items.extend(finding_lines(f))
            items.append(Text(""))
    else:
        items.append(Text("No findings."))
    return _print(items, color=color, width=width, soft_wrap=False)


def render_finding_text(f: Mapping[str, Any], *, width: int = 100) -> str:
    """One finding as plain text, as the terminal shows it without colour."""
    return _print(finding_lines(f), color=False, width=width, soft_wrap=False).rstrip("\n")
