"""What Kubernetes promises for the first packet of a connection to a Service address.

This is the reference semantics that a node's rules are checked against. It is derived from the
documented behaviour of Services, not from kube-proxy's rules, so the two can disagree:

* "Virtual IPs and Service Proxies" and the Service docs: traffic to a ClusterIP, NodePort,
  externalIP or LoadBalancer IP goes to one of the Service's endpoints, chosen at random with
  equal weight (NV001, NV002, NV007); a Service with no usable endpoints is rejected so clients
  fail fast (NV003; kube-proxy REJECT since issue 17359).
* "Service Traffic Policy" (``internalTrafficPolicy``, KEP-2086): ``Local`` sends ClusterIP
  traffic only to endpoints on the same node, and drops it when there is none (NV006).
* ``externalTrafficPolicy`` (Service docs; "Using Source IP" tutorial): ``Cluster`` may send
  external traffic to any node's endpoint and source-NATs it, so the client IP is lost (NV004);
  the promise is about clients outside the cluster: a pod of this node (as the local-traffic
  detector sees it) needs no masquerade, its reply comes back through this node's conntrack,
  so either is allowed (kubernetes#96296: kube-proxy 1.21-1.23 do not masquerade it, 1.24+ do;
  the hairpin case stays NV008);
  ``Local`` keeps the client IP and only uses this node's endpoints, dropping the traffic when
  there is none (NV005). Traffic from pods and from the node itself to an external address is
  "short-circuited" to the cluster-wide endpoints (PR 77523, kept after the PR 99317 debate):
  pods keep their source IP, the host is masqueraded because its source is a node address.
* Source IP for ClusterIP ("Using Source IP": "packets sent to ClusterIP from within the cluster
  are never source NAT'd"); what "within the cluster" means is the configured local-traffic
  detector (KubeProxyConfiguration ``detectLocalMode``; ``masqueradeAll`` masquerades all);
  traffic from outside it is masqueraded (NV009). With no detector nothing can be told apart;
  pod traffic keeps its source and no promise is made for other sources (NV010 warning).
* Hairpin (issue 20475, "a Pod cannot reach itself via its Service"): a pod whose connection is
  sent back to itself must be masqueraded, or its reply would bypass conntrack (NV008).
  Because the endpoint is chosen at random, this is expressed per endpoint
  (``Expectation.masquerade_required``).
* Locally delivered endpoints (the API server of ``default/kubernetes``, hostNetwork pods such as
  ingress controllers, node-local DNS, metrics agents): an endpoint whose address is one of this
  node's own addresses is delivered to a local socket. A packet that entered the node (from off
  the node or from a pod) is DNATed in nat PREROUTING, routed to INPUT, and never meets nat
  POSTROUTING, so nothing can masquerade it (the kernel: the packet keeps its source, the reply
  leaves from this node and conntrack reverses the DNAT). Its source is therefore expected to
  be kept, whatever the policy would ask of a forwarded packet, and its reply needs no
  masquerade to come back (no NV010). The node's own traffic to it takes the OUTPUT path, where
  nat POSTROUTING does run: the usual requirement applies, and a hairpin masquerade is not
  needed (the reply returns through lo and conntrack). An endpoint that is another node's
  address is forwarded like one on a remote pod.
* ``loadBalancerSourceRanges`` (Service docs, "restrict traffic through the cloud-provider
  load-balancer ... to the specified client IPs"): LB-IP traffic from any other source is dropped
  (NV012). The rule judges the packet's source address whatever its origin (pods included, as in
  kube-proxy's own flow tests "pod to LB1 (blocked by LoadBalancerSourceRanges)"). One documented
  exception (kube-proxy ``KUBE-FW``, reference section 3.7): a packet whose source is one of the
  Service's own LB IPs is accepted when a node IP of the family lies in a range (a node reaching
  its LB, SNATed by the cloud to the LB IP). NodePorts and externalIPs are not filtered
  (issue 33586: the documented upstream behaviour).
* A range list with no entry of the packet's family admits no source of that family (the client
  is not among "the specified client IPs"); unparseable entries are ignored.
"""

from __future__ import annotations

import ipaddress
from fractions import Fraction

import attrs

from nat_verify.intent.destination import Destination, find_service_port, lb_ips
from nat_verify.intent.detector import (
    Detector,
    detector_for,
    is_local_traffic,
    node_addresses,
)
from nat_verify.intent.endpoints import EndpointKey, EndpointSets, usable_endpoints
from nat_verify.intent.index import parse_ip
from nat_verify.model.cluster import Cluster, ProxyConfig, Service

KINDS: tuple[str, ...] = ("dnat", "reject", "drop", "unmanaged")


