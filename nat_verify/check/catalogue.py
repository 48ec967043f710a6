"""The invariant catalogue: NV001-NV028, each a small object with a stable ID.

Each invariant says which Kubernetes rule it stands for (with the upstream document or KEP),
which packet classes it covers, and how it judges one packet: ``check(case)`` compares the
intent's ``Expectation`` with the interpreter's outcome distribution and yields the
violations it owns. Ownership is exclusive: a difference is reported by the most specific
invariant that names it (see each docstring), so a planted bug is caught under one ID.

NV011 (two connections), NV014 (structure) and NV015 (drift) are not per-packet: their checks
live in ``runner``, ``structure`` and ``drift``; their entries here document them. NV016-NV028
are about the cluster's objects, not the rules (the selector, the Pods, the EndpointSlices):
``objects`` checks them, once per cluster.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterator
from fractions import Fraction
from typing import ClassVar

import attrs

from nat_verify.intent import Destination, Expectation
from nat_verify.intent.endpoints import EndpointInfo
from nat_verify.model.outcome import Outcome, Trace, probability_text
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.interpreter import reply
from nat_verify.netfilter.saveform import P31

ALL_CLASSES = ("cluster-ip", "node-port", "localhost-node-port", "external-ip", "lb-ip")
EXTERNAL = ("node-port", "localhost-node-port", "external-ip", "lb-ip")


@attrs.frozen
class Violation:
    invariant: str
    message: str
    expected: str
    actual: str
    outcome: Outcome | None = None
    severity: str = "error"


def describe(o: Outcome) -> str:
    if o.verdict == "inconclusive":
        return f"inconclusive ({o.reason})"
    head = {"reject": f"REJECT ({o.reject_with})", "drop": "DROP"}.get(o.verdict, "")
    if not head:
        head = f"DNAT {o.destination}" if o.dnat else f"{o.verdict} un-NATed to {o.destination}"
        head += ", masqueraded" if o.masquerade else ", client IP kept"
    return head + ("" if o.probability == 1 else f" (p={probability_text(o.probability)})")


def describe_expectation(exp: Expectation) -> str:
    if exp.kind == "dnat":
        eps = ", ".join(f"[{ip}]:{p}" if ":" in ip else f"{ip}:{p}" for ip, p in sorted(exp.endpoints))
        m = {True: "masqueraded", False: "client IP kept", None: "masquerade either way"}[exp.masquerade]
        return f"DNAT to one of {{{eps}}} (each 1/{len(exp.endpoints)}), {m}"
    return {"reject": "REJECT (icmp port unreachable)", "drop": "DROP", "unmanaged": "no promise"}[exp.kind]


@attrs.frozen(slots=False)
class Case:
    """One packet: where it goes, what Kubernetes allows, what the rules do."""

    dest: Destination
    src: str
    origin: str
    exp: Expectation
    trace: Trace
    endpoints: tuple[EndpointInfo, ...]
    ctx: NodeContext

    @functools.cached_property
    def outcomes(self) -> list[Outcome]:
        return [o for o in self.trace.outcomes if o.verdict != "inconclusive"]

    @functools.cached_property
    def _keys(self) -> dict[int, tuple[str, int]]:
        return {id(o): (str(o.dst), o.dport) for o in self.trace.outcomes}

    def key(self, o: Outcome) -> tuple[str, int]:
        return self._keys.get(id(o)) or (str(o.dst), o.dport)

    @property
    def want(self) -> str:
        return describe_expectation(self.exp)

    def endpoint(self, o: Outcome) -> EndpointInfo | None:
        ip, port = self.key(o)
        for e in self.endpoints:
            if e.ip == ip and e.port == port:
                return e
        return None

    def reached(self, o: Outcome) -> bool:
        return o.dnat and o.verdict in ("forward", "accept")

    def allowed(self, o: Outcome) -> bool:
        return self.reached(o) and self.key(o) in self.exp.endpoints

    def local_policy(self) -> str:
        """"NV006"/"NV005" when a Local traffic policy governs this case, else ""."""
        if "NV006" in self.exp.invariants:
            return "NV006"
        if self.dest.external and "NV005" in self.exp.invariants:
            return "NV005"
        return ""

    def violation(self, inv: str, message: str, o: Outcome | None, severity: str = "error") -> Violation:
        return Violation(inv, f"{self.dest}: {message}", self.want, describe(o) if o else "", o, severity)


class Invariant:
    id: ClassVar[str]
    name: ClassVar[str]  # CamelCase, for SARIF rule names
    title: ClassVar[str]
    description: ClassVar[str]  # the one-paragraph statement (DESIGN.md's table, expanded)
    reference: ClassVar[str]
    classes: ClassVar[tuple[str, ...]] = ALL_CLASSES

    def check(self, case: Case) -> Iterator[Violation]:
        return iter(())

    def applies(self, case: Case) -> bool:
        return case.dest.address_class in self.classes


class _Reach(Invariant):
    """Shared by NV001/NV002: the packet reaches a usable endpoint of *this* Service port."""

    def check(self, case: Case) -> Iterator[Violation]:
        if case.exp.kind != "dnat" or not self.applies(case) or case.local_policy():
            # under a Local policy NV005/NV006 own "not reached" and "reached a remote endpoint"
            yield from self._wrong_endpoints(case)
            return
        for o in case.outcomes:
            if not case.reached(o):
                yield case.violation(self.id, f"should reach an endpoint, but the packet is {describe(o)}", o)
        yield from self._wrong_endpoints(case)

    def _wrong_endpoints(self, case: Case) -> Iterator[Violation]:
        if case.exp.kind != "dnat" or not self.applies(case):
            return
        for o in case.outcomes:
            if not case.reached(o) or case.allowed(o):
                continue
            e = case.endpoint(o)
            if e is not None and e.terminating and e.serving:
                continue  # NV013
            if e is not None and e.ready and not e.local and case.local_policy():
                continue  # NV005 / NV006
            why = "an endpoint that is not ready" if (e is not None and not e.serving) else (
                "an address that is no usable endpoint of this Service port (wrong pod or port)")
            yield case.violation(self.id, f"is DNATed to {o.destination}, {why}", o)


class NV001(_Reach):
    """ClusterIP traffic goes to a usable endpoint of the Service, on its targetPort.

    "Virtual IPs and Service Proxies": a connection to a Service's ClusterIP:port is redirected
    to one of the Service's endpoints (the EndpointSlice addresses whose ``ready`` condition is
    true), on the endpoint's port (the resolved ``targetPort``). Never to another pod, never
    to a not-ready one, never left un-NATed.
    https://kubernetes.io/docs/reference/networking/virtual-ips/
    """

    id, name = "NV001", "ClusterIPReachesEndpoint"
    description = "A packet to ClusterIP:port of a Service with usable endpoints is DNATed to one of them, on the endpoint's targetPort, and never elsewhere."
    title = "ClusterIP traffic is DNATed to a usable endpoint"
    reference = "https://kubernetes.io/docs/reference/networking/virtual-ips/"
    classes = ("cluster-ip",)


class NV002(_Reach):
    """NodePort, externalIP and LoadBalancer traffic goes to a usable endpoint.

    The Service docs: a NodePort is open on every node address (``nodePortAddresses`` narrow it;
    iptables mode also serves 127.0.0.1 when ``localhostNodePorts``), externalIPs and
    ``status.loadBalancer.ingress`` IPs lead to the same endpoints as the ClusterIP.
    https://kubernetes.io/docs/concepts/services-networking/service/#type-nodeport
    """

    id, name = "NV002", "NodePortReachesEndpoint"
    description = 'Every NodePort address (nodePortAddresses, localhost NodePorts), externalIP and LoadBalancer IP leads to a usable endpoint of the Service.'
    title = "NodePort, externalIP and LoadBalancer traffic is DNATed to a usable endpoint"
    reference = "https://kubernetes.io/docs/concepts/services-networking/service/#type-nodeport"
    classes = EXTERNAL


class NV003(Invariant):
    """A Service without usable endpoints rejects connections (ICMP port unreachable).

    kube-proxy's contract since kubernetes issue 17359: clients must fail fast rather than hang,
    on every address of the Service and from every origin (issue 60124: pods, FORWARD path).
    """

    id, name = "NV003", "NoEndpointsRejected"
    description = 'A Service with no usable endpoints is REJECTed, never silently dropped or forwarded without NAT.'
    title = "A Service without usable endpoints is rejected"
    reference = "https://github.com/kubernetes/kubernetes/issues/17359"

    def check(self, case: Case) -> Iterator[Violation]:
        if case.exp.kind != "reject":
            return
        for o in case.outcomes:
            if o.verdict != "reject":
                if case.origin == "host" and case.dest.external and not case.ctx.is_local(case.trace.packet.dst):
                    # kube-proxy by design: filter OUTPUT has no KUBE-EXTERNAL-SERVICES jump, so the
                    # node's own traffic to a remote externalIP/LB IP leaves un-NATed (reference 2.3)
                    yield case.violation(
                        self.id,
                        f"has no usable endpoint, but the node's own packet is {describe(o)}: kube-proxy does "
                        "not reject host traffic to external addresses (no KUBE-EXTERNAL-SERVICES jump from OUTPUT)",
                        o, "warning",
                    )  # fmt: skip
                    return
                yield case.violation(self.id, f"has no usable endpoint and must be rejected, but the packet is {describe(o)}", o)
                return


class NV004(Invariant):
    """externalTrafficPolicy=Cluster: external traffic is masqueraded (the client IP is lost).

    Service docs ("externalTrafficPolicy: Cluster ... obscures the client source IP"); the
    node may forward to an endpoint on another node, so the source must be the node's for the
    reply to come back. https://kubernetes.io/docs/tutorials/services/source-ip/
    """

    id, name = "NV004", "ClusterPolicyMasquerades"
    description = 'With externalTrafficPolicy=Cluster, external traffic is masqueraded (the client IP is lost).'
    title = "externalTrafficPolicy=Cluster masquerades external traffic"
    reference = "https://kubernetes.io/docs/tutorials/services/source-ip/"
    classes = EXTERNAL

    def check(self, case: Case) -> Iterator[Violation]:
        if self.applies(case) and "NV005" not in case.exp.invariants:
            yield from _masquerade(case, self.id)


class NV005(Invariant):
    """externalTrafficPolicy=Local: client IP kept, local endpoints only, none -> DROP; pods and
    the host are short-circuited to the cluster-wide endpoints.

    Service docs ("Local preserves the client source IP and avoids a second hop"); the
    short-circuit for in-cluster sources: kubernetes PR 77523 (issue 66354), kept after PR 99317.
    A missing short-circuit is this invariant's finding wherever it shows: a drop on a node
    without local endpoints, or, with local endpoints, only those chosen (NV007 stays silent).
    https://kubernetes.io/docs/reference/networking/virtual-ips/#external-traffic-policy
    """

    id, name = "NV005", "LocalPolicyKeepsClientIP"
    description = 'With externalTrafficPolicy=Local, external traffic keeps its client IP and reaches only local endpoints; with none local it is dropped; pod and host sources are short-circuited to the cluster endpoints.'
    title = "externalTrafficPolicy=Local keeps the client IP and uses local endpoints only"
    reference = "https://kubernetes.io/docs/reference/networking/virtual-ips/#external-traffic-policy"
    classes = EXTERNAL

    def check(self, case: Case) -> Iterator[Violation]:
        if not self.applies(case) or "NV005" not in case.exp.invariants:
            return
        if case.exp.kind == "drop":
            if "NV012" not in case.exp.invariants and "NV006" not in case.exp.invariants:
                yield from _must_drop(case, self.id)
            return
        if case.exp.kind == "dnat":
            yield from _local_policy_reach(case, self.id)
            yield from _short_circuit(case, self.id)
            yield from _masquerade(case, self.id)


class NV006(Invariant):
    """internalTrafficPolicy=Local: ClusterIP traffic only to this node's endpoints; none -> DROP.

    KEP-2086, "Service Internal Traffic Policy".
    https://kubernetes.io/docs/concepts/services-networking/service-traffic-policy/
    """

    id, name = "NV006", "InternalLocalPolicy"
    description = 'With internalTrafficPolicy=Local, ClusterIP traffic reaches only local endpoints; with none local it is dropped.'
    title = "internalTrafficPolicy=Local uses local endpoints only"
    reference = "https://kubernetes.io/docs/concepts/services-networking/service-traffic-policy/"
    classes = ("cluster-ip",)

    def check(self, case: Case) -> Iterator[Violation]:
        if not self.applies(case) or "NV006" not in case.exp.invariants:
            return
        if case.exp.kind == "drop":
            yield from _must_drop(case, self.id)
        elif case.exp.kind == "dnat":
            yield from _local_policy_reach(case, self.id)


class NV007(Invariant):
    """Every allowed endpoint is chosen with probability 1/n.

    kube-proxy's statistic cascade (probability 1/(n-i) at step i) gives each endpoint 1/n in
    exact arithmetic; the kernel stores round(p * 2^31), so each step may be off by 2^-32. The
    check allows n * 2^-31 in total and nothing more: 5-decimal probabilities (issue 34321) fail.
    """

    id, name = "NV007", "UniformEndpointChoice"
    description = "Each of n endpoints is chosen with probability exactly 1/n, within the kernel's 2^-31 quantisation of the statistic match."
    title = "Every endpoint is chosen with probability 1/n"
    reference = "https://github.com/kubernetes/kubernetes/pull/83599"

    def check(self, case: Case) -> Iterator[Violation]:
        exp = case.exp
        if exp.kind != "dnat" or not exp.endpoints:
            return
        if len(case.outcomes) != len(case.trace.outcomes) or not all(case.allowed(o) for o in case.outcomes):
            return  # a wrong outcome is reported by its own invariant; shares are then moot
        if _unshort_circuited(case):
            return  # NV005 owns a missing short-circuit (only this node's endpoints chosen)
        shares: dict[tuple[str, int], Fraction] = defaultdict(Fraction)
        for o in case.outcomes:
            shares[(str(o.dst), o.dport)] += o.probability
        n = len(exp.endpoints)
        tol = Fraction(n, P31)
        missing = sorted(k for k in exp.endpoints if k not in shares)
        skew = sorted((k, p) for k, p in shares.items() if abs(p - exp.share) > tol)
        if missing or skew:
            parts = [f"{k[0]}:{k[1]} is never chosen" for k in missing]
            parts += [f"{k[0]}:{k[1]} gets {float(p):.6f}" for k, p in skew]
            actual = "; ".join(f"{k[0]}:{k[1]} p={probability_text(v)}" for k, v in sorted(shares.items()))
            yield Violation(self.id, f"{case.dest}: endpoints are not chosen uniformly (1/{n} each): " + ", ".join(parts), case.want, actual)


class NV008(Invariant):
    """Hairpin: a pod reaching itself through its Service is masqueraded.

    Kubernetes issue 20475: without SNAT the pod answers itself directly and the reply never
    meets the conntrack entry that would un-DNAT it.
    """

    id, name = "NV008", "HairpinMasquerade"
    description = 'A pod that reaches itself through a Service is masqueraded.'
    title = "Hairpin traffic is masqueraded"
    reference = "https://github.com/kubernetes/kubernetes/issues/20475"

    def check(self, case: Case) -> Iterator[Violation]:
        yield from _masquerade(case, self.id, hairpin=True)


class NV009(Invariant):
    """ClusterIP traffic from outside the cluster is masqueraded (all of it with masqueradeAll).

    "Using Source IP": packets to a ClusterIP from within the cluster are never source NAT'd;
    "within" is what the configured local-traffic detector (``detectLocalMode``) says.
    https://kubernetes.io/docs/tutorials/services/source-ip/#source-ip-for-services-with-type-clusterip
    """

    id, name = "NV009", "OffClusterMasquerade"
    description = 'ClusterIP traffic from outside the cluster, as the local-traffic detector defines it, is masqueraded (all of it with masqueradeAll).'
    title = "ClusterIP traffic from outside the cluster is masqueraded"
    reference = "https://kubernetes.io/docs/tutorials/services/source-ip/"
    classes = ("cluster-ip",)

    def check(self, case: Case) -> Iterator[Violation]:
        if self.applies(case):
            yield from _masquerade(case, self.id)


class NV010(Invariant):
    """Return path: a DNAT to another node's endpoint from an off-node client is masqueraded.

    Otherwise the endpoint answers the client directly, with its own address, and the client
    drops the reply (kubernetes issue 44916). Reported as a warning where the configuration
    itself chose so (no local-traffic detector, Local policy semantics). The same holds between
    two pods on one bridge when the node does not pass bridged packets to netfilter
    (``net.bridge.bridge-nf-call-iptables=0``, a node fact): the reply is bridged past conntrack.
    """

    id, name = "NV010", "ReturnPath"
    description = "A DNAT to an endpoint on another node from an off-node client is masqueraded so the reply returns through this node's conntrack."
    title = "DNAT to another node from an off-node client is masqueraded"
    reference = "https://github.com/kubernetes/kubernetes/issues/44916"

    def check(self, case: Case) -> Iterator[Violation]:
        if case.exp.kind != "dnat":
            return
        warn = any("NV010" in w for w in case.exp.warnings)
        src = case.trace.packet.src
        if case.dest.address_class in ("cluster-ip", "external-ip", "lb-ip") and case.origin == "external" and case.ctx.in_pod_network(src):
            # a pod on another node sends ClusterIP, externalIP and LB IP traffic through its own
            # node's rules (every kube-proxy captures them in PREROUTING), not ours
            return
        for o in case.outcomes:
            if not case.allowed(o) or _masq_mismatch(case, o) is not None:
                continue
            e = case.endpoint(o)
            bridged = case.ctx.reply_bridged(case.origin, src, o.dst) and not (o.masquerade or o.snat)
            if bridged:
                yield case.violation(
                    self.id,
                    f"the reply from {o.dst} to pod {case.src} is bridged past conntrack "
                    "(net.bridge.bridge-nf-call-iptables=0 and both pods on the bridge): the DNAT is "
                    "not undone, so the connection fails unless it is masqueraded",
                    o,
                )
                continue
            if e is not None and e.local:
                continue  # an endpoint on this node answers through this node (its EndpointSlice nodeName)
            if reply(case.trace.packet, o, case.ctx).broken:
                yield case.violation(
                    self.id,
                    f"the reply from {o.dst} to off-node client {case.src} bypasses this node's conntrack "
                    "(DNAT to another node without masquerade)",
                    o, "warning" if warn else "error",
                )  # fmt: skip


class NV011(Invariant):
    """sessionAffinity=ClientIP: a client keeps its endpoint within the timeout.

    Service docs, "Session stickiness". Checked over two connections in ``runner``.
    """

    id, name = "NV011", "SessionAffinity"
    description = 'With sessionAffinity=ClientIP, a client sent to an endpoint keeps it within the timeout.'
    title = "sessionAffinity=ClientIP keeps a client on its endpoint"
    reference = "https://kubernetes.io/docs/reference/networking/virtual-ips/#session-affinity"


class NV012(Invariant):
    """loadBalancerSourceRanges: LB-IP traffic from other sources is dropped.

    Service docs: "restrict traffic through the cloud-provider load-balancer ... to the
    specified client IPs". NodePorts are not covered (issue 33586, by design).
    """

    id, name = "NV012", "LoadBalancerSourceRanges"
    description = 'LoadBalancer IP traffic from outside loadBalancerSourceRanges is dropped.'
    title = "Traffic from outside loadBalancerSourceRanges is dropped"
    reference = "https://kubernetes.io/docs/concepts/services-networking/service/#loadbalancer"
    classes = ("lb-ip",)

    def check(self, case: Case) -> Iterator[Violation]:
        if self.applies(case) and case.exp.kind == "drop" and "NV012" in case.exp.invariants:
            warn = any("NV012" in w for w in case.exp.warnings)
            for v in _must_drop(case, self.id):
                yield attrs.evolve(v, severity="warning") if warn else v


class NV013(Invariant):
    """Terminating endpoints are used only when no ready endpoint exists (serving ones only).

    KEP-1669 (ProxyTerminatingEndpoints, GA 1.28).
    https://github.com/kubernetes/enhancements/tree/master/keps/sig-network/1669-proxy-terminating-endpoints
    """

    id, name = "NV013", "TerminatingFallback"
    description = 'Terminating (serving) endpoints receive traffic only when the Service has no ready endpoint.'
    title = "Terminating endpoints are used only when no ready endpoint exists"
    reference = "https://github.com/kubernetes/enhancements/tree/master/keps/sig-network/1669-proxy-terminating-endpoints"

    def check(self, case: Case) -> Iterator[Violation]:
        if case.exp.kind != "dnat":
            return
        for o in case.outcomes:
            if case.reached(o) and not case.allowed(o):
                e = case.endpoint(o)
                if e is not None and e.terminating and e.serving:
                    yield case.violation(self.id, f"is DNATed to {o.destination}, a terminating endpoint, while ready endpoints exist", o)


class NV014(Invariant):
    """Structure: no orphaned KUBE chain, no unreachable rule, the masquerade mark set with a mask
    and cleared before MASQUERADE (issues 19983, 78948), MASQUERADE --random-fully (76699), the
    CVE-2020-8558 martian DROP with localhost NodePorts. Checked in ``structure`` and ``runner``."""

    id, name = "NV014", "RulesetStructure"
    description = 'No jump to a missing chain, no orphaned KUBE chain, no unreachable rule; the masquerade mark is set with a mask and cleared before MASQUERADE.'
    title = "The ruleset is well-formed"
    reference = "https://github.com/kubernetes/kubernetes/issues/78948"


class NV015(Invariant):
    """Drift: the dump's Services and endpoints match the cluster state (``drift``)."""

    id, name = "NV015", "Drift"
    description = "The dump's Services and endpoints match the cluster state: no stale endpoint, no missing Service."
    title = "The dump matches the cluster state"
    reference = "https://github.com/kubernetes/enhancements/tree/master/keps/sig-network/3453-minimize-iptables-restore"


