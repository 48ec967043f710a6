"""Titles of the invariants NV001-NV015, for reports that are read without the checker.

The checker (``nat_verify.check``) owns the catalogue proper; this table is the fallback
a renderer uses when a report does not carry titles of its own (see ``build_report``).
Statements follow DESIGN.md's invariant table.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs


@attrs.frozen
class InvariantInfo:
    """What a report says about one invariant: a stable ID, a CamelCase name, one line."""

    id: str
    name: str
    title: str
    description: str = ""

    def to_json(self) -> dict[str, str]:
        d = {"name": self.name, "title": self.title}
        if self.description:
            d["description"] = self.description
        return d


def _i(id: str, name: str, title: str, description: str) -> InvariantInfo:
    return InvariantInfo(id, name, title, description)


BUILTIN: Mapping[str, InvariantInfo] = {
    i.id: i
    for i in (
        _i("NV001", "ClusterIPReachesEndpoint",
           "ClusterIP traffic is DNATed to a usable endpoint",
           "A packet to ClusterIP:port of a Service with usable endpoints is DNATed to one of "
           "them, on the endpoint's targetPort, and never elsewhere."),
        _i("NV002", "NodePortReachesEndpoint",
           "NodePort, externalIP and LoadBalancer traffic is DNATed to a usable endpoint",
           "Every NodePort address (nodePortAddresses, localhost NodePorts), externalIP and "
           "LoadBalancer IP leads to a usable endpoint of the Service."),
        _i("NV003", "NoEndpointsRejected",
           "A Service without usable endpoints is rejected",
           "A Service with no usable endpoints is REJECTed, never silently dropped or forwarded "
           "without NAT."),
        _i("NV004", "ClusterPolicyMasquerades",
           "externalTrafficPolicy=Cluster masquerades external traffic",
           "With externalTrafficPolicy=Cluster, external traffic is masqueraded (the client IP "
           "is lost)."),
        _i("NV005", "LocalPolicyKeepsClientIP",
           "externalTrafficPolicy=Local keeps the client IP and uses local endpoints only",
           "With externalTrafficPolicy=Local, external traffic keeps its client IP and reaches "
           "only local endpoints; with none local it is dropped; pod and host sources are "
           "short-circuited to the cluster endpoints."),
        _i("NV006", "InternalLocalPolicy",
           "internalTrafficPolicy=Local uses local endpoints only",
           "With internalTrafficPolicy=Local, ClusterIP traffic reaches only local endpoints; "
           "with none local it is dropped."),
        _i("NV007", "UniformEndpointChoice",
           "Every endpoint is chosen with probability 1/n",
           "Each of n endpoints is chosen with probability exactly 1/n, within the kernel's "
           "2^-31 quantisation of the statistic match."),
        _i("NV008", "HairpinMasquerade",
           "Hairpin traffic is masqueraded",
           "A pod that reaches itself through a Service is masqueraded."),
        _i("NV009", "OffClusterMasquerade",
           "ClusterIP traffic from outside the cluster is masqueraded",
           "ClusterIP traffic from outside the cluster, as the local-traffic detector defines it, "
           "is masqueraded (all of it with masqueradeAll)."),
        _i("NV010", "ReturnPath",
           "DNAT to another node from an off-node client is masqueraded",
           "A DNAT to an endpoint on another node from an off-node client is masqueraded so the "
           "reply returns through this node's conntrack."),
        _i("NV011", "SessionAffinity",
           "sessionAffinity=ClientIP keeps a client on its endpoint",
           "With sessionAffinity=ClientIP, a client sent to an endpoint keeps it within the "
           "timeout."),
        _i("NV012", "LoadBalancerSourceRanges",
           "Traffic from outside loadBalancerSourceRanges is dropped",
           "LoadBalancer IP traffic from outside loadBalancerSourceRanges is dropped."),
        _i("NV013", "TerminatingFallback",
           "Terminating endpoints are used only when no ready endpoint exists",
           "Terminating (serving) endpoints receive traffic only when the Service has no ready "
           "endpoint."),
        _i("NV014", "RulesetStructure",
           "The ruleset is well-formed",
           "No jump to a missing chain, no orphaned KUBE chain, no unreachable rule; the "
           "masquerade mark is set with a mask and cleared before MASQUERADE."),
        _i("NV015", "Drift",
           "The dump matches the cluster state",
           "The dump's Services and endpoints match the cluster state: no stale endpoint, no "
           "missing Service."),
    )
}


def info(invariant: str, catalogue: Mapping[str, InvariantInfo] | None = None) -> InvariantInfo:
    """The entry for ``invariant``; an unknown ID gets a placeholder rather than an error."""
    for table in (catalogue or {}, BUILTIN):
        if invariant in table:
            return table[invariant]
    return InvariantInfo(invariant, invariant, invariant)


def from_report(report: Mapping[str, object]) -> dict[str, InvariantInfo]:
    """The titles a report document carries (``"catalogue"``), as ``InvariantInfo`` s."""
    raw = report.get("catalogue")
    out: dict[str, InvariantInfo] = {}
    if isinstance(raw, Mapping):
        for k, v in raw.items():
            if isinstance(v, Mapping):
                out[str(k)] = InvariantInfo(
                    str(k),
                    str(v.get("name", k)),
                    str(v.get("title", k)),
                    str(v.get("description", "")),
                )
    return out
