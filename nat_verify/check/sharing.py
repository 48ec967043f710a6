"""Symmetry reduction: one check per shape of Service port, a linear check per instance.

``check_shared`` gives the same report as ``check_ruleset`` (a property test compares them on
random clusters), computed differently: every Service port's shape (``shape.shape_of``: its
slice of the rules, the node's facts and its own objects, constants renamed) is computed,
which costs the Service's own rules; one Service port of each shape (its *representative*) is
checked exhaustively; every other port of that shape gets the representative's statuses, per
invariant, with the same count of packet classes. Sharing happens only where the
representative's check is clean: every invariant ``proved`` and no finding on it. Otherwise
(and for a port without a shape) each port is checked on its own, so every counterexample,
warning and inconclusive reason in a report comes from a concrete check of its own Service.

``memo`` carries clean shapes from one call to the next: the nodes of a fleet share it, since
the shape names no node (its own facts come first and other nodes by position).
"""

from __future__ import annotations

from typing import Any

import attrs

from nat_verify.check.atoms import SourceSpace
from nat_verify.check.nodectx import node_context
from nat_verify.check.runner import CheckReport, Progress, check_ruleset, drift_report
from nat_verify.check.shape import NodeBase, Slicer, group_destinations, shape_of
from nat_verify.intent import destinations, find_service_port
from nat_verify.model.cluster import Cluster, Service
from nat_verify.model.outcome import Finding, Result
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.ruleset import Ruleset
from nat_verify.node.facts import NodeFacts
from nat_verify.node.proxyconfig import with_inferred_config

Template = tuple[tuple[str, str, str, int], ...]  # (invariant, status, engine, packet classes)


@attrs.define
class ShapeMemo:
    """Clean shapes seen so far: shape -> the per-invariant results of its representative."""

    clean: dict[Any, Template] = attrs.field(factory=dict)
    checked: int = 0  # Service ports checked concretely
    shared: int = 0  # Service ports that took a representative's results


def _services(cluster: Cluster, ports: list[tuple[str, str]]) -> list[Service]:
    out: dict[str, Service] = {}
    for key, proto in ports:
        svc, _ = find_service_port(cluster, key, proto)
        out.setdefault(svc.key, svc)
    return list(out.values())


def _sub_cluster(cluster: Cluster, services: list[Service]) -> Cluster:
    keys = {(s.namespace, s.name) for s in services}
    ids = {id(s) for s in services}
    return attrs.evolve(
        cluster,
        services=tuple(s for s in cluster.services if id(s) in ids),
        slices=tuple(es for es in cluster.slices if (es.namespace, es.service_name) in keys),
    )


def check_shared(
    cluster: Cluster,
    node: str,
    ruleset: Ruleset,
    *,
    drift_check: bool = True,
    progress: Progress | None = None,
    memo: ShapeMemo | None = None,
    facts: NodeFacts | None = None,
    workers: int = 1,
    infer_config: bool = True,
    kube_proxy_version: str = "",
) -> CheckReport:
    """Every invariant on one node's ruleset, one check per shape of Service port.

    ``workers`` > 1 splits the Services to check concretely between that many forked
    processes (whole Services per process; the ruleset-wide checks run in the first); the
    report is the same for any number of workers.

    ``facts`` and the settings inferred from the dump without a KubeProxyConfiguration are
    those of ``check_ruleset``: applied once here, for the shapes and every check alike."""
    memo = memo if memo is not None else ShapeMemo()
    inferred: tuple[Any, ...] = ()
    if infer_config:
        cluster, inferred = with_inferred_config(cluster, node, ruleset)
    ctx = node_context(cluster, node, ruleset.family, facts, ruleset)
    slicer = Slicer.of(ruleset)
    base = NodeBase(cluster, node, ctx)
    interp = Interpreter(ruleset, ctx)
    prepared = (interp, SourceSpace(interp))  # one pass over the dump for every call below
    keyed: list[tuple[str, str, Any]] = []  # (service port, proto, shape or None)
    for service, dests in group_destinations(destinations(cluster, node, ruleset.family)):
        keyed.append((service, dests[0].proto, shape_of(slicer, cluster, node, ctx, service, dests, base)))
    reps: dict[Any, tuple[str, str]] = {}
    concrete: list[tuple[str, str]] = []
    for service, proto, key in keyed:
        if key is None:
            concrete.append((service, proto))
        elif key not in memo.clean and key not in reps:
            reps[key] = (service, proto)
    report = _checked(
        cluster, node, ruleset, [*reps.values(), *concrete], progress, structure=True, facts=facts, workers=workers,
        prepared=prepared,
    )  # fmt: skip
    by_service = _by_service(report)
    for key, (service, _) in reps.items():
        results, findings = by_service.get(service, ([], []))
        if results and not findings and all(r.status == "proved" for r in results):
            memo.clean[key] = tuple((r.invariant, r.status, r.engine, r.checked) for r in results)
    done = {s for s, _ in reps.values()} | {s for s, _ in concrete} | set(by_service)
    again = [(s, p) for s, p, k in keyed if s not in done and k not in memo.clean]
    if again:
        report = report.merged(
            _checked(cluster, node, ruleset, again, progress, structure=False, facts=facts, workers=workers, prepared=prepared)
        )
        done |= {s for s, _ in again}
    shared: list[Result] = []
    for service, _, key in keyed:
        if service in done:
            continue
        if progress:
            progress(f"{service} (shared)")
        shared += [Result(inv, service, node, status, engine, n, cluster.name)  # type: ignore[arg-type]
                   for inv, status, engine, n in memo.clean[key]]  # fmt: skip
    ports = {s for s, _, _ in keyed}
    memo.checked += len(ports & done)
    memo.shared += len(ports - done)
    premises = tuple((node, p) for p in (*inferred, *ctx.assumptions))
    out = CheckReport(report.results + tuple(shared), report.findings, report.packets, premises)
    if drift_check:
        from nat_verify.check.runner import _service_location

        out = out.merged(drift_report(cluster, node, ruleset, ctx, lambda s: _service_location(cluster, s), kube_proxy_version))
    return out