class _Objects(Invariant):
    """An invariant over the cluster's objects (``check.objects``): no packet involved."""

    classes = ()


class NV016(_Objects):
    """A Service's selector matches a Pod (or a workload's Pod template) in its namespace.

    "Service" docs: the selector determines the set of Pods a Service targets; the EndpointSlice
    controller lists the Pods of the Service's namespace whose labels contain every selector
    entry. A selector that matches nothing (a typo in a key or value, the wrong namespace) leaves
    the Service without endpoints; the finding lists the closest labels.
    """

    id, name = "NV016", "SelectorMatchesPods"
    description = "A Service's selector matches at least one Pod or Pod template in its namespace."
    title = "The selector matches a Pod"
    reference = "https://kubernetes.io/docs/concepts/services-networking/service/#services-in-kubernetes"


class NV017(_Objects):
    """A Service's selector selects the Pods of one workload.

    Labels are shared freely, so a selector such as ``app: web`` can also pick another
    Deployment's Pods, and connections are then spread over both. Workloads running the same
    image (a canary or blue-green split, as in the "Canary deployments" docs) are a note.
    """

    id, name = "NV017", "SelectorSingleWorkload"
    description = "A Service's selector selects the Pods of one workload, not of several running different images."
    title = "The selector selects one workload"
    reference = "https://kubernetes.io/docs/concepts/workloads/management/#canary-deployments"


