"""From a Service to its Pods: selector matching, near misses, targetPort resolution, readiness.

The first half of a Service's path, as the Kubernetes controllers walk it (no rules involved):

* **Selection.** A Service's ``spec.selector`` is an equality-based label selector: a Pod is
  selected when it is in the Service's namespace and its labels contain every ``key: value`` of
  the selector. A Service without a selector (``None``) selects nothing; kube-proxy then uses the
  EndpointSlices someone else wrote. Workloads (Deployments, StatefulSets, DaemonSets, ownerless
  ReplicaSets, ReplicationControllers) are selected through their Pod template's labels, so
  manifests without running Pods can be checked too.
* **Near misses.** When nothing is selected, the Pods and templates whose labels come closest
  (one value spelt differently, a key in another case, the right labels in another namespace)
  are what a person looking for the typo wants to see.
* **targetPort.** A number is used as it is. A name is looked up, as the EndpointSlice
  controller's ``FindPort`` does, among the ports of the Pod's containers and then of its sidecars
  (init containers with ``restartPolicy: Always``), matching the name *and* the Service port's
  protocol; no match means the Pod gets no endpoint port for that Service port.
* **Readiness.** A Pod is an endpoint when it is not finished (phase Succeeded/Failed) and has an
  IP; it is ``ready`` when its ``Ready`` condition is True (``serving``) and it is not being
  deleted. ``readiness`` says *why* a Pod is not Ready, from its conditions, container statuses
  and readiness gates, the way ``kubectl describe pod`` would make a person piece it together.

This is the API ``nat-verify explain`` and the object checks (``nat_verify.check.objects``) share:
``selects``, ``selected_pods``, ``endpoint_pods``, ``selected_workloads``, ``workload_of``,
``near_misses``, ``resolve_target_port`` and ``readiness`` (and ``SelectionIndex``, the same
questions for many Services at the cost of one pass over the Pods). Every function takes model
values and returns values; nothing here reads files.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence

import attrs

from nat_verify.model.cluster import (
    Cluster,
    Condition,
    ContainerPort,
    LabelSelector,
    Pod,
    Service,
    ServicePort,
    Workload,
)

Labels = Mapping[str, str] | Iterable[tuple[str, str]]
TERMINAL_PHASES = ("Succeeded", "Failed")
# Kinds whose Pod template stands for Pods; a ReplicaSet owned by a Deployment is a revision of
# it, not a workload of its own.
TEMPLATE_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController")
REVISION_LABELS = ("pod-template-hash", "controller-revision-hash")


def _dict(labels: Labels) -> dict[str, str]:
    return dict(labels.items()) if isinstance(labels, Mapping) else dict(labels)


def selects(selector: Labels | None, labels: Labels) -> bool:
    """A Service selector (equality-based) selects these labels; ``None`` selects nothing."""
    if selector is None:
        return False
    if isinstance(selector, tuple) and isinstance(labels, tuple):  # the model's own form: cheap
        return set(selector).issubset(labels)
    have = _dict(labels)
    return all(have.get(k) == v for k, v in _dict(selector).items())


def label_selector_selects(sel: LabelSelector, labels: Labels) -> bool:
    """A workload's ``spec.selector`` (matchLabels and matchExpressions) selects these labels."""
    have = _dict(labels)
    if not all(have.get(k) == v for k, v in sel.match_labels):
        return False
    for req in sel.match_expressions:
        present = req.key in have
        if req.operator == "In" and not (present and have[req.key] in req.values):
            return False
        if req.operator == "NotIn" and present and have[req.key] in req.values:
            return False
        if req.operator == "Exists" and not present:
            return False
        if req.operator == "DoesNotExist" and present:
            return False
    return True


# -- selection ----------------------------------------------------------------------------------


