"""The Kubernetes half of a Service checked: its objects against each other (NV016-NV028).

Before kube-proxy writes a rule, a Service reaches its Pods through other objects: the selector
picks Pods (and, in manifests, Pod templates) by label; the Pods' readiness decides which of them
are endpoints; the EndpointSlice controller writes those into EndpointSlices (and the Endpoints
controller into v1 Endpoints); the targetPort, a number or a container port's name, becomes each
endpoint's port. A break anywhere in that chain means the Service does not serve what its
objects say, even when every rule is right. The checks here compare the objects with each other,
by the controllers' rules (``kube.selection``), and need no ruleset:

* NV016 the selector matches no Pod or template in its namespace (near misses point at the typo)
* NV017 the selector matches the Pods of several workloads
* NV018 a targetPort no selected container declares (a name: error, the Pod gets no endpoint port;
  a number: warning, since containers need not declare their ports)
* NV019 a named targetPort resolving to different numbers (a rollout: note; otherwise warning)
* NV020 the container port has another protocol than the Service port
* NV021-NV025 EndpointSlices (or v1 Endpoints) that disagree with the Pods: a Ready Pod missing,
  conditions that disagree with readiness, a stale endpoint, a wrong port, a wrong node or zone
* NV026 Pods selected but none Ready, with the condition that fails on each
* NV027 v1 Endpoints and EndpointSlices of one Service that disagree
* NV028 an EndpointSlice naming a Service that does not exist

A check runs only where the input can decide it: selection checks need Pods or workloads in the
Service's namespace (otherwise the Pods were simply not given); slice checks need Pods too. Each
finding names the objects and the field to fix, with ``file:line``. Results are ``proved`` (every
object of the input examined) or ``violated``, with engine ``exhaustive`` and no node.
"""

from __future__ import annotations

import difflib
import functools
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence

import attrs

from nat_verify.kube.endpoints import slices_from_endpoints
from nat_verify.kube.endpointslice import CONTROLLER
from nat_verify.kube.selection import (
    SelectionIndex,
    is_endpoint_candidate,
    near_misses,
    readiness,
    resolve_target_port,
    revision_of,
)
from nat_verify.model.cluster import (
    Cluster,
    ContainerPort,
    Endpoint,
    EndpointSlice,
    LegacyEndpoints,
    Pod,
    Service,
    ServicePort,
    Workload,
)
from nat_verify.model.outcome import Finding, Result

SLICES = ("NV021", "NV022", "NV023", "NV024", "NV025")
OBJECT_INVARIANTS = ("NV016", "NV017", "NV018", "NV019", "NV020", *SLICES, "NV026", "NV027", "NV028")
SHOWN = 4  # objects listed by name in one message


@attrs.frozen
class Issue:
    """One object-level violation (or warning, or note)."""

    invariant: str
    service: str  # "ns/name" (the Service the finding is about)
    message: str
    location: str
    severity: str = "error"
    expected: str = ""
    actual: str = ""