class NV018(_Objects):
    """Every targetPort is a container port of the selected Pods.

    A named targetPort resolves, Pod by Pod, to the container port of that name and the Service
    port's protocol (EndpointSlice controller ``FindPort``); a Pod without one gets no endpoint
    port for that Service port. A number that no container declares is a warning only, since
    declaring container ports is optional.
    """

    id, name = "NV018", "TargetPortDeclared"
    description = "Every Service port's targetPort names (or numbers) a container port of the Pods it selects."
    title = "The targetPort is a container port of the selected Pods"
    reference = "https://kubernetes.io/docs/concepts/services-networking/service/#defining-a-service"


class NV019(_Objects):
    """A named targetPort resolves to one port number across the selected Pods.

    Kubernetes allows a named port to differ between Pods (a rollout that moves the port is
    the documented use, reported as a note); across unrelated Pods it is a warning.
    """

    id, name = "NV019", "TargetPortConsistent"
    description = "A named targetPort resolves to the same port number on every selected Pod (outside a rollout)."
    title = "A named targetPort resolves to one number"
    reference = "https://kubernetes.io/docs/concepts/services-networking/service/#defining-a-service"


class NV020(_Objects):
    """The container port a targetPort resolves to has the Service port's protocol.

    ``FindPort`` matches name and protocol, so a UDP Service port whose named container port
    is TCP resolves to nothing; a number declared only for another protocol (the classic DNS
    ``53/UDP`` forgotten) is the same mistake.
    """

    id, name = "NV020", "TargetPortProtocol"
    description = "The container port behind a Service port's targetPort is declared for the Service port's protocol."
    title = "The container port has the Service port's protocol"
    reference = "https://kubernetes.io/docs/reference/networking/service-protocols/"


