"""The report document (``"format": "nat_verify.report/v1"``): built from results, read back.

``build_report`` is the one place that decides the summary and the exit code, so every
renderer and the CLI agree on them. Exit codes follow DESIGN.md: 0 when everything holds or
is proved, 1 when an error-severity violation exists, 3 when something is inconclusive and
nothing is violated.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nat_verify import __version__
from nat_verify.model.outcome import Finding, Result
from nat_verify.report import catalogue as cat
from nat_verify.report import schema

REPORT_FORMAT = "nat_verify.report/v1"
TRACE_FORMAT = "nat_verify.trace/v1"
STATUSES: tuple[str, ...] = ("violated", "inconclusive", "holds", "proved")
SEVERITIES: tuple[str, ...] = ("error", "warning", "note")
# what a finding says, by severity: only an error says "violated"
FINDING_STATUS = {"error": "violated", "warning": "warning", "note": "note"}

Key = tuple[str, str, str]  # (invariant, service, node)


class ReportInputError(Exception):
    """A report file that cannot be used; ``str()`` is ``file:line: message``."""

    def __init__(self, file: str, line: int, message: str) -> None:
        super().__init__(f"{file}:{line}: {message}" if line else f"{file}: {message}")
        self.file = file
        self.line = line
        self.message = message


def _result_key(r: Result) -> tuple[str, ...]:
    return (r.invariant, r.service, r.node, r.cluster, r.engine, r.status)


def _finding_key(f: Finding) -> tuple[str, ...]:
    # the message and the location break ties so equal inputs in any order give equal output
    return (f.invariant, f.service, f.node, f.severity, f.location, f.message, f.expected, f.actual)


def _counts(statuses: Sequence[str]) -> dict[str, int]:
    return {s: sum(1 for x in statuses if x == s) for s in STATUSES}


def _is_error(f: Finding, statuses: Sequence[str]) -> bool:
    """An error finding counts as a violation unless its results were all inconclusive.

    A finding that contradicts a ``holds``/``proved`` result still counts: a report never
    hides an error-severity counterexample.
    """
    if f.severity != "error":
        return False
    return not (statuses and all(s == "inconclusive" for s in statuses))


def build_report(
    results: Sequence[Result],
    findings: Sequence[Finding],
    *,
    command: str,
    clusters: Sequence[str],
    meta: Mapping[str, Any] | None = None,
    catalogue: Mapping[str, cat.InvariantInfo] | None = None,
    shares: Sequence[Any] = (),
    assumptions: Sequence[Mapping[str, str]] = (),
) -> dict[str, Any]:
    """The report document, ordered by (invariant, service, node) throughout.

    ``assumptions``: what the results rest on that the user did not give, one object per node
    and fact (``{"node", "fact", "value", "basis": "inferred"|"assumed", "detail"}``); the
    document has the key only when there are some.

    ``meta`` is copied into the document as is (it must be JSON-serialisable); ``meta["dump"]``,
    when present, names the dump file whose line numbers the rule paths refer to (SARIF uses it).
    ``catalogue`` gives invariant titles; the built-in table fills in the rest. ``shares``
    (``evidence.Share`` s) are the endpoint shares per Service and node the report charts.
    """
    res = sorted(results, key=_result_key)
    # a finding found twice (two packet classes with the same representative) is one finding
    fnd = sorted(dict.fromkeys(findings), key=_finding_key)

    statuses_of: dict[Key, list[str]] = {}
    for r in res:
        statuses_of.setdefault((r.invariant, r.service, r.node), []).append(r.status)
    findings_of: dict[Key, list[Finding]] = {}
    for f in fnd:
        findings_of.setdefault((f.invariant, f.service, f.node), []).append(f)

    violations = sum(1 for f in fnd if _is_error(f, statuses_of.get(_fkey(f), [])))
    # a violated result without any finding is an error too; with findings, they decide
    violations += sum(1 for r in res if r.status == "violated" and not findings_of.get(_rkey(r)))
    inconclusive = any(r.status == "inconclusive" for r in res)
    exit_code = 1 if violations else 3 if inconclusive else 0

    invariants = sorted({r.invariant for r in res} | {f.invariant for f in fnd})
    per_invariant = {
        inv: _counts([r.status for r in res if r.invariant == inv]) for inv in invariants
    }

    finding_docs = []
    for f in fnd:
        d = f.to_json()
        sts = statuses_of.get(_fkey(f), [])
        # a finding about a result that could not be decided says so, whatever its severity
        unsure = sts and all(s == "inconclusive" for s in sts)
        d["status"] = "inconclusive" if unsure else FINDING_STATUS[f.severity]
        finding_docs.append(d)
    findings_per_invariant = {
        inv: {s: sum(1 for f in fnd if f.invariant == inv and f.severity == s) for s in SEVERITIES}
        for inv in invariants
    }

    doc: dict[str, Any] = {
        "format": REPORT_FORMAT,
        "tool": {"name": "nat-verify", "version": __version__},
        "command": command,
        "clusters": sorted(set(clusters)),
        "meta": dict(meta or {}),
        "summary": {
            "exit_code": exit_code,
            "outcome": "violated" if violations else "inconclusive" if inconclusive else "ok",
            "results": len(res),
            "violations": violations,
            "statuses": _counts([r.status for r in res]),
            "severities": {s: sum(1 for f in fnd if f.severity == s) for s in SEVERITIES},
            "invariants": per_invariant,
            "findings": findings_per_invariant,
        },
        "catalogue": {inv: cat.info(inv, catalogue).to_json() for inv in invariants},
        "results": [r.to_json() for r in res],
        "findings": finding_docs,
    }
    if shares:
        docs = [s.to_json() for s in shares]
        doc["shares"] = sorted(docs, key=lambda d: (d["service"], d["node"]))
    if assumptions:
        doc["assumptions"] = [dict(a) for a in assumptions]
    return doc


def _rkey(r: Result) -> Key:
    return (r.invariant, r.service, r.node)


def _fkey(f: Finding) -> Key:
    return (f.invariant, f.service, f.node)


def exit_code(report: Mapping[str, Any]) -> int:
    """The process exit code a report stands for (0, 1 or 3)."""
    return int(report["summary"]["exit_code"])


_C1 = re.compile("[\x7f-\x9f]")


def json_text(value: object) -> str:
    """JSON text, two-space indented, ending with a newline, with no raw control character.

    ``json`` escapes C0 controls itself; DEL and the C1 controls (0x9b is a terminal's CSI) it
    leaves raw, so they are escaped here: a name from a dump cannot reach a terminal that shows
    the file.
    """
    text = json.dumps(value, indent=2, ensure_ascii=False)
    return _C1.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"


def to_json_text(report: Mapping[str, Any]) -> str:
    """The document as JSON text (``json_text``)."""
    return json_text(report)


def load_report(path: str | Path) -> dict[str, Any]:
    """Read and validate a report file; any problem is a ``ReportInputError`` with a line."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ReportInputError(name, 0, f"cannot read the report: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ReportInputError(name, 0, f"not UTF-8 text ({e.reason})") from None
    return parse_report(text, name)


def parse_report(text: str, name: str = "<report>") -> dict[str, Any]:
    """``load_report`` for text already in memory; ``name`` is used in error messages."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportInputError(
            name, e.lineno, f"not valid JSON: {e.msg} (column {e.colno})"
        ) from None
    if not isinstance(doc, dict):
        raise ReportInputError(name, 1, f'expected a JSON object with "format": "{REPORT_FORMAT}"')
    fmt = doc.get("format")
    if fmt != REPORT_FORMAT:
        line = schema.locate(text, ("format",)) if "format" in doc else 1
        hint = (
            " (this is a trace; `nat-verify report` takes verify/check results)"
            if (fmt == TRACE_FORMAT)
            else ""
        )
        found = 'no "format" field' if fmt is None else f'"format": {json.dumps(fmt)}'
        raise ReportInputError(
            name, line, f'expected "format": "{REPORT_FORMAT}", found {found}{hint}'
        )
    problems = schema.errors(doc, schema.load_schema("report"))
    if problems:
        where, message = problems[0]
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        raise ReportInputError(
            name, schema.locate(text, where), f"{schema.format_path(where)}: {message}{more}"
        )
    return doc
