"""``check DIR``: a fleet of node dumps, identical nodes grouped, per-node reports, executors.

The cluster (data/fleet/cluster.yaml) is built so that kube-proxy writes the same rules on
node-2 and node-3 and different ones on node-1 (see the file's comment): the expected groups
follow from that construction. Per-node results are compared with ``check_ruleset`` run on
each node's dump on its own, the path that shares nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nat_verify.check import check_ruleset
from nat_verify.cli import main
from nat_verify.fleet import FleetInputError, LocalExecutor, check_fleet, load_fleet
from nat_verify.fleet.inventory import node_of_file
from nat_verify.kube.loader import load_cluster
from nat_verify.kubeproxy import compile_node
from nat_verify.model.cluster import Cluster
from nat_verify.netfilter.parse import parse_file

DATA = Path(__file__).resolve().parent / "data" / "fleet"
CLUSTER = str(DATA / "cluster.yaml")
NODES = ("node-1", "node-2", "node-3")


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    if r.exception and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.stdout, r.stderr


@pytest.fixture(scope="module")
def cluster() -> Cluster:
    return load_cluster([CLUSTER])


@pytest.fixture()
def fleet_dir(tmp_path: Path, cluster: Cluster) -> Path:
    for n in NODES:
        (tmp_path / f"{n}.save").write_text(compile_node(cluster, n, 4))
    return tmp_path


def _key(results: tuple[object, ...]) -> list[tuple[str, str, str, str]]:
    return sorted((r.invariant, r.service, r.node, r.status) for r in results)  # type: ignore[attr-defined]


def _outcome(res: object) -> object:
    """What a fleet check found: groups, and per node its results and findings (not how many
    packets were traced, which depends on how much work was shared)."""
    return (
        res.groups,  # type: ignore[attr-defined]
        [(n.node, n.dumps, _key(n.report.results), sorted(n.report.findings, key=str)) for n in res.nodes],  # type: ignore[attr-defined]
    )


def test_file_names_give_the_node_and_family() -> None:
    assert node_of_file("node-a.save") == ("node-a", None)
    assert node_of_file("node-a.ipv6.rules") == ("node-a", 6)
    assert node_of_file("ip-10-0-0-1.ec2.internal.txt") == ("ip-10-0-0-1.ec2.internal", None)
    assert node_of_file("node-b") == ("node-b", None)


def test_identical_dumps_form_one_group_and_every_node_equals_its_own_check(fleet_dir: Path, cluster: Cluster) -> None:
    fleet = load_fleet(str(fleet_dir), cluster)
    res = check_fleet(cluster, fleet)
    assert res.groups == (("node-1",), ("node-2", "node-3"))
    for n in res.nodes:
        alone = check_ruleset(cluster, n.node, parse_file(str(fleet_dir / f"{n.node}.save")))
        assert _key(n.report.results) == _key(alone.results)
        assert sorted(f.message for f in n.report.findings) == sorted(f.message for f in alone.findings)
        assert {r.node for r in n.report.results} == {n.node}


def test_a_manifest_maps_files_to_nodes(fleet_dir: Path, cluster: Cluster) -> None:
    for n in NODES:
        (fleet_dir / f"{n}.save").rename(fleet_dir / f"dump-{n[-1]}.rules")
    (fleet_dir / "manifest.yaml").write_text("nodes:\n" + "".join(f"  {n}: dump-{n[-1]}.rules\n" for n in NODES))
    fleet = load_fleet(str(fleet_dir), cluster)
    assert [(d.node, Path(d.path).name) for d in fleet.dumps] == [(n, f"dump-{n[-1]}.rules") for n in NODES]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: (d / "node-9.save").write_text("*nat\nCOMMIT\n"), "no node 'node-9' in the cluster"),
        (lambda d: (d / "manifest.json").write_text('{"nodes": {"node-1": "gone.rules"}}'), "no file"),
        (lambda d: (d / "manifest.json").write_text('["node-1"]'), "expected a mapping"),
        (lambda d: (d / "manifest.json").write_text('{"nodes": '), "not JSON"),
    ],
)
def test_bad_fleet_input_is_one_clear_error(tmp_path: Path, cluster: Cluster, setup, message: str) -> None:  # type: ignore[no-untyped-def]
    setup(tmp_path)
    with pytest.raises(FleetInputError, match=message):
        load_fleet(str(tmp_path), cluster)


def test_an_empty_directory_is_bad_input(tmp_path: Path, cluster: Cluster) -> None:
    with pytest.raises(FleetInputError, match="no dump files"):
        load_fleet(str(tmp_path), cluster)


def test_cli_checks_a_directory_and_reports_per_node(fleet_dir: Path) -> None:
    code, out, err = run("check", str(fleet_dir), "--cluster", CLUSTER, "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["meta"]["groups"] == [["node-1"], ["node-2", "node-3"]]
    assert set(doc["meta"]["nodes"]) == set(NODES)
    # the cluster's objects (NV016-NV028) are checked once, for no node in particular
    assert {r["node"] for r in doc["results"]} == {*NODES, ""}
    assert {r["invariant"] for r in doc["results"] if not r["node"]} <= {f"NV0{n}" for n in range(16, 29)}


def test_cli_a_broken_node_is_reported_on_that_node_only(fleet_dir: Path) -> None:
    # node-3's DNAT for web's first endpoint sends traffic to a pod that is not an endpoint
    p = fleet_dir / "node-3.save"
    text = p.read_text()
    assert "--to-destination 10.42.1.5:8080" in text
    p.write_text(text.replace("--to-destination 10.42.1.5:8080", "--to-destination 10.42.3.77:8080"))
    code, out, _ = run("check", str(fleet_dir), "--cluster", CLUSTER, "--format", "json")
    assert code == 1
    doc = json.loads(out)
    assert doc["meta"]["groups"] == [["node-1"], ["node-2"], ["node-3"]]
    assert doc["meta"]["nodes"]["node-3"]["violated"] > 0
    assert doc["meta"]["nodes"]["node-1"]["violated"] == doc["meta"]["nodes"]["node-2"]["violated"] == 0
    assert {f["node"] for f in doc["findings"] if f["severity"] == "error"} == {"node-3"}


@pytest.mark.parametrize(
    "args",
    [
        ("--node", "node-1"),  # the node of each dump comes from the directory
        ("--scheduler", "tcp://127.0.0.1:1"),  # only with --executor dask
    ],
)
def test_cli_refuses_options_that_do_not_fit_a_directory(fleet_dir: Path, args: tuple[str, ...]) -> None:
    code, out, err = run("check", str(fleet_dir), "--cluster", CLUSTER, *args)
    assert code == 2 and out == "" and "error" in err and "Traceback" not in err


def test_cli_unknown_node_file_is_exit_2(fleet_dir: Path) -> None:
    (fleet_dir / "stranger.save").write_text("*nat\nCOMMIT\n")
    code, out, err = run("check", str(fleet_dir), "--cluster", CLUSTER)
    assert code == 2 and out == ""
    assert "stranger.save" in err and "no node 'stranger'" in err


def test_cli_a_bad_dump_in_the_fleet_names_its_file_and_line(fleet_dir: Path) -> None:
    (fleet_dir / "node-2.save").write_text("*nat\n-A PREROUTING -p tcp --dport 99999 -j ACCEPT\nCOMMIT\n")
    code, out, err = run("check", str(fleet_dir), "--cluster", CLUSTER)
    assert code == 2 and out == ""
    assert f"{fleet_dir / 'node-2.save'}:2" in err


def test_a_process_pool_gives_the_same_results_as_one_process(fleet_dir: Path, cluster: Cluster) -> None:
    fleet = load_fleet(str(fleet_dir), cluster)
    one = check_fleet(cluster, fleet, LocalExecutor(1))
    two = check_fleet(cluster, fleet, LocalExecutor(2))
    assert _outcome(one) == _outcome(two)


def test_dask_gives_the_same_results_as_the_local_executor(fleet_dir: Path, cluster: Cluster) -> None:
    from nat_verify.fleet import DaskExecutor  # Dask is a test dependency (pyproject [test])

    fleet = load_fleet(str(fleet_dir), cluster)
    local = check_fleet(cluster, fleet)
    on_dask = check_fleet(cluster, fleet, DaskExecutor(workers=2))
    assert _outcome(on_dask) == _outcome(local)
