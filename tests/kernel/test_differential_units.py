"""Pure parts of the model-vs-kernel bridge (no privileges needed): the chi-square survival
function against table values, the distribution fit, ``compare``, the mirrored topology and
the packet generator."""

from __future__ import annotations

import ipaddress
import math
from fractions import Fraction

import pytest

from nat_verify.check.nodectx import node_context
from nat_verify.kube import load_clusters
from nat_verify.kubeproxy import compile_node
from nat_verify.model.outcome import Outcome, Trace
from nat_verify.model.packet import Packet
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.parse import parse
from nat_verify.oracle.bridge import (
    OracleUnsupported,
    dnat_targets,
    kernel_outcome,
    local_dnat_ports,
    mirror_packet,
    topology_for,
)
from nat_verify.oracle.differential import chi2_sf, compare, fits_distribution
from nat_verify.oracle.oracle import KernelResult
from nat_verify.oracle.targets import aims, packets_for_ruleset

# -- chi-square ---------------------------------------------------------------------------------

# (statistic, degrees of freedom, upper-tail probability) from standard chi-square tables
# (e.g. NIST/SEMATECH e-Handbook, table 1.3.6.7.4), 3-4 significant digits.
TABLE = [
    (3.841, 1, 0.05),
    (6.635, 1, 0.01),
    (10.828, 1, 0.001),
    (5.991, 2, 0.05),
    (11.070, 5, 0.05),
    (20.515, 5, 0.001),
    (1.145, 5, 0.95),  # lower tail side: the series branch (x/2 < a + 1)
    (3.940, 10, 0.95),
    (18.307, 10, 0.05),
    (29.588, 10, 0.001),
    (124.342, 100, 0.05),
]


@pytest.mark.parametrize(("x", "df", "p"), TABLE)
def test_chi2_sf_matches_tables(x: float, df: int, p: float) -> None:
    assert chi2_sf(x, df) == pytest.approx(p, rel=2e-3)


@pytest.mark.parametrize("x", [0.01, 0.5, 1.9, 2.1, 7.0, 13.8155, 40.0, 300.0])
def test_chi2_sf_two_degrees_is_exponential(x: float) -> None:
    # With 2 degrees of freedom the chi-square law is exponential with mean 2: P(X >= x) = e^(-x/2).
    assert chi2_sf(x, 2) == pytest.approx(math.exp(-x / 2), rel=1e-10)


def test_chi2_sf_edges() -> None:
    assert chi2_sf(0.0, 3) == 1.0
    assert chi2_sf(math.inf, 3) == 0.0
    with pytest.raises(ValueError, match="degrees of freedom"):
        chi2_sf(1.0, 0)


def _out(dst: str, port: int, p: Fraction, **kw: object) -> Outcome:
    fields: dict[str, object] = {
        "probability": p,
        "verdict": "forward",
        "dst": ipaddress.ip_address(dst),
        "dport": port,
        "src": ipaddress.ip_address("10.0.0.2"),
        "sport": 40000,
        "dnat": True,
    }
    fields.update(kw)
    return Outcome(**fields)  # type: ignore[arg-type]


THIRDS = [_out(f"10.1.0.{i}", 80, Fraction(1, 3)) for i in (1, 2, 3)]


def test_fits_distribution() -> None:
    exact = {("10.1.0.1", 80): 500, ("10.1.0.2", 80): 500, ("10.1.0.3", 80): 500}
    assert fits_distribution(THIRDS, exact) == (True, 0.0)
    # (700-500)^2/500 + 2 * (400-500)^2/500 = 80 + 20 + 20 = 120, far beyond 13.8 (df 2, p .001)
    skewed = {("10.1.0.1", 80): 700, ("10.1.0.2", 80): 400, ("10.1.0.3", 80): 400}
    ok, stat = fits_distribution(THIRDS, skewed)
    assert (ok, stat) == (False, pytest.approx(120.0))
    # a destination the model never sends to
    ok, stat = fits_distribution(THIRDS, {**exact, ("10.9.9.9", 80): 1})
    assert (ok, stat) == (False, math.inf)
    # 3600/500 + 2 * 900/500 = 10.8: below 13.82 (df 2, p .001), above 9.21 (df 2, p .01)
    near = {("10.1.0.1", 80): 560, ("10.1.0.2", 80): 470, ("10.1.0.3", 80): 470}
    ok, stat = fits_distribution(THIRDS, near)
    assert ok and stat == pytest.approx(10.8)
    assert fits_distribution(THIRDS, near, alpha=0.01)[0] is False  # 10.8 > 9.21 (df 2, p .01)
    # one destination: nothing random, every probe must go there
    one = [_out("10.1.0.1", 80, Fraction(1))]
    assert fits_distribution(one, {("10.1.0.1", 80): 9}) == (True, 0.0)


