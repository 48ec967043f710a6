"""One template at a time: compile small clusters built in Python and check the rule text.

Expected lines are written from the templates of the reference (kube-proxy.md section 3) and
upstream proxier.go, not from the compiler's output. Chain hashes come from hashing.py, which
is checked against upstream's examples in test_hashing.py.
"""

from __future__ import annotations

import attrs
import pytest

from nat_verify.kubeproxy import CompileError, chain_owners, compile_node, owners_from_comments
from nat_verify.kubeproxy.hashing import SEP, SVC, endpoint_chain_name, service_port_chain_name
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

NODE = Node(
    "n1", internal_ips=("192.168.0.2", "2001:db8::2"), pod_cidrs=("10.244.1.0/24", "fd00:1::/64")
)
CFG = ProxyConfig(
    cluster_cidrs=("10.0.0.0/8", "fd00::/48"),
    mark_spelling="test",
    random_fully=False,
    nfacct=False,
)


def svc(**kw: object) -> Service:
    base: dict[str, object] = {
        "namespace": "ns",
        "name": "web",
        "ports": (ServicePort(80, name="http", target_port=8080),),
        "cluster_ips": ("172.30.0.10",),
    }
    base.update(kw)
    return Service(**base)  # type: ignore[arg-type]


def eps(
    *endpoints: Endpoint, family: str = "IPv4", ports: tuple[EndpointPort, ...] | None = None
) -> EndpointSlice:
    return EndpointSlice(
        "ns",
        f"web-{family}",
        "web",
        family,
        endpoints,
        ports if ports is not None else (EndpointPort(8080, name="http"),),
    )


def ep(ip: str, node: str = "n2", **kw: bool) -> Endpoint:
    return Endpoint((ip,), node_name=node, **kw)


def compile_(
    services: tuple[Service, ...],
    slices: tuple[EndpointSlice, ...],
    cfg: ProxyConfig = CFG,
    family: int = 4,
    base_jumps: bool = False,
) -> list[str]:
    cluster = Cluster(services=services, slices=slices, nodes=(NODE,), proxy=cfg)
    return compile_node(cluster, "n1", family, base_jumps=base_jumps).splitlines()


SVC_H = service_port_chain_name(SVC, "ns/web:http", "tcp")[len(SVC) :]


def sep(endpoint: str, spn: str = "ns/web:http", proto: str = "tcp") -> str:
    return endpoint_chain_name(spn, proto, endpoint)


def test_cluster_ip_masquerade_cascade_and_endpoint_order() -> None:
    # three endpoints; string order puts 10.1.0.10 before 10.1.0.2 (byEndpoint sorts strings)
    out = compile_((svc(),), (eps(ep("10.1.0.2"), ep("10.1.0.10"), ep("10.1.0.3")),))
    a, b, c = "10.1.0.10:8080", "10.1.0.2:8080", "10.1.0.3:8080"
    chain = f"KUBE-SVC-{SVC_H}"
    assert (
        f'-A KUBE-SERVICES -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d 172.30.0.10 --dport 80 -j {chain}'
        in out
    )
    got = [ln for ln in out if ln.startswith(f"-A {chain} ")]
    assert got == [
        f'-A {chain} -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d 172.30.0.10 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ',
        f'-A {chain} -m comment --comment "ns/web:http -> {a}" -m statistic --mode random --probability 0.3333333333 -j {sep(a)}',
        f'-A {chain} -m comment --comment "ns/web:http -> {b}" -m statistic --mode random --probability 0.5000000000 -j {sep(b)}',
        f'-A {chain} -m comment --comment "ns/web:http -> {c}" -j {sep(c)}',
    ]
    # SEP: hairpin masquerade, then DNAT to the endpoint port (targetPort), not the service port
    assert [ln for ln in out if ln.startswith(f"-A {sep(a)} ")] == [
        f"-A {sep(a)} -m comment --comment ns/web:http -s 10.1.0.10 -j KUBE-MARK-MASQ",
        f"-A {sep(a)} -m comment --comment ns/web:http -m tcp -p tcp -j DNAT --to-destination 10.1.0.10:8080",
    ]