class SelectionIndex:
    """A cluster's Pods, templates and ReplicaSets indexed for many selector look-ups.

    The module's functions build one for a single question; a caller asking about every Service
    of a large cluster (``check.objects``) builds one and asks it, so selecting costs the
    candidates carrying the selector's first label, not every Pod.
    """

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.pods_in: dict[str, list[Pod]] = {}
        self._by_label: dict[tuple[str, str], list[Pod]] = {}
        for p in cluster.pods:
            self.pods_in.setdefault(p.namespace, []).append(p)
            for kv in p.labels:
                self._by_label.setdefault(kv, []).append(p)
        self.templates_in: dict[str, list[Workload]] = {}
        for w in cluster.workloads:
            if w.kind in TEMPLATE_KINDS and not _is_revision(w):
                self.templates_in.setdefault(w.namespace, []).append(w)
        self._replicasets = {(w.namespace, w.name): w for w in cluster.workloads if w.kind == "ReplicaSet"}

    def matching_pods(self, selector: tuple[tuple[str, str], ...]) -> list[Pod]:
        """Pods of every namespace whose labels contain a non-empty selector."""
        return [p for p in self._by_label.get(selector[0], []) if selects(selector, p.labels)]

    def selected_pods(self, svc: Service) -> tuple[Pod, ...]:
        if svc.selector is None:
            return ()
        if not svc.selector:
            return tuple(self.pods_in.get(svc.namespace, ()))
        return tuple(p for p in self.matching_pods(svc.selector) if p.namespace == svc.namespace)

    def endpoint_pods(self, svc: Service) -> tuple[Pod, ...]:
        return tuple(p for p in self.selected_pods(svc) if is_endpoint_candidate(p))

    def selected_workloads(self, svc: Service) -> tuple[Workload, ...]:
        if svc.selector is None:
            return ()
        return tuple(w for w in self.templates_in.get(svc.namespace, ()) if selects(svc.selector, w.labels))

    def workload_of(self, pod: Pod) -> str:
        owner = pod.owner
        if owner is None:
            return ""
        if owner.kind == "ReplicaSet":
            rs = self._replicasets.get((pod.namespace, owner.name))
            if rs is not None:
                if rs.owner is not None and rs.owner.kind == "Deployment":
                    return f"Deployment {pod.namespace}/{rs.owner.name}"
                return f"ReplicaSet {pod.namespace}/{rs.name}"
            digest = dict(pod.labels).get("pod-template-hash", "")
            if digest and owner.name.endswith("-" + digest):
                return f"Deployment {pod.namespace}/{owner.name[: -len(digest) - 1]}"
        return f"{owner.kind} {pod.namespace}/{owner.name}"


def selected_pods(cluster: Cluster, svc: Service) -> tuple[Pod, ...]:
    """Every Pod the Service's selector selects, finished or not, in input order."""
    return SelectionIndex(cluster).selected_pods(svc)


def is_endpoint_candidate(pod: Pod) -> bool:
    """The EndpointSlice controller lists this Pod (not finished, has an IP; terminating ones too)."""
    return pod.phase not in TERMINAL_PHASES and bool(pod.ips)


def endpoint_pods(cluster: Cluster, svc: Service) -> tuple[Pod, ...]:
    """The selected Pods the EndpointSlice controller turns into endpoints."""
    return SelectionIndex(cluster).endpoint_pods(svc)


def template_workloads(cluster: Cluster) -> tuple[Workload, ...]:
    """Workloads whose template stands for their Pods: not a ReplicaSet revision of a Deployment."""
    return tuple(w for w in cluster.workloads if w.kind in TEMPLATE_KINDS and not _is_revision(w))


def _is_revision(w: Workload) -> bool:
    return w.kind == "ReplicaSet" and w.owner is not None and w.owner.kind == "Deployment"


def selected_workloads(cluster: Cluster, svc: Service) -> tuple[Workload, ...]:
    """Workloads whose Pod template the Service's selector selects."""
    return SelectionIndex(cluster).selected_workloads(svc)


def workload_of(cluster: Cluster, pod: Pod) -> str:
    """The workload a Pod belongs to, as ``"Kind ns/name"`` (top owner), or ``""`` for a bare Pod.

    A ReplicaSet is followed to its Deployment: through the ReplicaSet object when the input has
    it, otherwise by its name, which the Deployment controller makes ``<deployment>-<pod-template-hash>``.
    """
    return SelectionIndex(cluster).workload_of(pod)


def revision_of(pod: Pod) -> str:
    """The template revision a Pod was made from (its pod-template-hash or controller-revision-hash)."""
    labels = dict(pod.labels)
    return next((labels[k] for k in REVISION_LABELS if k in labels), "")


# -- near misses --------------------------------------------------------------------------------


@attrs.frozen
class LabelDiff:
    """How one ``key: value`` of a selector fails on a candidate's labels."""

    key: str
    wanted: str
    found: str | None  # the candidate's value; None when it has no such key
    similar_key: str = ""  # a key of the candidate spelt like ``key`` (with ``found`` its value)

    def describe(self) -> str:
        if self.similar_key:
            return f"{self.key}={self.wanted}: it has {self.similar_key}={self.found} (key spelt differently)"
        if self.found is None:
            return f"{self.key}={self.wanted}: it has no label {self.key}"
        return f"{self.key}={self.wanted}: it has {self.key}={self.found}"


