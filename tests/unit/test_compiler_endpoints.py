"""Endpoint selection (topology.go CategorizeEndpoints, endpointslicecache) in isolation."""

from __future__ import annotations

from nat_verify.kubeproxy.endpoints import EndpointInfo, categorize, endpoint_index
from nat_verify.kubeproxy.serviceports import service_ports
from nat_verify.model.cluster import (
    Cluster,
    Endpoint,
    EndpointPort,
    EndpointSlice,
    Node,
    Service,
    ServicePort,
)


def info(
    ip: str,
    *,
    local: bool = False,
    ready: bool = True,
    serving: bool = True,
    terminating: bool = False,
    zones: tuple[str, ...] | None = None,
) -> EndpointInfo:
    return EndpointInfo(ip, 80, f"{ip}:80", local, ready, serving, terminating, zones)


def port_info(**kw: object):  # type: ignore[no-untyped-def]
    base: dict[str, object] = {
        "namespace": "ns",
        "name": "s",
        "ports": (ServicePort(80),),
        "cluster_ips": ("172.30.0.1",),
    }
    base.update(kw)
    cluster = Cluster(services=(Service(**base),))  # type: ignore[arg-type]
    return service_ports(cluster, 4)[0]


def ips(eps: tuple[EndpointInfo, ...]) -> list[str]:
    return [e.ip for e in eps]


def test_index_sorts_by_string_dedups_local_first_and_filters_family() -> None:
    slices = (
        EndpointSlice(
            "ns",
            "s-1",
            "s",
            "IPv4",
            (
                Endpoint(("10.0.0.2",), node_name="other"),
                Endpoint(("10.0.0.10",), node_name="other"),
            ),
            (EndpointPort(8080, name=""),),
        ),
        # the same address in a second slice, this time on our node: the local copy wins
        EndpointSlice(
            "ns",
            "s-2",
            "s",
            "IPv4",
            (Endpoint(("10.0.0.2",), node_name="me"),),
            (EndpointPort(8080, name=""),),
        ),
        EndpointSlice(
            "ns",
            "s-3",
            "s",
            "IPv6",
            (Endpoint(("fd00::2",), node_name="me"),),
            (EndpointPort(8080, name=""),),
        ),
        EndpointSlice(
            "ns",
            "s-4",
            "s",
            "FQDN",
            (Endpoint(("db.example.com",)),),
            (EndpointPort(8080, name=""),),
        ),
    )
    cluster = Cluster(slices=slices, nodes=(Node("me"),))
    got = endpoint_index(cluster, "me", 4)[("ns", "s", "", "TCP")]
    assert [e.endpoint for e in got] == ["10.0.0.10:8080", "10.0.0.2:8080"]
    assert [e.is_local for e in got] == [False, True]
    v6 = endpoint_index(cluster, "me", 6)[("ns", "s", "", "TCP")]
    assert [e.endpoint for e in v6] == ["[fd00::2]:8080"]


def test_cluster_policy_prefers_ready_then_serving_terminating() -> None:
    sp = port_info()
    eps = [info("10.0.0.1", ready=False, serving=True, terminating=True), info("10.0.0.2")]
    sel = categorize(eps, sp)
    assert ips(sel.cluster) == ["10.0.0.2"] and sel.has_endpoints and sel.local == ()
    only_term = [
        info("10.0.0.1", ready=False, serving=True, terminating=True),
        info("10.0.0.3", ready=False, serving=False, terminating=True),
    ]
    assert ips(categorize(only_term, sp).cluster) == ["10.0.0.1"]
    off = categorize(only_term, sp, terminating_fallback=False)
    assert off.cluster == () and not off.has_endpoints


def test_local_policy_uses_local_terminating_and_merges_with_cluster() -> None:
    sp = port_info(
        type="NodePort", ports=(ServicePort(80, node_port=30080),), external_traffic_policy="Local"
    )
    eps = [
        info("10.0.0.1", local=True, ready=False, serving=True, terminating=True),
        info("10.0.0.2"),
    ]
    sel = categorize(eps, sp)
    assert ips(sel.cluster) == ["10.0.0.2"]
    assert ips(sel.local) == ["10.0.0.1"]
    # SEP chains for the union: the terminating local endpoint and the remote ready one
    assert ips(sel.reachable) == ["10.0.0.1", "10.0.0.2"]


def test_internal_local_only_counts_any_usable_endpoint() -> None:
    sp = port_info(internal_traffic_policy="Local")
    sel = categorize([info("10.0.0.2")], sp)
    assert sel.cluster == () and sel.local == () and sel.has_endpoints  # -> DROP, not REJECT
    assert not categorize([info("10.0.0.2", ready=False, serving=False)], sp).has_endpoints


def test_zone_hints() -> None:
    sp = port_info()
    eps = [info("10.0.0.1", zones=("a",)), info("10.0.0.2", zones=("b",))]
    assert ips(categorize(eps, sp, zone="a").cluster) == ["10.0.0.1"]
    # no endpoint hinted for our zone, or no zone label: hints ignored
    assert ips(categorize(eps, sp, zone="c").cluster) == ["10.0.0.1", "10.0.0.2"]
    assert ips(categorize(eps, sp, zone="").cluster) == ["10.0.0.1", "10.0.0.2"]
    # one ready endpoint without hints: hints ignored
    eps.append(info("10.0.0.3"))
    assert ips(categorize(eps, sp, zone="a").cluster) == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
