"""Intent against kube-proxy's own flow expectations (tests/conformance/data/kube-proxy).

Each Cluster below is built by hand from the case's ``services`` description; the expected
outputs and masquerade flags are the flows in the corpus (kube-proxy's unit tests, which encode
the behaviour the Kubernetes maintainers intend). The tracer lists every endpoint of a random
cascade and sets ``masq`` if any visited rule marked the packet, so it is compared with the set of
allowed endpoints and with "some allowed endpoint requires masquerade".

Cases where intent and kube-proxy's flows disagree on purpose are not in this corpus; the
documented disagreements (host to a remote external IP with no endpoints) are covered in
test_intent.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from nat_verify.intent import classify_origin, destinations, expect
from nat_verify.model.cluster import (
    Cluster,
    Endpoint,
    EndpointPort,
    EndpointSlice,
    LoadBalancerIngress,
    Node,
    ProxyConfig,
    Service,
    ServicePort,
)

DATA = Path(__file__).resolve().parents[1] / "conformance" / "data" / "kube-proxy"
NODE = "test-hostname"  # the legacy fake proxier's node name

# (ip, ready, serving, terminating, nodeName); "" = nodeName unset (not this node)
Ep = tuple[str, bool, bool, bool, str]


def _cluster(
    svc: Service,
    eps: list[Ep],
    *,
    ep_port: EndpointPort,
    cluster_cidrs: tuple[str, ...] = ("10.0.0.0/8",),
    **proxy: Any,
) -> Cluster:
    es = EndpointSlice(
        svc.namespace,
        f"{svc.name}-1",
        svc.name,
        "IPv4",
        tuple(
            Endpoint((ip,), ready=r, serving=s, terminating=t, node_name=n)
            for ip, r, s, t, n in eps
        ),
        (ep_port,),
    )
    return Cluster(
        services=(svc,),
        slices=(es,) if eps else (),
        nodes=(Node(NODE, ("192.168.0.2",), ("10.0.0.0/8",)),),
        proxy=ProxyConfig(cluster_cidrs=cluster_cidrs, **proxy),
    )


def _ready(ip: str, node: str = "") -> Ep:
    return (ip, True, True, False, node)


def load_balancer() -> Cluster:
    svc = Service(
        "ns1",
        "svc1",
        (ServicePort(80, "TCP", "p80", 80, 3001),),
        type="LoadBalancer",
        cluster_ips=("172.30.0.41",),
        lb_ingress=(LoadBalancerIngress(ip="1.2.3.4"), LoadBalancerIngress(ip="5.6.7.8")),
        lb_source_ranges=("192.168.0.0/24", " 203.0.113.0/25"),
    )
    return _cluster(svc, [_ready("10.180.0.1")], ep_port=EndpointPort(80, "TCP", "p80"))


def node_port() -> Cluster:
    svc = Service(
        "ns1",
        "svc1",
        (ServicePort(80, "TCP", "p80", 80, 3001),),
        type="NodePort",
        cluster_ips=("172.30.0.41",),
    )
    return _cluster(svc, [_ready("10.180.0.1")], ep_port=EndpointPort(80, "TCP", "p80"))


def node_port_reject() -> Cluster:
    svc = Service(
        "ns1",
        "svc1",
        (ServicePort(80, "TCP", "p80", 80, 3001),),
        type="NodePort",
        cluster_ips=("172.30.0.41",),
    )
    return _cluster(svc, [], ep_port=EndpointPort(80, "TCP", "p80"))


def cluster_ip_sctp() -> Cluster:
    svc = Service(
        "ns1", "svc1", (ServicePort(80, "SCTP", "p80", 80),), cluster_ips=("172.30.0.41",)
    )
    return _cluster(svc, [_ready("10.180.0.1")], ep_port=EndpointPort(80, "SCTP", "p80"))


def _only_local(**proxy: Any) -> Cluster:
    svc = Service(
        "ns1",
        "svc1",
        (ServicePort(80, "TCP", "p80", 80, 3001),),
        type="NodePort",
        cluster_ips=("172.30.0.41",),
        external_traffic_policy="Local",
    )
    eps = [_ready("10.180.0.1"), _ready("10.180.2.1", NODE)]
    return _cluster(
        svc,
        eps,
        ep_port=EndpointPort(80, "TCP", "p80"),
        node_port_addresses=("192.168.0.0/24",),
        localhost_node_ports=False,
        **proxy,
    )


def only_local_node_ports() -> Cluster:
    return _only_local()


def only_local_node_ports_no_cluster_cidr() -> Cluster:
    return _only_local(cluster_cidrs=())


def only_local_load_balancing() -> Cluster:
    svc = Service(
        "ns1",
        "svc1",
        (ServicePort(80, "TCP", "p80", 80, 3001),),
        type="LoadBalancer",
        cluster_ips=("172.30.0.41",),
        lb_ingress=(LoadBalancerIngress(ip="1.2.3.4"),),
        external_traffic_policy="Local",
        session_affinity="ClientIP",
        health_check_node_port=30000,
    )
    eps = [_ready("10.180.0.1"), _ready("10.180.2.1", NODE)]
    return _cluster(svc, eps, ep_port=EndpointPort(80, "TCP", "p80"))


def only_local_external_ips() -> Cluster:
    svc = Service(
        "ns1",
        "svc1",
        (ServicePort(80, "TCP", "p80", 80),),
        type="NodePort",
        cluster_ips=("172.30.0.41",),
        external_ips=("192.168.99.11",),
        external_traffic_policy="Local",
    )
    eps = [_ready("10.180.0.1"), _ready("10.180.2.1", NODE)]
    return _cluster(svc, eps, ep_port=EndpointPort(80, "TCP", "p80"))


def _itp(policy: str, nodes: tuple[str, str, str]) -> Cluster:
    svc = Service(
        "ns1",
        "svc1",
        (ServicePort(80, "TCP", "", 80),),
        cluster_ips=("172.30.1.1",),
        internal_traffic_policy=policy,  # type: ignore[arg-type]
    )
    eps = [_ready(f"10.0.1.{i + 1}", n) for i, n in enumerate(nodes)]
    return _cluster(svc, eps, ep_port=EndpointPort(80, "TCP", ""))


def _terminating(etp: str, fallback: bool, eps: list[Ep]) -> Cluster:
    svc = Service(
        "ns1",
        "svc1",
        (ServicePort(80, "TCP", "", 80),),
        type="LoadBalancer",
        cluster_ips=("172.30.1.1",),
        lb_ingress=(LoadBalancerIngress(ip="1.2.3.4"),),
        external_traffic_policy=etp,  # type: ignore[arg-type]
        session_affinity="ClientIP",
        health_check_node_port=30000,
    )
    return _cluster(svc, eps, ep_port=EndpointPort(80, "TCP", ""), terminating_fallback=fallback)


T, F = True, False


def _ready_exist(etp: str, fallback: bool) -> Cluster:
    # Local: 10.0.1.3/.4 are on this node, 10.0.1.5 on host-1; Cluster: all three elsewhere
    other = NODE if etp == "Local" else "another-host"
    fifth = "host-1" if etp == "Local" else "another-host"
    return _terminating(
        etp,
        fallback,
        [
            ("10.0.1.1", T, T, F, NODE),
            ("10.0.1.2", T, T, F, NODE),
            ("10.0.1.3", F, T, T, other),
            ("10.0.1.4", F, F, T, other),
            ("10.0.1.5", T, T, F, fifth),
        ],
    )


TERM = "legacy__TestEndpointSliceWithTerminatingEndpointsTrafficPolicy"
CASES: dict[str, Callable[[], Cluster]] = {
    "legacy__TestLoadBalancer": load_balancer,
    "legacy__TestNodePort": node_port,
    "legacy__TestNodePortReject": node_port_reject,
    "legacy__TestClusterIPEndpointsMore": cluster_ip_sctp,
    "legacy__TestOnlyLocalNodePorts": only_local_node_ports,
    "legacy__TestOnlyLocalNodePortsNoClusterCIDR": only_local_node_ports_no_cluster_cidr,
    "legacy__TestOnlyLocalLoadBalancing": only_local_load_balancing,
    "legacy__TestOnlyLocalExternalIPs": only_local_external_ips,
    "legacy__TestInternalTrafficPolicyE2E__local_with_local_eps": lambda: _itp(
        "Local", (NODE, "host1", "host2")
    ),
    "legacy__TestInternalTrafficPolicyE2E__local_no_local_eps": lambda: _itp(
        "Local", ("host0", "host1", "host2")
    ),
    f"{TERM}Local__fg_off_only_nonlocal_and_terminating": lambda: _terminating(
        "Local",
        False,
        [
            ("10.0.1.1", F, T, T, NODE),
            ("10.0.1.2", F, T, T, NODE),
            ("10.0.1.3", F, F, T, NODE),
            ("10.0.1.4", F, F, T, NODE),
            ("10.0.1.5", T, T, F, "host-1"),
        ],
    ),
    f"{TERM}Local__fg_on_only_terminating": lambda: _terminating(
        "Local",
        True,
        [
            ("10.0.1.2", F, T, T, NODE),
            ("10.0.1.3", F, T, T, NODE),
            ("10.0.1.4", F, F, T, NODE),
            ("10.0.1.5", T, T, F, "host-1"),
        ],
    ),
    f"{TERM}Cluster__fg_on_only_terminating": lambda: _terminating(
        "Cluster",
        True,
        [
            ("10.0.1.2", F, T, T, NODE),
            ("10.0.1.3", F, T, T, NODE),
            ("10.0.1.4", F, F, T, "another-host"),
            ("10.0.1.5", F, T, T, "another-host"),
        ],
    ),
    f"{TERM}Cluster__fg_off_only_terminating": lambda: _terminating(
        "Cluster",
        False,
        [
            ("10.0.1.1", F, T, T, NODE),
            ("10.0.1.2", F, T, T, NODE),
            ("10.0.1.3", F, F, T, "another-host"),
            ("10.0.1.4", F, F, T, "another-host"),
            ("10.0.1.5", F, T, T, "another-host"),
        ],
    ),
    f"{TERM}Local__no_usable_endpoints": lambda: _terminating(
        "Local", True, [("10.0.1.5", F, F, T, NODE), ("10.0.1.5", F, F, T, "host-1")]
    ),
    f"{TERM}Cluster__no_usable_endpoints": lambda: _terminating(
        "Cluster", True, [("10.0.1.5", F, F, T, NODE), ("10.0.1.5", F, F, T, "host-1")]
    ),
    f"{TERM}Local__fg_on_terminating_on_remote_node": lambda: _terminating(
        "Local", True, [("10.0.1.5", F, T, T, "host-1")]
    ),
    f"{TERM}Cluster__fg_on_terminating_on_remote_node": lambda: _terminating(
        "Cluster", True, [("10.0.1.5", F, T, T, "host-1")]
    ),
    **{
        f"{TERM}{etp}__fg_{gate}_ready_exist": partial(_ready_exist, etp, gate == "on")
        for etp in ("Local", "Cluster")
        for gate in ("on", "off")
    },
    "legacy__TestInternalTrafficPolicyE2E__cluster": lambda: _itp(
        "Cluster", (NODE, "host1", "host2")
    ),
    "legacy__TestClusterIPReject": lambda: _cluster(
        Service("ns1", "svc1", (ServicePort(80, "TCP", "p80", 80),), cluster_ips=("172.30.0.41",)),
        [],
        ep_port=EndpointPort(80, "TCP", "p80"),
    ),
    "legacy__TestExternalIPsReject": lambda: _cluster(
        Service(
            "ns1",
            "svc1",
            (ServicePort(80, "TCP", "p80", 80),),
            cluster_ips=("172.30.0.41",),
            external_ips=("192.168.99.11",),
        ),
        [],
        ep_port=EndpointPort(80, "TCP", "p80"),
    ),
    "legacy__TestNonLocalExternalIPs": lambda: _cluster(
        Service(
            "ns1",
            "svc1",
            (ServicePort(80, "TCP", "p80", 80),),
            cluster_ips=("172.30.0.41",),
            external_ips=("192.168.99.11",),
        ),
        [_ready("10.180.0.1"), _ready("10.180.2.1", NODE)],
        ep_port=EndpointPort(80, "TCP", "p80"),
    ),
    "legacy__TestLoadBalancerReject": lambda: _cluster(
        Service(
            "ns1",
            "svc1",
            (ServicePort(80, "TCP", "p80", 80, 3001),),
            type="LoadBalancer",
            cluster_ips=("172.30.0.41",),
            lb_ingress=(LoadBalancerIngress(ip="1.2.3.4"),),
            external_traffic_policy="Local",
            session_affinity="ClientIP",
            health_check_node_port=30000,
        ),
        [],
        ep_port=EndpointPort(80, "TCP", "p80"),
    ),
}


def _flows() -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for case in CASES:
        data = json.loads((DATA / f"{case}.json").read_text())
        out.extend((case, flow) for flow in data["flows"])
    return out


FLOWS = _flows()


def test_corpus_cases_are_present() -> None:
    # every legacy case but TestHealthCheckNodePort (a health-check port is not a Service address)
    assert len(CASES) == 27
    assert len(FLOWS) == 70


@pytest.mark.parametrize(("case", "flow"), FLOWS, ids=[f"{c}:{f['name']}" for c, f in FLOWS])
def test_intent_agrees_with_kube_proxy_flow(case: str, flow: dict[str, Any]) -> None:
    cluster = CASES[case]()
    src, dst, port, proto = flow["source_ip"], flow["dest_ip"], flow["dest_port"], flow["protocol"]
    matches = [
        d for d in destinations(cluster, NODE, 4) if (d.ip, d.port, d.proto) == (dst, port, proto)
    ]
    if flow["output"] == "":
        # kube-proxy leaves the packet alone: it must not be a Service address at all
        assert matches == []
        return
    assert len(matches) == 1, matches
    origin = classify_origin(cluster, NODE, src)
    exp = expect(cluster, NODE, matches[0], src, origin)
    if flow["output"] in ("REJECT", "DROP"):
        assert exp.kind == flow["output"].lower(), exp.reasons
        return
    want = set()
    for item in flow["output"].split(", "):
        ip, _, p = item.rpartition(":")
        want.add((ip, int(p)))
    assert exp.kind == "dnat", exp.reasons
    assert exp.endpoints == want
    required = [exp.masquerade_required(ep) for ep in sorted(exp.endpoints)]
    assert None not in required, exp.reasons
    assert any(required) == flow["masq"], exp.reasons
