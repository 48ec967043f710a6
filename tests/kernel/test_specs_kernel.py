"""``trace --kernel`` and the model agree on every example in ``specs/``.

For every spec cluster, every node, IPv4: the rules kube-proxy would write are compiled,
loaded into a sandbox mirroring the node (``topology_for``), and every packet intent calls
interesting (each destination of ``destinations()`` from each of ``interesting_sources()``),
plus random packets aimed at the dump, is probed as a first connection (conntrack and
affinity reset before each probe). The kernel's answer must be one the model allows
(``compare``), including the masquerade address.

IPv6 is out of the oracle's scope for now: its sandbox is IPv4 only (no IPv6 namespaces,
routes or ICMPv6 evidence yet), so the dual-stack spec is checked on its IPv4 side only.
"""

from __future__ import annotations

import zlib

import pytest

from nat_verify.check.nodectx import node_context
from nat_verify.intent import destinations, interesting_sources
from nat_verify.kube import load_clusters
from nat_verify.kubeproxy import compile_node
from nat_verify.model.cluster import Cluster
from nat_verify.model.packet import Packet
from nat_verify.netfilter.parse import parse
from nat_verify.oracle.differential import OracleSession
from nat_verify.oracle.targets import packets_for_ruleset

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("kernel_ok")]

CLUSTERS = load_clusters("specs")
CASES = [(c, n.name) for c in CLUSTERS for n in c.nodes]
# Each intent packet is probed this often: enough that a 2-endpoint choice shows both sides
# most of the time, few enough for the whole file to take seconds.
PROBES = 4


def intent_packets(cluster: Cluster, node: str) -> list[Packet]:
    out = []
    for d in destinations(cluster, node, 4):
        for src, origin in interesting_sources(cluster, node, d):
            out.append(Packet(src=src, dst=d.ip, dport=d.port, proto=d.proto, origin=origin))  # type: ignore[arg-type]
    return out


def test_specs_are_all_here() -> None:
    # thirteen example clusters of two nodes each: a lost file must not shrink the check silently
    assert len(CLUSTERS) == 13
    assert len(CASES) == 26


@pytest.mark.parametrize(("cluster", "node"), CASES, ids=[f"{c.name}/{n}" for c, n in CASES])
def test_kernel_agrees_with_model_on_spec(cluster: Cluster, node: str) -> None:
    ruleset = parse(compile_node(cluster, node, 4), source=f"{cluster.name}/{node}")
    ctx = node_context(cluster, node, 4)
    packets = intent_packets(cluster, node)
    assert packets, "every spec has at least one IPv4 destination"
    randoms = packets_for_ruleset(
        ruleset, ctx, 12, seed=zlib.crc32(f"{cluster.name}/{node}".encode())
    )
    problems: list[str] = []
    with OracleSession.open(ruleset, ctx, packets + randoms) as s:
        for p in packets:
            problems += [d.message for d in s.check(p, PROBES)]
        for p in randoms:
            problems += [d.message for d in s.check(p, 1)]
    assert not problems, "\n".join(problems)
