"""SARIF 2.1.0 (plain dicts, then JSON) for code-scanning tools.

One rule per invariant (``ruleId`` = the stable ID), one result per finding. A finding's
``location`` (``file:line`` of the manifest object or dump rule at fault) becomes the
physical location; its rule path becomes a code flow, one thread-flow location per step,
pointing into the dump when ``meta["dump"]`` names it. Results the checker could not
decide and violations without a recorded counterexample are reported too, so nothing in
the report is lost on the way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any
from urllib.parse import quote

from nat_verify.report import catalogue as cat
from nat_verify.report.document import json_text
from nat_verify.report.words import assumption_texts, packet_json_text, where

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
_LEVEL = {"error": "error", "warning": "warning", "note": "note"}


def split_location(location: str) -> tuple[str, int]:
    """``"specs/a.yaml:12"`` -> ``("specs/a.yaml", 12)``; line 0 when there is none."""
    file, sep, line = location.rpartition(":")
    if sep and line.isdigit() and file:
        return file, int(line)
    return location, 0


def artifact(file: str, root: str | None) -> dict[str, Any] | None:
    """An artifactLocation: a relative URI against %SRCROOT% where possible, else file://."""
    if not file or file.startswith("<"):  # "<generated>", "<stdin>": no file to point at
        return None
    p: PurePosixPath | PureWindowsPath = PurePosixPath(file)
    if "\\" in file or PureWindowsPath(file).drive:
        p = PureWindowsPath(file)
    if isinstance(p, PurePosixPath) and root is not None and (p.is_absolute() or ".." in p.parts):
        # a path outside the working tree cannot be mapped into a repository: say where it is
        full = (Path(root) / file).resolve() if not p.is_absolute() else Path(file)
        try:
            rel = full.relative_to(Path(root).resolve())
        except ValueError:
            return {"uri": full.as_uri()}
        return {"uri": quote(rel.as_posix(), safe="/"), "uriBaseId": "%SRCROOT%"}
    if p.is_absolute():
        return {"uri": Path(file).as_uri()} if isinstance(p, PurePosixPath) else {"uri": p.as_uri()}
    return {"uri": quote(p.as_posix(), safe="/"), "uriBaseId": "%SRCROOT%"}


def _physical(file: str, line: int, root: str | None) -> dict[str, Any] | None:
    art = artifact(file, root)
    if art is None:
        return None
    loc: dict[str, Any] = {"artifactLocation": art}
    if line > 0:
        loc["region"] = {"startLine": line}
    return loc


def _logical(name: str, kind: str) -> dict[str, Any]:
    return {"logicalLocations": [{"fullyQualifiedName": name, "kind": kind}]}


