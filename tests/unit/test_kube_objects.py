"""The loader's newer inputs: workloads, v1 Endpoints, the kube-proxy ConfigMap, typed Lists,
unknown kinds, and the Pod fields that explain readiness; each in the shape the API returns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nat_verify.kube import KubeInputError, load_cluster
from nat_verify.kube.selection import readiness

DATA = Path(__file__).parent / "data"


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  clusterIP: 10.96.7.7
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
"""


def test_unknown_kinds_are_skipped_with_a_count_and_a_hint() -> None:
    c = load_cluster(DATA / "objects" / "unknown-kind.yaml")
    (skipped,) = c.skipped
    assert (skipped.kind, skipped.api_version, skipped.count, skipped.hint) == ("Servce", "v1", 1, "Service")
    assert skipped.first.line == 7
    assert [w.name for w in c.workloads] == ["ignored-on-purpose"]  # a Deployment is read now


def test_crds_are_counted_per_kind(tmp_path: Path) -> None:
    crd = "apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata: {name: c%d}\n"
    c = load_cluster(write(tmp_path, SERVICE + "".join("---\n" + crd % i for i in range(3))))
    assert [(s.kind, s.count, s.hint) for s in c.skipped] == [("Certificate", 3, "")]


def test_deployment_template_with_sidecar_ports(tmp_path: Path) -> None:
    deploy = """\
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
    matchExpressions: [{key: track, operator: In, values: [stable, canary]}]
  template:
    metadata: {labels: {app: web, track: stable}}
    spec:
      initContainers:
      - {name: migrate, image: "migrate:1", ports: [{name: ignored, containerPort: 1}]}
      - name: proxy
        image: envoy:1.30
        restartPolicy: Always
        ports: [{name: http, containerPort: 15001}]
      containers:
      - name: app
        image: web:2
        readinessProbe: {httpGet: {path: /, port: 8080}}
        ports: [{name: metrics, containerPort: 9090}]
"""
    c = load_cluster(write(tmp_path, SERVICE + deploy))
    (w,) = c.workloads
    assert (w.kind, w.replicas, dict(w.labels)) == ("Deployment", 3, {"app": "web", "track": "stable"})
    # containers first, then sidecars (init containers with restartPolicy Always), as FindPort searches
    assert [(p.name, p.port) for p in w.ports] == [("metrics", 9090), ("http", 15001)]
    assert [c.sidecar for c in w.containers] == [False, True] and w.containers[0].readiness_probe
    assert w.location("spec.template.metadata.labels") == f"{tmp_path / 'c.yaml'}:18"


def test_workload_selector_must_select_its_template(tmp_path: Path) -> None:
    bad = """\
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: shop}
spec:
  selector:
    matchLabels: {app: db}
  template:
    metadata: {labels: {app: database}}
    spec: {containers: [{name: db, image: postgres}]}
"""
    with pytest.raises(KubeInputError) as e:
        load_cluster(write(tmp_path, SERVICE + bad))
    assert e.value.line == 13 and "does not match the template's labels" in e.value.message


def test_replication_controller_selector_defaults_to_template_labels(tmp_path: Path) -> None:
    rc = """\
---
apiVersion: v1
kind: ReplicationController
metadata: {name: old, namespace: shop}
spec:
  replicas: 1
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx, ports: [{name: http, containerPort: 80}]}]}
"""
    (w,) = load_cluster(write(tmp_path, SERVICE + rc)).workloads
    assert w.selector.match_labels == (("app", "web"),)


def test_typed_list_items_take_the_lists_kind(tmp_path: Path) -> None:
    # what the API server (and kubectl cluster-info dump) sends: items without kind/apiVersion
    doc = {"kind": "ServiceList", "apiVersion": "v1", "metadata": {"resourceVersion": "7"},
           "items": [{"metadata": {"name": "a", "namespace": "x"},
                      "spec": {"clusterIP": "10.96.0.9", "ports": [{"port": 80}]}}]}  # fmt: skip
    c = load_cluster(write(tmp_path, json.dumps(doc, indent=4), "svc.json"))
    assert [s.key for s in c.services] == ["x/a"]


def test_concatenated_json_with_logs_reports_the_right_line(tmp_path: Path) -> None:
    text = (
        '{\n    "kind": "NodeList",\n    "apiVersion": "v1",\n    "items": []\n}\n'
        "==== START logs for container c of pod a/b ====\n{ not json\n==== END logs for container c of pod a/b ====\n"
        '{\n    "kind": "ServiceList",\n    "apiVersion": "v1"\n    "items": []\n}\n'
    )
    with pytest.raises(KubeInputError) as e:
        load_cluster(write(tmp_path, text, "dump.json"))
    # the stdlib names the line of the token after the missing comma, as for one document
    assert e.value.line == 12 and "Expecting ',' delimiter" in e.value.message


