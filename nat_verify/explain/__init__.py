"""``nat-verify explain``: what an address or Service is, what selects its Pods, where its packets go.

``explain`` answers, from the user's own objects and rules, the questions a person debugging
Service networking asks (``target`` what the thing is, ``selection`` which Pods and why,
``flows`` what the node's rules do to a packet from a pod, the node and outside, ``facts`` what
those flows show that people get wrong). The answer is one JSON document
(``nat_verify.explain/v1``); ``render`` turns it into text, Markdown, HTML, SARIF or JUnit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from nat_verify import __version__
from nat_verify.explain.facts import facts
from nat_verify.explain.flows import service_flows
from nat_verify.explain.selection import selection
from nat_verify.explain.target import Identity, TargetError, identify
from nat_verify.model.cluster import Cluster
from nat_verify.netfilter.interpreter import Interpreter

EXPLAIN_FORMAT = "nat_verify.explain/v1"


def explain(
    cluster: Cluster,
    identity: Identity,
    node: str,
    traced: Sequence[tuple[Interpreter, Sequence[str]]],
    *,
    rules: str,
) -> dict[str, Any]:
    """The explanation of ``identity`` on ``node``, whose rules each interpreter of ``traced``
    runs (one per IP family), with the rules' text (for the rule text of each step); ``rules``
    says where they come from."""
    services = []
    for svc in identity.services:
        services.append({
            "service": svc.key, "type": svc.type, "location": svc.location(),
            "cluster_ips": [a for a in svc.cluster_ips if a != "None"],
            "ports": [
                {"name": p.name, "port": p.port, "protocol": p.protocol, "target_port": str(p.target_port),
                 "node_port": p.node_port}
                for p in svc.ports
            ],
            "external_traffic_policy": svc.external_traffic_policy,
            "internal_traffic_policy": svc.internal_traffic_policy,
            **selection(cluster, svc),
        })  # fmt: skip
    flows = [
        f
        for interp, lines in traced
        for f in service_flows(cluster, node, interp, lines, identity.services, ip=identity.ip, port=identity.port)
    ]
    return {
        "format": EXPLAIN_FORMAT,
        "tool": {"name": "nat-verify", "version": __version__},
        "target": identity.target,
        "node": node,
        "rules": rules,
        "what": list(identity.what),
        "services": services,
        "flows": flows,
        "facts": facts(flows, node),
    }


__all__ = ["EXPLAIN_FORMAT", "Identity", "TargetError", "explain", "identify"]
