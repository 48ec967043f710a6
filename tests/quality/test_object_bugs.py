"""The object half of the quality suite: every planted object bug is found, under its invariant,
at the field to fix; the correct cluster reports nothing; verify and check exit 1 on them.

``object_bugs.py`` holds the bugs; each is one edit to the recorded ``shop`` cluster or to a
Helm-rendered release. The expected findings come from the Kubernetes rule each bug breaks (its
docstring), and the expected location from the edited file's text (``marker``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nat_verify.check import check_objects
from nat_verify.cli import main
from nat_verify.kube import load_cluster
from nat_verify.model.outcome import Finding
from tests.quality.object_bugs import BY_NAME, HELM, OBJECT_BUGS, RECORDED, ObjectBug, materialise

IDS = [b.name for b in OBJECT_BUGS]


def _findings(paths: list[Path]) -> tuple[Finding, ...]:
    return check_objects(load_cluster(paths)).findings


def _describe(findings: tuple[Finding, ...]) -> str:
    return "\n".join(f"  {f.severity} {f.invariant} {f.location}: {f.message}" for f in findings) or "  (none)"


def _line(location: str) -> str:
    file, _, line = location.rpartition(":")
    return Path(file).read_text().splitlines()[int(line) - 1]


@pytest.mark.parametrize("base", ["recorded", "helm"])
def test_the_correct_cluster_has_no_finding(tmp_path: Path, base: str) -> None:
    bug = BY_NAME["helm-canary"] if base == "helm" else None
    findings = _findings(materialise(bug, tmp_path, mutated=False))
    assert [f for f in findings if f.severity != "note"] == [], _describe(findings)


@pytest.mark.parametrize("bug", OBJECT_BUGS, ids=IDS)
def test_object_bug_is_caught_at_the_field_to_fix(tmp_path: Path, bug: ObjectBug) -> None:
    findings = _findings(materialise(bug, tmp_path))
    for inv, severity in bug.expected:
        assert any(f.invariant == inv and f.severity == severity for f in findings), (
            f"{bug.name}: expected {inv} ({severity}), got:\n{_describe(findings)}"
        )
    inv, severity = bug.expected[0]
    first = next(f for f in findings if f.invariant == inv and f.severity == severity)
    assert first.location.startswith(str(tmp_path / bug.file) + ":"), first.location
    assert bug.marker in _line(first.location), f"{bug.name}: {first.location} is {_line(first.location)!r}"
    for inv in bug.not_flagged:
        assert not [f for f in findings if f.invariant == inv and f.severity == "error"], _describe(findings)


@pytest.mark.parametrize("bug", [b for b in OBJECT_BUGS if b.file != HELM and any(s == "error" for _, s in b.expected)], ids=lambda b: b.name)
def test_check_exits_1_on_an_object_bug(tmp_path: Path, bug: ObjectBug) -> None:
    paths = materialise(bug, tmp_path)
    node = RECORDED / "nodes" / "worker-1.iptables-save"
    args = ["check", str(node), *[a for p in paths for a in ("--cluster", str(p))], "--node", "worker-1", "--format", "json"]
    r = CliRunner().invoke(main, args)
    doc = json.loads(r.stdout)
    errors = {f["invariant"] for f in doc["findings"] if f["severity"] == "error"}
    assert r.exit_code == 1 and {inv for inv, s in bug.expected if s == "error"} <= errors


@pytest.mark.parametrize(
    "name", ["helm-selector-typo", "helm-named-targetport-typo", "helm-udp-service-port", "helm-second-workload", "pod-crash-loop"],
)
def test_verify_exits_1_on_an_object_bug(tmp_path: Path, name: str) -> None:
    bug = BY_NAME[name]
    cluster = tmp_path / "snapshot" / "shop"
    cluster.mkdir(parents=True)
    materialise(bug, cluster)
    r = CliRunner().invoke(main, ["verify", str(cluster.parent), "--format", "json"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 1
    assert bug.expected[0][0] in {f["invariant"] for f in doc["findings"] if f["severity"] == "error"}


def test_messages_name_the_cause() -> None:
    # what the person fixing it reads: the near miss, the declared ports, the failing condition
    def one(name: str, inv: str, tmp: Path) -> str:
        return next(f.message for f in _findings(materialise(BY_NAME[name], tmp)) if f.invariant == inv)

    import tempfile

    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        assert "Pod shop/frontend-6d4cf56db6-2xq7w" in one("selector-typo", "NV016", tmp)
        assert "it has app=frontend" in one("selector-typo", "NV016", tmp)
    with tempfile.TemporaryDirectory() as t:
        assert "named ports: http" in one("helm-named-targetport-typo", "NV018", Path(t))
    with tempfile.TemporaryDirectory() as t:
        msg = one("pod-crash-loop", "NV026", Path(t))
        assert "container redis is waiting (CrashLoopBackOff: back-off 5m0s" in msg and "9 restart(s)" in msg
    with tempfile.TemporaryDirectory() as t:
        msg = one("helm-second-workload", "NV017", Path(t))
        assert "Deployment default/blog (ghost)" in msg and "Deployment default/blog-admin (adminer)" in msg
