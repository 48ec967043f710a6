"""kube.selection: selector matching, near misses, targetPort resolution and readiness reasons.

Expected values follow the Kubernetes rules stated in each test (equality-based Service
selectors, the EndpointSlice controller's FindPort, Pod conditions), not the code's output.
"""

from __future__ import annotations

from nat_verify.kube.selection import (
    label_selector_selects,
    near_misses,
    readiness,
    resolve_target_port,
    selected_pods,
    selected_workloads,
    selects,
    workload_of,
)
from nat_verify.model.cluster import (
    Cluster,
    Condition,
    ContainerPort,
    ContainerState,
    LabelSelector,
    OwnerRef,
    Pod,
    Requirement,
    Service,
    ServicePort,
    Workload,
)


def svc(selector: dict[str, str] | None, ns: str = "default", target: int | str = 8080, proto: str = "TCP") -> Service:
    return Service(
        ns, "web", (ServicePort(80, proto, "http", target),),  # type: ignore[arg-type]
        selector=tuple(sorted(selector.items())) if selector is not None else None,
    )  # fmt: skip


def pod(name: str, labels: dict[str, str], ns: str = "default", **kw: object) -> Pod:
    return Pod(ns, name, labels=tuple(sorted(labels.items())), **kw)  # type: ignore[arg-type]


def test_selector_is_a_subset_match_and_none_selects_nothing() -> None:
    assert selects({"app": "web"}, {"app": "web", "tier": "fe"})
    assert not selects({"app": "web", "tier": "be"}, {"app": "web", "tier": "fe"})
    assert selects({}, {"app": "x"})  # an empty selector is "everything" to the label package
    assert not selects(None, {"app": "web"})  # a selector-less Service selects nothing


def test_match_expressions() -> None:
    sel = LabelSelector(
        (("app", "web"),),
        (Requirement("track", "In", ("stable", "canary")), Requirement("legacy", "DoesNotExist")),
    )
    assert label_selector_selects(sel, {"app": "web", "track": "canary"})
    assert not label_selector_selects(sel, {"app": "web", "track": "dev"})
    assert not label_selector_selects(sel, {"app": "web", "track": "stable", "legacy": "1"})
    assert label_selector_selects(LabelSelector((), (Requirement("x", "NotIn", ("a",)),)), {})


def test_selected_pods_stay_in_the_namespace() -> None:
    c = Cluster(pods=(pod("a", {"app": "web"}), pod("b", {"app": "web"}, ns="other"), pod("c", {"app": "db"})))
    assert [p.name for p in selected_pods(c, svc({"app": "web"}))] == ["a"]
    assert selected_pods(c, svc(None)) == ()


def test_templates_of_revisions_are_not_workloads() -> None:
    deploy = Workload("Deployment", "default", "web", labels=(("app", "web"),))
    rs = Workload("ReplicaSet", "default", "web-5d4f", labels=(("app", "web"),), owner=OwnerRef("Deployment", "web"))
    lone = Workload("ReplicaSet", "default", "lone", labels=(("app", "web"),))
    c = Cluster(workloads=(deploy, rs, lone))
    assert [w.key for w in selected_workloads(c, svc({"app": "web"}))] == [
        "Deployment default/web", "ReplicaSet default/lone",
    ]  # fmt: skip


def test_workload_of_follows_replicasets_to_deployments() -> None:
    owned = pod("web-5d4f-x", {"app": "web", "pod-template-hash": "5d4f"}, owner=OwnerRef("ReplicaSet", "web-5d4f"))
    # no ReplicaSet object in the input: the name is <deployment>-<pod-template-hash>
    assert workload_of(Cluster(), owned) == "Deployment default/web"
    rs = Workload("ReplicaSet", "default", "web-5d4f", owner=OwnerRef("Deployment", "frontend"))
    assert workload_of(Cluster(workloads=(rs,)), owned) == "Deployment default/frontend"
    sts = pod("db-0", {"app": "db"}, owner=OwnerRef("StatefulSet", "db"))
    assert workload_of(Cluster(), sts) == "StatefulSet default/db"
    assert workload_of(Cluster(), pod("bare", {})) == ""


