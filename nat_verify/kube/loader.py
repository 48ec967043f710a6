"""Files -> ``Cluster``: dispatch each object by kind, check the set as a whole, fill gaps.

Well-known kinds that do not affect Service networking (Deployments, ConfigMaps...) are
skipped, so a whole application manifest can be given; any other kind is refused, because a
typo in ``kind:`` would otherwise silently drop an object from the verification.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nat_verify.kube.documents import RawObject, read_file, spec_files
from nat_verify.kube.endpointslice import read_endpointslice
from nat_verify.kube.errors import KubeInputError
from nat_verify.kube.fields import Fields
from nat_verify.kube.node import read_node
from nat_verify.kube.pod import read_pod
from nat_verify.kube.proxyconfig import read_proxy_config
from nat_verify.kube.service import read_service
from nat_verify.kube.servicecidr import read_service_cidr
from nat_verify.kube.synthesis import synthesise_slices
from nat_verify.model.cluster import (
    Cluster,
    EndpointSlice,
    Node,
    Pod,
    ProxyConfig,
    Service,
    SourceRef,
)

API_VERSIONS = {
    "Service": "v1",
    "EndpointSlice": "discovery.k8s.io/v1",
    "Node": "v1",
    "Pod": "v1",
    "KubeProxyConfiguration": "kubeproxy.config.k8s.io/v1alpha1",
    "ServiceCIDR": "networking.k8s.io/v1",
}
# earlier API versions read the same (ServiceCIDR was beta in 1.31 and 1.32)
OTHER_API_VERSIONS = {"ServiceCIDR": ("networking.k8s.io/v1beta1",)}

# Kinds that carry nothing kube-proxy reads. Endpoints is here on purpose: kube-proxy reads
# EndpointSlices only (the mirroring controller turns custom Endpoints into slices).
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
        "ConfigMap",
        "ControllerRevision",
        "CronJob",
        "CustomResourceDefinition",
        "DaemonSet",
        "Deployment",
        "Endpoints",
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
        "ReplicaSet",
        "ReplicationController",
        "ResourceQuota",
        "Role",
        "RoleBinding",
        "RuntimeClass",
        "Secret",
        "ServiceAccount",
        "StatefulSet",
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
    services: list[tuple[Service, bool]] = []
    slices: list[EndpointSlice] = []
    nodes: list[Node] = []
    pods: list[tuple[Pod, str]] = []
    proxy: ProxyConfig | None = None
    service_cidrs: list[str] = []
    seen: dict[tuple[str, str, str], SourceRef] = {}

    def once(kind: str, namespace: str, obj_name: str, src: SourceRef) -> None:
        key = (kind, namespace, obj_name)
        if key in seen:
            shown = f"{namespace}/{obj_name}" if namespace else obj_name
            raise KubeInputError(
                src.file, src.line, f"duplicate {kind} {shown} (first defined at {seen[key]})"
            )
        seen[key] = src

    for obj in objects:
        kind = _kind(obj)
        if kind is None:
            continue
        if kind == "Service":
            svc, publish = read_service(obj)
            once(kind, svc.namespace, svc.name, svc.source)
            services.append((svc, publish))
        elif kind == "EndpointSlice":
            es = read_endpointslice(obj)
            once(kind, es.namespace, es.name, es.source)
            slices.append(es)
        elif kind == "Node":
            node = read_node(obj)
            once(kind, "", node.name, node.source)
            nodes.append(node)
        elif kind == "Pod":
            pod, phase = read_pod(obj)
            once(kind, pod.namespace, pod.name, pod.source)
            pods.append((pod, phase))
        elif kind == "ServiceCIDR":
            cidr_name, cidrs = read_service_cidr(obj)
            once(kind, "", cidr_name, SourceRef(obj.file, obj.line))
            service_cidrs.extend(c for c in cidrs if c not in service_cidrs)
        else:
            config = read_proxy_config(obj)
            if proxy is not None:
                raise KubeInputError(
                    obj.file,
                    obj.line,
                    "duplicate KubeProxyConfiguration "
                    f"(first defined at {proxy.source}); a cluster has one",
                )
            proxy = config

    with_slices = {(s.namespace, s.service_name) for s in slices}
    for svc, publish in services:
        if (svc.namespace, svc.name) in with_slices or not _proxied(svc):
            continue
        if svc.selector is None:
            raise KubeInputError(
                svc.source.file,
                svc.source.line,
                f"Service {svc.key} has no selector and no EndpointSlice labelled "
                f"kubernetes.io/service-name={svc.name}: its endpoints are unknown "
                "(add the EndpointSlice, or a selector and Pods)",
            )
        if pods:
            slices.extend(synthesise_slices(svc, publish, pods, nodes))

    return Cluster(
        services=tuple(s for s, _ in services),
        slices=tuple(slices),
        nodes=tuple(nodes),
        pods=tuple(p for p, _ in pods),
        proxy=proxy if proxy is not None else ProxyConfig(),
        service_cidrs=tuple(service_cidrs),
        name=name,
        source=source if source is not None else SourceRef(),
    )


def _proxied(svc: Service) -> bool:
    """Services kube-proxy writes rules for: not ExternalName, not headless."""
    return svc.type != "ExternalName" and svc.cluster_ips != ("None",)


def _kind(obj: RawObject) -> str | None:
    """The kind if nat-verify reads it, ``None`` if it is a known kind to skip."""
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
    if kind in IGNORED_KINDS:
        return None
    f.fail(
        "kind",
        f"must be one of {', '.join(API_VERSIONS)} or a well-known kind without "
        f"effect on Services such as Deployment or ConfigMap (got {kind!r})",
    )
