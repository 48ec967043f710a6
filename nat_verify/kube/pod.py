"""Pod (v1) -> ``model.Pod``, plus the phase (only needed to synthesise EndpointSlices)."""

from __future__ import annotations

from nat_verify.kube.documents import RawObject
from nat_verify.kube.fields import Fields
from nat_verify.kube.meta import read_meta
from nat_verify.kube.service import PROTOCOLS
from nat_verify.model.cluster import ContainerPort, Pod


def read_pod(obj: RawObject) -> tuple[Pod, str]:
    """The Pod and its phase (``Running`` when the status does not say)."""
    meta = read_meta(obj, "Pod")
    f = meta.fields
    spec = f.mapping_or_empty("spec")
    status = f.mapping_or_empty("status")
    ports: list[ContainerPort] = []
    for c in spec.items("containers"):
        for p in c.items("ports"):
            ports.append(
                ContainerPort(
                    port=p.port("containerPort", required=True),
                    protocol=p.choice("protocol", PROTOCOLS, "TCP"),  # type: ignore[arg-type]
                    name=p.text("name"),
                )
            )
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
    return Pod(
        namespace=meta.namespace,
        name=meta.name,
        node_name=spec.text("nodeName"),
        ips=ips,
        labels=tuple(sorted(meta.labels.items())),
        ports=tuple(ports),
        host_network=spec.boolean("hostNetwork", False),
        ready=_ready(status),
        terminating=meta.deleting,
        source=meta.source,
    ), status.choice("phase", ("Pending", "Running", "Succeeded", "Failed", "Unknown"), "Running")


def _ready(status: Fields) -> bool:
    if not status.has("conditions"):
        # A hand-written spec Pod without conditions means a running, Ready pod; a Pod read
        # back from a cluster always carries its Ready condition.
        return True
    for cond in status.items("conditions"):
        if cond.text("type") == "Ready":
            return cond.choice("status", ("True", "False", "Unknown"), "Unknown") == "True"
    return False