class NV021(_Objects):
    """Every Ready selected Pod is an endpoint in the Service's EndpointSlices.

    EndpointSlice controller: every selected Pod that is not finished and has an IP becomes an
    endpoint. A Ready Pod missing from the slices (a stale slice, a stuck controller) gets no
    traffic although the objects say it should.
    """

    id, name = "NV021", "ReadyPodsListed"
    description = "Every Ready Pod the selector selects is listed in the Service's EndpointSlices (or Endpoints)."
    title = "Every Ready selected Pod is an endpoint"
    reference = "https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/"


class NV022(_Objects):
    """Endpoint conditions match the Pod: serving = its Ready condition, terminating = being
    deleted, ready = serving and not terminating (or publishNotReadyAddresses).

    EndpointSlice docs, "Conditions". A not-Ready Pod listed as ready receives traffic it cannot
    serve; a Ready one listed as not ready receives none.
    """

    id, name = "NV022", "EndpointConditions"
    description = "An endpoint's ready, serving and terminating conditions agree with its Pod's readiness and deletion."
    title = "Endpoint conditions match the Pod's readiness"
    reference = "https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/#conditions"


class NV023(_Objects):
    """Every endpoint is a live Pod the selector selects, at its current address.

    An endpoint whose Pod was deleted, has finished, no longer matches the selector or changed
    its IP is stale: kube-proxy sends traffic to an address nobody serves.
    """

    id, name = "NV023", "NoStaleEndpoint"
    description = "Every endpoint is a live Pod that the Service's selector selects, at its current address."
    title = "No endpoint is stale"
    reference = "https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/#ownership"


