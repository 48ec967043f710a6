"""``check`` on the rules each era writes for the golden cluster: no false alarm.

Every error that an older layout gets is listed here with the reason it is true of the
releases of that era (what their rules do to a packet, read off the rules): a new error, or a
listed one disappearing, fails. The newest eras must pass clean.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from nat_verify.cli import main
from nat_verify.kube import load_cluster
from nat_verify.kubeproxy.compiler import compile_node
from nat_verify.kubeproxy.eras import ERA_NAMES, Era, before_mark_fix, era_named
from nat_verify.netfilter.parse import parse
from nat_verify.netfilter.render import render
from nat_verify.netfilter.saveform import to_save_form

GOLDEN = Path(__file__).parents[1] / "golden" / "eras"

# invariant, address class, origin -> why it is true of the era
HOST_EXTERNAL_IP = ("NV002", "external-ip", "host")  # 1.16-1.20
# The externalIP capture is "-m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL" or
# "--dst-type LOCAL": a process on the node sending to an externalIP that is not one of the
# node's addresses matches neither, and the packet leaves un-DNATed (1.21's kubernetes#96296
# matches externalIPs like ClusterIPs).
LB_REFUSED_FORWARDED = ("NV012", "lb-ip", "pod")  # 1.16-1.24, and from outside alike
LB_REFUSED_EXTERNAL = ("NV012", "lb-ip", "external")
# KUBE-FW only marks a refused source (KUBE-MARK-DROP); kubelet drops marked packets on INPUT
# and OUTPUT, so traffic to an LB IP that is not local to the node is forwarded un-NATed.
FIVE_DECIMALS = ("NV007", "cluster-ip", None)  # 1.16: 0.33333 per step is not 1/3 each
MARK_NOT_CLEARED = ("NV014", "", None)  # 1.16.0-1.16.12, 1.17.0-1.17.8, 1.18.0-1.18.5 (#78948)
KNOWN: dict[str, set[tuple[str, str, str | None]]] = {
    "1.16": {HOST_EXTERNAL_IP, LB_REFUSED_FORWARDED, LB_REFUSED_EXTERNAL, FIVE_DECIMALS,
             ("NV007", "node-port", None), ("NV007", "localhost-node-port", None)},
    "1.17": {HOST_EXTERNAL_IP, LB_REFUSED_FORWARDED, LB_REFUSED_EXTERNAL},
    "1.18": {HOST_EXTERNAL_IP, LB_REFUSED_FORWARDED, LB_REFUSED_EXTERNAL},
    "1.20": {HOST_EXTERNAL_IP, LB_REFUSED_FORWARDED, LB_REFUSED_EXTERNAL},
    "1.21": {LB_REFUSED_FORWARDED, LB_REFUSED_EXTERNAL},
    "1.23": {LB_REFUSED_FORWARDED, LB_REFUSED_EXTERNAL},
    "1.24": {LB_REFUSED_FORWARDED, LB_REFUSED_EXTERNAL},
}  # fmt: skip


def _key(f: dict[str, object]) -> tuple[str, str, str | None]:
    inv = str(f["invariant"])
    if inv == "NV014":
        return (inv, "", None)
    msg = str(f["message"])
    cls = msg.split(" ")[1] if msg.count(" ") else ""
    origin = f["counterexample"]["from"] if inv != "NV007" and f.get("counterexample") else None  # type: ignore[index]
    return (inv, cls, origin)


def _check(tmp_path: Path, era: Era) -> tuple[dict[str, Any], int]:
    cluster = load_cluster(GOLDEN / "cluster.yaml")
    dump = tmp_path / f"node-1-{era.releases}.rules"
    dump.write_text(render(to_save_form(parse(compile_node(cluster, "node-1", era=era), family=4))))
    r = CliRunner().invoke(main, ["check", str(dump), "--cluster", str(GOLDEN / "cluster.yaml"), "--node", "node-1",
                                  "--format", "json"])  # fmt: skip
    return json.loads(r.stdout), r.exit_code


@pytest.mark.parametrize("era", ["1.16", "1.17", "1.18"])
def test_patch_releases_before_the_mark_fix_leave_the_mark_set(era: str, tmp_path: Path) -> None:
    early = before_mark_fix(era_named(era))
    doc, code = _check(tmp_path, early)
    errors = {_key(f) for f in doc["findings"] if f["severity"] == "error"}
    assert errors == KNOWN[era] | {MARK_NOT_CLEARED} and code == 1, sorted(errors)
    note = next(f for f in doc["findings"] if f["invariant"] == "NV015" and f["message"].startswith("rules compared"))
    assert f"kube-proxy {early.releases} assumed" in note["message"]


@pytest.mark.parametrize("era", ERA_NAMES)
def test_check_of_each_era_finds_only_what_the_era_really_does(era: str, tmp_path: Path) -> None:
    cluster = load_cluster(GOLDEN / "cluster.yaml")
    dump = tmp_path / f"node-1-{era}.rules"
    dump.write_text(render(to_save_form(parse(compile_node(cluster, "node-1", era=era_named(era)), family=4))))
    r = CliRunner().invoke(main, ["check", str(dump), "--cluster", str(GOLDEN / "cluster.yaml"), "--node", "node-1",
                                  "--format", "json"])  # fmt: skip
    doc = json.loads(r.stdout)
    errors = {_key(f) for f in doc["findings"] if f["severity"] == "error"}
    assert errors == KNOWN.get(era, set()), sorted(errors)
    assert r.exit_code == (1 if era in KNOWN else 0)
    # the era is recognised from the rules, not assumed
    note = next(f for f in doc["findings"] if f["invariant"] == "NV015" and f["message"].startswith("rules compared"))
    assert f"kube-proxy {era_named(era).releases}" in note["message"] or era in ("1.25", "1.26", "1.27", "1.30")
