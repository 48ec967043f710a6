"""The object checks against the strategies' own model of the EndpointSlice controller.

``nat_verify.strategies`` writes each generated Service's EndpointSlices from its Pods as the
controller does (conditions from readiness, ports from the resolved targetPort, nodeName and
zone from the Pod's node). So on every generated cluster the slice checks (NV021-NV025) and the
port checks (NV018-NV020) must hold; NV016 must fire exactly for a Service whose namespace has
Pods but none it selects, and NV026 exactly for one whose selected Pods exist but none is Ready.
"""

from __future__ import annotations

from hypothesis import given, settings

from nat_verify import strategies as nvst
from nat_verify.check import check_objects
from nat_verify.kube.selection import selects
from nat_verify.model.cluster import Cluster


@settings(max_examples=60)
@given(nvst.clusters(max_nodes=3, max_services=4, max_endpoints=4, families=(4, 6)))
def test_generated_clusters_agree_with_their_pods(cluster: Cluster) -> None:
    report = check_objects(cluster)
    errors = {(f.invariant, f.service) for f in report.findings if f.severity == "error"}
    assert not {e for e in errors if e[0] not in ("NV016", "NV026")}, report.findings
    for svc in cluster.services:
        pods = [p for p in cluster.pods if p.namespace == svc.namespace and selects(svc.selector, p.labels)]
        covered = any(p.namespace == svc.namespace for p in cluster.pods)
        assert (("NV016", svc.key) in errors) == (covered and not pods)
        assert (("NV026", svc.key) in errors) == (bool(pods) and not any(p.ready for p in pods))