class NV024(_Objects):
    """An EndpointSlice port is the targetPort resolved on the Pods it lists.

    The slice port named after a Service port carries the number ``targetPort`` resolves to on
    those Pods; kube-proxy DNATs to that number, so a wrong one reaches the Pod on a closed port.
    """

    id, name = "NV024", "EndpointPorts"
    description = "Each EndpointSlice port is the Service port's targetPort as resolved on the Pods the slice lists."
    title = "EndpointSlice ports are the resolved targetPorts"
    reference = "https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/#address-types"


class NV025(_Objects):
    """An endpoint's nodeName is its Pod's node, and its zone that node's zone label.

    kube-proxy reads ``nodeName`` to tell local endpoints (traffic policy Local) and ``zone``
    (with hints) for topology-aware routing; a wrong value sends traffic to the wrong node.
    """

    id, name = "NV025", "EndpointTopology"
    description = "An endpoint's nodeName is its Pod's node and its zone is that node's topology.kubernetes.io/zone."
    title = "Endpoint nodeName and zone match the Pod"
    reference = "https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/#topology"


class NV026(_Objects):
    """A Service whose selector matches Pods has a Ready one.

    Pod lifecycle docs: only Ready Pods receive Service traffic. When Pods exist but none is
    Ready the Service rejects every connection; the finding names the failing condition of each
    Pod (unscheduled, image pull, crash loop, readiness probe, readiness gate). A Service with no
    Pods at all is NV016.
    """

    id, name = "NV026", "SelectedPodsReady"
    description = "A Service whose selector matches Pods has at least one Ready Pod; otherwise the failing condition is named."
    title = "A selected Pod is Ready"
    reference = "https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-conditions"


