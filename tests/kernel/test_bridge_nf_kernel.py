"""``net.bridge.bridge-nf-call-iptables`` decides whether a DNAT between pods on one bridge works.

The kernel: two pods A (10.244.1.2) and B (10.244.1.3) on the bridge cni0 of a node; a
ClusterIP 10.96.0.5:80 DNATed to B:8080 without masquerade. A's SYN goes to its gateway (the
ClusterIP is off-link), so the node routes it and nat PREROUTING translates it. B answers A
directly on the bridge: with bridge-nf-call-iptables=1 that bridged reply passes netfilter and
conntrack reverses the DNAT (A sees 10.96.0.5:80); with 0 it never meets conntrack, A gets a
SYN-ACK from 10.244.1.3 it did not ask for, and the connection fails. The model says the same:
``NodeContext.reply_bridged`` and NV010 (the sysctl is a node fact, ``--sysctl``).
"""

from __future__ import annotations

import ipaddress
import os
import socket
import threading
from collections.abc import Iterator

import pytest

from nat_verify.netfilter.context import NodeContext
from nat_verify.oracle.netns import create_namespaces, in_netns, ip_batch, run_in, write_sysctl

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("kernel_ok")]

RULES = """*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -d 10.96.0.5/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination 10.244.1.3:8080
COMMIT
"""


@pytest.fixture
def bridged() -> Iterator[tuple[int, int, int]]:
    node, a, b = create_namespaces(3)
    try:
        ip_batch(node, ["link set lo up", "link add cni0 type bridge", "link set cni0 up", "addr add 10.244.1.1/24 dev cni0"])
        for fd, name, addr in ((a, "veth-a", "10.244.1.2"), (b, "veth-b", "10.244.1.3")):
            res = run_in(node, ["ip", "link", "add", name, "type", "veth", "peer", "name", "eth0", "netns", f"/proc/{os.getpid()}/fd/{fd}"])
            assert res.returncode == 0, res.stderr
            ip_batch(node, [f"link set {name} master cni0", f"link set {name} up"])
            ip_batch(fd, ["link set lo up", "link set eth0 up", f"addr add {addr}/24 dev eth0", "route add default via 10.244.1.1"])
        write_sysctl(node, {"net.ipv4.ip_forward": "1"})
        res = run_in(node, ["iptables-restore"], RULES)
        assert res.returncode == 0, res.stderr
        yield node, a, b
    finally:
        for fd in (node, a, b):
            os.close(fd)


def _connect(a: int, b: int) -> tuple[str, int] | None:
    """A connects to the ClusterIP; B serves it. The peer A sees, or None if it failed."""
    with in_netns(b):
        srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("10.244.1.3", 8080))
    srv.listen(4)
    srv.settimeout(2)

    def serve() -> None:
        try:
            c, _ = srv.accept()
            c.close()
        except OSError:
            pass

    t = threading.Thread(target=serve)
    t.start()
    with in_netns(a):
        cli = socket.socket()
    cli.settimeout(1.5)
    try:
        cli.connect(("10.96.0.5", 80))
        peer = cli.getpeername()
        return str(peer[0]), int(peer[1])
    except OSError:
        return None
    finally:
        cli.close()
        t.join()
        srv.close()


@pytest.mark.parametrize(("value", "works"), [("1", True), ("0", False)])
def test_bridged_reply_needs_bridge_nf_call_iptables(bridged: tuple[int, int, int], value: str, works: bool) -> None:
    node, a, b = bridged
    if not os.path.exists("/proc/sys/net/bridge"):
        pytest.fail("br_netfilter is not loaded (modprobe br_netfilter): the sysctl under test does not exist")
    write_sysctl(node, {"net.bridge.bridge-nf-call-iptables": value})
    got = _connect(a, b)
    assert (got == ("10.96.0.5", 80)) if works else (got is None), got
    ctx = NodeContext(
        family=4, addresses=("10.244.1.1",), pod_cidrs=("10.244.1.0/24",), local_pod_cidrs=("10.244.1.0/24",),
        pod_iface="cni0", bridge_nf_call=value == "1",
    )  # fmt: skip
    assert ctx.reply_bridged("pod", ipaddress.ip_address("10.244.1.2"), ipaddress.ip_address("10.244.1.3")) is not works
