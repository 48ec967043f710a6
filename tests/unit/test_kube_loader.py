"""Loading Kubernetes objects: the example specs, API defaults, Lists, JSON, lines, synthesis.

Expected values are the ones written in the spec files, the defaults the Kubernetes API
reference documents (protocol TCP, targetPort = port, type ClusterIP, sessionAffinity None
with a 10800 s ClientIP timeout, traffic policies Cluster, EndpointSlice conditions ready
nil = true, serving nil = ready, terminating nil = false) and the EndpointSlice controller's
rules for synthesised slices (explained at each test).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nat_verify.kube import load_cluster, load_clusters
from nat_verify.model.cluster import (
    Cluster,
    ContainerPort,
    Endpoint,
    EndpointPort,
    ProxyConfig,
    ServicePort,
)

SPECS = Path(__file__).resolve().parents[2] / "specs"
SPEC_NAMES = [
    "control-plane",
    "deployment",
    "dual-stack",
    "etp-local",
    "hostnetwork-daemonset",
    "itp-local",
    "loadbalancer-source-ranges",
    "named-targetport",
    "no-endpoints",
    "pods-only",
    "rollout-terminating",
    "session-affinity",
    "web-svc",
]


def spec(name: str) -> Cluster:
    return load_cluster([SPECS / f"{name}.yaml"])


def load_text(tmp_path: Path, text: str, name: str = "c.yaml") -> Cluster:
    path = tmp_path / name
    path.write_text(text)
    return load_cluster([path])


# -- the example specs ------------------------------------------------------------------------


@pytest.mark.parametrize("name", SPEC_NAMES)
def test_every_spec_loads(name: str) -> None:
    path = SPECS / f"{name}.yaml"
    assert path.read_text().startswith("# "), "a spec starts with a comment saying what it shows"
    cluster = load_cluster([path])
    assert cluster.name == name
    assert [n.name for n in cluster.nodes] == ["node-1", "node-2"]
    assert cluster.services
    for svc in cluster.services:
        assert cluster.slices_for(svc), f"{svc.key} has no EndpointSlice"
        assert svc.source.file == str(path) and svc.source.line > 0
    assert cluster.proxy.cluster_cidrs[0] == "10.42.0.0/16"
    assert cluster.proxy.detect_local_mode == "ClusterCIDR"


def test_load_clusters_of_the_spec_directory() -> None:
    clusters = load_clusters([SPECS])
    assert [c.name for c in clusters] == SPEC_NAMES  # sorted by file name
    assert len(clusters) >= 10


def test_web_svc() -> None:
    c = spec("web-svc")
    (svc,) = c.services
    assert (svc.namespace, svc.name, svc.type) == ("default", "web-svc", "NodePort")
    assert svc.cluster_ips == ("10.43.0.15",)
    assert svc.selector == (("app", "nginx"),)
    assert svc.ports == (
        ServicePort(port=80, protocol="TCP", name="http", target_port=8080, node_port=30080),
    )
    assert svc.external_traffic_policy == "Cluster"  # defaulted for NodePort
    assert svc.ip_families == ("IPv4",)
    n1, n2 = c.nodes
    assert (n1.internal_ips, n1.pod_cidrs) == (("192.168.1.10",), ("10.42.1.0/24",))
    assert (n2.internal_ips, n2.pod_cidrs) == (("192.168.1.11",), ("10.42.2.0/24",))
    (es,) = c.slices
    assert es.service_name == "web-svc" and es.address_type == "IPv4"
    assert es.ports == (EndpointPort(port=8080, protocol="TCP", name="http"),)
    assert [(e.addresses, e.node_name, e.ready) for e in es.endpoints] == [
        (("10.42.1.7",), "node-1", True),
        (("10.42.2.3",), "node-2", True),
    ]
    assert [(p.name, p.ips, p.node_name, p.ready) for p in c.pods] == [
        ("nginx-1", ("10.42.1.7",), "node-1", True),
        ("nginx-2", ("10.42.2.3",), "node-2", True),
    ]
    assert c.proxy.cluster_cidrs == ("10.42.0.0/16",)
    assert c.proxy.masquerade_bit == 14 and c.proxy.localhost_node_ports


def test_etp_local() -> None:
    c = spec("etp-local")
    (svc,) = c.services
    assert svc.type == "LoadBalancer"
    assert svc.external_traffic_policy == "Local"
    assert svc.health_check_node_port == 32081
    assert [i.ip for i in svc.lb_ingress] == ["203.0.113.10"]
    assert [e.node_name for s in c.slices for e in s.endpoints] == ["node-1"]


def test_itp_local_and_session_affinity() -> None:
    (svc,) = spec("itp-local").services
    assert (svc.internal_traffic_policy, svc.external_traffic_policy) == ("Local", "Cluster")
    (sticky,) = spec("session-affinity").services
    assert (sticky.session_affinity, sticky.affinity_timeout) == ("ClientIP", 600)


def test_loadbalancer_source_ranges() -> None:
    c = spec("loadbalancer-source-ranges")
    lb, ext = c.services
    assert lb.lb_source_ranges == ("198.51.100.0/24", "192.168.1.0/24")
    assert [(i.ip, i.ip_mode) for i in lb.lb_ingress] == [("203.0.113.20", "VIP")]
    assert ext.type == "ClusterIP" and ext.external_ips == ("203.0.113.30",)
    assert ext.lb_source_ranges == ()


def test_no_endpoints_and_rollout() -> None:
    c = spec("no-endpoints")
    eps = [e for s in c.slices for e in s.endpoints]
    assert eps and not any(e.ready or e.serving for e in eps)
    assert c.services[0].selector is None and not c.pods
    c = spec("rollout-terminating")
    eps = [e for s in c.slices for e in s.endpoints]
    assert not any(e.ready for e in eps)
    assert all(e.terminating for e in eps)
    assert [e.serving for e in eps] == [True, True, False]


def test_dual_stack() -> None:
    c = spec("dual-stack")
    (svc,) = c.services
    assert svc.cluster_ips == ("10.43.0.50", "fd00:43::32")
    assert svc.ip_families == ("IPv4", "IPv6")
    assert sorted(s.address_type for s in c.slices) == ["IPv4", "IPv6"]
    assert c.nodes[0].internal_ips == ("192.168.1.10", "fd00:192::10")
    assert c.nodes[0].pod_cidrs == ("10.42.1.0/24", "fd00:42:0:1::/64")
    assert c.proxy.cluster_cidrs == ("10.42.0.0/16", "fd00:42::/56")


def test_named_targetport_stays_a_name() -> None:
    c = spec("named-targetport")
    (svc,) = c.services
    assert svc.namespace == "kube-system"
    assert [(p.name, p.protocol, p.port, p.target_port) for p in svc.ports] == [
        ("dns", "UDP", 53, "dns"),
        ("dns-tcp", "TCP", 53, "dns-tcp"),
        ("web", "TCP", 80, "http"),
    ]
    (es,) = c.slices
    assert {p.name: (p.port, p.protocol) for p in es.ports} == {
        "dns": (5353, "UDP"),
        "dns-tcp": (5353, "TCP"),
        "web": (8080, "TCP"),
    }
    assert c.pods[0].ports[0] == ContainerPort(port=5353, protocol="UDP", name="dns")


def test_pods_only_synthesises_the_controllers_slice() -> None:
    # The spec's comment lists the expectation: api-1 and api-2 ready, api-3 not ready (its
    # Ready condition is False); api-old is Succeeded, api-x in another namespace, db-1 has
    # other labels. targetPort "http" is container port 8080, named after the Service port.
    c = spec("pods-only")
    (svc,) = c.services
    (es,) = c.slices_for(svc)
    assert es.address_type == "IPv4"
    assert es.ports == (EndpointPort(port=8080, protocol="TCP", name="http"),)
    assert [
        (e.addresses, e.node_name, e.ready, e.serving, e.terminating, e.target_pod)
        for e in es.endpoints
    ] == [
        (("10.42.1.21",), "node-1", True, True, False, "default/api-1"),
        (("10.42.2.21",), "node-2", True, True, False, "default/api-2"),
        (("10.42.2.22",), "node-2", False, False, False, "default/api-3"),
    ]
    assert es.source == svc.source  # findings about it point at the Service
    assert len(c.pods) == 6  # every Pod is kept, selected or not


# -- defaults ---------------------------------------------------------------------------------

MINIMAL_SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: s}
spec:
  selector: {app: s}
  clusterIP: 10.43.0.9
  ports:
    - port: 8080
"""