ENDPOINTS = """\
apiVersion: v1
kind: Service
metadata: {name: db, namespace: shop}
spec:
  clusterIP: 10.96.8.8
  ports: [{name: pg, port: 5432}]
---
apiVersion: v1
kind: Endpoints
metadata: {name: db, namespace: shop%s}
subsets:
- addresses: [{ip: 192.168.10.5, nodeName: n1}, {ip: "fd00::5"}]
  notReadyAddresses: [{ip: 192.168.10.6}]
  ports: [{name: pg, port: 5432, protocol: TCP}]
"""


def test_endpoints_of_a_selectorless_service_are_mirrored(tmp_path: Path) -> None:
    c = load_cluster(write(tmp_path, ENDPOINTS % ""))
    v4, v6 = sorted(c.slices, key=lambda s: s.address_type)
    assert (v4.origin, v4.address_type, v6.address_type) == ("mirrored", "IPv4", "IPv6")
    assert [(e.addresses[0], e.ready, e.serving, e.node_name) for e in v4.endpoints] == [
        ("192.168.10.5", True, True, "n1"), ("192.168.10.6", False, False, ""),
    ]  # fmt: skip
    assert [(p.name, p.port) for p in v4.ports] == [("pg", 5432)]
    assert v4.endpoints[0].line == 12  # findings point at the Endpoints' address
    assert any(n.invariant == "NV027" and "taken from the v1 Endpoints" in n.message for n in c.notes)


def test_skip_mirror_endpoints_are_not_mirrored_when_slices_are_given(tmp_path: Path) -> None:
    other = "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: o, namespace: shop, labels: {kubernetes.io/service-name: other}}\naddressType: IPv4\nendpoints: []\n"
    c = load_cluster(write(tmp_path, ENDPOINTS % ", labels: {endpointslice.kubernetes.io/skip-mirror: 'true'}" + other))
    assert [s.name for s in c.slices] == ["o"]
    (note,) = [n for n in c.notes if n.service == "shop/db"]
    assert note.invariant == "NV003" and "skip-mirror" in note.message


@pytest.mark.parametrize(("name", "key"), [("kube-proxy", "config.conf"), ("kube-proxy-config", "config")])
def test_kube_proxy_configuration_from_its_configmap_as_json(tmp_path: Path, name: str, key: str) -> None:
    conf = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nclusterCIDR: 10.244.0.0/16\niptables:\n  masqueradeBit: 14\n"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "kube-system"}, "data": {key: conf}}
    lst = {"apiVersion": "v1", "kind": "List", "items": [cm, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "other", "namespace": "kube-system"}, "data": {"config.conf": "junk: ["}}]}
    c = load_cluster([write(tmp_path, SERVICE), write(tmp_path, json.dumps(lst, indent=4), "cms.json")])
    assert c.proxy.cluster_cidrs == ("10.244.0.0/16",)
    bad = json.dumps({**lst, "items": [{**cm, "data": {key: conf.replace("/16", "/99")}}]}, indent=4)
    with pytest.raises(KubeInputError) as e:
        load_cluster([write(tmp_path, SERVICE), write(tmp_path, bad, "bad.json")])
    key_line = next(n for n, t in enumerate(bad.splitlines(), 1) if f'"{key}":' in t)
    assert e.value.line == key_line and f"ConfigMap kube-system/{name} data[{key}]" in e.value.message


def test_pod_status_explains_readiness(tmp_path: Path) -> None:
    pod = """\
---
apiVersion: v1
kind: Pod
metadata:
  name: web-7d9c-x1
  namespace: shop
  labels: {app: web, pod-template-hash: 7d9c}
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-7d9c, controller: true, uid: u1}]
spec:
  nodeName: n1
  readinessGates: [{conditionType: target-health.elbv2.k8s.aws/web}]
  containers: [{name: web, image: web:1, ports: [{name: http, containerPort: 8080}]}]
status:
  phase: Running
  podIP: 10.244.1.9
  podIPs: [{ip: 10.244.1.9}]
  conditions:
  - {type: Initialized, status: "True"}
  - {type: Ready, status: "False", reason: ReadinessGatesNotReady, message: "corresponding condition of pod readiness gate is not true"}
  - {type: ContainersReady, status: "True"}
  - {type: PodScheduled, status: "True"}
  containerStatuses:
  - {name: web, ready: true, restartCount: 0, state: {running: {startedAt: "2026-11-30T08:00:00Z"}}}
"""
    c = load_cluster(write(tmp_path, SERVICE + pod))
    (p,) = c.pods
    assert (p.ready, p.phase, p.owner.kind if p.owner else "") == (False, "Running", "ReplicaSet")
    assert readiness(p).reasons == ("readiness gate target-health.elbv2.k8s.aws/web is not set",)
    assert p.location("status.conditions") == f"{tmp_path / 'c.yaml'}:24"
