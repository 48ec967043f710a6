"""Without a KubeProxyConfiguration, ``check`` reads kube-proxy's settings back from the dump.

Ground truth: each dump is what the compiler writes for ``specs/web-svc.yaml`` under a known
KubeProxyConfiguration (the parameter); ``check`` is then given the same cluster without any
config. A healthy node must get no error (the issue's false "stale" finding came from checking
such a dump against guessed defaults), and the settings must be inferred as they were set,
with the dump line that shows them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from nat_verify.check import check_ruleset
from nat_verify.kube import load_cluster
from nat_verify.kubeproxy import compile_node
from nat_verify.model.cluster import Cluster, ProxyConfig
from nat_verify.netfilter.parse import parse
from nat_verify.node.proxyconfig import infer_proxy_config, proxy_config_given
from tests.unit.test_cli import SPECS, run

WEB = SPECS / "web-svc.yaml"


def web(proxy: ProxyConfig | None) -> Cluster:
    c = load_cluster([WEB])
    return attrs.evolve(c, proxy=proxy if proxy is not None else ProxyConfig())


CONFIGS: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    # name: (KubeProxyConfiguration fields, premises expected {fact: value})
    "cluster-cidr": ({"cluster_cidrs": ("10.42.0.0/16",), "detect_local_mode": "ClusterCIDR"}, {"cluster CIDR": "10.42.0.0/16"}),
    "node-cidr": ({"detect_local_mode": "NodeCIDR"}, {"detect-local": "NodeCIDR (10.42.1.0/24, the node's podCIDR)"}),
    "bridge": ({"detect_local_mode": "BridgeInterface", "bridge_interface": "cbr0"}, {"detect-local": "BridgeInterface cbr0"}),
    "prefix": ({"detect_local_mode": "InterfaceNamePrefix", "interface_name_prefix": "veth"}, {"detect-local": "InterfaceNamePrefix veth"}),
    "masquerade-all": ({"cluster_cidrs": ("10.42.0.0/16",), "masquerade_all": True}, {"masqueradeAll": "true"}),
    "no-detector": ({}, {"detect-local": "none"}),
    "mark-bit-12": ({"cluster_cidrs": ("10.42.0.0/16",), "masquerade_bit": 12}, {"masquerade bit": "12 (0x1000)"}),
    "localhost-off": ({"cluster_cidrs": ("10.42.0.0/16",), "localhost_node_ports": False}, {"localhostNodePorts": "false"}),
    "node-port-addresses": ({"cluster_cidrs": ("10.42.0.0/16",), "node_port_addresses": ("192.168.1.0/24",)}, {"nodePortAddresses": "192.168.1.10/32"}),
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("form", ["restore", "save"])
def test_settings_are_read_back_from_the_dump(name: str, form: str) -> None:
    fields, want = CONFIGS[name]
    truth = web(attrs.evolve(ProxyConfig(), **fields))
    text = compile_node(truth, "node-1", 4)
    if form == "save":
        from nat_verify.netfilter.render import render
        from nat_verify.netfilter.saveform import to_save_form

        text = render(to_save_form(parse(text, family=4)))
    ruleset = parse(text, source="node-1.dump", family=4)
    bare = web(None)
    assert not proxy_config_given(bare)
    cfg, premises = infer_proxy_config(bare, "node-1", ruleset)
    got = {p.fact: p for p in premises}
    for fact, value in want.items():
        assert got[fact].value == value and got[fact].basis == "inferred", premises
        if name != "no-detector":
            assert got[fact].detail.startswith("node-1.dump:")  # the line that shows it
    # the dump kube-proxy writes under the inferred settings is the one given
    assert compile_node(attrs.evolve(bare, proxy=cfg), "node-1", 4) == compile_node(truth, "node-1", 4)
    report = check_ruleset(bare, "node-1", ruleset)
    errors = [f for f in report.findings if f.severity == "error"]
    assert not errors, [f.message for f in errors]
    assert any(p.fact in want for _, p in report.assumptions)


def test_a_given_config_is_not_second_guessed() -> None:
    truth = web(ProxyConfig(cluster_cidrs=("10.42.0.0/16",)))
    dump = parse(compile_node(web(ProxyConfig(cluster_cidrs=("10.99.0.0/16",))), "node-1", 4), family=4)
    # the config says 10.42/16 and the dump's rules were written for 10.99/16: drift, and no
    # inference replaces what the user gave
    report = check_ruleset(truth, "node-1", dump)
    assert any(f.invariant == "NV015" and f.severity == "error" for f in report.findings)
    assert not [p for _, p in report.assumptions if p.fact == "cluster CIDR"]


def test_dump_without_service_rules_assumes_and_says_so() -> None:
    bare = web(None)
    empty = parse("*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n", source="empty.dump", family=4)
    cfg, premises = infer_proxy_config(bare, "node-1", empty)
    assert cfg == ProxyConfig()
    assert {p.fact: p.basis for p in premises} == {"detect-local": "assumed", "masquerade bit": "assumed", "nodePortAddresses": "assumed"}


def test_conflicting_rules_infer_nothing() -> None:
    text = compile_node(web(ProxyConfig(cluster_cidrs=("10.42.0.0/16",))), "node-1", 4)
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if "! -s 10.42.0.0/16" in ln)
    lines.insert(i + 1, lines[i].replace("! -s 10.42.0.0/16", "! -i cni0"))
    cfg, premises = infer_proxy_config(web(None), "node-1", parse("\n".join(lines) + "\n", family=4))
    assert cfg.detect_local_mode == "" and not cfg.cluster_cidrs
    assert next(p for p in premises if p.fact == "detect-local").basis == "assumed"


def test_check_cli_lists_what_it_inferred(tmp_path: Path) -> None:
    truth = web(ProxyConfig(cluster_cidrs=("10.42.0.0/16",)))
    dump = tmp_path / "node-1.dump"
    dump.write_text(compile_node(truth, "node-1", 4))
    cluster = tmp_path / "cluster.yaml"
    text = WEB.read_text()
    cluster.write_text("\n---\n".join(d for d in text.split("\n---\n") if "KubeProxyConfiguration" not in d))
    code, out, _ = run("check", str(dump), "--cluster", str(cluster), "--node", "node-1", "--format", "json")
    doc = json.loads(out)
    assert code == 0, [f["message"] for f in doc["findings"]]
    inferred = {a["fact"]: a for a in doc["assumptions"] if a["basis"] == "inferred"}
    assert inferred["cluster CIDR"]["value"] == "10.42.0.0/16" and inferred["cluster CIDR"]["node"] == "node-1"
    code, out, _ = run("check", str(dump), "--cluster", str(cluster), "--node", "node-1")
    assert "inferred: cluster CIDR = 10.42.0.0/16" in out and "assumed: node addresses" in out
