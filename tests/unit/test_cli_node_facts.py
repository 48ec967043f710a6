"""The node-fact options on trace, check, diff and oracle: accepted with or without --cluster,
bad input refused with one message (file:line, exit 2, nothing on stdout), and every default
the answer rests on listed ("assumptions" in JSON, "assumed: ..." in text)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.test_cli import WEB, run

DATA = Path(__file__).resolve().parent / "data" / "node"


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    code, out, _ = run("compile", WEB, "--node", "node-1", "--style", "save")
    assert code == 0
    p = tmp_path_factory.mktemp("facts") / "node-1.save"
    p.write_text(out)
    return p


FACT_OPTIONS = ("--interface", "--ip-addr", "--pod-interface", "--cni", "--ip-route", "--ipset", "--sysctl")


@pytest.mark.parametrize("command", ["trace", "check", "diff", "oracle"])
def test_every_command_takes_the_node_facts(command: str) -> None:
    code, out, _ = run(command, "--help")
    assert code == 0
    for opt in FACT_OPTIONS:
        assert opt in out, f"{command} lacks {opt}"


def test_trace_with_interfaces_and_no_cluster(dump: Path) -> None:
    # no --node-ip: the node's addresses are its interfaces'
    code, out, err = run(
        "trace", str(dump), "--interface", "eth0=192.168.1.10/24", "--interface", "cni0=10.42.1.1/24",
        "--src", "10.42.1.50", "--dst", "10.43.0.15:80", "--format", "json",
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(out)
    # 10.42.1.50 lies in cni0's subnet: a pod (inferred pod network), sent to either endpoint
    assert doc["packet"]["from"] == "pod"
    assert sorted(o["destination"] for o in doc["outcomes"]) == ["10.42.1.7:8080", "10.42.2.3:8080"]
    facts = {a["fact"]: a for a in doc["assumptions"]}
    assert facts["pod interface"]["basis"] == "inferred" and facts["pod interface"]["value"] == "cni0"
    assert facts["pod network"]["value"] == "10.42.1.0/24"
    assert "node addresses" not in facts  # given, so not an assumption


def test_trace_text_lists_assumptions_on_stderr(dump: Path) -> None:
    code, out, err = run("trace", str(dump), "--cluster", WEB, "--node", "node-1",
                         "--src", "203.0.113.9", "--dst", "10.43.0.15:80")  # fmt: skip
    assert code == 0
    assert len(out.strip().splitlines()) == 2  # one line per outcome
    assert "assumed: node addresses = 192.168.1.10" in err
    assert "assumed: net.bridge.bridge-nf-call-iptables = 1" in err


def test_check_lists_assumptions_and_given_facts_silence_them(dump: Path) -> None:
    code, out, _ = run("check", str(dump), "--cluster", WEB, "--node", "node-1", "--format", "json")
    assert code == 0
    assumed = {a["fact"] for a in json.loads(out)["assumptions"] if a["basis"] == "assumed"}
    assert {"node addresses", "interface roles", "routes", "net.bridge.bridge-nf-call-iptables"} <= assumed
    code, out, _ = run(
        "check", str(dump), "--cluster", WEB, "--node", "node-1", "--format", "json",
        "--interface", "eth0=192.168.1.10/24", "--pod-interface", "cni0",
        "--sysctl", "net.bridge.bridge-nf-call-iptables=1", "--sysctl", "net.ipv4.conf.all.route_localnet=1",
        "--ip-route", str(DATA / "ip-route-flannel.json"),
    )  # fmt: skip
    doc = json.loads(out)
    assert code == 0, [f["message"] for f in doc["findings"]]
    assumed = {a["fact"] for a in doc.get("assumptions", []) if a["basis"] == "assumed"}
    assert not assumed & {"node addresses", "interface roles", "routes", "route_localnet", "net.bridge.bridge-nf-call-iptables"}


def test_diff_takes_facts_and_reports_assumptions(dump: Path) -> None:
    code, out, _ = run("diff", str(dump), str(dump), "--ip-addr", str(DATA / "ip-addr-flannel.json"), "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["equivalent"] is True
    assert any(a["fact"] == "external interface" and a["value"] == "eth0" for a in doc["assumptions"])


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--ipset", "SETS"], "SETS:1: add to set 'x', which no earlier line creates"),
        (["--ip-addr", "ADDR"], "ADDR:1: not JSON"),
        (["--interface", "eth0=10.0.0.300/24"], "--interface: eth0: expected an address"),
        (["--sysctl", "net.ipv4.ip_forward=1"], "--sysctl: net.ipv4.ip_forward: not a sysctl"),
        (["--cni", "frobnet"], "--cni: unknown CNI 'frobnet'"),
        (["--ip-route", "MISSING"], "MISSING: cannot read"),
    ],
)
def test_bad_facts_are_one_clear_error(dump: Path, tmp_path: Path, args: list[str], needle: str) -> None:
    sets = tmp_path / "sets.txt"
    sets.write_text("add x 10.0.0.1\n")
    addr = tmp_path / "addr.txt"
    addr.write_text("1: lo: <LOOPBACK,UP> mtu 65536\n")
    subst = {"SETS": str(sets), "ADDR": str(addr), "MISSING": str(tmp_path / "missing.json")}
    args = [subst.get(a, a) for a in args]
    needle = needle.replace("SETS", str(sets)).replace("ADDR", str(addr)).replace("MISSING", str(tmp_path / "missing.json"))
    for cmd in (["trace", str(dump), "--node-ip", "192.168.1.10", "--src", "10.0.0.1", "--dst", "10.43.0.15:80"],
                ["check", str(dump), "--cluster", WEB, "--node", "node-1"]):  # fmt: skip
        code, out, err = run(*cmd, *args)
        assert code == 2 and out == "", (cmd, out)
        assert needle in err and "Traceback" not in err, err


def test_no_node_at_all_is_refused(dump: Path) -> None:
    code, out, err = run("trace", str(dump), "--src", "10.0.0.1", "--dst", "10.43.0.15:80")
    assert code == 2 and out == "" and "--interface" in err


@pytest.mark.parametrize(
    ("facts", "errors"),
    [
        (["--pod-interface", "cni0", "--sysctl", "net.bridge.bridge-nf-call-iptables=0"], True),
        (["--pod-interface", "cni0", "--sysctl", "net.bridge.bridge-nf-call-iptables=1"], False),
        (["--cni", "calico", "--sysctl", "net.bridge.bridge-nf-call-iptables=0"], False),  # routed: no bridge
    ],
)
def test_bridge_nf_call_iptables_zero_breaks_pod_to_local_pod(dump: Path, facts: list[str], errors: bool) -> None:
    # tests/kernel/test_bridge_nf_kernel.py: with the sysctl at 0 a pod's DNAT to another pod on
    # the same bridge fails unless masqueraded; kube-proxy masquerades only the hairpin
    code, out, _ = run("check", str(dump), "--cluster", WEB, "--node", "node-1", "--format", "json", *facts)
    found = [f for f in json.loads(out)["findings"] if f["severity"] == "error"]
    if errors:
        assert code == 1 and found and {f["invariant"] for f in found} == {"NV010"}
        assert all("10.42.1.7" in f["message"] and "bridged past conntrack" in f["message"] for f in found)
    else:
        assert code == 0 and not found
