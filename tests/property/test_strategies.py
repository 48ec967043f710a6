"""The public strategies build what they promise: consistent clusters that shrink to small ones.

Every expected value below follows from the construction rules stated in the strategies'
docstring (the address plan) and from Kubernetes API validation, not from running the code.
"""

from __future__ import annotations

import importlib.metadata
import ipaddress
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import yaml
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st

from nat_verify import strategies as nvst
from nat_verify.intent import ADDRESS_CLASSES, destinations
from nat_verify.kube import load_cluster
from nat_verify.model.cluster import (
    Cluster,
    EndpointSlice,
    Node,
    Pod,
    ProxyConfig,
    Service,
    SourceRef,
)
from nat_verify.model.packet import Packet

FIND = settings(database=None, max_examples=2000)
# reachability only: the first example found will do, no shrinking
REACH = settings(database=None, max_examples=5000, phases=[Phase.generate], derandomize=True)
FAMILIES = st.sampled_from([(4,), (6,), (4, 6), (6, 4)])
dual_clusters = FAMILIES.flatmap(lambda f: nvst.clusters(families=f, max_nodes=3))


def net(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(text)


def addr(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


def family_of(svc: Service) -> tuple[int, ...]:
    return tuple(4 if f == "IPv4" else 6 for f in svc.ip_families)


def assert_consistent(c: Cluster) -> None:
    """The construction invariants of a generated cluster (Kubernetes' own rules included)."""
    names = [n.name for n in c.nodes]
    assert len(set(names)) == len(names)
    # pod CIDRs: disjoint, inside the cluster CIDR of their family
    cidrs = [net(p) for n in c.nodes for p in n.pod_cidrs]
    for i, a in enumerate(cidrs):
        assert a.subnet_of(net(nvst.CLUSTER_CIDRS[a.version]))  # type: ignore[arg-type]
        assert not any(a.overlaps(b) for b in cidrs[i + 1 :])
    node_ips = [ip for n in c.nodes for ip in n.internal_ips]
    assert len(set(node_ips)) == len(node_ips)

    cluster_ips = [ip for s in c.services for ip in s.cluster_ips]
    assert len(set(cluster_ips)) == len(cluster_ips)
    node_ports = [p.node_port for s in c.services for p in s.ports if p.node_port]
    node_ports += [s.health_check_node_port for s in c.services if s.health_check_node_port]
    assert len(set(node_ports)) == len(node_ports)
    assert all(30000 <= p <= 32767 for p in node_ports)
    assert len({s.key for s in c.services}) == len(c.services)

    for s in c.services:
        fams = family_of(s)
        assert [addr(ip).version for ip in s.cluster_ips] == list(fams)
        for ip in s.cluster_ips:
            assert addr(ip) in net(nvst.SERVICE_CIDRS[addr(ip).version])
        # API validation: several ports need unique names; (port, protocol) is unique
        pnames = [p.name for p in s.ports]
        assert len(set(pnames)) == len(pnames)
        assert len(s.ports) == 1 or all(pnames)
        assert len({(p.port, p.protocol) for p in s.ports}) == len(s.ports)
        externally = s.type in ("NodePort", "LoadBalancer") or bool(s.external_ips)
        assert s.external_traffic_policy == "Cluster" or externally
        assert bool(s.health_check_node_port) == (
            s.type == "LoadBalancer" and s.external_traffic_policy == "Local"
        )
        assert all(not p.node_port for p in s.ports) or s.type in ("NodePort", "LoadBalancer")
        assert s.type != "NodePort" or all(p.node_port for p in s.ports)
        assert not s.lb_ingress or s.type == "LoadBalancer"
        assert 1 <= s.affinity_timeout <= 86400
        for ing in s.lb_ingress:
            assert addr(ing.ip).version in fams
        by_name = {p.name: p for p in s.ports}
        # at least one slice per family, empty when there are no endpoints (as the controller)
        assert {sl.address_type for sl in c.slices_for(s)} == set(s.ip_families)
        for sl in c.slices_for(s):
            assert sl.address_type in s.ip_families
            # slice ports: the Service ports by name and protocol, numbers resolved
            assert sorted(p.name for p in sl.ports) == sorted(by_name)
            for ep_port in sl.ports:
                sp = by_name[ep_port.name]
                assert ep_port.protocol == sp.protocol
                if isinstance(sp.target_port, int):
                    assert ep_port.port == sp.target_port

    endpoint_ips = [e.addresses[0] for sl in c.slices for e in sl.endpoints]
    assert len(set(endpoint_ips)) == len(endpoint_ips)
    pods = {f"{p.namespace}/{p.name}": p for p in c.pods}
    assert len(pods) == len(c.pods)
    pod_ips = [ip for p in c.pods for ip in p.ips]
    assert len(set(pod_ips)) == len(pod_ips)
    for sl in c.slices:
        for e in sl.endpoints:
            node = c.node(e.node_name)
            ip = addr(e.addresses[0])
            assert ip.version == (4 if sl.address_type == "IPv4" else 6)
            assert any(ip in net(p) for p in node.pod_cidrs)
            # the backing Pod carries the address, and a named targetPort resolves to the
            # number this slice gives
            pod = pods[e.target_pod]
            assert e.addresses[0] in pod.ips and pod.node_name == e.node_name
            svc = next(
                s for s in c.services if s.name == sl.service_name and s.namespace == sl.namespace
            )
            for sp in svc.ports:
                if isinstance(sp.target_port, str):
                    number = next(p.port for p in sl.ports if p.name == sp.name)
                    assert (number, sp.target_port) in {(cp.port, cp.name) for cp in pod.ports}
    for p in c.pods:
        node = c.node(p.node_name)
        assert all(any(addr(ip) in net(pc) for pc in node.pod_cidrs) for ip in p.ips)
        # .1 is the node's bridge address
        assert all(int(addr(ip)) - int(net(pc).network_address) >= 2
                   for ip in p.ips for pc in node.pod_cidrs if addr(ip) in net(pc))  # fmt: skip

    cfg = c.proxy
    # "" (no detector) is only expressible without cluster CIDRs (kube-proxy's default)
    assert (cfg.detect_local_mode == "") == (not cfg.cluster_cidrs)
    assert bool(cfg.bridge_interface) == (cfg.detect_local_mode == "BridgeInterface")
    assert bool(cfg.interface_name_prefix) == (cfg.detect_local_mode == "InterfaceNamePrefix")
    assert 0 <= cfg.masquerade_bit <= 31


@given(dual_clusters)
def test_generated_clusters_are_consistent(c: Cluster) -> None:
    assert_consistent(c)


@given(nvst.clusters(min_nodes=2, max_nodes=2, min_services=1, max_services=1, max_ports=1))
def test_bounds_are_respected(c: Cluster) -> None:
    assert len(c.nodes) == 2 and len(c.services) == 1 and len(c.services[0].ports) == 1


def test_the_plugin_is_declared() -> None:
    # st.from_type works without importing nat_verify.strategies because of this entry point
    eps = importlib.metadata.entry_points(group="hypothesis")
    assert "nat_verify._hypothesis_hook:_hypothesis_setup_hook" in {e.value for e in eps}


@settings(max_examples=20)
@given(
    st.from_type(Cluster),
    st.from_type(Service),
    st.from_type(EndpointSlice),
    st.from_type(ProxyConfig),
    st.from_type(Node),
)
def test_from_type_uses_our_strategies(
    c: Cluster, svc: Service, sl: EndpointSlice, cfg: ProxyConfig, node: Node
) -> None:
    # Hypothesis' own attrs inference would produce arbitrary text here, never the plan
    assert_consistent(c)
    assert svc.name == "svc-0" and addr(svc.cluster_ips[0]) in net("10.43.0.0/16")
    assert sl.service_name == "svc-0" and sl.address_type == "IPv4"
    assert all(addr(e.addresses[0]) in net("10.42.0.0/16") for e in sl.endpoints)
    assert cfg.masquerade_bit in (14, 0, 1, 15, 31)
    i = int(node.name.removeprefix("node-"))
    assert node.internal_ips == (f"192.168.1.{10 + i}",) and node.pod_cidrs == (f"10.42.{i}.0/24",)


def test_shrinks_to_two_services_on_one_node() -> None:
    c = find(nvst.clusters(), lambda c: len(c.services) >= 2, settings=FIND)
    assert len(c.services) == 2
    assert len(c.nodes) == 1
    # simpler also means defaults: the first choice of every knob, the lowest addresses/ports
    assert [s.type for s in c.services] == ["ClusterIP", "ClusterIP"]
    assert [s.cluster_ips for s in c.services] == [("10.43.0.10",), ("10.43.0.11",)]
    assert [[(p.port, p.protocol, p.target_port) for p in s.ports] for s in c.services] == [
        [(80, "TCP", 80)],
        [(80, "TCP", 80)],
    ]
    # no endpoints: one empty slice per Service, as the EndpointSlice controller writes
    assert [(sl.service_name, sl.endpoints) for sl in c.slices] == [("svc-0", ()), ("svc-1", ())]
    assert c.pods == ()
    assert c.proxy == ProxyConfig(cluster_cidrs=("10.42.0.0/16",), detect_local_mode="ClusterCIDR")


def test_shrinks_to_one_remote_endpoint() -> None:
    def remote_endpoint(c: Cluster) -> bool:
        return any(e.node_name == "node-1" for sl in c.slices for e in sl.endpoints)

    c = find(nvst.clusters(), remote_endpoint, settings=FIND)
    assert [n.name for n in c.nodes] == ["node-0", "node-1"]
    assert len(c.services) == 1 and len(c.slices) == 1
    (ep,) = c.slices[0].endpoints
    # node-1's first pod address (.1 is its bridge)
    assert ep.addresses == ("10.42.1.2",) and ep.ready and not ep.terminating


def test_dual_stack_shrinks_to_single_stack_first_family() -> None:
    c = find(nvst.clusters(families=(4, 6)), lambda c: len(c.services) >= 1, settings=FIND)
    assert c.services[0].ip_families == ("IPv4",)
    assert c.nodes[0].internal_ips == ("192.168.1.10", "fd00:1::10")
    assert c.nodes[0].pod_cidrs == ("10.42.0.0/24", "fd00:42::/64")


def detector_is(mode: str) -> Callable[[Cluster], bool]:
    return lambda c: c.proxy.detect_local_mode == mode


def test_every_knob_is_reachable() -> None:
    """Each knob the model has is generated somewhere (find fails if one is unreachable)."""
    probes = {
        "LoadBalancer eTP Local": lambda c: any(s.health_check_node_port for s in c.services),
        "iTP Local": lambda c: any(s.internal_traffic_policy == "Local" for s in c.services),
        "ClientIP affinity": lambda c: any(s.session_affinity == "ClientIP" and s.affinity_timeout != 10800 for s in c.services),
        "externalIPs": lambda c: any(s.external_ips for s in c.services),
        "ipMode Proxy": lambda c: any(i.ip_mode == "Proxy" for s in c.services for i in s.lb_ingress),
        "source ranges": lambda c: any(s.lb_source_ranges for s in c.services),
        "serving+terminating": lambda c: any(e.serving and e.terminating for sl in c.slices for e in sl.endpoints),
        "not serving": lambda c: any(not e.serving for sl in c.slices for e in sl.endpoints),
        "no endpoints": lambda c: any(not any(sl.endpoints for sl in c.slices_for(s)) for s in c.services),
        "UDP": lambda c: any(p.protocol == "UDP" for s in c.services for p in s.ports),
        "SCTP": lambda c: any(p.protocol == "SCTP" for s in c.services for p in s.ports),
        "named targetPort, two slices": lambda c: any(
            isinstance(p.target_port, str) and len(c.slices_for(s)) == 2 for s in c.services for p in s.ports
        ),
        "three ports": lambda c: any(len(s.ports) == 3 for s in c.services),
        "LB without nodePorts": lambda c: any(s.type == "LoadBalancer" and not s.ports[0].node_port for s in c.services),
        "zone hints": lambda c: any(e.hint_zones for sl in c.slices for e in sl.endpoints),
        "masqueradeAll": lambda c: c.proxy.masquerade_all,
        "masqueradeBit 31": lambda c: c.proxy.masquerade_bit == 31,
        "nodePortAddresses primary": lambda c: c.proxy.node_port_addresses == ("primary",),
        "no localhost NodePorts": lambda c: not c.proxy.localhost_node_ports,
        "large cluster": lambda c: c.proxy.large_cluster_threshold == 1,
        "no terminating fallback": lambda c: not c.proxy.terminating_fallback,
        "client pod": lambda c: any(p.name.startswith("client-") for p in c.pods),
        **{f"detector {m or 'none'}": detector_is(m) for m in nvst.DETECTORS},
    }  # fmt: skip
    for what, probe in probes.items():
        c = find(nvst.clusters(), probe, settings=REACH)
        assert probe(c), what
    dual = find(
        nvst.clusters(families=(4, 6)),
        lambda c: any(s.ip_families == ("IPv6", "IPv4") for s in c.services),
        settings=REACH,
    )
    assert dual.services[0].cluster_ips[0].startswith("fd00:43::")


@given(nvst.clusters(families=(4, 6), max_nodes=2), st.data())
def test_packets_come_from_where_they_say(c: Cluster, data: st.DataObject) -> None:
    node = c.node(data.draw(nvst.node_names(c)))
    family = data.draw(st.sampled_from([4, 6]))
    p = data.draw(nvst.packets(c, node.name, family))
    assert isinstance(p, Packet)
    assert p.dst.version == family and p.src.version == family
    assert p.proto in ("tcp", "udp", "sctp") and 32768 <= p.sport <= 60999 and p.dport > 0
    local_pods = [net(pc) for pc in node.pod_cidrs]
    if p.origin == "pod":
        assert any(p.src in n for n in local_pods)
    elif p.origin == "host":
        lb = {i.ip for s in c.services for i in s.lb_ingress}
        assert str(p.src) in (*node.internal_ips, "127.0.0.1", *lb)
    else:
        assert not any(p.src in n for n in local_pods) and str(p.src) not in node.internal_ips


def test_packets_reach_every_destination_and_hairpin() -> None:
    """On a rich generated cluster, every address intent knows for the node is aimed at, and an
    endpoint on the node sends to its own Service (hairpin)."""

    def rich_service(c: Cluster, s: Service) -> bool:
        return bool(
            s.type == "LoadBalancer" and s.external_ips
            and any(i.ip_mode != "Proxy" for i in s.lb_ingress) and s.ports[0].node_port
            and any(e.node_name == "node-0" and e.ready for sl in c.slices_for(s) for e in sl.endpoints)
        )  # fmt: skip

    # kube-proxy's defaults: every local address (127.0.0.1 too) accepts NodePorts
    defaults = ProxyConfig(cluster_cidrs=("10.42.0.0/16",), detect_local_mode="ClusterCIDR")
    c = find(
        nvst.clusters(max_nodes=2, proxy=st.just(defaults)),
        lambda c: len(c.nodes) == 2 and any(rich_service(c, s) for s in c.services),
        settings=REACH,
    )
    dests = destinations(c, "node-0", 4)
    assert set(ADDRESS_CLASSES) <= {d.address_class for d in dests}
    wanted = {(d.ip, d.port, d.proto) for d in dests}
    seen: set[tuple[str, int, str]] = set()

    def all_seen(p: Packet) -> bool:  # one generation run that records what it aims at
        seen.add((str(p.dst), p.dport, p.proto))
        return wanted <= seen

    find(nvst.packets(c, "node-0"), all_seen, settings=REACH)
    assert wanted <= seen

    svc = next(s for s in c.services if rich_service(c, s))
    local_eps = {
        e.addresses[0] for sl in c.slices_for(svc) for e in sl.endpoints if e.node_name == "node-0"
    }
    hairpin = find(
        nvst.packets(c, "node-0"),
        lambda p: (
            p.origin == "pod" and str(p.src) in local_eps and str(p.dst) == svc.cluster_ips[0]
        ),
        settings=REACH,
    )
    assert hairpin.origin == "pod"


def test_importing_strategies_before_hypothesis_works() -> None:
    # Importing Hypothesis runs our entry point, which calls back into this very module while
    # it is still being imported; a fresh interpreter shows the order nat_verify-first works.
    code = (
        "import nat_verify.strategies\n"
        "from hypothesis import strategies as st\n"
        "from nat_verify.model.cluster import Cluster\n"
        "print(type(st.from_type(Cluster).wrapped_strategy).__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "CompositeStrategy"


def test_sample_clusters_is_reproducible() -> None:
    a = nvst.sample_clusters(8, seed=7)
    assert a == nvst.sample_clusters(8, seed=7)
    assert a != nvst.sample_clusters(8, seed=8)
    assert [c.name for c in a] == [f"random-7-{i}" for i in range(8)]
    for c in a:
        assert c.services  # min_services=1 by default: nothing to verify otherwise
        assert_consistent(c)
    assert nvst.sample_clusters(0) == []


# --- the generated clusters read back from Kubernetes YAML unchanged -----------------------


def service_doc(s: Service) -> dict[str, Any]:
    ports = []
    for p in s.ports:
        port: dict[str, Any] = {"port": p.port, "protocol": p.protocol, "targetPort": p.target_port}
        if p.name:
            port["name"] = p.name
        if p.node_port:
            port["nodePort"] = p.node_port
        ports.append(port)
    spec: dict[str, Any] = {
        "type": s.type,
        "clusterIPs": list(s.cluster_ips),
        "ipFamilies": list(s.ip_families),
        "selector": dict(s.selector or ()),
        "ports": ports,
        "internalTrafficPolicy": s.internal_traffic_policy,
        "sessionAffinity": s.session_affinity,
    }
    if s.session_affinity == "ClientIP":
        spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": s.affinity_timeout}}
    if s.type != "ClusterIP" or s.external_ips:  # the API rejects it elsewhere
        spec["externalTrafficPolicy"] = s.external_traffic_policy
    if s.external_ips:
        spec["externalIPs"] = list(s.external_ips)
    if s.lb_source_ranges:
        spec["loadBalancerSourceRanges"] = list(s.lb_source_ranges)
    if s.health_check_node_port:
        spec["healthCheckNodePort"] = s.health_check_node_port
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"namespace": s.namespace, "name": s.name},
        "spec": spec,
    }
    if s.lb_ingress:
        ingress = [
            {"ip": i.ip, **({"ipMode": i.ip_mode} if i.ip_mode else {})} for i in s.lb_ingress
        ]
        doc["status"] = {"loadBalancer": {"ingress": ingress}}
    return doc


def slice_doc(sl: EndpointSlice) -> dict[str, Any]:
    endpoints = []
    for e in sl.endpoints:
        ns, _, pod = e.target_pod.partition("/")
        ep: dict[str, Any] = {
            "addresses": list(e.addresses),
            "conditions": {"ready": e.ready, "serving": e.serving, "terminating": e.terminating},
            "nodeName": e.node_name,
            "targetRef": {"kind": "Pod", "namespace": ns, "name": pod},
        }
        if e.zone:
            ep["zone"] = e.zone
        if e.hint_zones is not None:
            ep["hints"] = {"forZones": [{"name": z} for z in e.hint_zones]}
        endpoints.append(ep)
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "namespace": sl.namespace,
            "name": sl.name,
            "labels": {"kubernetes.io/service-name": sl.service_name},
        },
        "addressType": sl.address_type,
        "ports": [{"name": p.name, "port": p.port, "protocol": p.protocol} for p in sl.ports],
        "endpoints": endpoints,
    }


