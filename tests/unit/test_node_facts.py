"""Node facts: the parsers of ``ip -j addr``, ``ip -j route`` and ``ipset save`` on real outputs,
the command-line forms, and the ``NodeContext`` built from them.

The data files under ``data/node/`` are real outputs of iproute2 6.1 and ipset 7.17, produced
in a throwaway network namespace by the ``make-*-node.sh`` scripts next to them; the expected
values below are what those scripts configured (read the scripts), not what the parsers print.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from nat_verify.netfilter.context import (
    EXTERNAL_IFACE,
    POD_IFACE,
    NodeContext,
    iface_verdict,
)
from nat_verify.netfilter.ifaces import decided
from nat_verify.node.build import node_context
from nat_verify.node.errors import FactError
from nat_verify.node.facts import NodeFacts, gather, parse_cni, parse_interface, parse_sysctl
from nat_verify.node.ipaddr import parse_ip_addr
from nat_verify.node.iproute import parse_ip_route
from nat_verify.node.ipset import parse_ipset_save
from tests.unit.test_intent import web_cluster

DATA = Path(__file__).resolve().parent / "data" / "node"


def ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


def net(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(text)


# ------------------------------------------------------------------------- ip -j addr


def test_ip_addr_flannel_node() -> None:
    ifs = {i.name: i for i in parse_ip_addr((DATA / "ip-addr-flannel.json").read_text())}
    assert {"lo", "eth0", "eth0peer", "cni0", "veth1a2b3c4d", "peer0", "flannel.1", "docker0"} <= set(ifs)
    assert [str(a) for a in ifs["eth0"].addresses] == ["192.168.1.10/24", "2001:db8:1::10/64"]
    assert str(ifs["cni0"].addresses[0]) == "10.244.1.1/24"
    assert str(ifs["flannel.1"].addresses[0]) == "10.244.1.0/32"
    # docker0 is down (never set up) and still owns its address
    assert [str(a) for a in ifs["docker0"].addresses] == ["172.17.0.1/16"]
    assert ifs["veth1a2b3c4d"].addresses == () and ifs["peer0"].addresses == ()


def test_ip_addr_pretty_is_the_same() -> None:
    a = parse_ip_addr((DATA / "ip-addr-flannel.json").read_text())
    b = parse_ip_addr((DATA / "ip-addr-flannel-pretty.json").read_text())
    assert a == b


@pytest.mark.parametrize(
    ("text", "line", "needle"),
    [
        ("", 0, "empty"),
        ("1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536\n", 1, "give `ip -j addr`"),
        ('{"ifname": "eth0"}', 1, "JSON array"),
        ('[\n{"ifname": "eth0", "addr_info": [\n{"family": "inet", "local": "300.1.1.1", "prefixlen": 24}]}]', 3, "bad address"),
    ],
)
def test_ip_addr_bad_input(text: str, line: int, needle: str) -> None:
    with pytest.raises(FactError) as e:
        parse_ip_addr(text, "addr.json")
    assert e.value.line == line and needle in str(e.value) and str(e.value).startswith("addr.json")


# ------------------------------------------------------------------------ ip -j route


def test_ip_route_flannel_node() -> None:
    ifs = parse_ip_addr((DATA / "ip-addr-flannel.json").read_text())
    routes = {str(r.dst): r for r in parse_ip_route((DATA / "ip-route-flannel.json").read_text(), interfaces=ifs)}
    assert set(routes) == {"0.0.0.0/0", "10.244.1.0/24", "10.244.2.0/24", "192.168.1.0/24"}
    assert (routes["0.0.0.0/0"].iface, routes["0.0.0.0/0"].src) == ("eth0", ip("192.168.1.10"))
    # no prefsrc: the device's own address, as MASQUERADE picks it (flannel's 10.244.1.0)
    assert (routes["10.244.2.0/24"].iface, routes["10.244.2.0/24"].src) == ("flannel.1", ip("10.244.1.0"))
    assert routes["10.244.1.0/24"].src == ip("10.244.1.1")


def test_ip_route_calico_node() -> None:
    ifs = parse_ip_addr((DATA / "ip-addr-calico.json").read_text())
    routes = {str(r.dst): r for r in parse_ip_route((DATA / "ip-route-calico.json").read_text(), interfaces=ifs)}
    # the blackhole block is not a route a packet can take; the pod's /32 inside it is
    assert "10.244.120.64/26" not in routes
    pod = routes["10.244.120.65/32"]
    # the pod veth has no address: the source falls back to the node's first universe address
    assert (pod.iface, pod.src) == ("cali12345abcde", ip("10.0.12.34"))
    assert routes["10.244.33.0/26"].iface == "vxlan.calico"


def test_ip_route_ipv6_default_and_bad_input() -> None:
    ifs = parse_ip_addr((DATA / "ip-addr-flannel.json").read_text())
    r6 = parse_ip_route((DATA / "ip-route6-flannel.json").read_text(), interfaces=ifs)
    assert {str(r.dst) for r in r6} >= {"2001:db8:1::/64"}
    with pytest.raises(FactError, match="routes.json:1: .*bad route destination"):
        parse_ip_route('[{"dst": "nonsense", "dev": "eth0"}]', "routes.json", ifs)


# ------------------------------------------------------------------------- ipset save


def sets() -> dict[str, object]:
    return {s.name: s for s in parse_ipset_save((DATA / "ipset-save.txt").read_text())}


def ctx_with_sets() -> NodeContext:
    return NodeContext(family=4, addresses=("192.168.1.10",), ipsets=tuple(sets().values()))  # type: ignore[arg-type]


def test_ipset_members_and_types() -> None:
    s = sets()
    assert set(s) == {"weave-local-pods", "cali40all-ipam-pools", "KUBE-CLUSTER-IP", "with-timeout", "v6set", "ranges", "all-sets"}
    c = ctx_with_sets()
    assert c.ipset_verdict("weave-local-pods", ip("10.32.0.5")) is True
    assert c.ipset_verdict("weave-local-pods", ip("10.32.0.6")) is False
    # timeout and comment options do not change membership
    assert c.ipset_verdict("with-timeout", ip("10.0.0.7")) is True
    # bitmap:ip saves the added range address by address
    assert [c.ipset_verdict("ranges", ip(f"10.50.0.{k}")) for k in (9, 10, 12, 13)] == [False, True, True, False]
    assert c.ipset_verdict("v6set", ip("2001:db8::1")) is True
    assert c.ipset_verdict("v6set", ip("10.0.0.1")) is False  # another family never matches


def test_ipset_nomatch_entries_are_exceptions() -> None:
    c = ctx_with_sets()
    # add 10.244.0.0/16, add 10.244.7.0/24 nomatch: the most specific entry decides
    assert c.ipset_verdict("cali40all-ipam-pools", ip("10.244.8.1")) is True
    assert c.ipset_verdict("cali40all-ipam-pools", ip("10.244.7.1")) is False
    # a set with exceptions is not a plain member list
    assert c.ipset("cali40all-ipam-pools") is None
    assert c.ipset("weave-local-pods") == (net("10.32.0.9/32"), net("10.32.0.5/32"))


def test_ipset_unknowns_name_the_reason() -> None:
    c = ctx_with_sets()
    v = c.ipset_verdict("KUBE-CLUSTER-IP", ip("10.96.0.1"))
    assert isinstance(v, str) and "hash:ip,port" in v
    v = c.ipset_verdict("not-given", ip("10.0.0.1"))
    assert isinstance(v, str) and "--ipset" in v
    # list:set: a member of a member set
    assert c.ipset_verdict("all-sets", ip("10.32.0.9")) is True
    assert c.ipset_verdict("all-sets", ip("10.32.0.10")) is False


@pytest.mark.parametrize(
    ("text", "line", "needle"),
    [
        ("add foo 10.0.0.1\n", 1, "no earlier line creates"),
        ("create foo hash:ip\nadd foo 10.0.0.300\n", 2, "bad hash:ip entry"),
        ("create foo hash:ip\ncreate foo hash:ip\n", 2, "created twice"),
        ("create foo hash:ip\nlist foo\n", 2, "expected `create"),
        ("", 0, "no set"),
    ],
)
def test_ipset_bad_input(text: str, line: int, needle: str) -> None:
    with pytest.raises(FactError) as e:
        parse_ipset_save(text, "sets.txt")
    assert e.value.line == line and needle in str(e.value)


# ------------------------------------------------------------------- command-line forms


def test_interface_option() -> None:
    i = parse_interface("eth0=192.168.1.10/24,2001:db8::10/64")
    assert i.name == "eth0" and [str(a) for a in i.addresses] == ["192.168.1.10/24", "2001:db8::10/64"]
    assert parse_interface("cali123").addresses == ()
    for bad in ("eth0=192.168.1.300/24", "=10.0.0.1/8", "cali+=10.0.0.1/8"):
        with pytest.raises(FactError, match="--interface"):
            parse_interface(bad)


def test_sysctl_and_cni_options() -> None:
    assert parse_sysctl("net.ipv4.conf.all.route_localnet = 1") == ("net.ipv4.conf.all.route_localnet", True)
    assert parse_sysctl("net/bridge/bridge-nf-call-iptables=0") == ("net.bridge.bridge-nf-call-iptables", False)
    assert parse_sysctl("net.ipv4.conf.eth0.route_localnet=1")[1] is True
    with pytest.raises(FactError, match="not a sysctl the model reads"):
        parse_sysctl("net.ipv4.ip_forward=1")
    with pytest.raises(FactError, match="KEY=0 or KEY=1"):
        parse_sysctl("net.ipv4.conf.all.route_localnet=yes")
    assert parse_cni("Weave") == ("weave",) and parse_cni("calico") == ("cali+",)
    with pytest.raises(FactError, match="unknown CNI"):
        parse_cni("frobnet")


def test_gather_reads_files_and_options_override(tmp_path: Path) -> None:
    f = gather(
        ip_addr=[str(DATA / "ip-addr-flannel.json")],
        interfaces=["docker0=172.18.0.1/16"],
        ipset=[str(DATA / "ipset-save.txt")],
        ip_route=[str(DATA / "ip-route-flannel.json")],
    )
    docker = next(i for i in f.interfaces if i.name == "docker0")
    assert [str(a) for a in docker.addresses] == ["172.18.0.1/16"]
    assert f.routes is not None and len(f.routes) == 4
    assert f.source_of("ipsets").endswith("ipset-save.txt")
    with pytest.raises(FactError, match="cannot read"):
        gather(ipset=[str(tmp_path / "missing")])


# ---------------------------------------------------------------- interface verdicts


@pytest.mark.parametrize(
    ("value", "name", "prefix", "want"),
    [
        ("eth0", "eth0", False, True),
        ("eth0", "eth", True, True),
        ("eth0", "cni0", False, False),
        ("cali+", "cali", True, True),  # every cali... name starts with cali
        ("cali+", "ca", True, True),
        ("cali+", "cali1", True, None),  # some cali... names do, some do not
        ("cali+", "calixyz", False, None),
        ("cali+", "lxc", True, False),
        ("cali+", "eth0", False, False),
        ("?pod interface", "weave", False, None),  # the Weave example: never a guess
        ("?pod interface", "lo", False, False),
        ("?pod interface", "flannel.1", False, False),  # an overlay carries other nodes' pods
        ("?external interface", "docker0", False, False),
        ("?external interface", "cali", True, False),
        ("?external interface", "weave", False, None),  # Weave delivers remote pods on its bridge
        ("?external interface", "eth1", False, None),
        ("?route to other nodes' pods", "cni0", False, False),
        ("?route to other nodes' pods", "flannel.1", False, None),
        ("?routes", "eth0", False, None),
    ],
)
def test_iface_verdict(value: str, name: str, prefix: bool, want: bool | None) -> None:
    got = iface_verdict(value, name, prefix)
    if want is None:
        assert isinstance(got, str) and got
    else:
        assert got is want


def test_role_table_answers_only_what_it_knows() -> None:
    assert decided(EXTERNAL_IFACE, "ens5", False) is None
    assert decided(POD_IFACE, "cni0", False) is None
    assert decided(POD_IFACE, "docker0", False) is False


# ---------------------------------------------------------------- the context built


def flannel_facts() -> NodeFacts:
    return gather(ip_addr=[str(DATA / "ip-addr-flannel.json")])


def test_context_from_interfaces_alone() -> None:
    c = node_context(4, flannel_facts())
    assert c.addresses[0] == ip("192.168.1.10")
    assert set(c.addresses) == {ip("192.168.1.10"), ip("10.244.1.1"), ip("10.244.1.0"), ip("172.17.0.1")}
    # the one pod bridge of the node; the external interface holds the first address
    assert (c.pod_iface, c.ext_iface) == ("cni0", "eth0")
    assert c.in_iface("pod") == "cni0" and c.in_iface("external") == "eth0"
    assert c.local_pod_cidrs == (net("10.244.1.0/24"),)
    facts = {p.fact: p for p in c.premises}
    assert facts["pod interface"].basis == "inferred" and facts["external interface"].basis == "inferred"
    assert facts["net.bridge.bridge-nf-call-iptables"].basis == "assumed"
    # connected subnets are known routes; anything else is not
    assert c.route(ip("10.244.1.7")).iface == "cni0"
    assert c.route(ip("10.244.2.7")).iface.startswith("?")
    assert c.route(ip("172.17.0.1")).iface == "lo"


def test_context_with_cluster_and_no_facts_lists_its_assumptions() -> None:
    c = node_context(4, None, cluster=web_cluster(), node="node-1")
    assert c.addresses == (ip("192.168.1.10"),)
    assert c.in_iface("pod") == "?pod interface" and c.in_iface("external") == "?external interface"
    assumed = {p.fact for p in c.assumptions}
    assert {"node addresses", "interface roles", "routes", "route_localnet", "net.bridge.bridge-nf-call-iptables"} <= assumed
    # kube-proxy sets route_localnet itself for localhost NodePorts (on by default)
    assert c.route_localnet is True


def test_context_given_facts_are_known() -> None:
    f = gather(
        interfaces=["ens5=10.0.12.34/20", "weave=10.32.0.1/12"],
        pod_interfaces=["weave"],
        sysctls=["net.ipv4.conf.all.route_localnet=0", "net.bridge.bridge-nf-call-iptables=0"],
        ipset=[str(DATA / "ipset-save.txt")],
        ip_route=[str(DATA / "ip-route-calico.json")],
    )
    c = node_context(4, f)
    assert c.route_localnet is False and c.bridge_nf_call is False
    assert c.in_iface("pod") == "weave" and c.ext_iface == "ens5"
    assert c.knows("ipset weave-local-pods") and c.knows("routes")
    assert not [p for p in c.premises if p.basis == "assumed" and p.fact in ("route_localnet", "routes", "pod interface")]


def test_node_address_missing_from_interfaces_is_kept_and_said() -> None:
    f = gather(interfaces=["eth0=10.9.9.9/24"])
    c = node_context(4, f, cluster=web_cluster(), node="node-1")
    assert ip("192.168.1.10") in c.addresses and ip("10.9.9.9") in c.addresses
    assert any(p.basis == "assumed" and "192.168.1.10" in p.value for p in c.premises)


def test_ipset_matching_networks_follow_the_most_specific_entry() -> None:
    from nat_verify.netfilter.context import IPSet

    s = IPSet(
        "pools", "hash:net", 4,
        members=(net("10.244.0.0/16"), net("10.244.7.128/25"), net("192.168.0.1/32")),
        nomatch=(net("10.244.7.0/24"),),
    )  # fmt: skip
    nets = s.matching_networks()
    # every address agrees with the entry-by-entry lookup
    for probe in ("10.244.0.1", "10.244.6.255", "10.244.7.0", "10.244.7.127", "10.244.7.128", "10.244.7.255",
                  "10.244.8.0", "10.245.0.0", "192.168.0.1", "192.168.0.2"):  # fmt: skip
        a = ip(probe)
        assert any(a in n for n in nets) == s.contains(a), probe
    assert net("10.244.7.0/25") not in nets and net("10.244.7.128/25") in nets