class NV027(_Objects):
    """A Service's v1 Endpoints and EndpointSlices list the same ready and not-ready addresses.

    Both controllers derive them from the same Pods (and the mirroring controller copies custom
    Endpoints into slices); a difference means one is stale, and tools that still read Endpoints
    route differently from kube-proxy.
    """

    id, name = "NV027", "EndpointsMatchSlices"
    description = "A Service's v1 Endpoints and its EndpointSlices list the same ready and not-ready addresses."
    title = "v1 Endpoints agree with the EndpointSlices"
    reference = "https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/#endpointslice-mirroring"


class NV028(_Objects):
    """Every EndpointSlice names an existing Service (label ``kubernetes.io/service-name``).

    kube-proxy joins slices to Services by that label only; a slice naming a Service that does
    not exist (a typo in a hand-written slice for a selector-less Service) serves nobody.
    """

    id, name = "NV028", "SliceNamesService"
    description = "Every EndpointSlice's kubernetes.io/service-name label names a Service in its namespace."
    title = "Every EndpointSlice names an existing Service"
    reference = "https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/#ownership"


def _must_drop(case: Case, inv: str) -> Iterator[Violation]:
    for o in case.outcomes:
        if o.verdict != "drop":
            yield case.violation(inv, f"must be dropped, but the packet is {describe(o)}", o)
            return