def test_near_misses_point_at_the_typo() -> None:
    c = Cluster(pods=(
        pod("web-1", {"app": "frontend", "tier": "web"}),
        pod("web-2", {"app": "frontend", "tier": "web"}),  # same labels: reported once
        pod("db-1", {"app": "postgres"}),  # nothing in common: not a near miss
        pod("elsewhere", {"app": "frontnd"}, ns="staging"),  # exact match in another namespace
        pod("keyed", {"App": "frontnd"}),  # the key in another case
    ))  # fmt: skip
    misses = near_misses(c, svc({"app": "frontnd"}))
    names = [m.name for m in misses]
    assert names[0] == "web-1" and misses[0].also == 1
    assert misses[0].diffs[0].found == "frontend"
    assert "app=frontnd: it has app=frontend" in misses[0].describe()
    assert "db-1" not in names
    assert "elsewhere" in names and "staging" in next(m for m in misses if m.name == "elsewhere").describe()
    keyed = next(m for m in misses if m.name == "keyed")
    assert keyed.diffs[0].similar_key == "App"


def test_named_target_port_resolves_by_name_and_protocol() -> None:
    ports = (ContainerPort(5353, "UDP", "dns"), ContainerPort(5353, "TCP", "dns-tcp"), ContainerPort(8080, "TCP", "http"))
    assert resolve_target_port(ports, ServicePort(80, "TCP", "", "http")).number == 8080
    assert resolve_target_port(ports, ServicePort(53, "UDP", "", "dns")).number == 5353
    # the name exists with another protocol: FindPort does not match it
    wrong = resolve_target_port(ports, ServicePort(53, "TCP", "", "dns"))
    assert wrong.number is None and "UDP, not TCP" in wrong.reason
    missing = resolve_target_port(ports, ServicePort(80, "TCP", "", "htp"))
    assert missing.number is None and "'htp'" in missing.reason and "http" in missing.reason
    # a number always resolves; ``declared`` says whether a container declares it
    assert resolve_target_port(ports, ServicePort(80, "TCP", "", 9090)) .number == 9090
    assert resolve_target_port(ports, ServicePort(80, "TCP", "", 9090)).declared is None
    assert resolve_target_port(ports, ServicePort(80, "TCP", "", 8080)).declared == ports[2]


def test_readiness_names_the_failing_condition() -> None:
    crashing = pod(
        "api-1", {}, ips=("10.42.1.5",), ready=False,
        conditions=(Condition("PodScheduled", "True"), Condition("ContainersReady", "False", "ContainersNotReady"),
                    Condition("Ready", "False", "ContainersNotReady")),
        container_states=(ContainerState("api", False, "waiting", "CrashLoopBackOff", "back-off 5m0s", restarts=7),),
    )  # fmt: skip
    r = readiness(crashing)
    assert not r.ready and not r.serving
    assert "container api is waiting (CrashLoopBackOff: back-off 5m0s), 7 restart(s)" in r.reasons
    assert any(c.type == "ContainersReady" for c in r.failing)

    unscheduled = pod(
        "api-2", {}, phase="Pending", ready=False,
        conditions=(Condition("PodScheduled", "False", "Unschedulable", "0/3 nodes are available"),),
    )  # fmt: skip
    reasons = readiness(unscheduled).reasons
    assert reasons[0] == "condition PodScheduled is False (Unschedulable: 0/3 nodes are available)"
    assert "has no Pod IP yet" in reasons

    gated = pod("api-3", {}, ips=("10.42.1.6",), ready=False, readiness_gates=("example.com/lb",),
                conditions=(Condition("ContainersReady", "True"), Condition("Ready", "False", "ReadinessGatesNotReady")))  # fmt: skip
    assert readiness(gated).reasons == ("readiness gate example.com/lb is not set",)

    terminating = pod("api-4", {}, ips=("10.42.1.7",), ready=True, terminating=True)
    t = readiness(terminating)
    assert t.serving and not t.ready and "being deleted" in t.describe()

    assert readiness(pod("ok", {}, ips=("10.42.1.8",))).ready