def test_mark_spelling_and_random_fully() -> None:
    real = attrs.evolve(CFG, mark_spelling="kube-proxy", random_fully=True)
    out = compile_((svc(),), (), cfg=real)
    assert "-A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000" in out
    assert "-A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN" in out
    assert "-A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000" in out
    assert (
        '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully'
        in out
    )
    bit0 = compile_((svc(),), (), cfg=attrs.evolve(CFG, masquerade_bit=0))
    assert "-A KUBE-MARK-MASQ -j MARK --or-mark 0x1" in bit0


def test_no_endpoints_reject_everywhere() -> None:
    s = svc(
        type="LoadBalancer",
        external_ips=("192.168.99.11",),
        ports=(ServicePort(80, name="http", node_port=30080),),
        lb_ingress=(LoadBalancerIngress(ip="1.2.3.4"),),
    )
    out = compile_((s,), ())
    c = '"ns/web:http has no endpoints"'
    assert [ln for ln in out if "has no endpoints" in ln] == [
        f"-A KUBE-SERVICES -m comment --comment {c} -m tcp -p tcp -d 172.30.0.10 --dport 80 -j REJECT",
        f"-A KUBE-EXTERNAL-SERVICES -m comment --comment {c} -m tcp -p tcp -d 192.168.99.11 --dport 80 -j REJECT",
        f"-A KUBE-EXTERNAL-SERVICES -m comment --comment {c} -m tcp -p tcp -d 1.2.3.4 --dport 80 -j REJECT",
        f"-A KUBE-EXTERNAL-SERVICES -m comment --comment {c} -m addrtype --dst-type LOCAL -m tcp -p tcp --dport 30080 -j REJECT",
    ]
    assert not any(ln.startswith((":KUBE-SVC-", ":KUBE-EXT-", ":KUBE-SEP-")) for ln in out)


def test_itp_local_without_local_endpoints_drops() -> None:
    out = compile_((svc(internal_traffic_policy="Local"),), (eps(ep("10.1.0.2")),))
    assert (
        '-A KUBE-SERVICES -m comment --comment "ns/web:http has no local endpoints" -m tcp -p tcp -d 172.30.0.10 --dport 80 -j DROP'
        in out
    )
    assert not any(ln.startswith(":KUBE-SVL-") or ln.startswith(":KUBE-SVC-") for ln in out)
    # with a local endpoint, ClusterIP goes to SVL, and the masquerade rule lives in SVL
    out = compile_(
        (svc(internal_traffic_policy="Local"),), (eps(ep("10.1.0.2"), ep("10.1.0.5", "n1")),)
    )
    svl = f"KUBE-SVL-{SVC_H}"
    assert [ln for ln in out if ln.startswith(f"-A {svl} ")] == [
        f'-A {svl} -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d 172.30.0.10 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ',
        f'-A {svl} -m comment --comment "ns/web:http -> 10.1.0.5:8080" -j {sep("10.1.0.5:8080")}',
    ]
    assert f":{sep('10.1.0.2:8080')} - [0:0]" not in out


@pytest.mark.parametrize(
    ("cfg", "is_local", "not_local"),
    [
        (attrs.evolve(CFG, detect_local_mode="NodeCIDR"), "-s 10.244.1.0/24", "! -s 10.244.1.0/24"),
        (
            attrs.evolve(CFG, detect_local_mode="BridgeInterface", bridge_interface="cbr0"),
            "-i cbr0",
            "! -i cbr0",
        ),
        (
            attrs.evolve(
                CFG, detect_local_mode="InterfaceNamePrefix", interface_name_prefix="veth"
            ),
            "-i veth+",
            "! -i veth+",
        ),
    ],
)
def test_local_traffic_detectors(cfg: ProxyConfig, is_local: str, not_local: str) -> None:
    s = svc(
        type="NodePort",
        external_traffic_policy="Local",
        ports=(ServicePort(80, name="http", node_port=30080),),
    )
    out = compile_((s,), (eps(ep("10.1.0.5", "n1")),), cfg=cfg)
    chain, ext = f"KUBE-SVC-{SVC_H}", f"KUBE-EXT-{SVC_H}"
    assert (
        f'-A {chain} -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d 172.30.0.10 --dport 80 {not_local} -j KUBE-MARK-MASQ'
        in out
    )
    assert [ln for ln in out if ln.startswith(f"-A {ext} ")] == [
        f'-A {ext} -m comment --comment "pod traffic for ns/web:http external destinations" {is_local} -j {chain}',
        f'-A {ext} -m comment --comment "masquerade LOCAL traffic for ns/web:http external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ',
        f'-A {ext} -m comment --comment "route LOCAL traffic for ns/web:http external destinations" -m addrtype --src-type LOCAL -j {chain}',
        f"-A {ext} -j KUBE-SVL-{SVC_H}",
    ]