class _Objects(SelectionIndex):
    """The cluster indexed once for every Service's questions (Pods, slices, v1 Endpoints)."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster)
        self.slices: dict[tuple[str, str], list[EndpointSlice]] = defaultdict(list)
        for s in cluster.slices:
            self.slices[(s.namespace, s.service_name)].append(s)
        self.legacy = {(e.namespace, e.name): e for e in cluster.legacy_endpoints}
        self.zones = {n.name: n.zone for n in cluster.nodes}
        self.by_key = {p.key: p for p in cluster.pods}
        self.by_ip: dict[tuple[str, str], list[Pod]] = defaultdict(list)  # (namespace, ip)
        for p in cluster.pods:
            for ip in p.ips:
                self.by_ip[(p.namespace, ip)].append(p)

    def pod_for(self, namespace: str, e: Endpoint) -> Pod | None:
        """The Pod an endpoint stands for: its targetRef, else the one Pod with its address."""
        if e.target_pod:
            return self.by_key.get(e.target_pod)
        owners = self.by_ip.get((namespace, e.addresses[0]), []) if e.addresses else []
        return owners[0] if len(owners) == 1 else None

    def slices_for(self, svc: Service) -> list[EndpointSlice]:
        return self.slices.get((svc.namespace, svc.name), [])

    # every check asks these of the same Service: answered once
    @functools.lru_cache(maxsize=4)  # noqa: B019 - one _Objects per run, a few Services in flight
    def selected_pods(self, svc: Service) -> tuple[Pod, ...]:
        return super().selected_pods(svc)

    @functools.lru_cache(maxsize=4)  # noqa: B019
    def targets(self, svc: Service) -> tuple[Target, ...]:
        return tuple(_targets(self, svc))


def _some(names: Sequence[str]) -> str:
    more = f" and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
    return ", ".join(names[:SHOWN]) + more


def _port_path(svc: Service, sp: ServicePort, field: str) -> tuple[str, str]:
    i = svc.ports.index(sp)
    return (f"spec.ports[{i}].{field}", f"spec.ports[{i}]")


# -- who is selected ------------------------------------------------------------------------------


@attrs.frozen
class Target:
    """A selected Pod, or a workload's template standing for its Pods, with its container ports."""

    what: str  # "Pod ns/name" or "Deployment ns/name"
    workload: str  # the workload key ("" for a bare Pod)
    ports: tuple[ContainerPort, ...]
    images: frozenset[str]
    revision: str
    location: str
    declares: bool  # has any container information at all

    @staticmethod
    def of_pod(ob: _Objects, pod: Pod) -> Target:
        return Target(
            f"Pod {pod.key}", ob.workload_of(pod), pod.ports, _images(c.image for c in pod.containers),
            revision_of(pod), pod.location("spec.containers"), bool(pod.containers or pod.ports),
        )  # fmt: skip

    @staticmethod
    def of_workload(w: Workload) -> Target:
        return Target(
            w.key, w.key, w.ports, _images(c.image for c in w.containers), "template",
            w.location("spec.template.spec.containers", "spec.template.metadata.labels"), bool(w.containers),
        )  # fmt: skip


def _images(images: Iterable[str]) -> frozenset[str]:
    """Image repositories, without tag or digest (a canary runs the same repository)."""
    out = set()
    for image in images:
        repo = image.split("@", 1)[0]
        head, _, tail = repo.rpartition(":")
        out.add(head if head and "/" not in tail else repo)
    return frozenset(i for i in out if i)


def _targets(ob: _Objects, svc: Service) -> list[Target]:
    """Selected templates, and the selected Pods that are not finished (one per Pod)."""
    targets = [Target.of_workload(w) for w in ob.selected_workloads(svc)]
    targets += [Target.of_pod(ob, p) for p in ob.selected_pods(svc) if is_endpoint_candidate(p) or not p.has_status]
    return targets


def _covered(ob: _Objects, namespace: str, *, templates: bool = True) -> bool:
    """The input has Pods (or Pod templates) in this namespace, so "none selected" means none exist."""
    return bool(ob.pods_in.get(namespace)) or (templates and bool(ob.templates_in.get(namespace)))


# -- NV016, NV017 ---------------------------------------------------------------------------------


def _selector_text(svc: Service) -> str:
    return ", ".join(f"{k}={v}" for k, v in svc.selector or ())