@attrs.frozen
class NearMiss:
    """A Pod or Pod template whose labels come close to a selector (or match it elsewhere)."""

    kind: str  # "Pod" or the workload kind
    namespace: str
    name: str
    diffs: tuple[LabelDiff, ...]  # empty: the labels match, in another namespace
    location: str = ""
    also: int = 0  # further objects with the same labels (Pods of one workload)

    def describe(self) -> str:
        more = f" (and {self.also} more with the same labels)" if self.also else ""
        who = f"{self.kind} {self.namespace}/{self.name}{more}"
        if not self.diffs:
            return f"{who} matches, but is in namespace {self.namespace}"
        return f"{who}: " + "; ".join(d.describe() for d in self.diffs)


def _similar(a: str, b: str) -> bool:
    return a.lower() == b.lower() or difflib.SequenceMatcher(None, a, b).ratio() >= 0.75


def _diffs(selector: Mapping[str, str], labels: Mapping[str, str]) -> tuple[LabelDiff, ...]:
    out = []
    for key, want in selector.items():
        if labels.get(key) == want:
            continue
        if key in labels:
            out.append(LabelDiff(key, want, labels[key]))
            continue
        alt = next((k for k in labels if k not in selector and _similar(k, key)), "")
        out.append(LabelDiff(key, want, labels[alt] if alt else None, alt))
    return tuple(out)


def _closeness(diffs: Sequence[LabelDiff]) -> tuple[int, float]:
    """Fewer failing entries first; among equals, values (or keys) spelt most alike first."""
    distance = 0.0
    for d in diffs:
        if d.found is None:
            distance += 1.0
        else:
            distance += 1.0 - difflib.SequenceMatcher(None, d.wanted, d.found).ratio()
            distance += 0.25 if d.similar_key else 0.0  # a misspelt key is a bigger step
    return (len(diffs), distance)


def near_misses(
    cluster: Cluster, svc: Service, limit: int = 3, index: SelectionIndex | None = None
) -> tuple[NearMiss, ...]:
    """The Pods and templates closest to the Service's selector, closest first.

    Candidates are the Pods and template workloads of the Service's namespace that match at
    least one selector entry or carry a similarly spelt key or value, and exact matches in other
    namespaces. Pods with identical labels are reported once (``also`` counts the rest).
    """
    if not svc.selector:
        return ()
    selector = dict(svc.selector)
    found: dict[tuple[str, tuple[tuple[str, str], ...]], NearMiss] = {}
    order: list[tuple[tuple[int, float], int, tuple[str, tuple[tuple[str, str], ...]]]] = []

    def consider(kind: str, namespace: str, name: str, labels: tuple[tuple[str, str], ...], where: str) -> None:
        have = dict(labels)
        key = (namespace, tuple(sorted((k, v) for k, v in labels if k not in REVISION_LABELS)))
        if key in found:
            found[key] = attrs.evolve(found[key], also=found[key].also + 1)
            return
        if namespace != svc.namespace:
            if not selects(selector, have):
                return
            diffs: tuple[LabelDiff, ...] = ()
            score = (1, 0.5)  # after a one-letter typo at home, before anything worse
        else:
            diffs = _diffs(selector, have)
            if not diffs:
                return  # a match, not a near miss
            close = [d for d in diffs if d.similar_key or (d.found is not None and _similar(d.found, d.wanted))]
            if len(diffs) == len(selector) and not close:
                return  # nothing in common
            score = _closeness(diffs)
        found[key] = NearMiss(kind, namespace, name, diffs, where)
        order.append((score, len(order), key))

    ix = index or SelectionIndex(cluster)
    here = ix.pods_in.get(svc.namespace, [])
    elsewhere = [p for p in ix.matching_pods(svc.selector) if p.namespace != svc.namespace]
    for pod in [*here, *elsewhere]:
        consider("Pod", pod.namespace, pod.name, pod.labels, pod.location("metadata.labels"))
    for w in template_workloads(cluster):
        if w.namespace == svc.namespace or selects(selector, w.labels):
            consider(w.kind, w.namespace, w.name, w.labels, w.location("spec.template.metadata.labels"))
    return tuple(found[key] for _, _, key in sorted(order)[:limit])


# -- targetPort ---------------------------------------------------------------------------------


@attrs.frozen
class PortResolution:
    """What a Service port's targetPort becomes on one Pod (or template)."""

    number: int | None  # None: the Pod gets no endpoint port for this Service port
    declared: ContainerPort | None  # the container port it resolved to, if declared
    reason: str = ""  # why number is None, or what is odd about it

    @property
    def resolved(self) -> bool:
        return self.number is not None