def test_masquerade_all_and_no_detector() -> None:
    chain = f"KUBE-SVC-{SVC_H}"
    out = compile_((svc(),), (eps(ep("10.1.0.2")),), cfg=attrs.evolve(CFG, masquerade_all=True))
    assert (
        f'-A {chain} -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d 172.30.0.10 --dport 80 -j KUBE-MARK-MASQ'
        in out
    )
    out = compile_((svc(),), (eps(ep("10.1.0.2")),), cfg=attrs.evolve(CFG, cluster_cidrs=()))
    assert not any(ln.startswith(f"-A {chain} ") and "KUBE-MARK-MASQ" in ln for ln in out)


def test_nodeport_localhost_nfacct_and_firewall() -> None:
    s = svc(type="NodePort", ports=(ServicePort(80, name="http", node_port=30080),))
    ext = f"KUBE-EXT-{SVC_H}"
    out = compile_((s,), (eps(ep("10.1.0.2")),), cfg=attrs.evolve(CFG, nfacct=True))
    assert [ln for ln in out if ln.startswith("-A KUBE-NODEPORTS ")] == [
        f"-A KUBE-NODEPORTS -m comment --comment ns/web:http -m tcp -p tcp -d 127.0.0.0/8 --dport 30080 -m nfacct --nfacct-name localhost_nps_accepted_pkts -j {ext}",
        f"-A KUBE-NODEPORTS -m comment --comment ns/web:http -m tcp -p tcp --dport 30080 -j {ext}",
    ]
    assert (
        "-A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP"
        in out
    )
    assert ":KUBE-FIREWALL - [0:0]" in out
    # localhost NodePorts off: no KUBE-FIREWALL, no nfacct localhost rule, ! -d 127.0.0.0/8
    out = compile_(
        (s,), (eps(ep("10.1.0.2")),), cfg=attrs.evolve(CFG, nfacct=True, localhost_node_ports=False)
    )
    assert ":KUBE-FIREWALL - [0:0]" not in out
    assert not any("localhost_nps_accepted_pkts" in ln for ln in out)
    nat = out[out.index("*nat") :]
    assert [ln for ln in nat if ln.startswith("-A KUBE-SERVICES ")][-1] == (
        '-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain"'
        " -m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS"
    )


def test_node_port_addresses_per_ip() -> None:
    cfg = attrs.evolve(CFG, node_port_addresses=("192.168.0.0/16", "127.0.0.0/8", "fd00::/8"))
    out = compile_((svc(),), (), cfg=cfg)
    last = '"kubernetes service nodeports; NOTE: this must be the last rule in this chain"'
    assert [ln for ln in out if last in ln] == [
        f"-A KUBE-SERVICES -m comment --comment {last} -d 192.168.0.2 -j KUBE-NODEPORTS",
        f"-A KUBE-SERVICES -m comment --comment {last} -d 127.0.0.1 -j KUBE-NODEPORTS",
    ]
    # "primary" = the node's first address of the family; nodePortAddresses without loopback
    # turns localhost NodePorts (and KUBE-FIREWALL) off
    out = compile_((svc(),), (), cfg=attrs.evolve(CFG, node_port_addresses=("primary",)))
    assert [ln for ln in out if last in ln] == [
        f"-A KUBE-SERVICES -m comment --comment {last} -d 192.168.0.2 -j KUBE-NODEPORTS"
    ]
    assert ":KUBE-FIREWALL - [0:0]" not in out