def test_service_defaults(tmp_path: Path) -> None:
    c = load_text(tmp_path, MINIMAL_SERVICE)
    (svc,) = c.services
    assert svc.namespace == "default"
    assert svc.type == "ClusterIP"
    assert svc.ports == (ServicePort(port=8080, protocol="TCP", name="", target_port=8080),)
    assert svc.session_affinity == "None" and svc.affinity_timeout == 10800
    assert svc.external_traffic_policy == "Cluster"
    assert svc.internal_traffic_policy == "Cluster"
    assert svc.cluster_ips == ("10.43.0.9",)
    assert svc.ip_families == ("IPv4",)  # from clusterIPs
    assert c.slices == ()  # no Pods given: nothing to synthesise from
    assert c.proxy == ProxyConfig()  # no KubeProxyConfiguration: kube-proxy defaults


def test_client_ip_affinity_default_timeout(tmp_path: Path) -> None:
    c = load_text(
        tmp_path, MINIMAL_SERVICE.replace("spec:\n", "spec:\n  sessionAffinity: ClientIP\n")
    )
    assert (c.services[0].session_affinity, c.services[0].affinity_timeout) == ("ClientIP", 10800)


def test_ipv6_addresses_are_canonical(tmp_path: Path) -> None:
    text = MINIMAL_SERVICE.replace("clusterIP: 10.43.0.9", 'clusterIP: "FD00:43:0:0::0032"')
    (svc,) = load_text(tmp_path, text).services
    assert svc.cluster_ips == ("fd00:43::32",) and svc.ip_families == ("IPv6",)


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ("{}", (True, True, False)),  # all nil
        ("{ready: false}", (False, False, False)),  # serving nil defers to ready
        ("{ready: false, serving: true, terminating: true}", (False, True, True)),
        ("{serving: false}", (True, False, False)),
        ("{terminating: true}", (True, True, True)),
    ],
)
def test_endpoint_condition_defaults(
    tmp_path: Path, conditions: str, expected: tuple[bool, bool, bool]
) -> None:
    text = (
        MINIMAL_SERVICE
        + f"""---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: s-1
  labels: {{kubernetes.io/service-name: s}}
addressType: IPv4
ports: [{{port: 8080}}]
endpoints:
  - addresses: [10.42.1.5]
    conditions: {conditions}
"""
    )
    (es,) = load_text(tmp_path, text).slices
    (ep,) = es.endpoints
    assert (ep.ready, ep.serving, ep.terminating) == expected
    assert es.ports == (EndpointPort(port=8080, protocol="TCP", name=""),)


