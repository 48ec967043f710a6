"""Pod (v1) -> ``model.Pod``: addresses, labels, container ports, and what explains readiness.

A Pod read back from a cluster (``kubectl get pods -o yaml``) has a ``status``: its phase, IPs,
conditions (``PodScheduled``, ``Initialized``, ``ContainersReady``, ``Ready``, readiness gates)
and container statuses, which ``kube.selection.readiness`` turns into the reason a Pod is not
Ready. A Pod written in a manifest has no status and is taken as running and Ready (it has no IP,
so it never becomes an endpoint; its labels and ports still count as what its Service selects).
"""

from __future__ import annotations

from nat_verify.kube.containers import all_ports, read_containers
from nat_verify.kube.documents import RawObject
from nat_verify.kube.fields import Fields
from nat_verify.kube.meta import read_meta
from nat_verify.model.cluster import Condition, ContainerState, Lines, Pod

PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")


def read_pod(obj: RawObject) -> Pod:
    meta = read_meta(obj, "Pod")
    f = meta.fields
    spec = f.mapping_or_empty("spec")
    status = f.mapping_or_empty("status")
    containers = read_containers(spec)
    listed = [(i.text("ip", required=True), i) for i in status.items("podIPs")]
    if listed:
        ips = tuple(i.ip("ip", v) for v, i in listed)
    elif status.text("podIP"):
        ips = (status.ip("podIP", status.text("podIP")),)
    else:
        ips = ()
    if (
        len(ips) == 2
        and status.text("podIP")
        and status.ip("podIP", status.text("podIP")) != ips[0]
    ):
        status.fail("podIP", f"must equal podIPs[0] ({ips[0]!r})")
    conditions = tuple(_condition(c) for c in status.items("conditions"))
    lines = [*meta.lines]
    for key in ("nodeName", "containers", "readinessGates"):
        if spec.has(key):
            lines.append((spec.field(key), spec.line(key)))
    for key in ("phase", "conditions", "podIPs", "podIP", "containerStatuses"):
        if status.has(key):
            lines.append((status.field(key), status.line(key)))
    return Pod(
        namespace=meta.namespace,
        name=meta.name,
        node_name=spec.text("nodeName"),
        ips=ips,
        labels=tuple(sorted(meta.labels.items())),
        ports=all_ports(containers),
        host_network=spec.boolean("hostNetwork", False),
        ready=_ready(status, conditions),
        terminating=meta.deleting,
        source=meta.source,
        phase=status.choice("phase", PHASES, "Running"),
        containers=containers,
        conditions=conditions,
        container_states=tuple(
            [_state(s, init=True) for s in status.items("initContainerStatuses")]
            + [_state(s, init=False) for s in status.items("containerStatuses")]
        ),
        readiness_gates=tuple(g.text("conditionType") for g in spec.items("readinessGates")),
        owner=meta.owner,
        hostname=spec.text("hostname"),
        subdomain=spec.text("subdomain"),
        status_reason=status.text("reason"),
        status_message=status.text("message"),
        has_status=f.has("status"),
        lines=Lines(tuple(lines)),
    )


def _condition(c: Fields) -> Condition:
    return Condition(
        type=c.text("type", required=True),
        status=c.choice("status", ("True", "False", "Unknown"), "Unknown"),
        reason=c.text("reason"),
        message=c.text("message"),
        line=c.line(),
    )


def _ready(status: Fields, conditions: tuple[Condition, ...]) -> bool:
    if not status.has("conditions"):
        # A hand-written spec Pod without conditions means a running, Ready pod; a Pod read
        # back from a cluster always carries its Ready condition.
        return True
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def _state(s: Fields, *, init: bool) -> ContainerState:
    state = s.mapping_or_empty("state")
    kind = next((k for k in ("running", "waiting", "terminated") if state.has(k)), "")
    detail = state.mapping_or_empty(kind) if kind else state
    code = detail.data.get("exitCode") if kind == "terminated" else None
    return ContainerState(
        name=s.text("name"),
        ready=s.boolean("ready", False),
        state=kind,
        reason=detail.text("reason") if kind in ("waiting", "terminated") else "",
        message=detail.text("message") if kind in ("waiting", "terminated") else "",
        restarts=s.integer("restartCount", 0, lo=0),
        exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        init=init,
    )