def test_lb_ingress_ip_mode_proxy_and_hostname_ignored() -> None:
    s = svc(
        type="LoadBalancer",
        ports=(ServicePort(80, name="http", node_port=30080),),
        lb_ingress=(
            LoadBalancerIngress(ip="1.2.3.4"),
            LoadBalancerIngress(ip="5.6.7.8", ip_mode="Proxy"),
            LoadBalancerIngress(hostname="lb.example.com"),
            LoadBalancerIngress(ip="9.9.9.9", ip_mode="VIP"),
        ),
    )
    out = compile_((s,), (eps(ep("10.1.0.2")),))
    lbs = [ln.split(" -d ")[1].split()[0] for ln in out if "loadbalancer IP" in ln]
    assert lbs == ["1.2.3.4", "9.9.9.9"]


def test_source_ranges_allow_from_node_and_proxy_firewall() -> None:
    s = svc(
        type="LoadBalancer",
        ports=(ServicePort(80, name="http", node_port=30080),),
        lb_ingress=(LoadBalancerIngress(ip="1.2.3.4"),),
        lb_source_ranges=("192.168.0.0/16", "bogus", "2001:db8::/32"),
    )
    out = compile_((s,), (eps(ep("10.1.0.2")),))
    fw, ext = f"KUBE-FW-{SVC_H}", f"KUBE-EXT-{SVC_H}"
    assert [ln for ln in out if ln.startswith(f"-A {fw} ")] == [
        f'-A {fw} -m comment --comment "ns/web:http loadbalancer IP" -s 192.168.0.0/16 -j {ext}',
        # the node IP 192.168.0.2 is inside a range: the LB VIP itself is allowed as a source
        f'-A {fw} -m comment --comment "ns/web:http loadbalancer IP" -s 1.2.3.4 -j {ext}',
        f'-A {fw} -m comment --comment "other traffic to ns/web:http will be dropped by KUBE-PROXY-FIREWALL"',
    ]
    assert (
        f'-A KUBE-PROXY-FIREWALL -m comment --comment "ns/web:http traffic not accepted by {fw}" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j DROP'
        in out
    )
    # NodePorts bypass KUBE-FW (documented upstream behaviour)
    assert any(ln.startswith("-A KUBE-NODEPORTS ") and ln.endswith(f"-j {ext}") for ln in out)


def test_session_affinity_timeout() -> None:
    s = svc(session_affinity="ClientIP", affinity_timeout=60)
    out = compile_((s,), (eps(ep("10.1.0.2"), ep("10.1.0.3")),))
    a, b = sep("10.1.0.2:8080"), sep("10.1.0.3:8080")
    chain = f"KUBE-SVC-{SVC_H}"
    assert [ln for ln in out if ln.startswith(f"-A {chain} ")][1:] == [
        f'-A {chain} -m comment --comment "ns/web:http -> 10.1.0.2:8080" -m recent --name {a} --rcheck --seconds 60 --reap -j {a}',
        f'-A {chain} -m comment --comment "ns/web:http -> 10.1.0.3:8080" -m recent --name {b} --rcheck --seconds 60 --reap -j {b}',
        f'-A {chain} -m comment --comment "ns/web:http -> 10.1.0.2:8080" -m statistic --mode random --probability 0.5000000000 -j {a}',
        f'-A {chain} -m comment --comment "ns/web:http -> 10.1.0.3:8080" -j {b}',
    ]
    assert (
        f"-A {a} -m comment --comment ns/web:http -m recent --name {a} --set -m tcp -p tcp -j DNAT --to-destination 10.1.0.2:8080"
        in out
    )


def test_terminating_selection() -> None:
    # only serving+terminating endpoints: used when the fallback is on, REJECT when off
    slices = (
        eps(
            ep("10.1.0.2", ready=False, serving=True, terminating=True),
            ep("10.1.0.3", ready=False, serving=False, terminating=True),
        ),
    )
    out = compile_((svc(),), slices)
    assert (
        f'-A KUBE-SVC-{SVC_H} -m comment --comment "ns/web:http -> 10.1.0.2:8080" -j {sep("10.1.0.2:8080")}'
        in out
    )
    assert f":{sep('10.1.0.3:8080')} - [0:0]" not in out
    out = compile_((svc(),), slices, cfg=attrs.evolve(CFG, terminating_fallback=False))
    assert any("has no endpoints" in ln and ln.endswith("-j REJECT") for ln in out)