def resolve_target_port(ports: Sequence[ContainerPort], sp: ServicePort) -> PortResolution:
    """``targetPort`` of ``sp`` on a Pod with these container ports (containers, then sidecars).

    A number always resolves (containers need not declare ports); ``declared`` says whether a
    container port of that number and protocol exists. A name resolves only to a port of that
    name and the Service port's protocol, as the EndpointSlice controller's ``FindPort``.
    """
    target = sp.target_port
    if isinstance(target, int):
        hit = next((p for p in ports if p.port == target and p.protocol == sp.protocol), None)
        return PortResolution(target, hit)
    hit = next((p for p in ports if p.name == target and p.protocol == sp.protocol), None)
    if hit is not None:
        return PortResolution(hit.port, hit)
    other = next((p for p in ports if p.name == target), None)
    if other is not None:
        return PortResolution(
            None, None, f"container port {target!r} is {other.port}/{other.protocol}, not {sp.protocol}"
        )
    names = sorted({p.name for p in ports if p.name})
    listed = f" (named ports: {', '.join(names)})" if names else " (no named container ports)"
    return PortResolution(None, None, f"no container declares a port named {target!r}{listed}")


# -- readiness ----------------------------------------------------------------------------------


@attrs.frozen
class Readiness:
    """Whether a Pod is Ready, and the reasons it is not, most fundamental first."""

    ready: bool
    serving: bool  # Ready, terminating or not: what EndpointSlice ``serving`` says
    reasons: tuple[str, ...] = ()
    failing: tuple[Condition, ...] = ()  # the conditions that are not True

    def describe(self) -> str:
        return "; ".join(self.reasons) if self.reasons else ("Ready" if self.ready else "not Ready")


_CONDITION_ORDER = ("PodScheduled", "Initialized", "ContainersReady", "Ready")


def readiness(pod: Pod) -> Readiness:
    """Why a Pod is or is not a ready endpoint, from what its status says.

    The reasons are written for the person fixing it: a finished phase, no IP, an unscheduled Pod
    (with the scheduler's message), waiting or crashing containers (CrashLoopBackOff,
    ImagePullBackOff), a running container whose readiness probe fails, a readiness gate that is
    not True, and the Pod being deleted.
    """
    reasons: list[str] = []
    if pod.phase in TERMINAL_PHASES:
        why = f" ({pod.status_reason}: {pod.status_message})" if pod.status_reason else ""
        reasons.append(f"phase is {pod.phase}{why}: a finished Pod is never an endpoint")
    conds = {c.type: c for c in pod.conditions}
    failing = tuple(
        c for c in sorted(pod.conditions, key=lambda c: _order(c.type)) if c.status != "True"
    )
    for c in failing:
        if c.type == "Ready" or c.type in pod.readiness_gates:
            continue  # explained below (containers, gates)
        detail = ": ".join(x for x in (c.reason, c.message) if x)
        reasons.append(f"condition {c.type} is {c.status}" + (f" ({detail})" if detail else ""))
    for s in pod.container_states:
        if s.ready or (s.init and s.state == "terminated" and s.exit_code == 0):
            continue  # a finished init container has done its job
        what = "init container" if s.init else "container"
        if s.state == "waiting":
            detail = ": ".join(x for x in (s.reason, s.message) if x)
            reasons.append(f"{what} {s.name} is waiting" + (f" ({detail})" if detail else ""))
        elif s.state == "terminated":
            code = f", exit code {s.exit_code}" if s.exit_code is not None else ""
            reasons.append(f"{what} {s.name} terminated ({s.reason or 'no reason'}{code})")
        elif s.state == "running" and not s.init:
            probe = next((c.readiness_probe for c in pod.containers if c.name == s.name), False)
            why = "its readiness probe fails" if probe else "not ready"
            reasons.append(f"container {s.name} is running but {why}")
        if s.restarts and not s.init:
            reasons[-1] += f", {s.restarts} restart(s)"
    for gate in pod.readiness_gates:
        status = conds[gate].status if gate in conds else "not set"
        if status != "True":
            reasons.append(f"readiness gate {gate} is {status}")
    if not pod.ips and pod.phase not in TERMINAL_PHASES:
        reasons.append("has no Pod IP yet")
    if pod.terminating:
        reasons.append("is being deleted (metadata.deletionTimestamp is set)")
    if not pod.ready and not reasons:
        cond = conds.get("Ready")
        if cond is None:
            reasons.append("has no Ready condition")
        else:
            detail = ": ".join(x for x in (cond.reason, cond.message) if x)
            reasons.append(f"condition Ready is {cond.status}" + (f" ({detail})" if detail else ""))
    return Readiness(ready=pod.ready and not pod.terminating, serving=pod.ready, reasons=tuple(reasons), failing=failing)


def _order(kind: str) -> int:
    return _CONDITION_ORDER.index(kind) if kind in _CONDITION_ORDER else len(_CONDITION_ORDER)
