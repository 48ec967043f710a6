"""Planted bugs in the cluster's objects: a correct cluster with one realistic defect each.

The rules are not involved: each ``ObjectBug`` starts from the recorded ``shop`` cluster
(``tests/unit/data/recorded``: ``kubectl get`` output of Services, EndpointSlices, Pods, Nodes,
workloads and v1 Endpoints) or from a Helm-rendered release (manifests only, no running Pods),
applies ONE edit to the objects of one file (a function below, whose docstring says which real
mistake it stands for and which invariant must catch it), and names the findings
``check_objects`` must report: ``(invariant, severity)`` pairs. ``marker`` is text of the edited
file on the line the first expected finding must point at (the field to fix).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import yaml

RECORDED = Path(__file__).resolve().parents[1] / "unit" / "data" / "recorded"
# the correct cluster: every object kind the object checks read
BASE_FILES = ("get-all.yaml", "get-workloads.yaml", "get-endpoints.yaml", "kube-proxy-configmap.yaml")
HELM = "helm-template.yaml"

Docs = list[dict[str, Any]]


@attrs.frozen
class ObjectBug:
    name: str
    file: str  # the file edited: one of BASE_FILES, or HELM (then the only file)
    mutate: Callable[[Docs], None]
    expected: tuple[tuple[str, str], ...]  # (invariant, severity), all must be reported
    marker: str  # text on the line the first expected finding's location must name
    not_flagged: tuple[str, ...] = ()  # invariants that must report no error

    @property
    def files(self) -> tuple[str, ...]:
        return (HELM,) if self.file == HELM else BASE_FILES


class _Dumper(yaml.SafeDumper):
    """As ``kubectl -o yaml`` prints: keys sorted, multi-line strings as literal blocks."""


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(str, _str)


def read_docs(file: str) -> Docs:
    """The objects of a recorded file (a List's items, or the documents)."""
    docs = [d for d in yaml.safe_load_all((RECORDED / file).read_text()) if d]
    if len(docs) == 1 and docs[0].get("kind") == "List":
        return list(docs[0]["items"])
    return docs


def write_docs(file: str, docs: Docs, target: Path) -> None:
    if file == HELM:
        text = yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, width=10000)
    elif file == "kube-proxy-configmap.yaml":
        text = yaml.dump(docs[0], Dumper=_Dumper, sort_keys=True, width=10000)
    else:
        lst = {"apiVersion": "v1", "items": docs, "kind": "List", "metadata": {"resourceVersion": ""}}
        text = yaml.dump(lst, Dumper=_Dumper, sort_keys=True, width=10000)
    target.write_text(text)


def materialise(bug: ObjectBug | None, directory: Path, *, mutated: bool = True) -> list[Path]:
    """The cluster's files written to ``directory`` (the bug applied when ``mutated``)."""
    files = bug.files if bug is not None else BASE_FILES
    out = []
    for f in files:
        docs = read_docs(f)
        if bug is not None and mutated and f == bug.file:
            docs = copy.deepcopy(docs)
            bug.mutate(docs)
        path = directory / f
        write_docs(f, docs, path)
        out.append(path)
    return out


# ---------------------------------------------------------------------------------------------
# finding objects