def fingerprint(*parts: str) -> str:
    """Stable across runs: the identity of what is wrong, not the packet that showed it."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:32]


def finding_fingerprint(f: Mapping[str, Any]) -> str:
    """What tells one finding from another: the invariant, Service, node and location, and the
    kind of packet (origin, protocol, destination) with what the rules did to it. The source
    address and port are left out: they are one representative of a class, and an engine may
    pick another next run."""
    packet = f.get("counterexample") or {}
    return fingerprint(
        str(f.get("invariant", "")), str(f.get("service", "")), str(f.get("node", "")),
        str(f.get("location", "")), str(packet.get("from", "")), str(packet.get("proto", "")),
        str(packet.get("dst", "")), str(f.get("actual", "")), str(f.get("expected", "")),
    )  # fmt: skip


def _code_flow(f: Mapping[str, Any], dump: str, root: str | None) -> dict[str, Any]:
    lines = list(f.get("lines", []))
    locations = []
    for i, step in enumerate(f.get("path", [])):
        line = int(lines[i]) if i < len(lines) else 0
        words = str(step).split()
        table, chain = (words + ["", ""])[:2]
        rules = list(f.get("rules", []))
        text = f"{step}: {rules[i]}" if i < len(rules) and rules[i] else str(step)
        loc: dict[str, Any] = {"message": {"text": text}}
        phys = _physical(dump, line, root) if dump and line else None
        if phys is not None:
            loc["physicalLocation"] = phys
        loc.update(_logical(f"{table}/{chain}", "function"))
        locations.append({"location": loc, "executionOrder": i + 1})
    return {"threadFlows": [{"locations": locations}]}


def _result_for_finding(
    f: Mapping[str, Any], rule_index: Mapping[str, int], dump: str, root: str | None
) -> dict[str, Any]:
    inv = str(f.get("invariant", ""))
    service, node = str(f.get("service", "")), str(f.get("node", ""))
    message = str(f.get("message", "")) or f"{inv} violated"
    details = [f"{message} ({where(service, node)})"]
    packet = packet_json_text(f.get("counterexample"))
    if packet:
        details.append(f"packet: {packet}")
    for label in ("expected", "actual"):
        if f.get(label):
            details.append(f"{label}: {f[label]}")
    file, line = split_location(str(f.get("location", "")))
    phys = _physical(file, line, root)
    if phys is None and dump:
        # no manifest location: point at the rule that decided, the last step with a line
        lines = [int(x) for x in f.get("lines", []) if int(x) > 0]
        phys = _physical(dump, lines[-1], root) if lines else None
    location = {"physicalLocation": phys} if phys else {}
    location.update(_logical(service or node or inv, "object"))
    result: dict[str, Any] = {
        "ruleId": inv,
        "ruleIndex": rule_index[inv],
        "level": _LEVEL.get(str(f.get("severity", "error")), "error"),
        "message": {"text": "\n".join(details)},
        "locations": [location],
        "partialFingerprints": {"natVerifyFinding/v1": finding_fingerprint(f)},
        "properties": {
            "service": service,
            "node": node,
            "status": f.get("status", "violated"),
            "counterexample": f.get("counterexample"),
            "expected": f.get("expected", ""),
            "actual": f.get("actual", ""),
        },
    }
    if f.get("path"):
        result["codeFlows"] = [_code_flow(f, dump, root)]
    return result


def _result_without_finding(r: Mapping[str, Any], rule_index: Mapping[str, int]) -> dict[str, Any]:
    inv, status = str(r.get("invariant", "")), str(r.get("status", ""))
    service, node = str(r.get("service", "")), str(r.get("node", ""))
    text = (
        f"{inv} is inconclusive for {where(service, node)} (engine {r.get('engine', '?')})"
        if status == "inconclusive"
        else f"{inv} is violated for {where(service, node)} (no counterexample recorded)"
    )
    return {
        "ruleId": inv,
        "ruleIndex": rule_index[inv],
        "level": "note" if status == "inconclusive" else "error",
        "message": {"text": text},
        "locations": [_logical(service or node or inv, "object")],
        "partialFingerprints": {"natVerifyFinding/v1": fingerprint(inv, service, node, status)},
        "properties": {"service": service, "node": node, "status": status},
    }


def sarif_document(
    report: Mapping[str, Any],
    *,
    catalogue: Mapping[str, cat.InvariantInfo] | None = None,
    root: str | None = None,
) -> dict[str, Any]:
    """The SARIF log as dicts. ``root``: directory relative URIs are taken against."""
    titles = {**cat.from_report(report), **(catalogue or {})}
    findings = list(report.get("findings", []))
    results = list(report.get("results", []))
    invariants = sorted(
        {str(x.get("invariant", "")) for x in findings + results}
        | set(report.get("catalogue", {}) or {})
    )
    rules = []
    for inv in invariants:
        info = cat.info(inv, titles)
        rules.append(
            {
                "id": inv,
                "name": info.name,
                "shortDescription": {"text": info.title},
                "fullDescription": {"text": info.description or info.title},
                "defaultConfiguration": {"level": "error"},
                "properties": {"tags": ["kubernetes", "netfilter", "kube-proxy"]},
            }
        )
    rule_index = {inv: i for i, inv in enumerate(invariants)}
    meta = report.get("meta", {}) or {}
    dump = str(meta.get("dump", "")) if isinstance(meta, Mapping) else ""

    sarif_results = [_result_for_finding(f, rule_index, dump, root) for f in findings]
    explained = {(f.get("invariant"), f.get("service"), f.get("node")) for f in findings}
    for r in results:
        key = (r.get("invariant"), r.get("service"), r.get("node"))
        if r.get("status") in ("violated", "inconclusive") and key not in explained:
            sarif_results.append(_result_without_finding(r, rule_index))

    tool = report.get("tool", {}) or {}
    run: dict[str, Any] = {
        "tool": {
            "driver": {
                "name": str(tool.get("name", "nat-verify")),
                "version": str(tool.get("version", "")),
                "rules": rules,
            }
        },
        "invocations": [
            {
                "executionSuccessful": True,
                "exitCode": int(report.get("summary", {}).get("exit_code", 0)),
            }
        ],
        "columnKind": "unicodeCodePoints",
        "results": sarif_results,
    }
    if report.get("assumptions"):
        run["properties"] = {"assumptions": assumption_texts(report["assumptions"])}
    if root is not None:
        run["originalUriBaseIds"] = {"%SRCROOT%": {"uri": Path(root).resolve().as_uri() + "/"}}
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def render_sarif(
    report: Mapping[str, Any],
    *,
    catalogue: Mapping[str, cat.InvariantInfo] | None = None,
    root: str | None = None,
) -> str:
    """SARIF 2.1.0 JSON text for ``report``."""
    doc = sarif_document(report, catalogue=catalogue, root=root)
    return json_text(doc)
