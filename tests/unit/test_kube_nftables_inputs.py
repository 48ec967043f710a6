"""What the nftables mode reads from the cluster: the proxy mode, ServiceCIDRs, and addresses
with leading zeros (which kube-proxy reads as decimal, ParseIPSloppy)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nat_verify.kube import load_cluster
from nat_verify.kube.errors import KubeInputError

PROXY = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"


def _load(tmp_path: Path, text: str) -> object:
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return load_cluster([p])


@pytest.mark.parametrize(("line", "mode"), [("", "iptables"), ("mode: ''\n", "iptables"), ("mode: nftables\n", "nftables"), ("mode: iptables\n", "iptables")])
def test_proxy_mode(tmp_path: Path, line: str, mode: str) -> None:
    assert _load(tmp_path, PROXY + line).proxy.mode == mode  # type: ignore[attr-defined]


def test_unknown_proxy_mode_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(KubeInputError) as e:
        _load(tmp_path, PROXY + "mode: nftabels\n")
    assert e.value.line == 3 and "one of iptables, nftables, ipvs" in e.value.message


def test_service_cidrs(tmp_path: Path) -> None:
    doc = (
        "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: kubernetes}\n"
        "spec: {cidrs: [10.96.0.0/12, 'fd00:10:96::/112']}\n---\n"
        "apiVersion: networking.k8s.io/v1beta1\nkind: ServiceCIDR\nmetadata: {name: extra}\n"
        "spec: {cidrs: [10.200.0.7/16]}\n"
    )
    assert _load(tmp_path, doc).service_cidrs == ("10.96.0.0/12", "fd00:10:96::/112", "10.200.0.0/16")  # type: ignore[attr-defined]


def test_service_cidr_with_two_of_one_family_is_refused(tmp_path: Path) -> None:
    doc = "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata: {name: k}\nspec:\n  cidrs: [10.96.0.0/12, 10.97.0.0/16]\n"
    with pytest.raises(KubeInputError) as e:
        _load(tmp_path, doc)
    assert e.value.line == 5 and "one CIDR per IP family" in e.value.message


def test_leading_zeros_in_service_addresses_are_decimal(tmp_path: Path) -> None:
    doc = (
        "apiVersion: v1\nkind: Service\nmetadata: {namespace: a, name: s}\n"
        "spec:\n  type: LoadBalancer\n  clusterIP: 172.30.0.041\n  externalIPs: ['192.168.099.022']\n"
        "  loadBalancerSourceRanges: ['203.0.113.000/025']\n  ports: [{port: 80, nodePort: 30001}]\n"
        "status: {loadBalancer: {ingress: [{ip: '1.2.3.004'}]}}\n---\n"
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  namespace: a\n  name: s-1\n"
        "  labels: {kubernetes.io/service-name: s}\naddressType: IPv4\nports: [{port: 80}]\n"
        "endpoints: [{addresses: ['10.180.00.001']}]\n"
    )
    c = _load(tmp_path, doc)
    (svc,) = c.services  # type: ignore[attr-defined]
    assert svc.cluster_ips == ("172.30.0.41",)
    assert svc.external_ips == ("192.168.99.22",)
    assert svc.lb_source_ranges == ("203.0.113.0/25",)
    assert svc.lb_ingress[0].ip == "1.2.3.4"
    assert c.slices[0].endpoints[0].addresses == ("10.180.0.1",)  # type: ignore[attr-defined]