def test_endpoint_without_conditions_and_with_hints(tmp_path: Path) -> None:
    text = """\
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: s-1, namespace: ns, labels: {kubernetes.io/service-name: s}}
addressType: IPv6
endpoints:
  - addresses: ["fd00:42::5"]
    zone: z1
    hints: {forZones: [{name: z1}]}
    targetRef: {kind: Pod, namespace: ns, name: p}
"""
    (es,) = load_text(tmp_path, text).slices
    assert es.endpoints == (
        Endpoint(addresses=("fd00:42::5",), zone="z1", hint_zones=("z1",), target_pod="ns/p"),
    )


def test_proxy_config_fields(tmp_path: Path) -> None:
    text = """\
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clusterCIDR: "10.42.0.0/16, fd00:42::/56"
detectLocalMode: InterfaceNamePrefix
detectLocal: {interfaceNamePrefix: veth, bridgeInterface: cni0}
nodePortAddresses: [192.168.1.0/24, primary]
iptables:
  masqueradeAll: true
  masqueradeBit: 15
  localhostNodePorts: false
"""
    p = load_text(tmp_path, text).proxy
    assert p.cluster_cidrs == ("10.42.0.0/16", "fd00:42::/56")
    assert p.detect_local_mode == "InterfaceNamePrefix"
    assert (p.interface_name_prefix, p.bridge_interface) == ("veth", "cni0")
    assert p.node_port_addresses == ("192.168.1.0/24", "primary")
    assert p.masquerade_all and p.masquerade_bit == 15 and p.masquerade_mark == 0x8000
    assert not p.localhost_node_ports
    assert p.source.line == 1


def test_proxy_config_detector_defaults(tmp_path: Path) -> None:
    head = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
    # kube-proxy's default mode is ClusterCIDR; without a cluster CIDR that is no detector.
    assert load_text(tmp_path, head).proxy.detect_local_mode == ""
    assert load_text(tmp_path, head + "clusterCIDR: 10.42.0.0/16\n").proxy.detect_local_mode == (
        "ClusterCIDR"
    )
    nodecidr = load_text(tmp_path, head + "detectLocalMode: NodeCIDR\n").proxy
    assert (nodecidr.detect_local_mode, nodecidr.cluster_cidrs) == ("NodeCIDR", ())
    assert load_text(tmp_path, head + "masqueradeAll: true\n").proxy.masquerade_all


