"""``diff``'s destination classes (``check.destspace``): fewer classes, the same answer.

The reference is the enumeration ``diff`` used before (every destination interval, and for each
every port constant of every rule without a ``-d`` or whose ``-d`` holds it), kept here as a
test oracle: on random clusters, with one rule of the second ruleset removed, both say
"equivalent" for exactly the same pairs. A NodePort moved to another port is found.
"""

from __future__ import annotations

import ipaddress

import attrs
from hypothesis import given
from hypothesis import strategies as st

from nat_verify.check.atoms import SourceSpace
from nat_verify.check.equivalence import _signature, equivalent
from nat_verify.check.nodectx import node_context
from nat_verify.kubeproxy import compile_node
from nat_verify.model.cluster import Cluster
from nat_verify.model.packet import Packet
from nat_verify.netfilter.constants import DST_PORT_OPTIONS, networks, port_boundaries
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.parse import parse
from nat_verify.netfilter.ruleset import Ruleset
from nat_verify.strategies import clusters


def _reps(bounds: list[int], top: int) -> list[int]:
    edges = sorted({0, top, *[b for b in bounds if 0 <= b <= top]})
    return [lo if hi - lo <= 2 else lo + 1 for lo, hi in zip(edges, edges[1:], strict=False)]


def reference_differs(a: Ruleset, b: Ruleset, ctx: NodeContext) -> bool:
    """The former enumeration: quadratic, but simple enough to trust."""
    fam = ctx.family
    ia, ib = Interpreter(a, ctx), Interpreter(b, ctx)
    sa, sb = SourceSpace(ia), SourceSpace(ib)
    dst_nets = {*ctx.pod_cidrs, *ctx.local_pod_cidrs, ctx.loopback, *(ipaddress.ip_network(x) for x in ctx.addresses)}
    by_rule = []
    protos = {"tcp"}
    for rs in (a, b):
        for t in rs.tables:
            for c in t.chains:
                for r in c.rules:
                    d = r.core_option("-d")
                    nets = [n for n in networks(d.value) if n.version == fam] if d is not None else []
                    dst_nets.update(nets)
                    by_rule.append(([] if (d is None or d.negated) else nets, port_boundaries(r, DST_PORT_OPTIONS)))
                    p = r.core_option("-p")
                    if p is not None and p.value in ("tcp", "udp", "sctp"):
                        protos.add(p.value)
    bounds = [x for n in dst_nets if n.version == fam for x in (int(n.network_address), int(n.broadcast_address) + 1)]
    to_ip = ipaddress.IPv4Address if fam == 4 else ipaddress.IPv6Address
    for rep in _reps(bounds, 1 << (32 if fam == 4 else 128)):
        dst = to_ip(rep)
        if dst.is_multicast or dst.is_unspecified or (fam == 4 and rep >> 24 == 0):
            continue
        ports = [p for nets, dports in by_rule if not nets or any(dst in n for n in nets) for p in dports]
        for dport in _reps(ports, 65536):
            for proto in sorted(protos):
                if not dport:
                    continue
                extra = sb.constants(dst, dport, proto)[0] | sa.constants(dst, dport, proto)[0]
                for src, sport, origin in sa.classes(ctx, dst, dport, proto, extra):
                    pkt = Packet(src=src, dst=dst, dport=dport, sport=sport, proto=proto, origin=origin)  # type: ignore[arg-type]
                    if _signature(ia.trace(pkt).outcomes) != _signature(ib.trace(pkt).outcomes):
                        return True
    return False


def _without(rs: Ruleset, k: int) -> Ruleset:
    """``rs`` less its k-th rule (counting over every chain of every table)."""
    tables = []
    for t in rs.tables:
        chains = []
        for c in t.chains:
            n = len(c.rules)
            if 0 <= k < n:
                c = attrs.evolve(c, rules=c.rules[:k] + c.rules[k + 1 :])
            k -= n
            chains.append(c)
        tables.append(attrs.evolve(t, chains=tuple(chains)))
    out = attrs.evolve(rs, tables=tuple(tables))
    assert out.rule_count() == rs.rule_count() - 1
    return out


@given(clusters(max_nodes=2, max_services=3, max_endpoints=3), st.data())
def test_destination_classes_decide_as_the_former_enumeration(cluster: Cluster, data: st.DataObject) -> None:
    node = data.draw(st.sampled_from([n.name for n in cluster.nodes]))
    a = parse(compile_node(cluster, node, 4), family=4)
    k = data.draw(st.integers(0, max(0, a.rule_count() - 1)))
    b = _without(a, k)
    ctx = node_context(cluster, node, 4)
    assert (equivalent(a, b, ctx).difference is not None) == reference_differs(a, b, ctx)


def test_a_nodeport_moved_to_another_port_is_found() -> None:
    from nat_verify.kube.loader import load_cluster
    from tests.unit.test_fleet import CLUSTER

    cluster = load_cluster([CLUSTER])
    text = compile_node(cluster, "node-2", 4)
    assert text.count("--dport 30081") >= 1
    a = parse(text, family=4)
    b = parse(text.replace("--dport 30081", "--dport 30999"), family=4)
    res = equivalent(a, b, node_context(cluster, "node-2", 4))
    assert res.difference is not None
    assert res.difference.packet.dport in (30081, 30999)