def test_multiple_ports_udp_sctp_and_named_target_port() -> None:
    s = svc(
        ports=(
            ServicePort(53, "UDP", "dns", target_port="dns"),
            ServicePort(53, "TCP", "dns-tcp", target_port="dns-tcp"),
            ServicePort(9, "SCTP", "sc", target_port=9999),
        )
    )
    sl = eps(
        ep("10.1.0.2"),
        ports=(
            EndpointPort(5353, "UDP", "dns"),
            EndpointPort(5354, "TCP", "dns-tcp"),
            EndpointPort(9999, "SCTP", "sc"),
        ),
    )
    out = compile_((s,), (sl,))
    assert (
        f'-A KUBE-SERVICES -m comment --comment "ns/web:dns cluster IP" -m udp -p udp -d 172.30.0.10 --dport 53 -j {service_port_chain_name(SVC, "ns/web:dns", "udp")}'
        in out
    )
    dns = sep("10.1.0.2:5353", "ns/web:dns", "udp")
    assert (
        f"-A {dns} -m comment --comment ns/web:dns -m udp -p udp -j DNAT --to-destination 10.1.0.2:5353"
        in out
    )
    assert (
        f"-A {sep('10.1.0.2:5354', 'ns/web:dns-tcp')} -m comment --comment ns/web:dns-tcp -m tcp -p tcp -j DNAT --to-destination 10.1.0.2:5354"
        in out
    )
    sc = sep("10.1.0.2:9999", "ns/web:sc", "sctp")
    assert (
        f"-A {sc} -m comment --comment ns/web:sc -m sctp -p sctp -j DNAT --to-destination 10.1.0.2:9999"
        in out
    )
    # a port name that no slice port carries has no endpoints
    lone = svc(ports=(ServicePort(80, name="other"),))
    assert any(
        '"ns/web:other has no endpoints"' in ln for ln in compile_((lone,), (eps(ep("10.1.0.2")),))
    )


def test_large_cluster_drops_endpoint_comments_only() -> None:
    out = compile_(
        (svc(),),
        (eps(ep("10.1.0.2"), ep("10.1.0.3")),),
        cfg=attrs.evolve(CFG, large_cluster_threshold=1),
    )
    a = sep("10.1.0.2:8080")
    chain = f"KUBE-SVC-{SVC_H}"
    assert f"-A {chain} -m statistic --mode random --probability 0.5000000000 -j {a}" in out
    assert f"-A {a} -s 10.1.0.2 -j KUBE-MARK-MASQ" in out
    assert f"-A {a} -m tcp -p tcp -j DNAT --to-destination 10.1.0.2:8080" in out
    assert (
        f'-A {chain} -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d 172.30.0.10 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ'
        in out
    )
    # at the threshold (2 endpoints, not more than 2) comments stay
    out = compile_(
        (svc(),),
        (eps(ep("10.1.0.2"), ep("10.1.0.3")),),
        cfg=attrs.evolve(CFG, large_cluster_threshold=2),
    )
    assert f"-A {a} -m comment --comment ns/web:http -s 10.1.0.2 -j KUBE-MARK-MASQ" in out


