"""The Z3 encoding and the interpreter agree on every outcome of every packet.

The symbolic walk (``nat_verify.symbolic.walk``) runs every packet of an origin and protocol
at once; instantiated for one packet, its paths must give exactly the interpreter's outcomes:
verdict, translated destination and source, masquerade, REJECT type, probabilities, rule path
and reasons. Checked here on kube-proxy's rules for random clusters; on rulesets drawn from
the registry in ``test_symbolic_registry``.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nat_verify import strategies as nvst
from nat_verify.check.nodectx import node_context
from nat_verify.kubeproxy import compile_node
from nat_verify.model.cluster import Cluster
from nat_verify.netfilter.interpreter import Interpreter, RecentState
from nat_verify.netfilter.parse import parse
from nat_verify.symbolic.paths import outcomes, same_outcomes
from nat_verify.symbolic.walk import Walker


@settings(max_examples=max(60, settings.default.max_examples))
@given(nvst.clusters(max_nodes=2, max_services=3, max_endpoints=3, families=(4, 6)), st.data())
def test_symbolic_paths_give_the_interpreters_outcomes(cluster: Cluster, data: st.DataObject) -> None:
    node = data.draw(nvst.node_names(cluster))
    fams = sorted({4 if ":" not in a else 6 for a in cluster.node(node).internal_ips})
    family = data.draw(st.sampled_from(fams))
    rs = parse(compile_node(cluster, node, family), family=family)
    ctx = node_context(cluster, node, family)
    interp = Interpreter(rs, ctx, linear=True)
    walker = Walker(interp.program)
    walks: dict[tuple[str, str], list] = {}
    for p in data.draw(st.lists(nvst.packets(cluster, node, family), min_size=1, max_size=25)):
        key = (p.origin, p.proto)
        if key not in walks:
            walks[key] = walker.every_packet(p.origin, p.proto)
        traced = interp.trace(p).outcomes
        assert same_outcomes(outcomes(p, walks[key]), traced), p
        # the next connection of a client remembered by xt_recent (session affinity)
        for o in traced[:2]:
            if o.recent_set:
                recent = RecentState.of({k: age for k, age in zip(o.recent_set, (1.0, 20000.0), strict=False)})
                paths = walker.every_packet(p.origin, p.proto, recent=recent)
                assert same_outcomes(outcomes(p, paths), interp.trace(p, recent).outcomes), (p, recent)