def test_node_pod_cidrs_do_not_become_a_cluster_cidr(tmp_path: Path) -> None:
    text = """\
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {topology.kubernetes.io/zone: z1}}
spec: {podCIDR: 10.42.1.0/24}
status:
  addresses:
    - {type: ExternalIP, address: 203.0.113.5}
    - {type: Hostname, address: n1}
    - {type: InternalIP, address: 192.168.1.10}
"""
    c = load_text(tmp_path, text)
    (node,) = c.nodes
    assert node.internal_ips == ("192.168.1.10", "203.0.113.5")  # InternalIP first
    assert node.pod_cidrs == ("10.42.1.0/24",)  # the singular podCIDR when podCIDRs is absent
    assert node.zone == "z1"
    assert c.proxy.cluster_cidrs == () and c.proxy.detect_local_mode == ""


def test_source_ranges_from_the_annotation(tmp_path: Path) -> None:
    text = """\
apiVersion: v1
kind: Service
metadata:
  name: lb
  annotations:
    service.beta.kubernetes.io/load-balancer-source-ranges: "198.51.100.0/24, 10.0.0.1/8"
spec:
  type: LoadBalancer
  selector: {app: lb}
  ports: [{port: 80, nodePort: 30001}]
"""
    (svc,) = load_text(tmp_path, text).services
    # Host bits are cleared as Go's ParseCIDR (and iptables-save) do.
    assert svc.lb_source_ranges == ("198.51.100.0/24", "10.0.0.0/8")
    assert svc.ports[0].node_port == 30001


def test_headless_and_externalname_need_no_slices(tmp_path: Path) -> None:
    text = """\
apiVersion: v1
kind: Service
metadata: {name: headless}
spec: {clusterIP: None, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: ext}
spec: {type: ExternalName, externalName: db.example.com}
"""
    headless, ext = load_text(tmp_path, text).services
    assert headless.cluster_ips == ("None",) and headless.selector is None
    assert ext.type == "ExternalName" and ext.ports == ()


# -- input forms and lines --------------------------------------------------------------------

MULTI_DOC = """\
# line 1: a comment before the first document
apiVersion: v1
kind: Node
metadata:
  name: n1
---
---
# line 8: an empty document above, a comment here
apiVersion: apps/v1
kind: Deployment
metadata: {name: ignored}
---
apiVersion: v1
kind: Service
metadata: {name: s, namespace: ns}
spec:
  selector: {app: s}
  ports: [{port: 80}]
---

apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: s-1, namespace: ns, labels: {kubernetes.io/service-name: s}}
addressType: IPv4
endpoints: []
"""


def test_lines_of_objects_in_a_multi_document_file(tmp_path: Path) -> None:
    c = load_text(tmp_path, MULTI_DOC)
    # Counted in MULTI_DOC: each object's line is the line of its first key.
    assert c.nodes[0].source.line == 2
    assert c.services[0].source.line == 13
    assert c.slices[0].source.line == 21
    assert c.services[0].source.file == str(tmp_path / "c.yaml")
    assert str(c.services[0].source) == f"{tmp_path / 'c.yaml'}:13"
    assert [s.name for s in c.services] == ["s"]  # the Deployment is skipped


def test_kind_list_from_kubectl_get_yaml(tmp_path: Path) -> None:
    text = """\
apiVersion: v1
items:
- apiVersion: v1
  kind: Service
  metadata:
    name: a
    namespace: default
  spec:
    clusterIP: 10.43.0.1
    ports:
    - port: 443
      protocol: TCP
      targetPort: 6443
    selector:
      app: a
- apiVersion: v1
  kind: Pod
  metadata:
    name: a-1
    labels:
      app: a
  spec:
    nodeName: n1
    containers: []
  status:
    podIP: 10.42.1.2
kind: List
metadata:
  resourceVersion: ""
"""
    c = load_text(tmp_path, text)
    assert [s.source.line for s in c.services] == [3]  # the "- apiVersion" line of the item
    assert [p.source.line for p in c.pods] == [16]
    (svc,) = c.services
    assert svc.ports[0].target_port == 6443
    # The Pod has no Ready condition at all: a hand-written running Pod, taken as Ready.
    (es,) = c.slices
    assert [e.addresses for e in es.endpoints] == [("10.42.1.2",)]
    assert es.ports == (EndpointPort(port=6443, protocol="TCP", name=""),)


