"""The Z3 engine on the example clusters: every invariant proved, like the exhaustive engine.

``verify_cluster`` compiles what kube-proxy writes for each spec's nodes; the specs are
correct clusters, so every invariant must be ``proved`` (the exhaustive engine says so too, by
other means), on the same (invariant, Service) pairs. With ``solve=True`` the solver decides
every class, also those the interval sets alone decide: the answer must not change.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nat_verify.check.runner import check_ruleset, families
from nat_verify.kube.loader import load_cluster
from nat_verify.kubeproxy import compile_node
from nat_verify.netfilter.parse import parse
from nat_verify.symbolic.engine import check_ruleset_z3

SPECS = sorted((Path(__file__).parents[2] / "specs").glob("*.yaml"))


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.stem)
def test_z3_proves_every_invariant_of_every_spec(spec: Path) -> None:
    cluster = load_cluster(spec)
    for n in cluster.nodes:
        for fam in families(cluster, n.name):
            rs = parse(compile_node(cluster, n.name, fam), family=fam)
            z3 = check_ruleset_z3(cluster, n.name, rs, drift_check=False)
            exhaustive = check_ruleset(cluster, n.name, rs, drift_check=False)
            assert z3.results and all(r.engine == "z3" for r in z3.results)
            assert {r.status for r in z3.results} == {"proved"}, [f.message for f in z3.findings]
            assert {(r.invariant, r.service) for r in z3.results} == {(r.invariant, r.service) for r in exhaustive.results}
            assert not [f for f in z3.findings if f.severity == "error"]


@pytest.mark.parametrize("spec", [s for s in SPECS if s.stem in ("web-svc", "loadbalancer-source-ranges", "etp-local")], ids=lambda p: p.stem)
def test_the_solver_deciding_every_class_changes_nothing(spec: Path) -> None:
    cluster = load_cluster(spec)
    n = cluster.nodes[0].name
    rs = parse(compile_node(cluster, n, 4), family=4)
    quick = check_ruleset_z3(cluster, n, rs, drift_check=False)
    solved = check_ruleset_z3(cluster, n, rs, drift_check=False, solve=True)
    assert quick.results == solved.results
    assert solved.packets >= quick.packets