def _selection(ob: _Objects, svc: Service) -> Iterator[Issue]:
    pods = ob.selected_pods(svc)
    workloads = ob.selected_workloads(svc)
    where = svc.location("spec.selector")
    if not pods and not workloads:
        misses = near_misses(ob.cluster, svc, index=ob)
        if misses and misses[0].diffs:  # point at the entry the closest candidate disagrees with
            where = svc.location(f"spec.selector.{misses[0].diffs[0].key}", "spec.selector")
        hint = "; ".join(m.describe() + (f" ({m.location})" if m.location else "") for m in misses)
        yield Issue(
            "NV016", svc.key,
            f"Service {svc.key}: selector {{{_selector_text(svc)}}} matches no Pod or Pod template in namespace "
            f"{svc.namespace}, so the Service has no endpoints"
            + (f"; closest: {hint}" if misses else "; no Pod there carries any of these labels"),
            where, expected=f"a Pod in {svc.namespace} labelled {_selector_text(svc)}",
            actual="; ".join(m.describe() for m in misses) or "no Pod with any of these labels",
        )  # fmt: skip
        return
    groups: dict[str, set[str]] = defaultdict(set)
    for t in ob.targets(svc):
        if t.workload:
            groups[t.workload] |= t.images
    if len(groups) < 2:
        return
    names = sorted(groups)
    shown = "; ".join(f"{n} ({', '.join(sorted(groups[n])) or 'no image'})" for n in names)
    same = len({frozenset(v) for v in groups.values()}) == 1 and all(groups.values())
    if same:
        yield Issue(
            "NV017", svc.key,
            f"Service {svc.key}: selector {{{_selector_text(svc)}}} selects the Pods of {len(names)} workloads "
            f"running the same image ({shown}): a canary or blue-green split, traffic is shared between them",
            where, "note",
        )  # fmt: skip
        return
    yield Issue(
        "NV017", svc.key,
        f"Service {svc.key}: selector {{{_selector_text(svc)}}} selects the Pods of {len(names)} workloads running "
        f"different images ({shown}): connections are spread over all of them; make the selector (or the "
        "templates' labels) specific to the workload that should serve it",
        where, expected="the Pods of one workload", actual=shown,
    )  # fmt: skip


# -- NV018, NV019, NV020 --------------------------------------------------------------------------


def _ports(ob: _Objects, svc: Service) -> Iterator[Issue]:
    targets = [t for t in ob.targets(svc) if t.declares]
    if not targets:
        return
    for sp in svc.ports:
        key = svc.key
        where = svc.location(*_port_path(svc, sp, "targetPort"))
        missing: list[str] = []
        wrong_proto: list[str] = []
        undeclared: list[str] = []
        numbers: dict[int, list[Target]] = defaultdict(list)
        reason = ""
        for t in targets:
            res = resolve_target_port(t.ports, sp)
            if res.number is None:
                if "not " + sp.protocol in res.reason:
                    wrong_proto.append(t.what)
                else:
                    missing.append(t.what)
                reason = reason or res.reason
                continue
            numbers[res.number].append(t)
            if isinstance(sp.target_port, int) and res.declared is None and t.ports:
                other = [p for p in t.ports if p.port == sp.target_port]
                (wrong_proto if other else undeclared).append(t.what)
        target = sp.target_port if isinstance(sp.target_port, int) else repr(sp.target_port)
        if missing and isinstance(sp.target_port, str):
            yield Issue(
                "NV018", key,
                f"Service {svc.key} port {sp.name or sp.port}: targetPort {target} is not a container port of "
                f"{_some(missing)}: {reason}; the EndpointSlice controller gives such a Pod no endpoint port, "
                f"so this Service port has no endpoint on it",
                where, expected=f"a container port named {target} ({sp.protocol})", actual=reason,
            )  # fmt: skip
        if undeclared:
            declared = sorted({f"{p.port}/{p.protocol}" + (f" ({p.name})" if p.name else "") for t in targets for p in t.ports})
            yield Issue(
                "NV018", key,
                f"Service {svc.key} port {sp.name or sp.port}: targetPort {target} is not among the container ports "
                f"declared by {_some(undeclared)} (declared: {', '.join(declared)}); containers need not declare "
                "their ports, but a port/targetPort mix-up looks like this",
                where, "warning", expected=f"a container port {target}/{sp.protocol}", actual=", ".join(declared),
            )  # fmt: skip
        if wrong_proto:
            yield Issue(
                "NV020", key,
                f"Service {svc.key} port {sp.name or sp.port} is {sp.protocol}, but on {_some(wrong_proto)} "
                f"targetPort {target} is a container port of another protocol"
                + (f" ({reason})" if reason else "") + f"; set protocol: {sp.protocol} on the container port, or "
                "fix the Service port's protocol",
                svc.location(*_port_path(svc, sp, "protocol")), expected=f"{target}/{sp.protocol}",
                actual=reason or "declared for another protocol",
            )  # fmt: skip
        if isinstance(sp.target_port, str) and len(numbers) > 1:
            spread = "; ".join(f"{n} on {_some([t.what for t in ts])}" for n, ts in sorted(numbers.items()))
            owners = {t.workload for ts in numbers.values() for t in ts}
            rollout = len(owners) == 1 and "" not in owners
            yield Issue(
                "NV019", key,
                f"Service {svc.key} port {sp.name or sp.port}: targetPort {target} resolves to different ports "
                f"({spread})" + (": a rollout that changes the port, which Kubernetes supports" if rollout else
                                 ": one Service port lands on different ports depending on the Pod"),
                where, "note" if rollout else "warning", expected="one port number", actual=spread,
            )  # fmt: skip