def test_json_list_and_typed_list(tmp_path: Path) -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "n1"},
                "status": {"addresses": [{"type": "InternalIP", "address": "192.168.1.10"}]},
            },
            {
                "apiVersion": "v1",
                "kind": "ServiceList",
                "items": [
                    {
                        "apiVersion": "v1",
                        "kind": "Service",
                        "metadata": {"name": "s"},
                        "spec": {
                            "clusterIPs": ["10.43.0.7"],
                            "selector": {"app": "s"},
                            "ports": [{"port": 53, "protocol": "UDP", "targetPort": "dns"}],
                        },
                    },
                ],
            },
        ],
    }
    path = tmp_path / "state.json"
    path.write_text(json.dumps(doc, indent=2))
    c = load_cluster([path])
    assert c.nodes[0].internal_ips == ("192.168.1.10",)
    (svc,) = c.services
    assert svc.ports == (ServicePort(port=53, protocol="UDP", target_port="dns"),)
    # json.dumps(indent=2) puts each object's "{" on its own line; find them independently.
    lines = path.read_text().splitlines()
    node_line = next(i for i, t in enumerate(lines, 1) if '"name": "n1"' in t)
    svc_line = next(i for i, t in enumerate(lines, 1) if '"name": "s"' in t)
    assert c.nodes[0].source.line < node_line and lines[c.nodes[0].source.line - 1].strip() == "{"
    assert svc.source.line < svc_line and lines[svc.source.line - 1].strip() == "{"


def test_directory_is_read_recursively_and_sorted(tmp_path: Path) -> None:
    node = "apiVersion: v1\nkind: Node\nmetadata: {{name: {}}}\n"
    (tmp_path / "b.yaml").write_text(node.format("b"))
    (tmp_path / "a.yml").write_text(node.format("a"))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.json").write_text(
        '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "c"}}'
    )
    (tmp_path / "notes.txt").write_text("kind: Node\n")  # not a spec suffix
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "x.yaml").write_text(node.format("hidden"))
    c = load_cluster([tmp_path])
    assert [n.name for n in c.nodes] == ["a", "b", "c"]
    assert c.name == tmp_path.name


def test_load_clusters_splits_files_and_subdirectories(tmp_path: Path) -> None:
    node = "apiVersion: v1\nkind: Node\nmetadata: {{name: {}}}\n"
    (tmp_path / "one.yaml").write_text(node.format("n1"))
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "x.yaml").write_text(node.format("n1"))  # same name, other cluster
    (tmp_path / "two" / "y.yaml").write_text(node.format("n2"))
    (tmp_path / "README.md").write_text("# not a spec\n")
    clusters = load_clusters([tmp_path])
    assert [(c.name, [n.name for n in c.nodes]) for c in clusters] == [
        ("one", ["n1"]),
        ("two", ["n1", "n2"]),
    ]
    (single,) = load_clusters([tmp_path / "one.yaml"])
    assert single.name == "one"


def test_several_paths_make_one_cluster(tmp_path: Path) -> None:
    (tmp_path / "svc.yaml").write_text(MINIMAL_SERVICE)
    (tmp_path / "pods.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {app: s}}\n"
        "status: {podIP: 10.42.1.9}\n"
    )
    c = load_cluster([tmp_path / "svc.yaml", tmp_path / "pods.yaml"])
    assert c.name == ""
    assert [e.addresses for s in c.slices for e in s.endpoints] == [("10.42.1.9",)]


# -- synthesis --------------------------------------------------------------------------------

SYNTH_SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: s, namespace: ns}
spec:
  selector: {app: s}
  clusterIPs: [10.43.0.9, "fd00:43::9"]
  publishNotReadyAddresses: PUBLISH
  ports:
    - {name: web, port: 80, targetPort: http}
    - {name: dns, port: 53, protocol: UDP, targetPort: 5353}
"""

SYNTH_POD = """\
---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: ns
  labels: {{app: s}}
  {deletion}
spec:
  nodeName: node-1
  containers:
    - name: c
      ports: {ports}
status:
  podIPs: {ips}
  conditions: [{{type: Ready, status: "{ready}"}}]