def _local_policy_reach(case: Case, inv: str) -> Iterator[Violation]:
    if case.local_policy() != inv:
        return
    for o in case.outcomes:
        if not case.reached(o):
            yield case.violation(inv, f"should reach an endpoint, but the packet is {describe(o)}", o)
        elif not case.allowed(o):
            e = case.endpoint(o)
            if e is not None and e.ready and not e.local:
                yield case.violation(inv, f"is DNATed to {o.destination}, an endpoint on another node, under a Local traffic policy", o)


def _unshort_circuited(case: Case) -> list[tuple[str, int]]:
    """The other nodes' endpoints a short-circuited packet never reaches, when every outcome
    reached this node's endpoints only: the rules treat pod/host traffic to an eTP=Local address
    as external traffic (no short-circuit). Empty otherwise."""
    if not case.exp.short_circuit or not case.outcomes:
        return []
    if not all(case.allowed(o) for o in case.outcomes):
        return []  # a wrong outcome is reported by its own invariant
    chosen = {case.key(o) for o in case.outcomes}
    local = {e.key for e in case.endpoints if e.local}
    if not chosen or not chosen <= local:
        return []
    return sorted(k for k in case.exp.endpoints if k not in chosen and k not in local)


def _short_circuit(case: Case, inv: str) -> Iterator[Violation]:
    missing = _unshort_circuited(case)
    if not missing:
        return
    shown = ", ".join(f"[{ip}]:{p}" if ":" in ip else f"{ip}:{p}" for ip, p in missing)
    o = case.outcomes[0]
    yield case.violation(
        inv,
        f"traffic from {case.origin} {case.src} must be short-circuited to every cluster endpoint "
        "(externalTrafficPolicy=Local keeps only off-cluster clients on this node, PR 77523), but "
        f"the rules choose only this node's endpoints: {shown} is never chosen",
        o,
    )