@attrs.frozen
class Expectation:
    """The outcomes Kubernetes allows for one packet.

    ``kind`` ``dnat``: DNAT to one of ``endpoints``, each with probability ``1/len``;
    ``reject`` / ``drop``: the packet must be rejected / dropped; ``unmanaged``: no promise.
    ``masquerade`` is the requirement for every endpoint not listed in ``masquerade_for``
    (True = must be masqueraded, False = must keep the client IP, None = not promised); ask
    ``masquerade_required(endpoint)`` for the endpoint the rules actually chose.
    ``warnings`` are configuration choices a checker should report but not fail (NV010).
    """

    kind: str
    endpoints: frozenset[EndpointKey] = frozenset()
    masquerade: bool | None = None
    invariants: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    masquerade_for: tuple[tuple[EndpointKey, bool | None], ...] = ()
    warnings: tuple[str, ...] = ()
    short_circuit: bool = False  # eTP=Local pod/host traffic sent to the cluster-wide endpoints

    def masquerade_required(self, endpoint: EndpointKey) -> bool | None:
        for key, value in self.masquerade_for:
            if key == endpoint:
                return value
        return self.masquerade

    def allows(self, endpoint: EndpointKey) -> bool:
        return self.kind == "dnat" and endpoint in self.endpoints

    @property
    def share(self) -> Fraction:
        """The probability each allowed endpoint must get (NV007); 0 when not a DNAT."""
        if self.kind != "dnat" or not self.endpoints:
            return Fraction(0)
        return Fraction(1, len(self.endpoints))


@attrs.frozen
class _Masq:
    """A masquerade requirement with its reason and optional warning."""

    value: bool | None
    reason: str
    warning: str = ""


def expect(
    cluster: Cluster,
    node: str,
    dest: Destination,
    src: str,
    origin: str,
    *,
    node_ips: frozenset[str] | None = None,
) -> Expectation:
    """What must happen to a new connection from ``src`` (entering as ``origin``) to ``dest``.

    ``origin``: ``external`` (arrives from off the node), ``pod`` (a pod on this node), ``host``
    (a process on the node). ``node_ips``: the node's own addresses (canonical text), when the
    caller knows more of them than the Node object lists (given node facts); an endpoint at one
    of them is delivered locally. Raises ``UnknownServicePort`` if ``dest`` names no Service
    port and ``ValueError`` for a source of the wrong family or an unknown origin.
    """
    if origin not in ("external", "pod", "host"):
        raise ValueError(f"origin must be external, pod or host, received {origin!r}")
    family = dest.family
    if parse_ip(src).version != family:
        raise ValueError(f"source {src} is not of the destination's family IPv{family}")
    svc, sp = find_service_port(cluster, dest.service, dest.proto)
    sets = usable_endpoints(cluster, node, svc, sp, family)

    if dest.address_class == "localhost-node-port" and origin != "host":
        return Expectation(
            "unmanaged",
            reasons=(
                "127.0.0.1 is only reachable from the node itself; no promise for "
                f"{origin} traffic",
            ),
        )
    if not sets.any_usable:
        return Expectation(
            "reject",
            invariants=("NV003",),
            reasons=(
                f"{dest.service} has no usable endpoint (no ready endpoint, and no serving "
                "terminating one to fall back to): connections are rejected so clients fail "
                "fast",
            ),
        )
    det = detector_for(cluster, node, family)
    common = _common_invariants(svc, sets)
    own = node_addresses(cluster, node) if node_ips is None else node_ips
    if dest.address_class == "cluster-ip":
        return _cluster_ip(cluster, svc, sets, det, _Src(src, origin, own), common)
    return _external(cluster, node, svc, dest, sets, det, _Src(src, origin, own), common)


@attrs.frozen
class _Src:
    """The packet's source, where it entered, and the node's own addresses (canonical text)."""

    ip: str
    origin: str
    own: frozenset[str]


def _show(ep: EndpointKey) -> str:
    return f"[{ep[0]}]:{ep[1]}" if ":" in ep[0] else f"{ep[0]}:{ep[1]}"


def _common_invariants(svc: Service, sets: EndpointSets) -> list[str]:
    inv: list[str] = []
    if sets.cluster_terminating or sets.local_terminating or any(e.terminating for e in sets.all):
        inv.append("NV013")
    if svc.session_affinity == "ClientIP":
        inv.append("NV011")
    return inv