# -- NV026 ----------------------------------------------------------------------------------------


def _readiness(ob: _Objects, svc: Service) -> Iterator[Issue]:
    pods = [p for p in ob.selected_pods(svc) if p.has_status]
    if not pods or svc.publish_not_ready_addresses:
        return
    if any(is_endpoint_candidate(p) and readiness(p).serving for p in pods):
        return
    lines = [f" Pod {p.key} ({p.location('status.conditions', 'status')}): {readiness(p).describe()}." for p in pods[:SHOWN]]
    if len(pods) > SHOWN:
        lines.append(f" And {len(pods) - SHOWN} more.")
    first = pods[0]
    yield Issue(
        "NV026", svc.key,
        f"Service {svc.key}: its selector matches {len(pods)} Pod(s) but none is Ready, so it has no usable "
        "endpoint and its traffic is rejected." + "".join(lines),
        first.location("status.conditions", "status"), expected="at least one Ready Pod",
        actual="; ".join(f"{p.name}: {readiness(p).describe()}" for p in pods[:SHOWN]),
    )  # fmt: skip


# -- NV021-NV025 ----------------------------------------------------------------------------------


def recorded_slices(cluster: Cluster, svc: Service) -> tuple[EndpointSlice, ...]:
    """What the controllers wrote for the Service (see ``_recorded``)."""
    return _recorded(_Objects(cluster), svc)


def _recorded(ob: _Objects, svc: Service) -> tuple[EndpointSlice, ...]:
    """What the controllers wrote for the Service: its given EndpointSlices (those the
    EndpointSlice controller manages, or hand-written ones), else its v1 Endpoints as slices."""
    given = tuple(
        s for s in ob.slices_for(svc)
        if s.origin == "given" and s.address_type != "FQDN" and s.managed_by in ("", CONTROLLER)
    )  # fmt: skip
    if given:
        return given
    mirrored = tuple(s for s in ob.slices_for(svc) if s.origin == "mirrored")
    if mirrored:
        return mirrored
    ep = _legacy(ob, svc)
    return slices_from_endpoints(ep) if ep is not None else ()


def _legacy(ob: _Objects, svc: Service) -> LegacyEndpoints | None:
    return ob.legacy.get((svc.namespace, svc.name))


def _what(s: EndpointSlice) -> str:
    return f"Endpoints {s.namespace}/{s.service_name}" if s.origin == "mirrored" else f"EndpointSlice {s.namespace}/{s.name}"


def _at(s: EndpointSlice, line: int) -> str:
    return s.source.at(line) if line else s.location("endpoints", "subsets")


