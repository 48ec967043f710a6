"""The model's view of one node of a cluster (``NodeContext``), from its objects and node facts.

The construction lives in ``nat_verify.node.build``; this module is the checker's entry point.
"""

from __future__ import annotations

from nat_verify.model.cluster import Cluster
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.ruleset import Ruleset
from nat_verify.node.build import configured_pod_interface, localhost_node_ports, pod_network
from nat_verify.node.build import node_context as _build
from nat_verify.node.facts import NodeFacts

__all__ = ["configured_pod_interface", "localhost_node_ports", "node_context", "pod_network"]


def node_context(
    cluster: Cluster,
    node: str,
    family: int = 4,
    facts: NodeFacts | None = None,
    ruleset: Ruleset | None = None,
) -> NodeContext:
    """Node ``node`` of ``cluster`` for ``family``, with the node facts the user gave."""
    return _build(family, facts, cluster=cluster, node=node, ruleset=ruleset)
