"""Inline SVG pictures for the HTML report: a packet's path, and each endpoint's share.

Both are drawn in a fixed coordinate system (``viewBox``) and scale to the width of the page,
so a phone shows the same picture smaller rather than a page that scrolls sideways. Text is laid
out by counting characters (monospace for rule text), never measured, so the output is a pure
function of its input. Every string from a report passes through ``esc`` (HTML escaping of the
text with its control characters made visible).
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from nat_verify.model.outcome import probability_text
from nat_verify.report.flow import Hop
from nat_verify.report.words import visible

WIDTH = 560
PAD = 12
BOX_W = WIDTH - 2 * PAD
TITLE_PX, NOTE_PX, RULE_PX = 14, 12, 10.5
LINE_TITLE, LINE_NOTE, LINE_RULE = 18, 15, 13
GAP = 34  # vertical room for an arrow and its label
# characters per line: sans at ~0.55 em, monospace at 0.6 em
TITLE_CHARS = int((BOX_W - 20) / (TITLE_PX * 0.58))
NOTE_CHARS = int((BOX_W - 20) / (NOTE_PX * 0.56))
FAULT_CHARS = int((BOX_W - 20) / (NOTE_PX * 0.64))  # bold
RULE_CHARS = int((BOX_W - 28) / (RULE_PX * 0.6))
EDGE_CHARS = int((WIDTH - 44) / (11 * 0.56))

_FILL = {
    "client": "#f6f8fa",
    "address": "#f6f8fa",
    "hook": "#ddf4ff",
    "chain": "#ffffff",
    "nat": "#fff8c5",
    "routing": "#f6f8fa",
    "end": "#dafbe1",
}


def esc(value: object) -> str:
    return html.escape(visible(value), quote=True)


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""]


def _box_lines(hop: Hop) -> list[tuple[str, str]]:
    """(css class, text) for every line inside a hop's box, in order."""
    lines = [("t", line) for line in _wrap(hop.label, TITLE_CHARS)]
    lines += [("n", line) for line in _wrap(hop.note, NOTE_CHARS)] if hop.note else []
    if hop.fault:
        lines += [("f", line) for line in _wrap(f"✗ the rules part from Kubernetes here. {hop.fault}", FAULT_CHARS)]
    for fired in hop.fired:
        lines.append(("w", fired.where))
        if fired.text:
            lines += [("r", line) for line in _wrap(fired.text, RULE_CHARS)]
    return lines


_LINE_H = {"t": LINE_TITLE, "n": LINE_NOTE, "f": LINE_NOTE, "w": LINE_RULE, "r": LINE_RULE}


def path_svg(hops: Sequence[Hop], *, title: str = "") -> str:
    """The hops top-down, one box each, with the address changes on the arrows between them."""
    parts: list[str] = []
    y = PAD
    for i, hop in enumerate(hops):
        if i:
            top = y
            y += GAP
            parts.append(
                f'<line class="arrow" x1="{PAD + 20}" y1="{top}" x2="{PAD + 20}" y2="{y - 2}" '
                'marker-end="url(#nv-arrow)"/>'
            )
            if hop.edge:
                label = _wrap(hop.edge, EDGE_CHARS)[0]
                parts.append(f'<text class="edge" x="{PAD + 30}" y="{top + GAP / 2 + 4:.0f}">{esc(label)}</text>')
        lines = _box_lines(hop)
        height = 12 + sum(_LINE_H[k] for k, _ in lines)
        cls = f"box k-{hop.kind}" + (" fault" if hop.fault else "")
        rx = 16 if hop.kind in ("client", "end") else 4
        parts.append(
            f'<rect class="{cls}" x="{PAD}" y="{y}" width="{BOX_W}" height="{height}" rx="{rx}" '
            f'fill="{_FILL.get(hop.kind, "#fff")}"/>'
        )
        ty = y + 6
        for kind, text in lines:
            ty += _LINE_H[kind]
            indent = 18 if kind == "r" else 10
            parts.append(f'<text class="l-{kind}" x="{PAD + indent}" y="{ty - 4}">{esc(text)}</text>')
        y += height
    height = y + PAD
    head = (
        f'<svg class="path" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" role="img">'
    )
    defs = (
        '<defs><marker id="nv-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#57606a"/></marker></defs>'
    )
    return "".join([head, f"<title>{esc(title)}</title>" if title else "", defs, *parts, "</svg>"])


# --- endpoint shares ---------------------------------------------------------------------------

LABEL_W = 190
BAR_W = WIDTH - LABEL_W - 2 * PAD - 110
ROW_H = 22


def shares_svg(endpoints: Sequence[Mapping[str, Any]], *, probes: int = 0, title: str = "") -> str:
    """A bar per endpoint: the model's exact probability, the kernel's observed share when given.

    A dashed line marks the uniform share 1/n, so a skewed cascade shows at a glance.
    """
    rows = [e for e in endpoints if e.get("destination")]
    n = len(rows)
    observed = probes > 0 and any("observed" in e for e in rows)
    row_h = ROW_H + (10 if observed else 0)
    height = PAD * 2 + 16 + n * row_h
    parts = [
        f'<svg class="shares" viewBox="0 0 {WIDTH} {height}" '
        f'width="{WIDTH}" height="{height}" role="img">',
        f"<title>{esc(title)}</title>" if title else "",
    ]
    x0 = PAD + LABEL_W
    legend = "model (exact)" + ("; kernel observed" if observed else "") + (f"; dashed: 1/{n}" if n > 1 else "")
    parts.append(f'<text class="l-n" x="{x0}" y="{PAD + 10}">{esc(legend)}</text>')
    y = PAD + 16
    for e in rows:
        p = Fraction(str(e.get("probability", "0")))
        w = float(p) * BAR_W
        label = str(e.get("destination", ""))
        tip = f"{label}: p = {e.get('probability')}"
        parts.append(f'<text class="l-w" x="{PAD}" y="{y + 14}">{esc(label[:30])}</text>')
        parts.append(f'<rect class="track" x="{x0}" y="{y + 3}" width="{BAR_W}" height="14" fill="#f6f8fa"/>')
        parts.append(
            f'<rect class="bar" x="{x0}" y="{y + 3}" width="{w:.1f}" height="14" fill="#0969da">'
            f"<title>{esc(tip)}</title></rect>"
        )
        parts.append(f'<text class="l-w" x="{x0 + BAR_W + 6}" y="{y + 14}">{esc(probability_text(p))}</text>')
        if observed and "observed" in e:
            share = Fraction(int(e["observed"]), probes)
            seen = f"observed {e['observed']} of {probes}"
            parts.append(
                f'<rect class="obs" x="{x0}" y="{y + 19}" width="{float(share) * BAR_W:.1f}" height="7" '
                f'fill="#bf8700"><title>{esc(seen)}</title></rect>'
            )
            kernel = f"kernel {probability_text(share)} ({e['observed']}/{probes})"
            parts.append(f'<text class="l-n" x="{x0 + BAR_W + 6}" y="{y + 27}">{esc(kernel)}</text>')
        y += row_h
    if n > 1:
        ux = x0 + BAR_W / n
        parts.append(
            f'<line class="uniform" x1="{ux:.1f}" y1="{PAD + 14}" x2="{ux:.1f}" y2="{y}" '
            'stroke="#57606a" stroke-dasharray="4 3"/>'
        )
    parts.append("</svg>")
    return "".join(parts)