def _slices(ob: _Objects, svc: Service) -> Iterator[Issue]:
    slices = _recorded(ob, svc)
    if not slices:
        return
    chosen = {p.key for p in ob.endpoint_pods(svc)}
    zones = ob.zones
    nodes = set(zones)
    listed: set[str] = set()
    for s in slices:
        what = _what(s)
        for e in s.endpoints:
            if not e.addresses:
                continue
            address = e.addresses[0]
            listed.add(address)
            at = _at(s, e.line)
            pod = ob.pod_for(svc.namespace, e)
            stale = _stale(svc, e, pod, chosen)
            if stale:
                yield Issue("NV023", svc.key, f"{what} lists {address}, {stale}: a stale endpoint", at,
                            expected="only live Pods the selector selects, at their current address", actual=stale)
                continue
            if pod is None:
                continue
            yield from _conditions(svc, s, e, pod, at)
            yield from _topology(svc, s, e, pod, at, zones, nodes)
        yield from _slice_ports(ob, svc, s, chosen)
    families = {s.address_type for s in slices}
    for p in ob.endpoint_pods(svc):
        if not readiness(p).serving:
            continue  # a not-Ready Pod that is missing gets no traffic either way
        for ip in p.ips:
            if ("IPv6" if ":" in ip else "IPv4") in families and ip not in listed:
                yield Issue(
                    "NV021", svc.key,
                    f"Pod {p.key} ({ip}, Ready, {p.location('metadata.labels')}) is selected by Service {svc.key} "
                    f"but is in none of its {'Endpoints' if slices[0].origin == 'mirrored' else 'EndpointSlices'} "
                    f"({', '.join(_what(s) for s in slices[:SHOWN])}): it receives no traffic",
                    slices[0].location("endpoints", "subsets"), expected=f"an endpoint {ip} (Pod {p.key})",
                    actual="not listed",
                )  # fmt: skip


def _stale(svc: Service, e: Endpoint, pod: Pod | None, chosen: set[str]) -> str:
    address = e.addresses[0]
    if e.target_pod and pod is None:
        return f"its targetRef names Pod {e.target_pod}, which does not exist"
    if pod is None:
        return "no selected Pod has this address"
    if pod.key not in chosen:
        if not is_endpoint_candidate(pod) and pod.phase in ("Succeeded", "Failed"):
            return f"Pod {pod.key} has finished (phase {pod.phase})"
        if address not in pod.ips and pod.ips:
            return f"Pod {pod.key} now has {', '.join(pod.ips)}"
        return f"Pod {pod.key} ({pod.location('metadata.labels')}) no longer matches the selector {{{_selector_text(svc)}}}"
    if address not in pod.ips:
        return f"Pod {pod.key} now has {', '.join(pod.ips) or 'no IP'}"
    return ""


def _conditions(svc: Service, s: EndpointSlice, e: Endpoint, pod: Pod, at: str) -> Iterator[Issue]:
    r = readiness(pod)
    ready = svc.publish_not_ready_addresses or (r.serving and not pod.terminating)
    wrong = []
    if e.ready != ready:
        if r.serving and pod.terminating:
            wrong.append(f"ready={str(e.ready).lower()} but the Pod is being deleted (a terminating endpoint is never ready)")
        else:
            wrong.append(f"ready={str(e.ready).lower()} but the Pod is " + ("Ready" if r.serving else f"not Ready ({r.describe()})"))
    if s.origin != "mirrored":
        if e.serving != r.serving:
            wrong.append(f"serving={str(e.serving).lower()} but the Pod's Ready condition is {str(r.serving)}")
        if e.terminating != pod.terminating:
            wrong.append(f"terminating={str(e.terminating).lower()} but the Pod is "
                         + ("being deleted" if pod.terminating else "not being deleted"))
    if wrong:
        yield Issue(
            "NV022", svc.key,
            f"{_what(s)}: endpoint {e.addresses[0]} (Pod {pod.key}): " + "; ".join(wrong),
            at, expected=f"ready={str(ready).lower()}, serving={str(r.serving).lower()}, "
            f"terminating={str(pod.terminating).lower()}", actual=f"ready={str(e.ready).lower()}, "
            f"serving={str(e.serving).lower()}, terminating={str(e.terminating).lower()}",
        )  # fmt: skip


