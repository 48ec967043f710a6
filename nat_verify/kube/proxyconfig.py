"""KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1) -> ``model.ProxyConfig``.

Only the fields that change iptables-mode rules are read. ``detectLocalMode`` defaults to
``ClusterCIDR`` as in kube-proxy; ``ClusterCIDR`` without a cluster CIDR is kube-proxy's no-op
detector and is written ``""`` in the model.
"""

from __future__ import annotations

import attrs

from nat_verify.kube.annotations import apply_annotations
from nat_verify.kube.documents import RawObject
from nat_verify.kube.fields import Fields, ip_family
from nat_verify.model.cluster import ProxyConfig, SourceRef

DETECT_LOCAL_MODES = ("ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix")
PROXY_MODES = ("iptables", "nftables", "ipvs")


def read_proxy_config(obj: RawObject) -> ProxyConfig:
    f = Fields(obj.file, obj.data, "KubeProxyConfiguration")
    cidrs = _cluster_cidrs(f)
    mode = f.choice("detectLocalMode", DETECT_LOCAL_MODES, "ClusterCIDR")
    detect = f.mapping_or_empty("detectLocal")
    bridge = detect.text("bridgeInterface")
    prefix = detect.text("interfaceNamePrefix")
    if mode == "BridgeInterface" and not bridge:
        detect.fail("bridgeInterface", "is required when detectLocalMode is BridgeInterface")
    if mode == "InterfaceNamePrefix" and not prefix:
        detect.fail(
            "interfaceNamePrefix", "is required when detectLocalMode is InterfaceNamePrefix"
        )
    if mode == "ClusterCIDR" and not cidrs:
        mode = ""
    ipt = f.mapping_or_empty("iptables")
    # "" is the platform default, iptables on Linux; kernelspace is Windows-only
    proxy_mode = f.choice("mode", PROXY_MODES, "iptables")
    cfg = ProxyConfig(
        cluster_cidrs=cidrs,
        detect_local_mode=mode,
        bridge_interface=bridge,
        interface_name_prefix=prefix,
        # v1alpha1 spells it iptables.masqueradeAll; the top-level form is accepted as well.
        masquerade_all=ipt.boolean("masqueradeAll", False) or f.boolean("masqueradeAll", False),
        masquerade_bit=ipt.integer("masqueradeBit", 14, lo=0, hi=31),
        node_port_addresses=_node_port_addresses(f),
        localhost_node_ports=ipt.boolean("localhostNodePorts", True),
        mode=proxy_mode,  # type: ignore[arg-type]
        source=SourceRef(obj.file, obj.line),
    )
    gates = obj.data.get("featureGates") or {}
    if isinstance(gates, dict) and "ProxyTerminatingEndpoints" in gates:
        cfg = attrs.evolve(cfg, terminating_fallback=bool(gates["ProxyTerminatingEndpoints"]))
    meta = obj.data.get("metadata") or {}
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if isinstance(annotations, dict):
        cfg = apply_annotations(cfg, {str(k): str(v) for k, v in annotations.items()})
    return cfg


def _cluster_cidrs(f: Fields) -> tuple[str, ...]:
    raw = f.text("clusterCIDR")
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    out = tuple(f.cidr("clusterCIDR", p) for p in parts)
    if len(out) > 2 or (len(out) == 2 and ip_family(out[0]) == ip_family(out[1])):
        f.expect("clusterCIDR", "at most one CIDR per IP family", raw)
    return out


def _node_port_addresses(f: Fields) -> tuple[str, ...]:
    out = []
    for value, line in f.strings("nodePortAddresses"):
        out.append(value if value == "primary" else f.cidr("nodePortAddresses", value, line=line))
    return tuple(out)
