"""How the object checks (NV016-NV028) and the loader's EndpointSlice synthesis scale.

A cluster of S Services in 50 namespaces, each selecting K Ready Pods of a Deployment with a
named targetPort, with its EndpointSlice (for the checks) or without (for the synthesis). Both
must grow linearly with the number of Pods: the script prints the times at S and 8*S and their
ratio (8 is linear; a scan of every Pod per Service would give about 64), measured in one run.

    python3 bench/bench_objects.py [S]
"""

from __future__ import annotations

import sys
import time

import attrs

from nat_verify.check import check_objects
from nat_verify.kube.synthesis import synthesise_slices
from nat_verify.model.cluster import (
    Cluster,
    Condition,
    Container,
    ContainerPort,
    Endpoint,
    EndpointPort,
    EndpointSlice,
    Node,
    OwnerRef,
    Pod,
    Service,
    ServicePort,
)

PODS_PER_SERVICE = 10


def cluster(services: int) -> Cluster:
    svcs, pods, slices = [], [], []
    port = ContainerPort(8080, "TCP", "http")
    for i in range(services):
        ns = f"ns{i % 50}"
        svcs.append(Service(
            ns, f"s{i}", (ServicePort(80, "TCP", "http", "http"),), cluster_ips=(f"10.96.{i // 250}.{i % 250 + 1}",),
            selector=(("app", f"s{i}"),), ip_families=("IPv4",),
        ))  # fmt: skip
        endpoints = []
        for j in range(PODS_PER_SERVICE):
            ip = f"10.{i // 250 + 1}.{i % 250}.{j + 1}"
            pods.append(Pod(
                ns, f"s{i}-abc12-{j}", node_name="n1", ips=(ip,), labels=(("app", f"s{i}"), ("pod-template-hash", "abc12")),
                ports=(port,), containers=(Container("app", "img:1", (port,)),), conditions=(Condition("Ready", "True"),),
                owner=OwnerRef("ReplicaSet", f"s{i}-abc12"),
            ))  # fmt: skip
            endpoints.append(Endpoint((ip,), node_name="n1", target_pod=f"{ns}/s{i}-abc12-{j}"))
        slices.append(EndpointSlice(ns, f"s{i}-x", f"s{i}", "IPv4", tuple(endpoints), (EndpointPort(8080, "TCP", "http"),)))
    return Cluster(services=tuple(svcs), slices=tuple(slices), nodes=(Node("n1", ("192.168.0.1",)),), pods=tuple(pods))


def timed_checks(c: Cluster) -> float:
    start = time.perf_counter()
    report = check_objects(c)
    elapsed = time.perf_counter() - start
    assert not [f for f in report.findings if f.severity == "error"]
    return elapsed


def timed_synthesis(c: Cluster) -> float:
    from nat_verify.kube.selection import SelectionIndex

    bare = attrs.evolve(c, slices=())
    start = time.perf_counter()
    index = SelectionIndex(bare)
    for svc in bare.services:
        synthesise_slices(svc, index.selected_pods(svc), bare.nodes)
    return time.perf_counter() - start


def main() -> None:
    small = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    for name, fn in (("object checks", timed_checks), ("slice synthesis", timed_synthesis)):
        a = fn(cluster(small))
        b = fn(cluster(8 * small))
        print(
            f"{name}: {small} Services ({small * PODS_PER_SERVICE} Pods) {a:.2f} s, "
            f"{8 * small} Services {b:.2f} s, ratio {b / a:.1f} (8 = linear)"
        )


if __name__ == "__main__":
    main()