def _masq_mismatch(case: Case, o: Outcome) -> str | None:
    """The invariant a masquerade difference on this outcome belongs to, or None."""
    if not case.allowed(o):
        return None
    key = case.key(o)
    need = case.exp.masquerade_required(key)
    if need is None or o.masquerade == need:
        return None
    if key[0] == case.src:
        return "NV008"
    if case.dest.external:
        return "NV005" if "NV005" in case.exp.invariants else "NV004"
    return "NV009"


def _masquerade(case: Case, inv: str, hairpin: bool = False) -> Iterator[Violation]:
    if case.exp.kind != "dnat":
        return
    for o in case.outcomes:
        if _masq_mismatch(case, o) != inv:
            continue
        need = case.exp.masquerade_required((str(o.dst), o.dport))
        word = "must be masqueraded" if need else "must keep the client IP"
        yield case.violation(inv, f"from {case.origin} {case.src} to endpoint {o.dst} {word}, but is {describe(o)}", o)


CATALOGUE: tuple[Invariant, ...] = (
    NV001(), NV002(), NV003(), NV004(), NV005(), NV006(), NV007(), NV008(), NV009(), NV010(),
    NV011(), NV012(), NV013(), NV014(), NV015(),
    NV016(), NV017(), NV018(), NV019(), NV020(), NV021(), NV022(), NV023(), NV024(), NV025(),
    NV026(), NV027(), NV028(),
)  # fmt: skip
BY_ID = {i.id: i for i in CATALOGUE}


def check_case(case: Case) -> list[Violation]:
    return [v for inv in CATALOGUE for v in inv.check(case)]