def test_ipv6_and_dual_stack() -> None:
    s = svc(
        type="NodePort",
        cluster_ips=("172.30.0.10", "fd00:30::10"),
        ports=(ServicePort(80, name="http", node_port=30080),),
        external_ips=("192.168.99.11", "2001:db8::99"),
    )
    slices = (eps(ep("10.1.0.2")), eps(ep("fd00:1::2"), family="IPv6"))
    v6 = compile_((s,), slices, family=6)
    e6 = "[fd00:1::2]:8080"
    assert (
        f'-A KUBE-SERVICES -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d fd00:30::10 --dport 80 -j KUBE-SVC-{SVC_H}'
        in v6
    )
    assert (
        f'-A KUBE-SERVICES -m comment --comment "ns/web:http external IP" -m tcp -p tcp -d 2001:db8::99 --dport 80 -j KUBE-EXT-{SVC_H}'
        in v6
    )
    assert (
        f'-A KUBE-SVC-{SVC_H} -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d fd00:30::10 --dport 80 ! -s fd00::/48 -j KUBE-MARK-MASQ'
        in v6
    )
    assert f"-A {sep(e6)} -m comment --comment ns/web:http -s fd00:1::2 -j KUBE-MARK-MASQ" in v6
    assert (
        f"-A {sep(e6)} -m comment --comment ns/web:http -m tcp -p tcp -j DNAT --to-destination {e6}"
        in v6
    )
    assert ":KUBE-FIREWALL - [0:0]" not in v6
    assert not any("127.0.0.0/8" in ln or "10.1.0.2" in ln or "172.30.0.10" in ln for ln in v6)
    assert any(
        ln.endswith("-m addrtype --dst-type LOCAL ! -d ::1/128 -j KUBE-NODEPORTS") for ln in v6
    )
    v4 = compile_((s,), slices, family=4)
    assert not any("fd00" in ln or "2001:db8" in ln for ln in v4)
    # a single-stack IPv4 Service writes nothing in the IPv6 ruleset
    only4 = compile_((svc(),), (eps(ep("10.1.0.2")),), family=6)
    assert not any("ns/web" in ln for ln in only4)


def test_base_jumps() -> None:
    out = compile_((svc(),), (), base_jumps=True)
    assert out[:9] == [
        "*filter",
        ":KUBE-NODEPORTS - [0:0]",
        ":KUBE-SERVICES - [0:0]",
        ":KUBE-EXTERNAL-SERVICES - [0:0]",
        ":KUBE-FIREWALL - [0:0]",
        ":KUBE-FORWARD - [0:0]",
        ":KUBE-PROXY-FIREWALL - [0:0]",
        ":FORWARD - [0:0]",
        ":INPUT - [0:0]",
    ]
    assert [ln for ln in out if ln.startswith("-A PREROUTING")] == [
        '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES'
    ]
    assert [ln for ln in out if ln.startswith("-A INPUT")][0] == "-A INPUT -j KUBE-FIREWALL"
    # IPv6: no KUBE-FIREWALL rules, but the (kubelet) jumps need the chain: declared empty
    v6 = compile_((svc(),), (), family=6, base_jumps=True)
    assert ":KUBE-FIREWALL - [0:0]" in v6 and not any(
        ln.startswith("-A KUBE-FIREWALL") for ln in v6
    )


def test_errors() -> None:
    cluster = Cluster(services=(svc(),), nodes=(NODE,), proxy=CFG)
    with pytest.raises(CompileError, match="node 'nope' is not in the cluster"):
        compile_node(cluster, "nope")
    with pytest.raises(CompileError, match="family must be 4 or 6"):
        compile_node(cluster, "n1", 5)
    bad = Cluster(services=(svc(cluster_ips=("not-an-ip",)),), nodes=(NODE,), proxy=CFG)
    with pytest.raises(CompileError, match="clusterIP 'not-an-ip'"):
        compile_node(bad, "n1")


def test_owners() -> None:
    s = svc(type="NodePort", ports=(ServicePort(80, name="http", node_port=30080),))
    cluster = Cluster(
        services=(s,), slices=(eps(ep("10.1.0.2", ready=False)),), nodes=(NODE,), proxy=CFG
    )
    owners = chain_owners(cluster, 4)
    assert owners[f"KUBE-SVC-{SVC_H}"] == owners[f"KUBE-XLB-{SVC_H}"] == "ns/web:http"
    assert owners[sep("10.1.0.2:8080")] == "ns/web:http"  # not ready: still named
    dump = "\n".join(compile_((s,), (eps(ep("10.1.0.2")),)))
    from_comments = owners_from_comments(dump)
    assert from_comments[f"KUBE-EXT-{SVC_H}"] == "ns/web:http"
    assert from_comments[sep("10.1.0.2:8080")] == "ns/web:http"
    assert all(v == "ns/web:http" for k, v in from_comments.items() if k.startswith((SVC, SEP)))