def _topology(
    svc: Service, s: EndpointSlice, e: Endpoint, pod: Pod, at: str, zones: dict[str, str], nodes: set[str]
) -> Iterator[Issue]:
    if pod.node_name and e.node_name != pod.node_name:
        yield Issue(
            "NV025", svc.key,
            f"{_what(s)}: endpoint {e.addresses[0]} has nodeName {e.node_name or '(unset)'}, but Pod {pod.key} runs "
            f"on {pod.node_name}: kube-proxy decides which endpoints are local (traffic policy Local) by nodeName",
            at, expected=f"nodeName: {pod.node_name}", actual=f"nodeName: {e.node_name or '(unset)'}",
        )  # fmt: skip
    if s.origin == "mirrored" or pod.node_name not in nodes:
        return
    zone = zones.get(pod.node_name, "")
    if e.zone != zone:
        yield Issue(
            "NV025", svc.key,
            f"{_what(s)}: endpoint {e.addresses[0]} has zone {e.zone or '(unset)'}, but its node {pod.node_name} is in "
            f"zone {zone or '(none: no topology.kubernetes.io/zone label)'}: topology-aware routing uses it",
            at, expected=f"zone: {zone or '(unset)'}", actual=f"zone: {e.zone or '(unset)'}",
        )  # fmt: skip


def _slice_ports(
    ob: _Objects, svc: Service, s: EndpointSlice, chosen: set[str]
) -> Iterator[Issue]:
    pods = [p for e in s.endpoints if (p := ob.pod_for(svc.namespace, e)) is not None and p.key in chosen]
    if not pods:
        return
    have = {(p.name, p.protocol): p for p in s.ports}
    for sp in svc.ports:
        key = svc.key
        slice_port = have.get((sp.name, sp.protocol))
        bad: list[str] = []
        for pod in pods:
            if isinstance(sp.target_port, str) and not (pod.containers or pod.ports):
                continue  # a hand-written Pod without containers: nothing to resolve against
            want = resolve_target_port(pod.ports, sp).number
            got = slice_port.port if slice_port is not None else None
            if want != got:
                bad.append(f"Pod {pod.key}: " + (
                    f"targetPort {sp.target_port!r} resolves to {want}" if want is not None else
                    f"targetPort {sp.target_port!r} does not resolve") + f", the slice says {got if got is not None else 'nothing'}")
        if bad:
            yield Issue(
                "NV024", key,
                f"{_what(s)}: port {sp.name or sp.port}/{sp.protocol} disagrees with the Pods it lists: {_some(bad)}",
                s.location("ports", "subsets"), expected=f"the resolved targetPort {sp.target_port!r}",
                actual=f"{slice_port.port if slice_port else 'no such port'}",
            )  # fmt: skip


# -- NV027, NV028 ---------------------------------------------------------------------------------


def _legacy_agree(ob: _Objects, svc: Service) -> Iterator[Issue]:
    ep = _legacy(ob, svc)
    given = [s for s in ob.slices_for(svc) if s.origin == "given" and s.address_type != "FQDN"]
    if ep is None or ep.truncated or not given:
        return

    def split(slices: Iterable[EndpointSlice], mirrored: bool) -> tuple[set[str], set[str]]:
        ready: set[str] = set()
        not_ready: set[str] = set()
        for sl in slices:
            for e in sl.endpoints:
                if not e.addresses or (e.terminating and not mirrored and not svc.publish_not_ready_addresses):
                    continue  # the Endpoints controller leaves terminating Pods out
                (ready if e.ready else not_ready).add(e.addresses[0])
        return ready, not_ready

    s_ready, s_not = split(given, False)
    e_ready, e_not = split(slices_from_endpoints(ep), True)
    diffs = []
    for label, a, b in (("ready", s_ready, e_ready), ("not ready", s_not, e_not)):
        if a - b:
            diffs.append(f"{label} in the EndpointSlices only: {', '.join(sorted(a - b))}")
        if b - a:
            diffs.append(f"{label} in the Endpoints only: {', '.join(sorted(b - a))}")
    if diffs:
        yield Issue(
            "NV027", svc.key,
            f"Service {svc.key}: its v1 Endpoints {ep.namespace}/{ep.name} and its EndpointSlices disagree "
            f"({'; '.join(diffs)}): one of them is stale, and tools reading Endpoints see other backends than kube-proxy",
            ep.location("subsets"), expected="the same addresses", actual="; ".join(diffs),
        )  # fmt: skip


