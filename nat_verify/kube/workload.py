"""Deployments, StatefulSets, DaemonSets, ReplicaSets, ReplicationControllers -> ``model.Workload``.

A workload matters to a Service through its Pod template: the template's labels are what the
Service's selector sees on every Pod the workload creates, and its containers' ports are what a
targetPort resolves to. So manifests from a repository can be checked without running Pods.

The API server refuses a workload whose ``spec.selector`` does not select its own template's
labels ("selector does not match template labels"); so does this reader. Older API versions
(``extensions/v1beta1``, ``apps/v1beta1``/``v1beta2``) defaulted a missing selector to the
template's labels, and ReplicationControllers still do.
"""

from __future__ import annotations

from nat_verify.kube.containers import read_containers
from nat_verify.kube.documents import RawObject
from nat_verify.kube.fields import Fields
from nat_verify.kube.meta import read_meta
from nat_verify.kube.selection import label_selector_selects
from nat_verify.model.cluster import LabelSelector, Lines, Requirement, Workload

_APPS = frozenset({"apps/v1", "apps/v1beta1", "apps/v1beta2", "extensions/v1beta1"})
# kind -> the apiVersions it was served under
API_VERSIONS: dict[str, frozenset[str]] = {
    "Deployment": _APPS,
    "StatefulSet": frozenset({"apps/v1", "apps/v1beta1", "apps/v1beta2"}),
    "DaemonSet": frozenset({"apps/v1", "apps/v1beta2", "extensions/v1beta1"}),
    "ReplicaSet": frozenset({"apps/v1", "apps/v1beta2", "extensions/v1beta1"}),
    "ReplicationController": frozenset({"v1"}),
}
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def read_workload(obj: RawObject, kind: str) -> Workload:
    meta = read_meta(obj, kind)
    f = meta.fields
    spec = f.mapping_or_empty("spec")
    template = spec.mapping_or_empty("template")
    tmeta = template.mapping_or_empty("metadata")
    labels = tmeta.string_map("labels") or {}
    selector = _selector(spec, kind, labels)
    if labels and not label_selector_selects(selector, labels):
        spec.fail("selector", f"does not match the template's labels {labels} (the API server refuses this)")
    lines = [*meta.lines]
    if spec.has("selector"):
        lines.append((spec.field("selector"), spec.line("selector")))
    if tmeta.has("labels"):
        lines.append((tmeta.field("labels"), tmeta.line("labels")))
    tspec = template.mapping_or_empty("spec")
    if tspec.has("containers"):
        lines.append((tspec.field("containers"), tspec.line("containers")))
    replicas = spec.integer("replicas", -1, lo=0) if kind != "DaemonSet" else -1
    return Workload(
        kind=kind,
        namespace=meta.namespace,
        name=meta.name,
        selector=selector,
        labels=tuple(sorted(labels.items())),
        containers=read_containers(tspec),
        replicas=None if replicas < 0 else replicas,
        owner=meta.owner,
        source=meta.source,
        lines=Lines(tuple(lines)),
    )


def _selector(spec: Fields, kind: str, labels: dict[str, str]) -> LabelSelector:
    if kind == "ReplicationController":
        plain = spec.string_map("selector")
        return LabelSelector(tuple(sorted((plain if plain is not None else labels).items())))
    sel = spec.mapping("selector")
    if sel is None:
        return LabelSelector(tuple(sorted(labels.items())))
    match = sel.string_map("matchLabels") or {}
    exprs = []
    for e in sel.items("matchExpressions"):
        op = e.choice("operator", OPERATORS, "")
        values = tuple(v for v, _ in e.strings("values"))
        if op in ("In", "NotIn") and not values:
            e.fail("values", f"must not be empty for operator {op}")
        exprs.append(Requirement(e.text("key", required=True), op, values))
    return LabelSelector(tuple(sorted(match.items())), tuple(exprs))
