"""Reports: the ``nat_verify.report/v1`` document and its renderers.

``build_report`` turns results and findings into the document (summary, exit code, ordering);
``render(report, fmt)`` turns a document into text, JSON, Markdown, HTML, SARIF or JUnit.
Every renderer is a pure function of the document.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nat_verify.report.catalogue import BUILTIN as CATALOGUE
from nat_verify.report.catalogue import InvariantInfo
from nat_verify.report.document import (
    REPORT_FORMAT,
    TRACE_FORMAT,
    ReportInputError,
    build_report,
    exit_code,
    load_report,
    parse_report,
    to_json_text,
)
from nat_verify.report.graph import outcome_dot, outcome_mermaid
from nat_verify.report.html import render_html
from nat_verify.report.junit import render_junit
from nat_verify.report.markdown import render_markdown
from nat_verify.report.sarif import render_sarif
from nat_verify.report.text import render_text, render_trace_text, want_color

FORMATS: tuple[str, ...] = ("text", "json", "md", "html", "sarif", "junit")

_RENDERERS: Mapping[str, Callable[[Mapping[str, Any]], str]] = {
    "text": render_text,
    "json": to_json_text,
    "md": render_markdown,
    "markdown": render_markdown,
    "html": render_html,
    "sarif": render_sarif,
    "junit": render_junit,
}


def render(report: Mapping[str, Any], fmt: str, *, root: str | None = None) -> str:
    """``report`` in format ``fmt`` (one of ``FORMATS``; ``markdown`` is accepted for ``md``).

    ``root`` is the directory SARIF's relative locations are taken against (the others ignore it).
    """
    if fmt == "sarif":
        return render_sarif(report, root=root)
    try:
        renderer = _RENDERERS[fmt]
    except KeyError:
        raise ValueError(
            f"unknown report format {fmt!r}; expected one of {', '.join(FORMATS)}"
        ) from None
    return renderer(report)


__all__ = [
    "CATALOGUE",
    "FORMATS",
    "REPORT_FORMAT",
    "TRACE_FORMAT",
    "InvariantInfo",
    "ReportInputError",
    "build_report",
    "exit_code",
    "load_report",
    "outcome_dot",
    "outcome_mermaid",
    "parse_report",
    "render",
    "render_html",
    "render_junit",
    "render_markdown",
    "render_sarif",
    "render_text",
    "render_trace_text",
    "to_json_text",
    "want_color",
]