def _orphans(cluster: Cluster) -> Iterator[Issue]:
    names: dict[str, set[str]] = defaultdict(set)
    for svc in cluster.services:
        names[svc.namespace].add(svc.name)
    for s in cluster.slices:
        if s.origin != "given" or s.namespace not in names or s.service_name in names[s.namespace]:
            continue
        close = difflib.get_close_matches(s.service_name, sorted(names[s.namespace]), n=1, cutoff=0.6)
        yield Issue(
            "NV028", f"{s.namespace}/{s.service_name}",
            f"EndpointSlice {s.namespace}/{s.name} is labelled kubernetes.io/service-name={s.service_name}, but "
            f"namespace {s.namespace} has no such Service" + (f" (did you mean {close[0]}?)" if close else "")
            + ": no Service uses its endpoints",
            s.location("metadata.labels"), expected=f"a Service {s.namespace}/{s.service_name}",
            actual=f"Services: {', '.join(sorted(names[s.namespace]))}",
        )  # fmt: skip


# -- the entry point ------------------------------------------------------------------------------


def object_issues(cluster: Cluster) -> tuple[list[Issue], dict[tuple[str, str], int]]:
    """Every object-level issue, and how many objects each (invariant, service) examined."""
    ob = _Objects(cluster)
    issues: list[Issue] = []
    checked: dict[tuple[str, str], int] = defaultdict(int)
    for svc in cluster.services:
        if svc.type == "ExternalName":
            continue
        if svc.selector is not None and _covered(ob, svc.namespace):
            checked[("NV016", svc.key)] += 1
            targets = ob.targets(svc)
            if targets:
                for inv in ("NV017", "NV018", "NV019", "NV020"):
                    checked[(inv, svc.key)] += len(targets)
            pods = ob.selected_pods(svc)
            if any(p.has_status for p in pods):
                checked[("NV026", svc.key)] += len(pods)
            issues += _selection(ob, svc)
            issues += _ports(ob, svc)
            issues += _readiness(ob, svc)
        if svc.selector is not None and _covered(ob, svc.namespace, templates=False):
            recorded = _recorded(ob, svc)
            if recorded:
                for inv in SLICES:
                    checked[(inv, svc.key)] += sum(len(s.endpoints) for s in recorded)
                issues += _slices(ob, svc)
        if _legacy(ob, svc) is not None and any(s.origin == "given" for s in ob.slices_for(svc)):
            checked[("NV027", svc.key)] += 1
            issues += _legacy_agree(ob, svc)
    for s in cluster.slices:
        if s.origin == "given":
            checked[("NV028", f"{s.namespace}/{s.service_name}")] += 1
    issues += _orphans(cluster)
    return issues, checked


def object_report(cluster: Cluster) -> tuple[tuple[Result, ...], tuple[Finding, ...]]:
    """Results and findings of NV016-NV028, plus the loader's notes, for one cluster."""
    issues, checked = object_issues(cluster)
    violated = {(i.invariant, i.service) for i in issues if i.severity == "error"}
    results = tuple(
        Result(inv, svc, "", "violated" if (inv, svc) in violated else "proved", "exhaustive", n, cluster.name)
        for (inv, svc), n in sorted(checked.items())
    )
    findings = [
        Finding(i.invariant, i.service, "", i.message, severity=i.severity,  # type: ignore[arg-type]
                expected=i.expected, actual=i.actual, location=i.location)
        for i in issues
    ]  # fmt: skip
    findings += [
        Finding(n.invariant, n.service, "", n.message, severity="note", location=n.location)
        for n in cluster.notes
    ]
    return results, tuple(findings)