def _one(docs: Docs, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
    hits = [
        d for d in docs
        if d["kind"] == kind and d["metadata"]["name"] == name
        and (not namespace or d["metadata"].get("namespace", "default") == namespace)
    ]  # fmt: skip
    assert len(hits) == 1, (kind, name, len(hits))
    return hits[0]


def _endpoint(docs: Docs, slice_name: str, pod: str) -> dict[str, Any]:
    s = _one(docs, "EndpointSlice", slice_name)
    return next(e for e in s["endpoints"] if e.get("targetRef", {}).get("name") == pod)


FRONTEND_B = "frontend-6d4cf56db6-b8kzm"


# ---------------------------------------------------------------------------------------------
# mutations


def selector_typo(docs: Docs) -> None:
    """``app: frontnd`` in the Service's selector: the most common "my Service doesn't work".

    No Pod carries that label, so the EndpointSlice controller would empty the slices (NV016,
    with the frontend Pods as near misses); the recorded slices still list the old Pods, which
    no longer match (NV023).
    """
    _one(docs, "Service", "frontend")["spec"]["selector"] = {"app": "frontnd"}


def helm_selector_typo(docs: Docs) -> None:
    """A chart whose Service selects ``app.kubernetes.io/name: blogg``: no template matches (NV016)."""
    _one(docs, "Service", "blog")["spec"]["selector"]["app.kubernetes.io/name"] = "blogg"


def helm_named_target_port_typo(docs: Docs) -> None:
    """``targetPort: htpp``: the container calls its port ``http``; every Pod of the release gets no
    endpoint port for the Service port (NV018)."""
    _one(docs, "Service", "blog")["spec"]["ports"][0]["targetPort"] = "htpp"


def renamed_container_port(docs: Docs) -> None:
    """The Service's ``targetPort: http`` now names ``web`` (the previous revision's name) while the
    running Pods call it ``http``: no Pod resolves it (NV018); the recorded slice still carries
    8080 for Pods that no longer resolve the name (NV024)."""
    _one(docs, "Service", "frontend")["spec"]["ports"][0]["targetPort"] = "web"


def helm_service_port_as_target(docs: Docs) -> None:
    """``targetPort: 80`` (the Service port) where the container listens on 2368: a port/targetPort
    mix-up. Containers need not declare ports, so this is a warning (NV018)."""
    _one(docs, "Service", "blog")["spec"]["ports"][0]["targetPort"] = 80


def helm_udp_service_port(docs: Docs) -> None:
    """The Service port is UDP, the container port ``http`` is TCP: ``FindPort`` matches name and
    protocol, so nothing resolves (NV020)."""
    _one(docs, "Service", "blog")["spec"]["ports"][0]["protocol"] = "UDP"


def helm_second_workload(docs: Docs) -> None:
    """An admin Deployment labelled like the blog: the Service's selector picks both, and half of
    the blog's connections reach the admin UI (NV017)."""
    admin = copy.deepcopy(_one(docs, "Deployment", "blog"))
    admin["metadata"]["name"] = "blog-admin"
    admin["spec"]["template"]["spec"]["containers"][0]["image"] = "adminer:4.8.1"
    admin["spec"]["template"]["spec"]["containers"][0]["name"] = "admin"
    docs.append(admin)


def helm_canary(docs: Docs) -> None:
    """A canary Deployment of the same image, labelled like the stable one: a documented pattern,
    reported as a note (NV017), not an error."""
    canary = copy.deepcopy(_one(docs, "Deployment", "blog"))
    canary["metadata"]["name"] = "blog-canary"
    canary["spec"]["template"]["spec"]["containers"][0]["image"] = "ghost:5.97.0-rc.1"
    docs.append(canary)


def pod_crash_loop(docs: Docs) -> None:
    """cart-0 never gets Ready: its container is in CrashLoopBackOff (a bad config, a missing
    volume). The Service has Pods but no Ready one (NV026, naming the container's state); the
    recorded slice still says ready (NV022)."""
    pod = _one(docs, "Pod", "cart-0")
    for c in pod["status"]["conditions"]:
        if c["type"] in ("Ready", "ContainersReady"):
            c.update(status="False", reason="ContainersNotReady", message="containers with unready status: [redis]")
    (cs,) = pod["status"]["containerStatuses"]
    cs.update(ready=False, restartCount=9, started=False)
    cs["state"] = {"waiting": {"message": "back-off 5m0s restarting failed container=redis pod=cart-0_shop", "reason": "CrashLoopBackOff"}}


def slice_misses_ready_pod(docs: Docs) -> None:
    """The slice lost a Ready Pod (a controller that stopped syncing): it gets no traffic (NV021)."""
    s = _one(docs, "EndpointSlice", "frontend-w4hzx")
    s["endpoints"] = [e for e in s["endpoints"] if e["targetRef"]["name"] != FRONTEND_B]


def unready_pod_listed_ready(docs: Docs) -> None:
    """A Pod whose readiness probe fails while its endpoint still says ready: traffic reaches a Pod
    that cannot serve it (NV022)."""
    pod = _one(docs, "Pod", FRONTEND_B)
    for c in pod["status"]["conditions"]:
        if c["type"] in ("Ready", "ContainersReady"):
            c.update(status="False", reason="ContainersNotReady")
    pod["status"]["containerStatuses"][0]["ready"] = False


def terminating_not_marked(docs: Docs) -> None:
    """A Pod being deleted whose endpoint is not marked terminating: it keeps getting new
    connections during its grace period (NV022)."""
    pod = _one(docs, "Pod", FRONTEND_B)
    pod["metadata"]["deletionTimestamp"] = "2026-11-30T08:13:40Z"
    pod["metadata"]["deletionGracePeriodSeconds"] = 30


def endpoint_of_deleted_pod(docs: Docs) -> None:
    """An endpoint left behind by a deleted Pod: connections to it time out (NV023)."""
    s = _one(docs, "EndpointSlice", "frontend-w4hzx")
    ghost = copy.deepcopy(s["endpoints"][0])
    ghost["addresses"] = ["10.244.1.4"]
    ghost["targetRef"] = dict(ghost["targetRef"], name="frontend-6d4cf56db6-zr5tq", uid="00000000-dead-4b7a-9d2f-000000000000")
    s["endpoints"].append(ghost)


def endpoint_of_finished_pod(docs: Docs) -> None:
    """cart-0 ran to completion (phase Failed, evicted) but is still listed: a finished Pod is never
    an endpoint (NV023)."""
    pod = _one(docs, "Pod", "cart-0")
    pod["status"].update(phase="Failed", reason="Evicted", message="The node was low on resource: memory.")


def slice_wrong_port(docs: Docs) -> None:
    """The slice carries port 80 (the Service port) for ``http`` where the Pods resolve 8080: the
    DNAT reaches the right Pod on a closed port (NV024)."""
    _one(docs, "EndpointSlice", "frontend-w4hzx")["ports"][0]["port"] = 80


def slice_wrong_node(docs: Docs) -> None:
    """An endpoint on worker-1 whose Pod runs on worker-2 (a hand-edited slice): traffic policy
    Local would treat it as local on the wrong node (NV025, nodeName and zone)."""
    _endpoint(docs, "frontend-w4hzx", FRONTEND_B)["nodeName"] = "worker-1"


def slice_wrong_zone(docs: Docs) -> None:
    """An endpoint in zone z-a whose node is in z-b: topology-aware routing keeps traffic in the
    wrong zone (NV025)."""
    _endpoint(docs, "frontend-w4hzx", FRONTEND_B)["zone"] = "z-a"


def rollout_port_change(docs: Docs) -> None:
    """Mid-rollout, a Pod of the new revision serves ``http`` on 8081 while the slice lists it under
    8080: the rollout itself is a note (NV019), the slice is wrong for that Pod (NV024)."""
    pod = _one(docs, "Pod", FRONTEND_B)
    pod["spec"]["containers"][0]["ports"][0]["containerPort"] = 8081
    pod["metadata"]["labels"]["pod-template-hash"] = "5c7d8e9f01"
    pod["metadata"]["ownerReferences"][0]["name"] = "frontend-5c7d8e9f01"


def endpoints_disagree(docs: Docs) -> None:
    """The v1 Endpoints lost a Pod the EndpointSlices still list: tools reading Endpoints (older
    ingress controllers) see one backend, kube-proxy two (NV027)."""
    ep = _one(docs, "Endpoints", "frontend")
    ep["subsets"][0]["addresses"] = [a for a in ep["subsets"][0]["addresses"] if a["targetRef"]["name"] != FRONTEND_B]


def slice_for_missing_service(docs: Docs) -> None:
    """A slice labelled for ``cartt``: no Service of that name, its endpoints serve nobody (NV028)."""
    _one(docs, "EndpointSlice", "cart-9qhtl")["metadata"]["labels"]["kubernetes.io/service-name"] = "cartt"


OBJECT_BUGS: tuple[ObjectBug, ...] = (
    ObjectBug("selector-typo", "get-all.yaml", selector_typo, (("NV016", "error"), ("NV023", "error")), "app: frontnd"),
    ObjectBug("helm-selector-typo", HELM, helm_selector_typo, (("NV016", "error"),), "app.kubernetes.io/name: blogg"),
    ObjectBug("helm-named-targetport-typo", HELM, helm_named_target_port_typo, (("NV018", "error"),), "targetPort: htpp"),
    ObjectBug("renamed-container-port", "get-all.yaml", renamed_container_port, (("NV018", "error"), ("NV024", "error")), "targetPort: web"),
    ObjectBug("helm-service-port-as-target", HELM, helm_service_port_as_target, (("NV018", "warning"),), "targetPort: 80", not_flagged=("NV018",)),
    ObjectBug("helm-udp-service-port", HELM, helm_udp_service_port, (("NV020", "error"),), "protocol: UDP"),
    ObjectBug("helm-second-workload", HELM, helm_second_workload, (("NV017", "error"),), "selector:"),
    ObjectBug("helm-canary", HELM, helm_canary, (("NV017", "note"),), "selector:", not_flagged=("NV017",)),
    ObjectBug("pod-crash-loop", "get-all.yaml", pod_crash_loop, (("NV026", "error"), ("NV022", "error")), "conditions:"),
    ObjectBug("slice-misses-ready-pod", "get-all.yaml", slice_misses_ready_pod, (("NV021", "error"),), "endpoints:"),
    ObjectBug("unready-pod-listed-ready", "get-all.yaml", unready_pod_listed_ready, (("NV022", "error"),), "- addresses:"),
    ObjectBug("terminating-not-marked", "get-all.yaml", terminating_not_marked, (("NV022", "error"),), "- addresses:"),
    ObjectBug("endpoint-of-deleted-pod", "get-all.yaml", endpoint_of_deleted_pod, (("NV023", "error"),), "- addresses:"),
    ObjectBug("endpoint-of-finished-pod", "get-all.yaml", endpoint_of_finished_pod, (("NV023", "error"),), "- addresses:"),
    ObjectBug("slice-wrong-port", "get-all.yaml", slice_wrong_port, (("NV024", "error"),), "ports:"),
    ObjectBug("slice-wrong-node", "get-all.yaml", slice_wrong_node, (("NV025", "error"),), "- addresses:"),
    ObjectBug("slice-wrong-zone", "get-all.yaml", slice_wrong_zone, (("NV025", "error"),), "- addresses:"),
    ObjectBug("rollout-port-change", "get-all.yaml", rollout_port_change, (("NV019", "note"), ("NV024", "error")), "targetPort: http"),
    ObjectBug("endpoints-disagree", "get-endpoints.yaml", endpoints_disagree, (("NV027", "error"),), "subsets:"),
    ObjectBug("slice-for-missing-service", "get-all.yaml", slice_for_missing_service, (("NV028", "error"),), "labels:"),
)
BY_NAME = {b.name: b for b in OBJECT_BUGS}