def node_doc(n: Node) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": n.name, "labels": dict(n.labels)},
        "spec": {"podCIDRs": list(n.pod_cidrs)},
        "status": {"addresses": [{"type": "InternalIP", "address": a} for a in n.internal_ips]},
    }


def pod_doc(p: Pod) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": p.namespace, "name": p.name, "labels": dict(p.labels)}
    if p.terminating:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    ports = [
        {
            "containerPort": cp.port,
            "protocol": cp.protocol,
            **({"name": cp.name} if cp.name else {}),
        }
        for cp in p.ports
    ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "nodeName": p.node_name,
            "containers": [{"name": "app", "image": "app", "ports": ports}],
        },
        "status": {
            "phase": "Running",
            "podIPs": [{"ip": ip} for ip in p.ips],
            "conditions": [{"type": "Ready", "status": "True" if p.ready else "False"}],
        },
    }


def proxy_doc(cfg: ProxyConfig) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "metadata": {
            "annotations": {
                "nat-verify.io/mark-spelling": cfg.mark_spelling,
                "nat-verify.io/random-fully": str(cfg.random_fully).lower(),
                "nat-verify.io/nfacct": str(cfg.nfacct).lower(),
                "nat-verify.io/legacy-layout": str(cfg.legacy_layout).lower(),
                "nat-verify.io/large-cluster-threshold": str(cfg.large_cluster_threshold),
            }
        },
        "mode": "iptables",
        "clusterCIDR": ",".join(cfg.cluster_cidrs),
        "iptables": {
            "masqueradeAll": cfg.masquerade_all,
            "masqueradeBit": cfg.masquerade_bit,
            "localhostNodePorts": cfg.localhost_node_ports,
        },
        "nodePortAddresses": list(cfg.node_port_addresses),
        "featureGates": {"ProxyTerminatingEndpoints": cfg.terminating_fallback},
    }
    if cfg.detect_local_mode:
        doc["detectLocalMode"] = cfg.detect_local_mode
        doc["detectLocal"] = {
            "bridgeInterface": cfg.bridge_interface,
            "interfaceNamePrefix": cfg.interface_name_prefix,
        }
    return doc


def without_sources(c: Cluster) -> Cluster:
    def bare(objs: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(attrs.evolve(o, source=SourceRef()) for o in objs)

    return attrs.evolve(
        c,
        services=bare(c.services),
        slices=bare(c.slices),
        nodes=bare(c.nodes),
        pods=bare(c.pods),
        proxy=attrs.evolve(c.proxy, source=SourceRef()),
        name="",
        source=SourceRef(),
    )


@settings(max_examples=25)
@given(FAMILIES.flatmap(lambda f: nvst.clusters(families=f)))
def test_clusters_read_back_from_yaml_unchanged(c: Cluster) -> None:
    """Written as the Kubernetes objects they stand for, generated clusters pass the loader's
    API validation and read back as the same values (nothing relies on a state YAML cannot
    express)."""
    docs = [
        *map(service_doc, c.services),
        *map(slice_doc, c.slices),
        *map(node_doc, c.nodes),
        *map(pod_doc, c.pods),
        proxy_doc(c.proxy),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cluster.yaml"
        path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        loaded = load_cluster(path)
    assert without_sources(loaded) == without_sources(c)