def verify_shared(
    cluster: Cluster, *, progress: Progress | None = None, memo: ShapeMemo | None = None, objects: bool = True
) -> CheckReport:
    """``runner.verify_cluster`` (the rules nat-verify compiles, every node and family; with
    ``objects``, the cluster's objects), with one check per shape shared by every node: the same
    report, at a cost that grows with the number of distinct shapes rather than nodes x Services."""
    from nat_verify.check.runner import check_objects, compiled_rulesets

    memo = memo if memo is not None else ShapeMemo()
    report = check_objects(cluster) if objects else CheckReport((), ())
    for node, rs in compiled_rulesets(cluster):
        report = report.merged(
            check_shared(cluster, node, rs, drift_check=False, progress=progress, memo=memo, infer_config=False)
        )
    return report


def _checked(
    cluster: Cluster, node: str, ruleset: Ruleset, ports: list[tuple[str, str]], progress: Progress | None,
    structure: bool, facts: NodeFacts | None = None, workers: int = 1,
    prepared: tuple[Interpreter, SourceSpace] | None = None,
) -> CheckReport:  # fmt: skip
    """``check_ruleset`` over the Services of ``ports`` (all their ports); ruleset-wide results
    (service ``""``: structure) kept only when ``structure``. With ``workers`` > 1, whole
    Services are dealt out to forked processes and the reports merged in a fixed order."""
    if not ports and not structure:
        return CheckReport((), ())
    if workers > 1 and len(ports) >= 2 * workers:
        return _checked_parallel(cluster, node, ruleset, ports, progress, structure, facts, workers, prepared)
    from nat_verify.check.runner import _service_location

    sub = _sub_cluster(cluster, _services(cluster, ports))
    rep = check_ruleset(
        sub, node, ruleset, drift_check=False, progress=progress, location=lambda s: _service_location(cluster, s),
        facts=facts, infer_config=False, prepared=prepared, structure_check=structure,
    )
    if structure:
        return rep
    return CheckReport(
        tuple(r for r in rep.results if r.service), tuple(f for f in rep.findings if f.service), rep.packets
    )


_Chunk = tuple[list[tuple[str, str]], bool]
_Shared = tuple[Cluster, str, Ruleset, NodeFacts | None, tuple[Interpreter, SourceSpace] | None]


def _check_chunk(shared: _Shared, item: _Chunk) -> CheckReport:
    cluster, node, ruleset, facts, prepared = shared
    ports, structure = item
    return _checked(cluster, node, ruleset, ports, None, structure, facts, prepared=prepared)


def _checked_parallel(
    cluster: Cluster, node: str, ruleset: Ruleset, ports: list[tuple[str, str]], progress: Progress | None,
    structure: bool, facts: NodeFacts | None, workers: int, prepared: tuple[Interpreter, SourceSpace] | None,
) -> CheckReport:  # fmt: skip
    """The workers are forked: each starts with this process's ``prepared`` interpreter."""
    from nat_verify.executors import LocalExecutor

    by_service: dict[str, list[tuple[str, str]]] = {}
    for key, proto in ports:
        svc, _ = find_service_port(cluster, key, proto)
        by_service.setdefault(svc.key, []).append((key, proto))
    groups = list(by_service.values())
    n = min(len(groups), workers)  # one chunk per worker: each check_ruleset call pays a setup linear in the dump
    chunks: list[_Chunk] = [
        ([p for g in groups[i::n] for p in g], structure and i == 0) for i in range(n)
    ]

    def done(i: int, _rep: object) -> None:
        if progress:
            for key, _ in chunks[i][0]:
                progress(f"{key} (checked)")

    reports = LocalExecutor(workers).run(_check_chunk, (cluster, node, ruleset, facts, prepared), chunks, done)
    out = CheckReport((), ())
    for rep in reports:
        out = out.merged(rep)
    return out


def _by_service(report: CheckReport) -> dict[str, tuple[list[Result], list[Finding]]]:
    out: dict[str, tuple[list[Result], list[Finding]]] = {}
    for r in report.results:
        out.setdefault(r.service, ([], []))[0].append(r)
    for f in report.findings:
        out.setdefault(f.service, ([], []))[1].append(f)
    return out
