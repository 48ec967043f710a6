"""``--report FILE`` on verify and check: every format beside the terminal output, all or nothing."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nat_verify.report.files import OutputError, format_of
from tests.unit.test_cli import run

SPECS = Path(__file__).resolve().parents[2] / "specs"
WEB = str(SPECS / "web-svc.yaml")
NAMES = ("r.html", "r.md", "r.sarif", "r.xml", "r.json", "r.txt")



def test_format_from_the_extension() -> None:
    assert [format_of(n) for n in NAMES] == ["html", "md", "sarif", "junit", "json", "text"]
    assert format_of("out/REPORT.HTML") == "html"
    assert format_of("x.sarif.json") == "sarif"
    with pytest.raises(OutputError, match="x.pdf"):
        format_of("x.pdf")


def _reports(tmp_path: Path) -> list[str]:
    return [a for n in NAMES for a in ("--report", str(tmp_path / n))]


def test_verify_writes_every_report_beside_the_terminal_output(tmp_path: Path) -> None:
    code, out, _ = run("verify", WEB, *_reports(tmp_path))
    assert code == 0
    assert out.startswith("nat-verify verify: OK")  # the terminal output is still there
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["format"] == "nat_verify.report/v1" and doc["summary"]["exit_code"] == 0
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert (tmp_path / "r.md").read_text().startswith("# nat-verify report: ok")
    assert json.loads((tmp_path / "r.sarif").read_text())["version"] == "2.1.0"
    root = ET.parse(tmp_path / "r.xml").getroot()
    assert root.tag == "testsuites" and root.get("failures") == "0"
    assert (tmp_path / "r.txt").read_text().startswith("nat-verify verify: OK")


def test_check_reports_and_report_renders_the_same_later(tmp_path: Path) -> None:
    code, dump, _ = run("compile", WEB, "--node", "node-1", "--style", "save")
    assert code == 0
    (tmp_path / "n1.save").write_text(dump)
    cwd = os.getcwd()
    os.chdir(tmp_path)  # SARIF locations are relative to the working directory in both runs
    try:
        code, out, _ = run("check", "n1.save", "--cluster", WEB, "--node", "node-1",
                           "--format", "json", *_reports(tmp_path))  # fmt: skip
        assert code == 0
        assert json.loads(out) == json.loads((tmp_path / "r.json").read_text())
        for name, fmt in (("r.html", "html"), ("r.md", "md"), ("r.sarif", "sarif"), ("r.xml", "junit")):
            code, again, _ = run("report", "r.json", "--format", fmt)
            assert code == 0
            assert again == (tmp_path / name).read_text(), name
    finally:
        os.chdir(cwd)


@pytest.mark.parametrize("bad", ["report.pdf", "missing-dir/report.html"])
def test_a_bad_report_file_is_refused_before_any_work(tmp_path: Path, bad: str) -> None:
    good = tmp_path / "good.html"
    code, out, err = run("verify", WEB, "--report", str(good), "--report", str(tmp_path / bad))
    assert code == 2
    assert out == ""
    assert str(tmp_path / bad) in err and "Traceback" not in err
    assert not good.exists()  # nothing half-done
    assert sorted(p.name for p in tmp_path.iterdir()) == []
