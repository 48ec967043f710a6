"""The containers of a Pod spec (a Pod's ``spec`` or a workload's ``spec.template.spec``).

Only what decides a Service's targetPort and a Pod's readiness is kept: names, images, declared
ports (with their lines), whether a readiness probe exists, and which init containers are
sidecars (``restartPolicy: Always``), whose ports a named targetPort may also resolve to.
"""

from __future__ import annotations

from nat_verify.kube.fields import Fields
from nat_verify.kube.service import PROTOCOLS
from nat_verify.model.cluster import Container, ContainerPort


def read_containers(spec: Fields) -> tuple[Container, ...]:
    """``containers`` then sidecar ``initContainers``, in order (the order ``FindPort`` searches)."""
    out = [_container(c, sidecar=False) for c in spec.items("containers")]
    for c in spec.items("initContainers"):
        if c.text("restartPolicy") == "Always":
            out.append(_container(c, sidecar=True))
    return tuple(out)


def _container(c: Fields, *, sidecar: bool) -> Container:
    return Container(
        name=c.text("name"),
        image=c.text("image"),
        ports=tuple(_port(p) for p in c.items("ports")),
        sidecar=sidecar,
        readiness_probe=c.has("readinessProbe"),
    )


def _port(p: Fields) -> ContainerPort:
    return ContainerPort(
        port=p.port("containerPort", required=True),
        protocol=p.choice("protocol", PROTOCOLS, "TCP"),  # type: ignore[arg-type]
        name=p.text("name"),
        line=p.line(),
    )


def all_ports(containers: tuple[Container, ...]) -> tuple[ContainerPort, ...]:
    return tuple(p for c in containers for p in c.ports)