# -- compare ------------------------------------------------------------------------------------

PKT = Packet(src="10.0.0.2", dst="10.96.0.1", dport=80, origin="pod")


def _k(verdict: str = "forward", **kw: object) -> KernelResult:
    return KernelResult(verdict, src="10.0.0.2", sport=20000, dst="10.96.0.1", dport=80, **kw)  # type: ignore[arg-type]


def test_compare_membership_and_destination() -> None:
    tr = Trace(PKT, tuple(THIRDS))
    assert compare(tr, _k(dnat=("10.1.0.2", 80))) is None
    msg = compare(tr, _k(dnat=("10.1.0.4", 80)))
    assert msg is not None and "10.1.0.4:80" in msg and "model allows" in msg
    assert compare(tr, _k(dnat=("10.1.0.2", 81))) is not None  # the port counts too
    assert compare(tr, _k("accept", dnat=("10.1.0.2", 80))) is not None  # and the verdict


def test_compare_source_rewrite() -> None:
    masq = Trace(
        PKT,
        (_out("10.1.0.1", 80, Fraction(1), src=ipaddress.ip_address("10.0.0.1"), masquerade=True),),
    )
    assert compare(masq, _k(dnat=("10.1.0.1", 80), snat_ip="10.0.0.1")) is None
    assert compare(masq, _k(dnat=("10.1.0.1", 80))) is not None  # kernel kept the source
    assert compare(masq, _k(dnat=("10.1.0.1", 80), snat_ip="10.0.0.9")) is not None
    assert compare(masq, _k(dnat=("10.1.0.1", 80), snat_ip="10.0.0.9"), exact_source=False) is None
    plain = Trace(PKT, (_out("10.1.0.1", 80, Fraction(1)),))
    assert compare(plain, _k(dnat=("10.1.0.1", 80), snat_ip="10.0.0.1")) is not None
    # a masquerade to the packet's own address changes nothing conntrack can show
    same = Trace(PKT, (_out("10.1.0.1", 80, Fraction(1), masquerade=True),))
    assert compare(same, _k(dnat=("10.1.0.1", 80))) is None


def test_compare_reject_drop_lost_inconclusive() -> None:
    rej = Trace(
        PKT,
        (
            _out(
                "10.96.0.1",
                80,
                Fraction(1),
                verdict="reject",
                dnat=False,
                reject_with="icmp-port-unreachable",
            ),
        ),
    )
    assert compare(rej, _k("reject", icmp=(3, 3), reject_with="icmp-port-unreachable")) is None
    assert compare(rej, _k("reject", reject_with="tcp-reset")) is not None
    assert compare(rej, _k("drop")) is not None
    rst = Trace(
        PKT,
        (_out("10.96.0.1", 80, Fraction(1), verdict="reject", dnat=False, reject_with="tcp-rst"),),
    )
    assert compare(rst, _k("reject", reject_with="tcp-reset")) is None  # iptables alias
    drop = Trace(PKT, (_out("10.96.0.1", 80, Fraction(1), verdict="drop", dnat=False),))
    assert compare(drop, _k("drop")) is None
    assert compare(drop, _k("forward")) is not None
    lo = Packet(src="10.0.0.2", dst="127.0.0.1", dport=80, origin="pod")
    stays = Trace(lo, (_out("127.0.0.1", 80, Fraction(1), verdict="accept", dnat=False),))
    assert compare(stays, KernelResult("lost", src="10.0.0.2", dst="127.0.0.1", dport=80)) is None
    unk = Trace(
        PKT, (_out("10.96.0.1", 80, Fraction(1), verdict="inconclusive", reason="target FOO"),)
    )
    msg = compare(unk, _k())
    assert msg is not None and "inconclusive (target FOO)" in msg
    assert compare(rej, _k("unreachable")) is not None


def test_kernel_outcome_shape() -> None:
    o = kernel_outcome(PKT, _k(dnat=("10.1.0.1", 8080), snat_ip="10.0.0.1", snat_port=1234))
    j = o.to_json()
    assert (j["probability"], j["verdict"], j["destination"], j["source"], j["dnat"], j["masquerade"]) == (
        "1", "forward", "10.1.0.1:8080", "10.0.0.1:1234", True, True,
    )  # fmt: skip
    assert j["path"] == [] and "kernel" in str(j["reason"])
    assert kernel_outcome(PKT, _k("lost")).verdict == "accept"
    assert kernel_outcome(PKT, _k("unreachable")).verdict == "inconclusive"
    rej = kernel_outcome(PKT, _k("reject", reject_with="icmp-port-unreachable"))
    assert (rej.verdict, rej.reject_with, rej.destination, rej.dnat) == (
        "reject",
        "icmp-port-unreachable",
        "10.96.0.1:80",
        False,
    )


