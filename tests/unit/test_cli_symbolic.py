"""The command line of the Z3 engine's commands: ``query`` and ``diff`` (default engine z3):
answers, formats and exit codes (0 no / equivalent, 1 yes / different, 2 bad input, 3 undecided)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.test_cli import WEB, node1_dump, run  # noqa: F401  (the fixture)

NODE = ("--cluster", WEB, "--node", "node-1")


def test_diff_with_z3_proves_restore_and_save_spellings_equivalent(node1_dump: Path, tmp_path: Path) -> None:  # noqa: F811
    code, restore, _ = run("compile", WEB, "--node", "node-1")
    p = tmp_path / "node-1.restore"
    p.write_text(restore)
    code, out, _ = run("diff", str(node1_dump), str(p), *NODE, "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["equivalent"] is True and doc["engine"] == "z3" and doc["classes"] > 0 and doc["inconclusive"] == 0
    code, out, _ = run("diff", str(node1_dump), str(p), *NODE)
    assert code == 0 and out.startswith("equivalent: ")


def test_diff_with_z3_proves_a_shadowed_rule_changes_nothing(node1_dump: Path, tmp_path: Path) -> None:  # noqa: F811
    # the localhost NodePort rule's packets (to 127.0.0.0/8:30080) are taken by the next rule,
    # which has no -d, to the same chain: removing it changes no packet (nfacct counts nothing)
    lines = node1_dump.read_text().splitlines()
    victim = next(ln for ln in lines if ln.startswith("-A KUBE-NODEPORTS -d 127.0.0.0/8"))
    p = tmp_path / "b.save"
    p.write_text("\n".join(ln for ln in lines if ln != victim) + "\n")
    code, out, _ = run("diff", str(node1_dump), str(p), *NODE)
    assert code == 0, out


def test_diff_with_z3_names_a_packet_that_replays_differently(node1_dump: Path, tmp_path: Path) -> None:  # noqa: F811
    # the NodePort rule for the node's addresses gone: packets to 192.168.1.10:30080 are no longer
    # DNATed (the localhost NodePort rule before it only takes 127.0.0.0/8)
    lines = node1_dump.read_text().splitlines()
    victim = next(ln for ln in lines if ln.startswith("-A KUBE-NODEPORTS -p tcp"))
    p = tmp_path / "b.save"
    p.write_text("\n".join(ln for ln in lines if ln != victim) + "\n")
    code, out, _ = run("diff", str(node1_dump), str(p), *NODE, "--format", "json")
    assert code == 1
    doc = json.loads(out)
    assert doc["packet"]["dst"] == "192.168.1.10:30080"
    assert {o["destination"] for o in doc["a"]} != {o["destination"] for o in doc["b"]}


def test_query_reach_yes_with_a_witness(node1_dump: Path) -> None:  # noqa: F811
    code, out, err = run("query", str(node1_dump), *NODE, "--reach", "10.42.2.3:8080", "--from", "203.0.113.0/24", "--format", "json")
    assert code == 1, err
    doc = json.loads(out)
    assert doc["format"] == "nat_verify.query/v1" and doc["answer"] == "yes"
    (w,) = doc["witnesses"]
    assert w["packet"]["src"].startswith("203.0.113.")
    assert any(o["destination"] == "10.42.2.3:8080" and o["verdict"] == "forward" for o in w["outcomes"])


def test_query_masqueraded_per_service_address(node1_dump: Path) -> None:  # noqa: F811
    code, out, _ = run("query", str(node1_dump), *NODE, "--masqueraded", "default/web-svc")
    assert code == 1
    assert out.startswith("which packets to default/web-svc are masqueraded?\nyes: ")
    # the hairpin pod is masqueraded to the ClusterIP; every pod of the node to the NodePort
    assert "to 10.43.0.15:80 from pod: 10.42.1.7/32" in out
    assert "to 192.168.1.10:30080 from pod: every source (10.42.1.0/24)" in out


def test_query_no_is_exit_0(node1_dump: Path, tmp_path: Path) -> None:  # noqa: F811
    # nothing but the node itself is ever delivered to 127.0.0.1:22 from off the node: no
    code, out, _ = run("query", str(node1_dump), *NODE, "--reach", "127.0.0.1:22", "--from", "203.0.113.0/24")
    assert code == 0, out
    assert "\nno: proved for every packet" in out


@pytest.mark.parametrize(
    "args, where",
    [
        (("--reach", "10.0.0.1:80", "--masqueraded", "a/b"), "ask one question"),
        (("--from", "10.0.0.0/8", "--masqueraded", "default/web-svc"), "--from goes with --reach"),
        (("--reach", "not-an-address"), "--reach"),
        (("--masqueraded", "default/nope"), "no Service port"),
        (("--reach", "fd00::1:80"), ""),
    ],
)
def test_query_bad_input_is_exit_2_without_stdout(node1_dump: Path, args: tuple[str, ...], where: str) -> None:  # noqa: F811
    code, out, err = run("query", str(node1_dump), *NODE, *args)
    assert code == 2 and out == ""
    assert err.startswith("nat-verify: error: ") and where in err and "Traceback" not in err
