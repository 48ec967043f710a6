"""Random clusters with hostNetwork-backed Services: kube-proxy's own rules give no error.

Endpoints at node addresses (a DaemonSet with ``hostNetwork: true``, the API server) are
delivered locally on their own node and forwarded elsewhere; every invariant must hold on the
rules kube-proxy writes for them, on every node and family (``strategies.clusters(...,
host_network=True)``). A finding here is a false alarm of the kind issue 8 reports.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from nat_verify import strategies as nvst
from nat_verify.check import check_ruleset, families
from nat_verify.kubeproxy import compile_node
from nat_verify.model.cluster import Cluster
from nat_verify.netfilter.parse import parse


@settings(max_examples=25)
@given(nvst.clusters(max_nodes=3, max_services=3, max_endpoints=3, families=(4, 6), host_network=True), st.data())
def test_host_network_endpoints_raise_no_false_alarm(cluster: Cluster, data: st.DataObject) -> None:
    node = data.draw(nvst.node_names(cluster))
    for fam in families(cluster, node):
        rs = parse(compile_node(cluster, node, family=fam), family=fam)
        errors = [f for f in check_ruleset(cluster, node, rs).findings if f.severity == "error"]
        assert not errors, "\n".join(f"{f.invariant} {f.service}: {f.message} [{f.packet}]" for f in errors[:10])


@settings(max_examples=10)
@given(nvst.clusters(max_nodes=2, max_services=3, max_endpoints=3, host_network=True))
def test_strategy_draws_host_network_pods_at_node_addresses(cluster: Cluster) -> None:
    node_ips = {ip for n in cluster.nodes for ip in n.internal_ips}
    for pod in cluster.pods:
        if pod.host_network:
            assert set(pod.ips) <= node_ips
        else:
            assert not set(pod.ips) & node_ips