# -- the mirrored topology ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def web() -> tuple[object, NodeContext]:
    (cluster,) = [c for c in load_clusters("specs") if c.name == "web-svc"]
    rs = parse(compile_node(cluster, "node-1", 4), source="web-svc/node-1")
    return rs, node_context(cluster, "node-1", 4)


def test_topology_mirrors_web_svc(web: tuple[object, NodeContext]) -> None:
    rs, ctx = web
    assert {str(a) for a in dnat_targets(rs)} == {"10.42.2.3", "10.42.1.7"}  # type: ignore[arg-type]
    pod_src = Packet(src="10.42.1.20", dst="10.43.0.15", dport=80, origin="pod")
    ext_src = Packet(src="203.0.113.77", dst="10.43.0.15", dport=80)
    spec, m = topology_for(rs, ctx, packets=[pod_src, ext_src])  # type: ignore[arg-type]
    # node-1 is 192.168.1.10 with pod CIDR 10.42.1.0/24; 10.42.1.7 is its endpoint, 10.42.2.3
    # lives on node-2 (routed to the sandbox's node2).
    assert spec.node_ips == ("192.168.1.10",)
    assert (spec.pod_cidr, spec.gateway) == ("10.42.1.0/24", "10.42.1.1")
    assert spec.pods == ("10.42.1.7", "10.42.1.20")
    assert spec.remote == ("10.42.2.3/32",)
    assert spec.external_clients == ("203.0.113.2", "203.0.113.77")
    # The kernel's MASQUERADE picks the address of the egress interface: the gateway on a pod
    # veth, the node's link address towards node2, the first node IP towards ext0.
    ip = ipaddress.ip_address
    assert m.route(ip("10.42.1.7")).src == ip("10.42.1.1")
    assert m.route(ip("10.42.2.3")).src == ip(spec.node_link_ip)
    assert m.route(ip("10.43.0.99")).src == ip(spec.node_link_ip)  # the default route
    assert m.route(ip("203.0.113.77")).src == ip("192.168.1.10")
    assert m.route(ip("127.0.0.1")).iface == "lo"
    # every address the sandboxed node owns is LOCAL to the model too (addrtype agrees)
    assert set(m.addresses) == {ip("192.168.1.10"), ip("10.42.1.1"), ip(spec.node_link_ip)}
    assert m.addresses[0] == ip("192.168.1.10")
    assert (m.pod_cidrs, m.local_pod_cidrs) == (ctx.pod_cidrs, ctx.local_pod_cidrs)
    # pod N arrives on prefix + N
    assert mirror_packet(pod_src, spec).in_iface == f"{spec.pod_iface_prefix}1"
    assert mirror_packet(ext_src, spec).in_iface == "ext0"
    assert local_dnat_ports(rs, spec.node_local()) == {}  # type: ignore[arg-type]


def test_topology_refuses_ipv6_and_sandbox_clashes(web: tuple[object, NodeContext]) -> None:
    rs, ctx = web
    with pytest.raises(OracleUnsupported, match="IPv4"):
        topology_for(rs, NodeContext(family=6, addresses=("fd00::1",)))  # type: ignore[arg-type]
    clash = NodeContext(family=4, addresses=("198.18.1.1",))
    with pytest.raises(OracleUnsupported, match="198.18"):
        topology_for(rs, clash)  # type: ignore[arg-type]


def test_packets_for_ruleset(web: tuple[object, NodeContext]) -> None:
    rs, ctx = web
    ip = ipaddress.ip_address
    targets = aims(rs, ctx)  # type: ignore[arg-type]
    # the ClusterIP with its port, the NodePort on the node address and on localhost
    for aim in [
        (ip("10.43.0.15"), 80, "tcp"),
        (ip("192.168.1.10"), 30080, "tcp"),
        (ip("127.0.0.1"), 30080, "tcp"),
    ]:
        assert aim in targets
    pk = packets_for_ruleset(rs, ctx, 300, seed=7)  # type: ignore[arg-type]
    assert len(pk) == 300
    assert pk == packets_for_ruleset(rs, ctx, 300, seed=7)  # type: ignore[arg-type]
    assert pk != packets_for_ruleset(rs, ctx, 300, seed=8)  # type: ignore[arg-type]
    assert {p.origin for p in pk} == {"external", "pod", "host"}
    aimed = {(a, port) for a, port, _ in targets}
    assert sum((p.dst, p.dport) in aimed for p in pk) > 200  # ~10% get a port no rule names
    assert all(p.origin == "host" for p in pk if p.dst.is_loopback)
    # hairpin: the local endpoint is among the pod sources
    assert any(p.src == ip("10.42.1.7") and p.origin == "pod" for p in pk)
