"""The interpreter's speed-ups change nothing: the destination index, chain summaries and the
whole-trace replay give exactly the outcomes of a plain rule-by-rule walk.

A summary replays a walk for another packet of the same class (see netfilter/summary.py); a
wrong class would show up here as a difference between the two interpreters, which see the
same packets in the same order.
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


# cheap and the guard of every speed-up: search harder than the profile's default
@settings(max_examples=max(400, settings.default.max_examples))
@given(nvst.clusters(max_nodes=2, max_services=4, max_endpoints=4, families=(4, 6)), st.data())
def test_fast_and_linear_interpreters_agree(cluster: Cluster, data: st.DataObject) -> None:
    node = data.draw(nvst.node_names(cluster))
    fams = sorted({4 if ":" not in a else 6 for a in cluster.node(node).internal_ips})
    family = data.draw(st.sampled_from(fams))
    rs = parse(compile_node(cluster, node, family), family=family)
    ctx = node_context(cluster, node, family)
    fast = Interpreter(rs, ctx, replay_after=0)  # replay whole traces from the first packet on
    plain = Interpreter(rs, ctx, linear=True)
    pkts = data.draw(st.lists(nvst.packets(cluster, node, family), min_size=1, max_size=40))
    for p in pkts:
        a, b = fast.trace(p), plain.trace(p)
        assert a == b, p
        # with the client remembered by the endpoint it was sent to (session affinity)
        for o in a.outcomes[:2]:
            if o.recent_set:
                recent = RecentState.of({k: 1.0 for k in o.recent_set})
                assert fast.trace(p, recent) == plain.trace(p, recent), p
