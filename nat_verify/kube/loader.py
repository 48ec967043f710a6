"""Files -> ``Cluster``: dispatch each object by kind, check the set as a whole, fill gaps.

Kinds read: Service, EndpointSlice, Endpoints (v1), Node, Pod, KubeProxyConfiguration, the
workloads with Pod templates (Deployment, StatefulSet, DaemonSet, ReplicaSet,
ReplicationController) and the ConfigMap that holds kube-proxy's configuration. Well-known kinds
that do not affect Service networking (Secrets, RBAC, Events...) are skipped silently; any other
kind (a CustomResource, a kind nat-verify does not know, or a misspelt one) is skipped and counted
in ``Cluster.skipped``, with the kind it may be a misspelling of, so a whole application or Helm
release can be given and nothing is dropped without a word.

Endpoints of a Service, in order of preference: its EndpointSlices as given; for a Service with a
selector and Pods in the input, the slices the EndpointSlice controller would write
(``synthesis``); its v1 Endpoints, converted (``endpoints``); otherwise none. A Service without a
selector and without either has no endpoints, as kube-proxy sees it (its traffic is rejected),
and the cluster carries a note saying so.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from pathlib import Path

import attrs

from nat_verify.kube.configmap import proxy_config_key, read_proxy_configmap
from nat_verify.kube.documents import RawObject, read_file, spec_files
from nat_verify.kube.endpoints import read_endpoints, slices_from_endpoints
from nat_verify.kube.endpointslice import read_endpointslice
from nat_verify.kube.errors import KubeInputError
from nat_verify.kube.fields import Fields
from nat_verify.kube.node import read_node
from nat_verify.kube.pod import read_pod
from nat_verify.kube.proxyconfig import read_proxy_config
from nat_verify.kube.selection import SelectionIndex
from nat_verify.kube.service import read_service
from nat_verify.kube.servicecidr import read_service_cidr
from nat_verify.kube.synthesis import synthesise_slices
from nat_verify.kube.workload import API_VERSIONS as WORKLOAD_API_VERSIONS
from nat_verify.kube.workload import read_workload
from nat_verify.model.cluster import (
    Cluster,
    EndpointSlice,
    LegacyEndpoints,
    LoadNote,
    Node,
    Pod,
    ProxyConfig,
    Service,
    SkippedKind,
    SourceRef,
    Workload,
)

API_VERSIONS = {
    "Service": "v1",
    "EndpointSlice": "discovery.k8s.io/v1",
    "Endpoints": "v1",
    "Node": "v1",
    "Pod": "v1",
    "KubeProxyConfiguration": "kubeproxy.config.k8s.io/v1alpha1",
    "ServiceCIDR": "networking.k8s.io/v1",
}
# earlier API versions read the same (ServiceCIDR was beta in 1.31 and 1.32)
OTHER_API_VERSIONS = {"ServiceCIDR": ("networking.k8s.io/v1beta1",)}
READ_KINDS = (*API_VERSIONS, *WORKLOAD_API_VERSIONS, "ConfigMap")

# Kinds that carry nothing kube-proxy reads, skipped without a count.
IGNORED_KINDS = frozenset(
    {
        "APIService",
        "Binding",
        "CSIDriver",
        "CSINode",
        "CSIStorageCapacity",
        "CertificateSigningRequest",
        "ClusterRole",
        "ClusterRoleBinding",
        "ComponentStatus",
        "ControllerRevision",
        "CronJob",
        "CustomResourceDefinition",
        "Event",
        "FlowSchema",
        "HorizontalPodAutoscaler",
        "Ingress",
        "IngressClass",
        "IPAddress",
        "Job",
        "KubeletConfiguration",
        "Lease",
        "LimitRange",
        "MutatingWebhookConfiguration",
        "Namespace",
        "NetworkPolicy",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "PodDisruptionBudget",
        "PodTemplate",
        "PriorityClass",
        "PriorityLevelConfiguration",
        "ResourceQuota",
        "Role",
        "RoleBinding",
        "RuntimeClass",
        "Secret",
        "ServiceAccount",
        "StorageClass",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ValidatingWebhookConfiguration",
        "VolumeAttachment",
    }
)


def load_cluster(paths: Sequence[str | Path] | str | Path, *, name: str | None = None) -> Cluster:
    """One cluster from every object in every spec file under ``paths`` (sorted, recursive)."""
    roots = [Path(p) for p in ([paths] if isinstance(paths, str | Path) else paths)]
    if not roots:
        raise KubeInputError("<arguments>", 0, "no input path given")
    objects: list[RawObject] = []
    for root in roots:
        files = spec_files(root)
        if not files:
            raise KubeInputError(str(root), 0, "no *.yaml, *.yml or *.json files in this directory")
        for file in files:
            objects.extend(read_file(file))
    if name is None:
        name = _cluster_name(roots[0]) if len(roots) == 1 else ""
    return build_cluster(objects, name=name, source=SourceRef(str(roots[0]), 0))


def load_clusters(paths: Sequence[str | Path] | str | Path) -> list[Cluster]:
    """Each spec file, and each subdirectory, of the given directories is its own cluster,
    named after it; a path that is a file is one cluster."""
    roots = [Path(p) for p in ([paths] if isinstance(paths, str | Path) else paths)]
    clusters: list[Cluster] = []
    for root in roots:
        if root.is_file():
            clusters.append(load_cluster([root]))
            continue
        if not root.is_dir():
            raise KubeInputError(str(root), 0, "no such file or directory")
        members = sorted(
            p
            for p in root.iterdir()
            if not p.name.startswith(".")
            and (p.is_dir() or (p.is_file() and p.suffix in (".yaml", ".yml", ".json")))
        )
        for member in members:
            if member.is_dir() and not spec_files(member):
                continue  # e.g. a directory of notes or scripts next to the specs
            clusters.append(load_cluster([member]))
        if not members:
            raise KubeInputError(str(root), 0, "no *.yaml, *.yml or *.json files in this directory")
    return clusters


def _cluster_name(path: Path) -> str:
    return path.stem if path.is_file() else path.name


def build_cluster(
    objects: Sequence[RawObject], *, name: str = "", source: SourceRef | None = None
) -> Cluster:
    """The cluster made of already-read objects (kept public for tests and generators)."""
    services: list[Service] = []
    slices: list[EndpointSlice] = []
    nodes: list[Node] = []
    pods: list[Pod] = []
    workloads: list[Workload] = []
    legacy: list[LegacyEndpoints] = []
    proxy: ProxyConfig | None = None
    service_cidrs: list[str] = []
    seen: dict[tuple[str, str, str], SourceRef] = {}
    skipped: dict[tuple[str, str], SkippedKind] = {}

    def once(kind: str, namespace: str, obj_name: str, src: SourceRef) -> None:
        key = (kind, namespace, obj_name)
        if key in seen:
            shown = f"{namespace}/{obj_name}" if namespace else obj_name
            raise KubeInputError(
                src.file, src.line, f"duplicate {kind} {shown} (first defined at {seen[key]})"
            )
        seen[key] = src

    def set_proxy(config: ProxyConfig, obj: RawObject) -> None:
        nonlocal proxy
        if proxy is not None:
            raise KubeInputError(
                obj.file,
                obj.line,
                "duplicate KubeProxyConfiguration "
                f"(first defined at {proxy.source}); a cluster has one",
            )
        proxy = config

    for obj in objects:
        kind = _kind(obj)
        if kind is None:
            continue
        if kind == "?":
            _skip(skipped, obj)
        elif kind == "Service":
            svc = read_service(obj)
            once(kind, svc.namespace, svc.name, svc.source)
            services.append(svc)
        elif kind == "EndpointSlice":
            es = read_endpointslice(obj)
            once(kind, es.namespace, es.name, es.source)
            slices.append(es)
        elif kind == "Endpoints":
            ep = read_endpoints(obj)
            once(kind, ep.namespace, ep.name, ep.source)
            legacy.append(ep)
        elif kind == "Node":
            node = read_node(obj)
            once(kind, "", node.name, node.source)
            nodes.append(node)
        elif kind == "Pod" and _helm_hook(obj):
            _skip(skipped, obj, "Pod (helm.sh/hook)")
        elif kind == "Pod":
            pod = read_pod(obj)
            once(kind, pod.namespace, pod.name, pod.source)
            pods.append(pod)
        elif kind == "ServiceCIDR":
            cidr_name, cidrs = read_service_cidr(obj)
            once(kind, "", cidr_name, SourceRef(obj.file, obj.line))
            service_cidrs.extend(c for c in cidrs if c not in service_cidrs)
        elif kind in WORKLOAD_API_VERSIONS:
            w = read_workload(obj, kind)
            once(kind, w.namespace, w.name, w.source)
            workloads.append(w)
        elif kind == "ConfigMap":
            key = proxy_config_key(obj)
            if key:
                set_proxy(read_proxy_configmap(obj, key), obj)
        else:
            set_proxy(read_proxy_config(obj), obj)

    index = SelectionIndex(Cluster(pods=tuple(pods)))  # selector look-ups without a scan per Service
    notes: list[LoadNote] = []
    with_slices = {(s.namespace, s.service_name) for s in slices}
    had_slices = bool(slices)  # before synthesis adds any
    any_slices = had_slices or bool(legacy)
    by_key = {(e.namespace, e.name): e for e in legacy}
    for svc in services:
        if (svc.namespace, svc.name) in with_slices or not _proxied(svc):
            continue
        selected = index.selected_pods(svc)
        found = by_key.get((svc.namespace, svc.name))
        if selected:
            slices.extend(synthesise_slices(svc, selected, nodes))
        elif found is not None and not (svc.selector is None and found.skip_mirror and had_slices):
            # skip-mirror says another writer keeps the slices (the API server does for
            # default/kubernetes); with no slice in the input at all, the Endpoints are the evidence
            slices.extend(slices_from_endpoints(found))
            notes.append(LoadNote(
                "NV027", svc.key,
                f"Service {svc.key}: no EndpointSlice in the input; its endpoints are taken from the v1 "
                f"Endpoints {found.namespace}/{found.name}" + (
                    " (written by the Endpoints controller from the same Pods)" if svc.selector is not None else
                    " (they carry endpointslice.kubernetes.io/skip-mirror: their writer keeps the slice itself, "
                    "which the input lacks)" if found.skip_mirror else
                    " (as the EndpointSlice mirroring controller copies them)"),
                str(found.source),
            ))  # fmt: skip
        elif svc.selector is None:
            if not any_slices:
                hint = (
                    "; the input has no EndpointSlice at all (kubectl cluster-info dump leaves them out): give "
                    "`kubectl get endpointslices -A -o yaml` too if it has endpoints"
                )
            else:
                hint = " (add the EndpointSlice, or a selector, if it should have some)"
            why = (
                f" (its Endpoints {found.namespace}/{found.name} carry endpointslice.kubernetes.io/skip-mirror, "
                "so they are not mirrored)" if found is not None else ""
            )
            notes.append(LoadNote(
                "NV003", svc.key,
                f"Service {svc.key} has no selector and no EndpointSlice labelled "
                f"kubernetes.io/service-name={svc.name}{why}: it has no endpoints, so kube-proxy rejects "
                f"its traffic{hint}",
                str(svc.source),
            ))  # fmt: skip
        elif pods:
            slices.extend(synthesise_slices(svc, (), nodes))  # no Pod selected: the placeholder slice

    return Cluster(
        services=tuple(services),
        slices=tuple(slices),
        nodes=tuple(nodes),
        pods=tuple(pods),
        proxy=proxy if proxy is not None else ProxyConfig(),
        service_cidrs=tuple(service_cidrs),
        name=name,
        source=source if source is not None else SourceRef(),
        workloads=tuple(workloads),
        legacy_endpoints=tuple(legacy),
        notes=tuple(notes),
        skipped=tuple(skipped.values()),
    )


def require_services(cluster: Cluster) -> None:
    """Refuse a cluster without any Service: there is nothing to verify, and saying OK would lie.

    The message points at the first object read (or the input's first line), so an editor or CI
    annotation lands in the file that should have held the Services.
    """
    if cluster.services:
        return
    hint = ""
    if cluster.skipped:
        shown = ", ".join(describe_skipped(s) for s in cluster.skipped[:3])
        hint = f"; skipped {shown}"
    sources = [o.source for group in (cluster.nodes, cluster.pods, cluster.workloads, cluster.slices,
                                      cluster.legacy_endpoints) for o in group]  # fmt: skip
    first: SourceRef | None = next((src for src in sources if src.line), None)
    if first is None and cluster.proxy.source.line:
        first = cluster.proxy.source
    if first is None:
        root = Path(cluster.source.file or ".")
        files = spec_files(root) if root.is_dir() else [root]
        first = SourceRef(str(files[0]) if files else str(root), 1)
    raise KubeInputError(first.file, first.line, f"no Service found in the input{hint}")


def describe_skipped(s: SkippedKind) -> str:
    """``3 objects of kind Foo (example.com/v1), first at x.yaml:3 (did you mean Service?)``."""
    what = f"{s.count} object{'s' if s.count != 1 else ''} of kind {s.kind} ({s.api_version or 'no apiVersion'})"
    return f"{what}, first at {s.first}" + (f" (did you mean {s.hint}?)" if s.hint else "")


def _helm_hook(obj: RawObject) -> bool:
    """A Pod of a Helm hook (``helm test`` and the like) in rendered manifests: it runs only
    when the hook fires, so it is not one of the Pods a Service of the release selects."""
    meta = obj.data.get("metadata")
    notes = meta.get("annotations") if isinstance(meta, dict) else None
    return isinstance(notes, dict) and "helm.sh/hook" in notes and obj.data.get("status") is None


def _skip(skipped: dict[tuple[str, str], SkippedKind], obj: RawObject, kind: str = "") -> None:
    kind, version = kind or str(obj.data.get("kind", "")), str(obj.data.get("apiVersion", ""))
    key = (kind, version)
    if key in skipped:
        skipped[key] = attrs.evolve(skipped[key], count=skipped[key].count + 1)
        return
    close = difflib.get_close_matches(kind, READ_KINDS, n=1, cutoff=0.75) if kind not in READ_KINDS else []
    skipped[key] = SkippedKind(kind, version, 1, SourceRef(obj.file, obj.line), close[0] if close else "")


def _proxied(svc: Service) -> bool:
    """Services kube-proxy writes rules for: not ExternalName, not headless."""
    return svc.type != "ExternalName" and svc.cluster_ips != ("None",)


def _kind(obj: RawObject) -> str | None:
    """The kind if nat-verify reads it, ``None`` for a known kind to skip, ``"?"`` for any other."""
    f = Fields(obj.file, obj.data, "Kubernetes object")
    kind = f.text("kind", required=True)
    api_version = f.text("apiVersion", required=True)
    if kind in API_VERSIONS:
        if api_version != API_VERSIONS[kind] and api_version not in OTHER_API_VERSIONS.get(kind, ()):
            f.fail(
                "apiVersion",
                f"must be {API_VERSIONS[kind]!r} for kind {kind} (got {api_version!r})",
            )
        return kind
    if kind in WORKLOAD_API_VERSIONS:
        return kind if api_version in WORKLOAD_API_VERSIONS[kind] else "?"
    if kind == "ConfigMap":
        return kind if api_version == "v1" else "?"
    if kind in IGNORED_KINDS:
        return None
    return "?"