def _cluster_ip(
    cluster: Cluster,
    svc: Service,
    sets: EndpointSets,
    det: Detector,
    source: _Src,
    common: list[str],
) -> Expectation:
    src, origin = source.ip, source.origin
    reasons: list[str] = []
    inv = ["NV001"]
    if svc.internal_traffic_policy == "Local":
        inv.append("NV006")
        if not sets.local:
            return Expectation(
                "drop",
                invariants=("NV006",),
                reasons=(
                    "internalTrafficPolicy=Local and no usable endpoint on this node: ClusterIP "
                    "traffic is dropped, never sent to another node (KEP-2086)",
                ),
            )
        targets = sets.local
        reasons.append("internalTrafficPolicy=Local: only this node's endpoints (KEP-2086)")
    else:
        targets = sets.cluster
        reasons.append("internalTrafficPolicy=Cluster: any usable endpoint in the cluster")
    reasons.extend(sets.notes)
    masq = _internal_masquerade(cluster.proxy, det, src, origin)
    return _dnat(targets, masq, source, sets, inv + ["NV007", "NV009"] + common, reasons)


def _internal_masquerade(proxy: ProxyConfig, det: Detector, src: str, origin: str) -> _Masq:
    """NV009: masquerade for ClusterIP traffic by the configured local-traffic detector."""
    if proxy.masquerade_all:
        return _Masq(True, "masqueradeAll: every ClusterIP connection is masqueraded")
    if not det.configured:
        if origin == "pod":
            return _Masq(
                False,
                "no local-traffic detector configured: ClusterIP traffic from a pod keeps its "
                "source IP",
            )
        why = (
            f"no local-traffic detector configured (NV010 warning): {origin} traffic to a "
            "ClusterIP cannot be told from pod traffic, so masquerade is not promised"
        )
        return _Masq(None, why, why)
    if is_local_traffic(det, src, origin):
        return _Masq(
            False,
            f"{det.describe()} calls {src} cluster traffic: ClusterIP traffic from within the "
            "cluster keeps its source IP ('Using Source IP')",
        )
    return _Masq(
        True,
        f"{det.describe()} calls {src} traffic from outside the cluster: it is masqueraded (NV009)",
    )


def _external(
    cluster: Cluster,
    node: str,
    svc: Service,
    dest: Destination,
    sets: EndpointSets,
    det: Detector,
    source: _Src,
    common: list[str],
) -> Expectation:
    src, origin = source.ip, source.origin
    reasons: list[str] = []
    inv = ["NV002"]
    if dest.address_class == "lb-ip" and svc.lb_source_ranges:
        allowed, why = _source_range_allows(cluster, node, svc, src, dest.family)
        if not allowed:
            fam_ranges = [r for r in svc.lb_source_ranges if _family_of_range(r) == dest.family]
            warn = () if fam_ranges else (
                f"NV012: loadBalancerSourceRanges has no IPv{dest.family} entry; kube-proxy then filters "
                f"no IPv{dest.family} source (only the cloud load balancer may)",
            )  # fmt: skip
            return Expectation("drop", invariants=("NV012",), reasons=(why,), warnings=warn)
        inv.append("NV012")
        reasons.append(why)

    if svc.external_traffic_policy == "Cluster":
        reasons.append("externalTrafficPolicy=Cluster: any usable endpoint in the cluster")
        reasons.extend(sets.notes)
        if origin == "pod" and is_local_traffic(det, src, origin):
            masq = _Masq(
                None,
                "externalTrafficPolicy=Cluster source-NATs clients from outside the cluster; a "
                f"pod of this node ({det.describe()}) needs no masquerade: its reply returns "
                "through this node's conntrack (kubernetes#96296, kube-proxy 1.21-1.23 keep it)",
            )
        elif origin == "external" and is_local_traffic(det, src, origin):
            # a pod of another node: no client from outside the cluster either. Whether its reply
            # finds its way back is the return path's question (NV010): externalIPs and LB IPs
            # are captured by its own node's kube-proxy, a NodePort on this node's address is not
            masq = _Masq(
                None,
                f"{src} is cluster traffic ({det.describe()}): a pod of another node is no client "
                "from outside the cluster (its return path is NV010's)",
            )
        else:
            masq = _Masq(
                True,
                "externalTrafficPolicy=Cluster: traffic to an external address is source-NATed "
                "(client IP lost)",
            )
        return _dnat(sets.cluster, masq, source, sets, inv + ["NV004", "NV007"] + common, reasons)

    inv.append("NV005")
    if origin == "host":
        reasons.append(
            "externalTrafficPolicy=Local, traffic from the node itself: short-circuited to all "
            "cluster endpoints (PR 77523)"
        )
        reasons.extend(sets.notes)
        masq = _Masq(
            True,
            "host traffic to an external address is masqueraded (its source is a node address)",
        )
        exp = _dnat(sets.cluster, masq, source, sets, inv + ["NV007"] + common, reasons)
        return attrs.evolve(exp, short_circuit=True)
    if is_local_traffic(det, src, origin):
        reasons.append(
            f"externalTrafficPolicy=Local, pod traffic ({det.describe()}): short-circuited to "
            "all cluster endpoints as if it went out to the load balancer and back (PR 77523, "
            "PR 99317)"
        )
        reasons.extend(sets.notes)
        masq = _Masq(False, "short-circuited pod traffic keeps its source IP")
        exp = _dnat(sets.cluster, masq, source, sets, inv + ["NV007"] + common, reasons)
        return attrs.evolve(exp, short_circuit=True)

    warnings: list[str] = []
    if origin == "pod":
        why = (
            "no local-traffic detector configured (NV010 warning): traffic from a pod on this "
            "node cannot be told from external traffic, so it gets the external behaviour"
        )
        reasons.append(why)
        warnings.append(why)
    if not sets.local:
        return Expectation(
            "drop",
            invariants=("NV005",),
            reasons=tuple(reasons)
            + (
                "externalTrafficPolicy=Local and no usable endpoint on this node: external "
                "traffic is dropped, never sent to another node",
            ),
            warnings=tuple(warnings),
        )
    reasons.append("externalTrafficPolicy=Local: only this node's endpoints")
    reasons.extend(sets.notes)
    masq = _Masq(False, "externalTrafficPolicy=Local: the client IP is preserved (no SNAT)")
    exp = _dnat(sets.local, masq, source, sets, inv + ["NV007"] + common, reasons)
    return attrs.evolve(exp, warnings=exp.warnings + tuple(warnings))


