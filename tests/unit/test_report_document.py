"""The report document: summary, exit code, ordering, schema, and reading it back."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from nat_verify.model.outcome import Finding, Result, Step
from nat_verify.model.packet import Packet
from nat_verify.report import ReportInputError, build_report, exit_code, load_report
from nat_verify.report import schema as sch
from nat_verify.report.document import parse_report, to_json_text

DATA = Path(__file__).parent / "data" / "report"
SAMPLE = DATA / "sample_report.json"

WEB = "default/web:80"
STICKY = "default/sticky:443"


def sample_results() -> list[Result]:
    return [
        Result("NV002", WEB, "node-a", "violated", "concrete", 12, "specs/web.yaml"),
        Result("NV011", STICKY, "node-a", "inconclusive", "z3", 0, "specs/web.yaml"),
        Result("NV001", WEB, "node-a", "holds", "hypothesis", 200, "specs/web.yaml"),
    ]


def sample_findings() -> list[Finding]:
    path = (
        Step("nat", "PREROUTING", 1, 53, "KUBE-SERVICES"),
        Step("nat", "KUBE-SERVICES", 9, 70, "KUBE-NODEPORTS"),
        Step("nat", "KUBE-NODEPORTS", 1, 60, "KUBE-EXT-AAA"),
        Step("nat", "KUBE-EXT-AAA", 2, 76, "KUBE-SVC-BBB"),
        Step("nat", "KUBE-SVC-BBB", 3, 95, "KUBE-SEP-ZZZ"),
        Step("nat", "KUBE-SEP-ZZZ", 2, 120, "DNAT"),
    )
    return [
        Finding(
            "NV011", STICKY, "node-a", "the recent match option --reap is not modelled",
            severity="note",
        ),
        Finding(
            "NV002", WEB, "node-a",
            "NodePort 30080 is DNATed to 10.42.9.9:8080, not an endpoint of default/web:80",
            packet=Packet("203.0.113.9", "192.168.0.2", dport=30080, sport=40000),
            expected="DNAT to one of 10.42.1.7:8080, 10.42.2.8:8080",
            actual='DNAT 10.42.9.9:8080 by a rule commented "<script>alert(1)</script>"',
            path=path,
            location="specs/web.yaml:14",
        ),
    ]


def sample_report() -> dict[str, Any]:
    return build_report(
        sample_results(), sample_findings(), command="check", clusters=["specs/web.yaml"],
        meta={"dump": "dumps/node-a.rules"},
    )


def test_build_report_matches_the_hand_written_document() -> None:
    # sample_report.json was written by hand from DESIGN's report format: 3 results
    # (holds, violated, inconclusive), one error finding, one note; exit code 1.
    expected = json.loads(SAMPLE.read_text())
    got = sample_report()
    got_catalogue = {k: {"name": v["name"], "title": v["title"]} for k, v in got.pop("catalogue").items()}
    assert got_catalogue == expected.pop("catalogue")
    got.pop("tool")
    expected.pop("tool")
    assert got == expected


def test_order_does_not_depend_on_input_order() -> None:
    rng = random.Random(7)
    results, findings = sample_results(), sample_findings()
    first = to_json_text(sample_report())
    for _ in range(5):
        rng.shuffle(results)
        rng.shuffle(findings)
        again = build_report(results, findings, command="check", clusters=["specs/web.yaml"],
                             meta={"dump": "dumps/node-a.rules"})
        assert to_json_text(again) == first
    keys = [(r["invariant"], r["service"], r["node"]) for r in json.loads(first)["results"]]
    assert keys == sorted(keys)


def _exit(results: list[Result], findings: list[Finding]) -> int:
    return exit_code(build_report(results, findings, command="verify", clusters=[]))


def test_exit_codes_follow_design() -> None:
    holds = Result("NV001", WEB, "n", "holds", "hypothesis")
    proved = Result("NV003", WEB, "n", "proved", "z3")
    violated = Result("NV002", WEB, "n", "violated", "concrete")
    unsure = Result("NV011", WEB, "n", "inconclusive", "z3")
    error = Finding("NV002", WEB, "n", "wrong endpoint")
    assert _exit([holds, proved], []) == 0
    assert _exit([], []) == 0
    assert _exit([holds, violated], [error]) == 1
    assert _exit([holds, unsure], []) == 3
    # a violation wins over an inconclusive result
    assert _exit([violated, unsure], [error]) == 1
    # a violated result without any recorded counterexample still fails
    assert _exit([violated], []) == 1


def test_warning_only_violation_does_not_fail() -> None:
    # NV010 is a warning where the configuration itself chose otherwise (DESIGN.md)
    r = Result("NV010", WEB, "n", "violated", "concrete")
    w = Finding("NV010", WEB, "n", "no masquerade to a remote endpoint", severity="warning")
    report = build_report([r], [w], command="verify", clusters=[])
    assert report["summary"]["exit_code"] == 0
    assert report["summary"]["outcome"] == "ok"
    assert report["summary"]["statuses"]["violated"] == 1
    assert report["summary"]["severities"] == {"error": 0, "warning": 1, "note": 0}


def test_error_finding_of_an_inconclusive_result_is_not_a_violation() -> None:
    r = Result("NV011", WEB, "n", "inconclusive", "z3")
    f = Finding("NV011", WEB, "n", "cannot decide")
    report = build_report([r], [f], command="verify", clusters=[])
    assert report["summary"]["exit_code"] == 3
    assert report["findings"][0]["status"] == "inconclusive"


def test_error_finding_without_a_result_fails() -> None:
    f = Finding("NV014", "", "n", "jump to missing chain KUBE-SVC-X")
    report = build_report([], [f], command="check", clusters=[])
    assert report["summary"]["exit_code"] == 1
    assert report["summary"]["invariants"]["NV014"] == {
        "proved": 0, "holds": 0, "violated": 0, "inconclusive": 0
    }


def test_unknown_invariant_gets_a_placeholder_title() -> None:
    r = Result("XX900", WEB, "n", "holds", "concrete")
    report = build_report([r], [], command="verify", clusters=[])
    assert report["catalogue"]["XX900"]["title"] == "XX900"


# --- schema ---------------------------------------------------------------------------------


def test_document_validates_against_schema() -> None:
    report = sample_report()
    assert sch.errors(report, sch.load_schema("report")) == []
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator.check_schema(sch.load_schema("report"))
    jsonschema.Draft202012Validator(sch.load_schema("report")).validate(report)


BAD_DOCUMENTS: list[tuple[str, Any]] = [
    ("status", {"results": [{"invariant": "NV001", "service": "", "node": "n", "status": "ok",
                             "engine": "z3"}]}),
    ("engine", {"results": [{"invariant": "NV001", "service": "", "node": "n",
                             "status": "holds", "engine": 3}]}),
    ("missing node", {"findings": [{"invariant": "NV001", "service": "", "message": "m"}]}),
    ("path step", {"findings": [{"invariant": "NV001", "service": "", "node": "n",
                                 "message": "m", "path": ["nat PREROUTING"]}]}),
    ("exit code", {"summary": {"exit_code": 2}}),
    ("bool count", {"summary": {"results": True}}),
]


@pytest.mark.parametrize(("what", "change"), BAD_DOCUMENTS, ids=[b[0] for b in BAD_DOCUMENTS])
def test_own_checker_agrees_with_jsonschema(what: str, change: dict[str, Any]) -> None:
    doc = sample_report()
    for k, v in change.items():
        if k == "summary":
            doc["summary"].update(v)
        else:
            doc[k] = v
    own = sch.errors(doc, sch.load_schema("report"))
    assert own, what
    jsonschema = pytest.importorskip("jsonschema")
    assert not jsonschema.Draft202012Validator(sch.load_schema("report")).is_valid(doc)


def test_trace_json_validates_against_trace_schema() -> None:
    from fractions import Fraction
    from ipaddress import ip_address

    from nat_verify.model.outcome import Outcome, Trace

    trace = Trace(
        Packet("10.0.0.2", "172.30.0.44", dport=80, origin="pod"),
        (
            Outcome(Fraction(1, 2), "forward", ip_address("10.180.0.4"), 80,
                    ip_address("10.0.0.2"), 40000, dnat=True,
                    path=(Step("nat", "PREROUTING", 1, 53, "KUBE-SERVICES"),)),
            Outcome(Fraction(1, 2), "reject", ip_address("172.30.0.44"), 80,
                    ip_address("10.0.0.2"), 40000, reject_with="icmp-port-unreachable",
                    path=(Step("filter", "FORWARD", 0, 0, "DROP"),)),
        ),
    )
    doc = trace.to_json()
    assert sch.errors(doc, sch.load_schema("trace")) == []
    doc["outcomes"][0]["probability"] = "0.5"
    assert sch.errors(doc, sch.load_schema("trace"))[0][0] == ("outcomes", 0, "probability")


# --- reading a report back -----------------------------------------------------------------


def test_load_report_round_trip(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text(to_json_text(sample_report()))
    assert load_report(p) == sample_report()
    assert load_report(SAMPLE)["summary"]["exit_code"] == 1


def test_bad_json_names_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "broken.json"
    p.write_text('{\n  "format": "nat_verify.report/v1",\n  "results": [,]\n}\n')
    with pytest.raises(ReportInputError) as e:
        load_report(p)
    assert e.value.line == 3
    assert str(e.value).startswith(f"{p}:3: not valid JSON")


def test_wrong_format_names_the_line_of_the_format_field() -> None:
    text = '{\n  "summary": {},\n  "format": "something/v2"\n}'
    with pytest.raises(ReportInputError) as e:
        parse_report(text, "r.json")
    assert e.value.line == 3
    assert '"something/v2"' in e.value.message


def test_a_trace_is_not_a_report() -> None:
    text = json.dumps({"format": "nat_verify.trace/v1", "packet": {}, "outcomes": []})
    with pytest.raises(ReportInputError, match="this is a trace"):
        parse_report(text, "t.json")


def test_missing_format_and_non_object() -> None:
    with pytest.raises(ReportInputError, match='no "format" field'):
        parse_report("{}", "x.json")
    with pytest.raises(ReportInputError, match="expected a JSON object"):
        parse_report("[1, 2]", "x.json")


def test_schema_problem_names_the_line_of_the_bad_value() -> None:
    doc = json.loads(SAMPLE.read_text())
    doc["results"][2]["status"] = "maybe"
    text = json.dumps(doc, indent=2)
    # the line of '"status": "maybe"' counted by hand from the text itself
    want = next(i for i, ln in enumerate(text.splitlines(), 1) if '"maybe"' in ln)
    with pytest.raises(ReportInputError) as e:
        parse_report(text, "r.json")
    assert e.value.line == want
    assert "results[2].status" in e.value.message


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ReportInputError, match="cannot read"):
        load_report(tmp_path / "absent.json")
    p = tmp_path / "latin1.json"
    p.write_bytes(b'{"format": "\xff"}')
    with pytest.raises(ReportInputError, match="not UTF-8"):
        load_report(p)


def test_locate_walks_nested_values() -> None:
    text = '{"a": [1,\n {"b": "x,]}"},\n {"c":\n  [true, {"d": 4}]}]}'
    assert sch.locate(text, ("a", 1, "b")) == 2
    assert sch.locate(text, ("a", 2, "c", 1, "d")) == 4
    assert sch.locate(text, ("a", 9)) == 1  # absent: the deepest value found, the array
