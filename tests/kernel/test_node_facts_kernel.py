"""The node-fact parsers on live output of this machine's ``ip`` and ``ipset``.

A throwaway anonymous network namespace is configured like a flannel node (uplink, pod bridge,
VXLAN device, Docker bridge, a route to another node's pods) with ipsets like Weave's and
Calico's; ``ip -j addr``, ``ip -j route`` and ``ipset save`` are run inside it and parsed. The
expected values are the configuration written here, so a change in the installed tools' output
format shows up as a failure (the recorded outputs in ``tests/unit/data/node`` pin one version).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterator

import pytest

from nat_verify.netfilter.context import NodeContext
from nat_verify.node.build import node_context
from nat_verify.node.facts import NodeFacts
from nat_verify.node.ipaddr import parse_ip_addr
from nat_verify.node.iproute import parse_ip_route
from nat_verify.node.ipset import parse_ipset_save
from nat_verify.oracle.netns import create_namespaces, ip_batch, run_in

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("kernel_ok")]

SETUP = [
    "link set lo up",
    "link add eth0 type veth peer name eth0-peer",
    "link set eth0 up",
    "addr add 192.168.1.10/24 dev eth0",
    "link add cni0 type bridge",
    "link set cni0 up",
    "addr add 10.244.1.1/24 dev cni0",
    "link add vethpod0 type veth peer name vethpod0-peer",
    "link set vethpod0 master cni0",
    "link add flannel.1 type vxlan id 1 dstport 8472 local 192.168.1.10 dev eth0",
    "link set flannel.1 up",
    "addr add 10.244.1.0/32 dev flannel.1",
    "link add docker0 type bridge",
    "addr add 172.17.0.1/16 dev docker0",
    "route add default via 192.168.1.1 dev eth0 onlink",
    "route add 10.244.2.0/24 via 10.244.2.0 dev flannel.1 onlink",
    "route add blackhole 10.244.9.0/24",
]


@pytest.fixture
def netns() -> Iterator[int]:
    (fd,) = create_namespaces(1)
    try:
        ip_batch(fd, SETUP)
        yield fd
    finally:
        os.close(fd)  # the anonymous namespace goes with its last reference


def _run(fd: int, argv: list[str]) -> str:
    res = run_in(fd, argv)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_live_ip_addr_and_route(netns: int) -> None:
    ifs = {i.name: i for i in parse_ip_addr(_run(netns, ["ip", "-j", "addr"]))}
    assert [str(a) for a in ifs["eth0"].addresses if a.version == 4] == ["192.168.1.10/24"]
    assert [str(a) for a in ifs["cni0"].addresses if a.version == 4] == ["10.244.1.1/24"]
    assert [str(a) for a in ifs["flannel.1"].addresses if a.version == 4] == ["10.244.1.0/32"]
    assert [str(a) for a in ifs["docker0"].addresses] == ["172.17.0.1/16"]  # down, still owned
    assert ifs["vethpod0"].addresses == ()
    routes = {str(r.dst): r for r in parse_ip_route(_run(netns, ["ip", "-j", "route"]), interfaces=tuple(ifs.values()))}
    assert (routes["0.0.0.0/0"].iface, str(routes["0.0.0.0/0"].src)) == ("eth0", "192.168.1.10")
    assert (routes["10.244.2.0/24"].iface, str(routes["10.244.2.0/24"].src)) == ("flannel.1", "10.244.1.0")
    assert "10.244.9.0/24" not in routes  # blackhole
    # the context: every address is the node's, cni0 is the one pod bridge, eth0 the uplink
    ctx: NodeContext = node_context(4, NodeFacts(interfaces=tuple(ifs.values()), routes=tuple(routes.values())))
    assert (ctx.pod_iface, ctx.ext_iface) == ("cni0", "eth0")
    assert ipaddress.ip_address("172.17.0.1") in ctx.addresses
    assert ctx.route(ipaddress.ip_address("10.244.2.9")).iface == "flannel.1"


def test_live_ipset_save(netns: int) -> None:
    for cmd in (
        "create weave-local-pods hash:ip", "add weave-local-pods 10.32.0.5",
        "create pools hash:net", "add pools 10.244.0.0/16", "add pools 10.244.7.0/24 nomatch",
        "create ports hash:ip,port", "add ports 10.96.0.1,tcp:443",
    ):  # fmt: skip
        _run(netns, ["ipset", *cmd.split()])
    try:
        sets = {s.name: s for s in parse_ipset_save(_run(netns, ["ipset", "save"]))}
        ctx = NodeContext(family=4, addresses=("192.168.1.10",), ipsets=tuple(sets.values()))
        assert ctx.ipset_verdict("weave-local-pods", ipaddress.ip_address("10.32.0.5")) is True
        assert ctx.ipset_verdict("pools", ipaddress.ip_address("10.244.7.3")) is False
        assert ctx.ipset_verdict("pools", ipaddress.ip_address("10.244.8.3")) is True
        assert isinstance(ctx.ipset_verdict("ports", ipaddress.ip_address("10.96.0.1")), str)
    finally:
        _run(netns, ["ipset", "destroy"])  # ipsets are per namespace; leave none behind
