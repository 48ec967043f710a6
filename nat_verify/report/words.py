"""How packets and outcomes are worded, the same in every renderer."""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from nat_verify.model.outcome import SEVERITIES, Outcome, Step, probability_text
from nat_verify.model.packet import Packet, format_endpoint
from nat_verify.report.path import target_word

# every report format shows these the same way and in this order, worst first
STATUSES: tuple[str, ...] = ("violated", "inconclusive", "holds", "proved")

# What each column of the summary table counts; every format prints this legend under it.
LEGEND: tuple[tuple[str, str], ...] = (
    ("violated", "a packet breaks the invariant: an error finding below shows it"),
    ("inconclusive", "some packet could not be decided (a rule or node fact the model lacks)"),
    ("holds", "no packet examined breaks it, but not every packet class was examined"),
    ("proved", "every packet class was examined and none breaks it"),
    ("findings", "the findings listed below, by severity: errors fail the run; "
                 "warnings (risks the configuration chose) and notes do not"),
)  # fmt: skip
LEGEND_HEAD = "Each status column counts (invariant, Service, node) results."

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def visible(text: object) -> str:
    """``text`` with every control character (ESC, BEL, NUL, newline, C1 ...) shown as ``\\xNN``.

    Names, comments and annotations come from dumps and manifests written by others: no report
    format may carry their control characters, which a terminal or viewer would act on.
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))


def value_lines(value: object) -> list[str]:
    """A value that may hold several lines (NV015's missing rules), each line made visible."""
    return [visible(line) for line in str(value).split("\n")]


def fraction(p: Fraction) -> str:
    return str(p.numerator) if p.denominator == 1 else f"{p.numerator}/{p.denominator}"


_FINDING_WORD = {"error": "violated", "warning": "warning", "note": "note"}


def finding_word(f: Mapping[str, Any]) -> str:
    """What a finding says: ``violated`` (an error), ``warning``, ``note`` or ``inconclusive``.

    A warning or note never reads ``violated``, also in documents written before the word was
    the severity's.
    """
    severity = str(f.get("severity", "error"))
    if f.get("status") == "inconclusive":
        return "inconclusive"
    return _FINDING_WORD.get(severity, "violated")


def findings_cell(counts: Mapping[str, Any]) -> str:
    """``5 errors, 1 warning``; empty when there are none."""
    parts = []
    for s in SEVERITIES:
        n = int(counts.get(s, 0))
        if n:
            parts.append(f"{n} {s}{'s' if n != 1 else ''}")
    return ", ".join(parts)


def packet_text(packet: Packet) -> str:
    """``external 203.0.113.9 -> 192.168.0.2:30080``; the protocol is named when not TCP.

    The source port is left out: kube-proxy's rules never look at it, and people draw the
    flow without it.
    """
    proto = "" if packet.proto == "tcp" else f"{packet.proto} "
    return f"{packet.origin} {proto}{packet.src} -> {format_endpoint(packet.dst, packet.dport)}"


def verdict_text(outcome: Outcome) -> str:
    """``DNAT 10.42.1.7:8080 (p=1/2)``, ``REJECT (icmp-port-unreachable)``, ``DROP`` ..."""
    o = outcome
    if o.verdict == "reject":
        text = f"REJECT ({o.reject_with})" if o.reject_with else "REJECT"
    elif o.verdict == "drop":
        text = "DROP"
    elif o.verdict == "inconclusive":
        text = f"inconclusive ({o.reason})" if o.reason else "inconclusive"
    elif o.dnat:
        text = f"DNAT {o.destination}"
    elif o.verdict == "accept":
        text = "ACCEPT"
    else:  # forwarded untranslated
        text = "no NAT"
    if o.probability != 1:
        text += f" (p={probability_text(o.probability)})"
    return text


def source_text(outcome: Outcome, packet: Packet) -> str:
    """What became of the client address: ``masquerade``, ``client IP kept`` ... or ``""``.

    Empty for packets that never leave (dropped, rejected, inconclusive).
    """
    o = outcome
    if o.verdict not in ("accept", "forward"):
        return ""
    if o.masquerade:
        return "masquerade"
    if o.snat:
        return f"SNAT {o.src}"
    if o.src == packet.src:
        return "client IP kept"
    return f"source {o.src}"


def step_text(step: Step) -> str:
    """``nat KUBE-SVC-X 2 -> KUBE-SEP-Y`` (the target only when known)."""
    target = target_word(step.target)
    return f"{step}{f' -> {target}' if target else ''}"


def packet_json_text(packet: Mapping[str, Any] | None) -> str:
    """A report's counterexample packet in one line: ``external tcp 1.2.3.4:5 -> 6.7.8.9:80``."""
    if not packet:
        return ""
    return (
        f"{packet.get('from', 'external')} {packet.get('proto', 'tcp')} "
        f"{packet.get('src', '?')} -> {packet.get('dst', '?')}"
    )


def where(service: str, node: str) -> str:
    return f"{service or '(node-wide)'} on {node or '(any node)'}"


def assumption_texts(items: Any, *, limit: int = 4) -> list[str]:
    """What results rest on that the user did not give (a report's ``assumptions``), one line
    per premise: ``assumed: FACT = VALUE [node] (DETAIL)``; the same premise of several nodes
    on one line, its values listed up to ``limit`` and the nodes counted."""
    groups: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    for a in items or []:
        if not isinstance(a, Mapping):
            continue
        key = (str(a.get("basis", "assumed")), str(a.get("fact", "")), str(a.get("detail", "")))
        groups.setdefault(key, []).append((str(a.get("node", "")), str(a.get("value", ""))))
    out = []
    for (basis, fact, detail), rows in groups.items():
        values = list(dict.fromkeys(v for _, v in rows))
        shown = "; ".join(values[:limit]) + (f"; +{len(values) - limit} more" if len(values) > limit else "")
        nodes = sorted({n for n, _ in rows if n})
        where_ = f" [{len(nodes)} nodes]" if len(nodes) > 1 else (f" [{nodes[0]}]" if nodes else "")
        out.append(f"{basis}: {fact} = {shown}{where_}" + (f" ({detail})" if detail else ""))
    return out