"""


def synth_pod(
    name: str,
    *,
    ports: str = "[{name: http, containerPort: 8080}]",
    ips: str = "[{ip: 10.42.1.5}]",
    ready: str = "True",
    deleting: bool = False,
) -> str:
    deletion = 'deletionTimestamp: "2024-01-01T00:00:00Z"' if deleting else ""
    return SYNTH_POD.format(name=name, ports=ports, ips=ips, ready=ready, deletion=deletion)


def test_synthesis_groups_by_family_and_resolved_ports(tmp_path: Path) -> None:
    text = (
        SYNTH_SERVICE.replace("PUBLISH", "false")
        + synth_pod("p1", ips='[{ip: 10.42.1.5}, {ip: "fd00:42::5"}]')
        # p2 has no container port named "http": the controller leaves out the web port for it,
        # so p2 lands in a slice of its own with only dns.
        + synth_pod("p2", ports="[{name: other, containerPort: 9090}]", ips="[{ip: 10.42.1.6}]")
    )
    c = load_text(tmp_path, text)
    got = {(s.address_type, s.ports): [e.addresses for e in s.endpoints] for s in c.slices}
    web = EndpointPort(port=8080, protocol="TCP", name="web")
    dns = EndpointPort(port=5353, protocol="UDP", name="dns")
    assert got == {
        ("IPv4", (web, dns)): [("10.42.1.5",)],
        ("IPv4", (dns,)): [("10.42.1.6",)],
        ("IPv6", (web, dns)): [("fd00:42::5",)],
    }
    assert all(s.service_name == "s" and s.namespace == "ns" for s in c.slices)


def test_synthesised_conditions_follow_the_controller(tmp_path: Path) -> None:
    # serving = pod Ready; terminating = deletionTimestamp; ready = serving and not terminating.
    text = (
        SYNTH_SERVICE.replace("PUBLISH", "false").replace(', "fd00:43::9"', "")
        + synth_pod("ready", ips="[{ip: 10.42.1.1}]")
        + synth_pod("unready", ips="[{ip: 10.42.1.2}]", ready="False")
        + synth_pod("draining", ips="[{ip: 10.42.1.3}]", deleting=True)
        + synth_pod("gone", ips="[{ip: 10.42.1.4}]", ready="False", deleting=True)
    )
    (es,) = load_text(tmp_path, text).slices
    assert [(e.addresses[0], e.ready, e.serving, e.terminating) for e in es.endpoints] == [
        ("10.42.1.1", True, True, False),
        ("10.42.1.2", False, False, False),
        ("10.42.1.3", False, True, True),
        ("10.42.1.4", False, False, True),
    ]


def test_publish_not_ready_addresses_makes_every_endpoint_ready(tmp_path: Path) -> None:
    text = SYNTH_SERVICE.replace("PUBLISH", "true").replace(', "fd00:43::9"', "") + synth_pod(
        "unready", ips="[{ip: 10.42.1.2}]", ready="False"
    )
    (es,) = load_text(tmp_path, text).slices
    assert [(e.ready, e.serving) for e in es.endpoints] == [(True, False)]


def test_placeholder_slice_when_no_pod_matches(tmp_path: Path) -> None:
    other = synth_pod("p", ips="[{ip: 10.42.1.2}]").replace("{app: s}", "{app: other}")
    text = SYNTH_SERVICE.replace("PUBLISH", "false").replace(', "fd00:43::9"', "") + other
    c = load_text(tmp_path, text)
    (es,) = c.slices
    assert (es.endpoints, es.ports, es.address_type) == ((), (), "IPv4")


def test_explicit_slices_win_over_pods(tmp_path: Path) -> None:
    text = (
        MINIMAL_SERVICE + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {app: s}}\n"
        "status: {podIP: 10.42.1.9}\n"
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"
        "metadata: {name: s-x, labels: {kubernetes.io/service-name: s}}\n"
        "addressType: IPv4\nendpoints: [{addresses: [10.42.1.77]}]\n"
    )
    (es,) = load_text(tmp_path, text).slices
    assert es.name == "s-x"
    assert es.endpoints[0].addresses == ("10.42.1.77",)


def test_deployment_spec_synthesises_the_slice_from_its_pods() -> None:
    c = spec("deployment")
    (w,) = c.workloads
    assert (w.kind, w.name, w.replicas) == ("Deployment", "api", 2)
    (s,) = c.slices
    assert s.origin == "synthesised"
    # targetPort "http" is container port 8080 on both Pods; nodeName from each Pod
    assert [(e.addresses, e.node_name, e.ready) for e in s.endpoints] == [
        (("10.42.1.30",), "node-1", True), (("10.42.2.30",), "node-2", True),
    ]  # fmt: skip
    assert [(p.name, p.port) for p in s.ports] == [("http", 8080)]