def _dnat(
    targets: frozenset[EndpointKey],
    masq: _Masq,
    source: _Src,
    sets: EndpointSets,
    invariants: list[str],
    reasons: list[str],
) -> Expectation:
    """A DNAT expectation, with hairpin and local-delivery overrides and the NV010 warning."""
    src, origin = source.ip, source.origin
    reasons = reasons + [masq.reason]
    warnings = [masq.warning] if masq.warning else []
    # endpoint addresses are canonical text (endpoint_infos), so compare canonical text
    src_text = str(parse_ip(src))
    per_endpoint: dict[EndpointKey, bool | None] = {}
    # a node address as source is the host itself: its reply returns through lo, no hairpin
    hairpin = [ep for ep in sorted(targets) if ep[0] == src_text and ep[0] not in source.own]
    if hairpin:
        per_endpoint.update((ep, True) for ep in hairpin)
        invariants = invariants + ["NV008"]
        reasons.append(
            f"hairpin: if {src} is sent to itself the connection must be masqueraded (issue 20475)"
        )
    delivered = [ep for ep in sorted(targets) if ep[0] in source.own]
    if delivered and origin != "host":
        per_endpoint.update((ep, False) for ep in delivered)
        reasons.append(
            f"{', '.join(map(_show, delivered))} is an address of this node: a packet sent there "
            "is delivered locally (INPUT) and never meets nat POSTROUTING, so it keeps its source "
            "and the reply returns through this node's conntrack"
        )
    if masq.value is False and origin == "external":
        remote = [ep for ep in targets if not sets.is_local(ep) and ep not in per_endpoint]
        if remote:
            invariants = invariants + ["NV010"]
            warnings.append(
                f"NV010: an off-node client ({src}) DNATed to an endpoint on another node without "
                "masquerade: the reply will not come back through this node's conntrack"
            )
    return Expectation(
        "dnat",
        endpoints=frozenset(targets),
        masquerade=masq.value,
        invariants=tuple(dict.fromkeys(invariants)),
        reasons=tuple(reasons),
        masquerade_for=tuple(sorted(per_endpoint.items())),
        warnings=tuple(warnings),
    )


def _family_of_range(text: str) -> int:
    try:
        return ipaddress.ip_network(text.strip(), strict=False).version
    except ValueError:
        return 0


def _source_range_allows(
    cluster: Cluster, node: str, svc: Service, src: str, family: int
) -> tuple[bool, str]:
    """NV012: whether loadBalancerSourceRanges admit ``src``, and why."""
    ranges = []
    for text in svc.lb_source_ranges:
        try:
            net = ipaddress.ip_network(text.strip(), strict=False)
        except ValueError:
            continue  # an invalid range admits nothing
        if net.version == family:
            ranges.append(net)
    addr = parse_ip(src)
    hit = next((net for net in ranges if addr in net), None)
    if hit is not None:
        return True, f"source {src} is inside loadBalancerSourceRanges entry {hit}"
    if str(addr) in lb_ips(svc, family):
        node_ips = [parse_ip(ip) for ip in node_addresses(cluster, node)]
        if any(ip in net for ip in node_ips if ip.version == family for net in ranges):
            return True, (
                f"source {src} is the Service's own LB IP and a node IP is inside "
                "loadBalancerSourceRanges: the node reaching its LB (SNATed to the LB IP) is "
                "admitted"
            )
    shown = ", ".join(map(str, ranges)) or f"no IPv{family} range"
    return False, (
        f"source {src} is outside loadBalancerSourceRanges ({shown}): LoadBalancer traffic is "
        "dropped"
    )
