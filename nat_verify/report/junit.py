"""JUnit XML for CI dashboards: a test suite per invariant, a test case per result.

A case fails when its result counts as a violation in the report's exit code (an
error-severity finding, or a violated result without any finding); the failure text is the
full counterexample. An inconclusive case is skipped with the reason. Warnings and notes
ride along as ``system-out`` of a passing case.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from nat_verify.report import catalogue as cat
from nat_verify.report.text import render_finding_text
from nat_verify.report.words import finding_word

# characters XML 1.0 cannot carry at all, even escaped, and DEL and C1 controls, which it
# can but a terminal showing the file would act on: all are shown as \xNN
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_NONCHAR = re.compile("[\ufffe\uffff]")


def xml_text(text: object) -> str:
    s = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text))
    return _NONCHAR.sub("\ufffd", s)


def finding_text(f: Mapping[str, Any]) -> str:
    """A finding in plain text, as the terminal shows it without colour."""
    return render_finding_text(f)


def _case(
    suite: ET.Element,
    name: str,
    classname: str,
    findings: Sequence[Mapping[str, Any]],
    status: str,
    engine: str,
) -> str:
    """Add a test case; return what it became: failed, skipped or passed."""
    case = ET.SubElement(suite, "testcase", name=xml_text(name), classname=xml_text(classname))
    case.set("time", "0")
    errors = [
        f
        for f in findings
        if finding_word(f) == "violated"
    ]
    if errors or (status == "violated" and not findings):
        first = errors[0] if errors else None
        message = (
            str(first.get("message", "")) if first else "violated (no counterexample recorded)"
        )
        failure = ET.SubElement(
            case,
            "failure",
            message=xml_text(message.splitlines()[0] if message else "violated"),
            type=xml_text(classname.rpartition(".")[2]),
        )
        failure.text = xml_text("\n\n".join(finding_text(f) for f in errors) or message)
        outcome = "failed"
    elif status == "inconclusive":
        reasons = [str(f.get("message", "")) for f in findings if f.get("message")]
        reason = "; ".join(reasons) or f"inconclusive (engine {engine})"
        ET.SubElement(case, "skipped", message=xml_text(reason))
        outcome = "skipped"
    else:
        outcome = "passed"
    rest = [f for f in findings if f not in errors]
    if rest:
        ET.SubElement(case, "system-out").text = xml_text(
            "\n\n".join(finding_text(f) for f in rest)
        )
    return outcome


def render_junit(report: Mapping[str, Any], *, name: str = "nat-verify") -> str:
    """JUnit XML text (``testsuites`` root) for ``report``."""
    titles = cat.from_report(report)
    results = list(report.get("results", []))
    findings = list(report.get("findings", []))
    by_key: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for f in findings:
        by_key.setdefault((f["invariant"], f["service"], f["node"]), []).append(f)
    result_keys = {(r["invariant"], r["service"], r["node"]) for r in results}

    root = ET.Element("testsuites", name=xml_text(name))
    totals = {"tests": 0, "failures": 0, "skipped": 0}
    invariants = sorted({r["invariant"] for r in results} | {f["invariant"] for f in findings})
    for inv in invariants:
        suite = ET.SubElement(root, "testsuite", name=xml_text(inv))
        ET.SubElement(
            ET.SubElement(suite, "properties"),
            "property",
            name="title",
            value=xml_text(cat.info(inv, titles).title),
        )
        classname = f"nat_verify.{inv}"
        outcomes = []
        for r in results:
            if r["invariant"] != inv:
                continue
            key = (inv, r["service"], r["node"])
            case_name = f"{r['service'] or '(node-wide)'} @ {r['node'] or '(any node)'}"
            if r.get("cluster"):
                case_name += f" [{r['cluster']}]"
            outcomes.append(
                _case(
                    suite,
                    case_name,
                    classname,
                    by_key.get(key, []),
                    r["status"],
                    str(r.get("engine", "")),
                )
            )
        # findings no result stands for still get a case of their own
        orphans: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
        for f in findings:
            key = (inv, f["service"], f["node"])
            if f["invariant"] == inv and key not in result_keys:
                orphans.setdefault(key, []).append(f)
        for (_, service, node), fs in orphans.items():
            case_name = f"{service or '(node-wide)'} @ {node or '(any node)'}"
            outcomes.append(_case(suite, case_name, classname, fs, "holds", ""))
        counts = {
            "tests": len(outcomes),
            "failures": outcomes.count("failed"),
            "skipped": outcomes.count("skipped"),
        }
        for k, v in counts.items():
            suite.set(k, str(v))
            totals[k] += v
        suite.set("errors", "0")
        suite.set("time", "0")
    for k, v in totals.items():
        root.set(k, str(v))
    root.set("errors", "0")
    root.set("time", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
