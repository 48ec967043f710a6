"""Terminal output: the summary table and findings of a report, and traces in one line each.

Everything goes through ``rich`` ``Text`` objects, never markup strings, so a chain name or a
comment such as ``[red]`` from a dump is printed as it is. Colour is added only when asked for
(``color=True``); ``want_color`` decides that for a stream the usual way.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from nat_verify.model.outcome import Outcome, Trace
from nat_verify.report import catalogue as cat
from nat_verify.report.document import STATUSES
from nat_verify.report.path import BUILTIN_CHAINS, Node, Segment, segments, walk
from nat_verify.report.words import (
    packet_json_text,
    packet_text,
    source_text,
    step_text,
    verdict_text,
    where,
)

STATUS_STYLE = {
    "proved": "bold green",
    "holds": "green",
    "violated": "bold red",
    "inconclusive": "yellow",
    "ok": "bold green",
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


def _print(items: Sequence[RenderableType], *, color: bool, width: int) -> str:
    console, buf = _console(color, width)
    for item in items:
        # soft_wrap: long trace lines stay one line, as promised
        console.print(item, soft_wrap=isinstance(item, Text))
    return buf.getvalue()


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
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")


def safe(text: object) -> str:
    """Text for a terminal: control characters (an ESC from a dump comment) shown as ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


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
    """``assumed: FACT = VALUE (DETAIL)`` per premise a result rests on, the same premise of
    several nodes on one line (values listed up to ``limit``, the nodes counted)."""
    groups: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    for a in items:
        key = (str(a.get("basis", "assumed")), str(a.get("fact", "")), str(a.get("detail", "")))
        groups.setdefault(key, []).append((str(a.get("node", "")), str(a.get("value", ""))))
    out = []
    for (basis, fact, detail), rows in groups.items():
        values = list(dict.fromkeys(v for _, v in rows))
        shown = "; ".join(values[:limit]) + (f"; +{len(values) - limit} more" if len(values) > limit else "")
        nodes = sorted({n for n, _ in rows if n})
        where_ = f" [{len(nodes)} nodes]" if len(nodes) > 1 else (f" [{nodes[0]}]" if nodes else "")
        line = f"{basis}: {fact} = {shown}{where_}" + (f" ({detail})" if detail else "")
        out.append(_paint(safe(line), "yellow" if basis == "assumed" else "dim", color))
    return out


# --- reports -------------------------------------------------------------------------------


def _status_text(status: str) -> Text:
    return Text(safe(status), style=STATUS_STYLE.get(status, ""))


def summary_table(report: Mapping[str, Any]) -> Table:
    titles = {**cat.BUILTIN, **cat.from_report(report)}
    table = Table(box=box.SIMPLE_HEAVY, show_footer=True, pad_edge=False)
    summary = report.get("summary", {})
    totals = summary.get("statuses", {})
    table.add_column("invariant", footer="total")
    table.add_column("title")
    for status in STATUSES:
        table.add_column(status, justify="right", footer=str(totals.get(status, 0)))
    for inv, counts in summary.get("invariants", {}).items():
        row: list[RenderableType] = [Text(safe(inv)), Text(safe(cat.info(inv, titles).title))]
        for status in STATUSES:
            n = counts.get(status, 0)
            row.append(Text(str(n), style=STATUS_STYLE[status] if n else "dim"))
        table.add_row(*row)
    return table


def finding_lines(f: Mapping[str, Any]) -> list[Text]:
    head = Text()
    head.append(safe(f.get("invariant", "")), style="bold")
    head.append(" ")
    severity = str(f.get("severity", "error"))
    status = str(f.get("status", "violated"))
    if severity == "warning" and status == "violated":
        status = "warning"  # a warning violates nothing: say what it is
    head.append_text(_status_text(status) if status != "warning" else Text("warning", style=SEVERITY_STYLE.get(severity, "")))
    head.append(f"  {safe(where(f.get('service', ''), f.get('node', '')))}  ")
    head.append(f"[{safe(severity)}]", style=SEVERITY_STYLE.get(severity, ""))
    lines = [head, Text(f"  {safe(f.get('message', ''))}")]
    for label, value in (
        ("packet", packet_json_text(f.get("counterexample"))),
        ("expected", f.get("expected", "")),
        ("actual", f.get("actual", "")),
        ("location", f.get("location", "")),
    ):
        if value:
            t = Text(f"  {label + ':':<10}", style="bold")
            t.append(safe(value))
            lines.append(t)
    path = list(f.get("path", []))
    if path:
        lines.append(Text("  rule path:", style="bold"))
        nums = list(f.get("lines", []))
        for i, step in enumerate(path):
            line = nums[i] if i < len(nums) else 0
            t = Text(f"    {i + 1:>2}. {safe(step)}")
            if line:
                t.append(f"  (line {safe(line)})", style="dim")
            lines.append(t)
    return lines


def render_text(report: Mapping[str, Any], *, color: bool = False, width: int = 100) -> str:
    """The summary table (invariant x status) and every finding, for a terminal."""
    summary = report.get("summary", {})
    outcome = str(summary.get("outcome", ""))
    head = Text()
    head.append(f"nat-verify {safe(report.get('command', ''))}".rstrip() + ": ")
    head.append(safe(outcome.upper()) or "?", style=STATUS_STYLE.get(outcome, "bold"))
    head.append(f" (exit code {safe(summary.get('exit_code', '?'))})")
    clusters = report.get("clusters", [])
    if clusters:
        head.append(f"  clusters: {safe(', '.join(map(str, clusters)))}")
    items: list[RenderableType] = [head, summary_table(report)]
    for line in assumption_lines(report.get("assumptions", [])):
        items.append(Text(line, style="yellow" if line.startswith("assumed") else "dim"))
    findings = list(report.get("findings", []))
    if findings:
        items.append(Text(f"Findings ({len(findings)})", style="bold underline"))
        for f in findings:
            items.extend(finding_lines(f))
            items.append(Text(""))
    else:
        items.append(Text("No findings."))
    return _print(items, color=color, width=width)
