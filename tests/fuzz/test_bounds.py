"""Bounded time and memory on hostile and large inputs (issue 13 item 2).

Each command runs in a child process under resource limits, and the test states its bound:
CPU seconds and peak resident memory, as the child itself measures them at exit. The bounds
are CPU time, not wall time, so that a loaded machine (the 2 shared cores these tests run on
are often busy) does not make them flake: waiting for a core costs wall time, not CPU time.
They are set at 2-3 times what the commands take on this machine, so a quadratic regression or
an unbounded expansion fails them while noise does not. ``RLIMIT_CPU`` and ``RLIMIT_AS`` kill
a runaway child before it can take the machine down with it.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

MIB = 1 << 20

_CHILD = r"""
import json, resource, sys
from nat_verify.cli import main
code = 0
try:
    main(sys.argv[1:], prog_name="nat-verify")
except SystemExit as e:
    code = e.code if isinstance(e.code, int) else 1
u = resource.getrusage(resource.RUSAGE_SELF)
sys.stderr.write("\nNV-BOUNDS " + json.dumps({"code": code, "cpu": u.ru_utime + u.ru_stime, "rss": u.ru_maxrss * 1024}) + "\n")
"""


def bounded(args: list[str], *, cpu: float, memory: int) -> tuple[int, str, str, dict[str, float]]:
    """Run ``nat-verify ARGS`` in a child limited to a little more than the bounds; its figures."""

    def limits() -> None:
        hard_cpu = int(cpu * 3) + 5  # the kill is a safety net; the assertions below are the bound
        resource.setrlimit(resource.RLIMIT_CPU, (hard_cpu, hard_cpu))
        resource.setrlimit(resource.RLIMIT_AS, (memory * 4 + 2048 * MIB, memory * 4 + 2048 * MIB))

    r = subprocess.run(
        [sys.executable, "-c", _CHILD, *args], capture_output=True, text=True, preexec_fn=limits, timeout=600
    )
    head, sep, tail = r.stderr.rpartition("\nNV-BOUNDS ")
    assert sep, f"the child died (exit {r.returncode}): {r.stderr[-2000:]}"
    figures = json.loads(tail)
    return int(figures["code"]), r.stdout, head, figures


def assert_within(figures: dict[str, float], *, cpu: float, memory: int) -> None:
    assert figures["cpu"] <= cpu, f"{figures['cpu']:.2f} s CPU, bound {cpu} s"
    assert figures["rss"] <= memory, f"{figures['rss'] / MIB:.0f} MiB peak, bound {memory / MIB:.0f} MiB"


def _manifest(size: int) -> str:
    """A cluster of one node and ~size bytes of Services with EndpointSlices (3 endpoints each)."""
    docs: list[dict[str, object]] = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"},
             "spec": {"podCIDR": "10.42.1.0/24"}, "status": {"addresses": [{"type": "InternalIP", "address": "192.168.1.11"}]}}]  # fmt: skip
    i, text = 0, ""
    while len(text) < size:
        for _ in range(100):
            docs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": f"svc{i}", "namespace": "ns"},
                         "spec": {"clusterIP": f"10.43.{i // 250}.{i % 250 + 1}", "selector": {"app": f"a{i}"},
                                  "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]}})  # fmt: skip
            docs.append({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                         "metadata": {"name": f"svc{i}-x", "namespace": "ns", "labels": {"kubernetes.io/service-name": f"svc{i}"}},
                         "addressType": "IPv4", "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
                         "endpoints": [{"addresses": [f"10.42.{i % 200}.{j + 1}"], "conditions": {"ready": True}, "nodeName": "node-1"} for j in range(3)]})  # fmt: skip
            i += 1
        text = yaml.dump_all(docs, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper))
    return text


@pytest.fixture(scope="module")
def manifest_1mb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("bounds") / "cluster.yaml"
    p.write_text(_manifest(1_000_000))
    return p


def test_a_1mb_manifest_compiles_within_4s_cpu_and_256mib(manifest_1mb: Path) -> None:
    assert manifest_1mb.stat().st_size >= 1_000_000
    code, out, err, fig = bounded(["compile", str(manifest_1mb), "--node", "node-1"], cpu=4, memory=256 * MIB)
    assert code == 0, err
    assert out.count("-j KUBE-SVC-") >= 1600  # every Service made it into the rules
    assert_within(fig, cpu=4, memory=256 * MIB)


def test_a_1mb_json_manifest_compiles_within_4s_cpu_and_256mib(manifest_1mb: Path, tmp_path: Path) -> None:
    docs = [d for d in yaml.safe_load_all(manifest_1mb.read_text()) if d]
    p = tmp_path / "cluster.json"
    p.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}, indent=2))
    code, out, err, fig = bounded(["compile", str(p), "--node", "node-1"], cpu=4, memory=256 * MIB)
    assert code == 0, err
    assert_within(fig, cpu=4, memory=256 * MIB)


def _bomb(levels: int, fanout: int) -> str:
    lines = ['a0: &a0 ["lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * fanout) + "]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        # the 2.9 KB bomb of issue 13 (55 s and 3 GB before the alias budget)
        ("bomb-3kb", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n" + "".join(
            "  " + ln + "\n" for ln in _bomb(9, 30).splitlines()), "alias"),
        # the same idea at 1 MB: many aliases of one large list
        ("bomb-1mb", "kind: ConfigMap\nbig: &b [" + ",".join(["x"] * 20_000) + "]\nuse: [" + ",".join(["*b"] * 90_000) + "]\n", "alias"),
        ("deep-yaml-1mb", "kind: X\nspec: " + "[" * 500_000 + "]" * 500_000 + "\n", "nested more than"),
        ("deep-block-yaml", "kind: X\nspec:\n  deep:\n    " + "- " * 400_000 + "1\n", "nested more than"),
    ],
    ids=lambda v: v if isinstance(v, str) and len(v) < 20 else "",
)
def test_hostile_manifests_are_refused_within_2s_cpu_and_256mib(tmp_path: Path, name: str, text: str, words: str) -> None:
    p = tmp_path / f"{name}.yaml"
    p.write_text(text)
    code, out, err, fig = bounded(["compile", str(p), "--node", "node-1"], cpu=2, memory=256 * MIB)
    assert code == 2 and out == "", err
    assert f"{p}:" in err and words in err
    assert_within(fig, cpu=2, memory=256 * MIB)


def test_deep_json_is_refused_within_2s_cpu(tmp_path: Path) -> None:
    p = tmp_path / "deep.json"
    p.write_text('{"kind": "X",\n "a": ' + "[" * 500_000 + "]" * 500_000 + "}")
    code, out, err, fig = bounded(["compile", str(p), "--node", "node-1"], cpu=2, memory=256 * MIB)
    assert code == 2 and out == "" and f"{p}:2:" in err, err
    assert_within(fig, cpu=2, memory=256 * MIB)


TRACE = ["--node-ip", "192.168.1.11", "--src", "10.42.1.7", "--dst", "10.43.0.15:80"]


def test_a_10mb_line_is_refused_within_2s_cpu_and_256mib(tmp_path: Path) -> None:
    p = tmp_path / "long.rules"
    p.write_text("*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -m comment --comment " + "x" * 10_000_000 + " -j ACCEPT\nCOMMIT\n")
    for extra in ([], ["--partial"]):
        code, out, err, fig = bounded(["trace", str(p), *TRACE, *extra], cpu=2, memory=256 * MIB)
        if extra:
            assert code == 3 and f"{p}:3: not used" in err, err  # the line is listed, the rest read
        else:
            assert code == 2 and out == "" and f"{p}:3:" in err, err
        assert_within(fig, cpu=2, memory=256 * MIB)


def test_100000_chains_jumping_in_a_row_trace_within_bounds(tmp_path: Path) -> None:
    # 100,000 user chains, each jumping to the next: a deep jump chain (the interpreter stops at
    # its depth limit and says inconclusive) read and traced in bounded time and memory
    n = 100_000
    lines = ["*nat", ":PREROUTING ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]", ":POSTROUTING ACCEPT [0:0]"]
    lines += [f":C{i} - [0:0]" for i in range(n)]
    lines += ["-A PREROUTING -j C0"] + [f"-A C{i} -j C{i + 1}" for i in range(n - 1)] + [f"-A C{n - 1} -j ACCEPT", "COMMIT"]
    p = tmp_path / "chains.rules"
    p.write_text("\n".join(lines) + "\n")
    code, out, err, fig = bounded(["trace", str(p), *TRACE, "--from", "external", "--format", "json"], cpu=10, memory=512 * MIB)
    assert code == 3, err
    (o,) = json.loads(out)["outcomes"]
    assert o["verdict"] == "inconclusive" and "depth" in o["reason"]
    assert_within(fig, cpu=10, memory=512 * MIB)


def test_a_cyclic_jump_is_refused_not_a_hang(tmp_path: Path) -> None:
    # the kernel refuses a loop reachable from a base chain (netfilter.placement): bad input
    p = tmp_path / "loop.rules"
    p.write_text("*nat\n:PREROUTING ACCEPT [0:0]\n:A - [0:0]\n:B - [0:0]\n-A PREROUTING -j A\n-A A -j B\n-A B -j A\nCOMMIT\n")
    code, out, err, fig = bounded(["trace", str(p), *TRACE, "--from", "external", "--format", "json"], cpu=3, memory=256 * MIB)
    assert code == 2 and out == "" and f"{p}:7:" in err and "loop" in err, err
    assert_within(fig, cpu=3, memory=256 * MIB)
