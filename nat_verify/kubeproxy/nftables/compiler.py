"""Cluster + node -> the nftables transaction kube-proxy's nftables mode writes (a full sync).

Written from upstream ``pkg/proxy/nftables/proxier.go`` (``setupNFTables`` and
``syncProxyRules``) in the layout of the conformance corpus's version (post-v1.34: filter
chains ``filter-prerouting-pre-dnat``/``filter-output-pre-dnat`` at -110 run the firewall
check before DNAT; ``filter-input``/``-forward``/``-output`` at 0 run the endpoint and
ClusterIP checks after it), and reproduces every literal of that corpus byte for byte after
upstream's test sort (``order.sort_transaction``).

Design
------
One table per IP family (``ip kube-proxy`` / ``ip6 kube-proxy``). Dispatch is by verdict
maps, not rule lists: ``service-ips`` (ClusterIP, externalIP, LB IP . protocol . port),
``service-nodeports`` (protocol . port, only for destinations in ``nodeport-ips``),
``firewall-ips`` (LB IPs with loadBalancerSourceRanges), and the ``no-endpoint-*`` maps whose
``drop`` / ``goto reject-chain`` verdicts the filter chains apply. Per service port there is a
``service-`` (Cluster policy) and/or ``local-`` (Local policy) chain ending in ``numgen random
mod N vmap``, an ``external-`` chain for external destinations, a ``firewall-`` chain for
source ranges, and an ``endpoint-`` chain (hairpin mark + DNAT) per endpoint; ClientIP affinity
adds an ``affinity-`` dynamic set per endpoint.

Which endpoints are used (``categorize``) and how Services are read (``service_ports``) are
shared with the iptables compiler: upstream shares them too (``proxy.CategorizeEndpoints``).

Output is knftables ``Fake.Dump()`` order (the table; chains, sets, maps by name; rules chain by
chain; set elements; map elements), which declares everything before its first use, so it loads
with ``nft -f`` as one transaction. ``stale_chains`` are chains of earlier syncs that kube-proxy
has flushed but not yet deleted (it deletes them a second later, for kernels before 6.2); they
are declared empty, as in the corpus's step-by-step literals.

Choices not shown by any corpus literal (from the older proxier.go and reasoning, noted here so
they can be checked): under ``masqueradeAll`` the masquerade rule is ``ip daddr <clusterIP>
jump mark-for-masquerade`` (the corpus version dropped ``<proto> dport <port>`` from the
detector form of this rule, and the chain is reached only through that address, protocol and
port); interface detectors are spelled ``iifname`` (the fix of kubernetes#134024; ``iif`` made
nft refuse the whole batch); with nodePortAddresses matching every address the ``nodeport-ips``
set is left out and NodePorts use ``fib daddr type local``.
"""

from __future__ import annotations

import ipaddress

import attrs

from nat_verify.kubeproxy.compiler import (
    _node_port_destinations,
    local_detector,
    mark_text,
    node_addresses,
)
from nat_verify.kubeproxy.endpoints import EndpointInfo, categorize, endpoint_index
from nat_verify.kubeproxy.errors import CompileError
from nat_verify.kubeproxy.nftables import names
from nat_verify.kubeproxy.serviceports import ServicePortInfo, service_ports
from nat_verify.model.cluster import Cluster, Node, ProxyConfig

TABLE = "kube-proxy"

FILTER_PREROUTING_PRE_DNAT = "filter-prerouting-pre-dnat"
FILTER_OUTPUT_PRE_DNAT = "filter-output-pre-dnat"
FILTER_INPUT = "filter-input"
FILTER_FORWARD = "filter-forward"
FILTER_OUTPUT = "filter-output"
NAT_PREROUTING = "nat-prerouting"
NAT_OUTPUT = "nat-output"
NAT_POSTROUTING = "nat-postrouting"

SERVICES = "services"
SERVICE_IPS = "service-ips"
SERVICE_NODEPORTS = "service-nodeports"
NODEPORT_IPS = "nodeport-ips"
CLUSTER_IPS = "cluster-ips"
SERVICE_ENDPOINTS_CHECK = "service-endpoints-check"
NODEPORT_ENDPOINTS_CHECK = "nodeport-endpoints-check"
NO_ENDPOINT_SERVICES = "no-endpoint-services"
NO_ENDPOINT_NODEPORTS = "no-endpoint-nodeports"
REJECT_CHAIN = "reject-chain"
CLUSTER_IPS_CHECK = "cluster-ips-check"
FIREWALL_IPS = "firewall-ips"
FIREWALL_CHECK = "firewall-check"
MARK_MASQ = "mark-for-masquerade"
MASQUERADING = "masquerading"

# (name, type, hook, priority) of the base chains
BASE_CHAINS: tuple[tuple[str, str, str, int], ...] = (
    (FILTER_PREROUTING_PRE_DNAT, "filter", "prerouting", -110),
    (FILTER_OUTPUT_PRE_DNAT, "filter", "output", -110),
    (FILTER_INPUT, "filter", "input", 0),
    (FILTER_FORWARD, "filter", "forward", 0),
    (FILTER_OUTPUT, "filter", "output", 0),
    (NAT_PREROUTING, "nat", "prerouting", -100),
    (NAT_OUTPUT, "nat", "output", -100),
    (NAT_POSTROUTING, "nat", "postrouting", 100),
)
# (chain jumped to, base chain, condition) in the order kube-proxy adds the jumps
JUMP_CHAINS: tuple[tuple[str, str, str], ...] = (
    (NODEPORT_ENDPOINTS_CHECK, FILTER_INPUT, "ct state new"),
    (SERVICE_ENDPOINTS_CHECK, FILTER_INPUT, "ct state new"),
    (SERVICE_ENDPOINTS_CHECK, FILTER_FORWARD, "ct state new"),
    (SERVICE_ENDPOINTS_CHECK, FILTER_OUTPUT, "ct state new"),
    (FIREWALL_CHECK, FILTER_PREROUTING_PRE_DNAT, "ct state new"),
    (FIREWALL_CHECK, FILTER_OUTPUT_PRE_DNAT, "ct state new"),
    (SERVICES, NAT_OUTPUT, ""),
    (SERVICES, NAT_PREROUTING, ""),
    (MASQUERADING, NAT_POSTROUTING, ""),
    (CLUSTER_IPS_CHECK, FILTER_FORWARD, "ct state new"),
    (CLUSTER_IPS_CHECK, FILTER_OUTPUT, "ct state new"),
)


def _q(text: str) -> str:
    """Go ``%q`` for the comments kube-proxy writes (plain ASCII: quotes and backslashes)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def nft_detector(cfg: ProxyConfig, node: Node, family: int) -> tuple[str, str] | None:
    """(``is local``, ``is not local``) of the LocalTrafficDetector, in nft spelling."""
    det = local_detector(cfg, node, family)
    if det is None:
        return None
    flag, _, value = det[0].partition(" ")
    if flag == "-s":
        ip = "ip6" if family == 6 else "ip"
        return (f"{ip} saddr {value}", f"{ip} saddr != {value}")
    name = value[:-1] + "*" if value.endswith("+") else value
    return (f"iifname {name}", f"iifname != {name}")


class _Tx:
    """The objects of one transaction, collected in any order and printed in dump order."""

    def __init__(self, family: str) -> None:
        self.family = family
        self.prefix = f"{family} {TABLE}"
        self.table = ""
        self.chains: dict[str, str] = {}
        self.rules: dict[str, list[str]] = {}
        self.sets: dict[str, str] = {}
        self.maps: dict[str, str] = {}
        self.elements: dict[str, list[str]] = {}

    def chain(self, name: str, spec: str = "") -> None:
        if name not in self.chains or spec:
            self.chains[name] = f"add chain {self.prefix} {name}" + (f" {{ {spec} }}" if spec else "")
        self.rules.setdefault(name, [])

    def rule(self, chain: str, text: str, comment: str = "") -> None:
        line = f"add rule {self.prefix} {chain} {text}"
        if comment:
            line += f" comment {_q(comment)}"
        self.rules[chain].append(line)

    def set(self, name: str, spec: str, kind: str = "set") -> None:
        (self.sets if kind == "set" else self.maps)[name] = f"add {kind} {self.prefix} {name} {{ {spec} }}"
        self.elements.setdefault(name, [])

    def element(self, name: str, key: str, value: str = "", comment: str = "") -> None:
        body = key + (f" comment {_q(comment)}" if comment else "") + (f" : {value}" if value else "")
        self.elements[name].append(f"add element {self.prefix} {name} {{ {body} }}")

    def text(self) -> str:
        out = [self.table]
        out += [self.chains[c] for c in sorted(self.chains)]
        out += [self.sets[s] for s in sorted(self.sets)]
        out += [self.maps[m] for m in sorted(self.maps)]
        for c in sorted(self.chains):
            out += self.rules[c]
        for s in sorted(self.sets):
            out += self.elements[s]
        for m in sorted(self.maps):
            out += self.elements[m]
        return "".join(line + "\n" for line in out)


def _service_cidrs(cluster: Cluster, family: int) -> list[str]:
    out = []
    for text in cluster.service_cidrs:
        try:
            net = ipaddress.ip_network(text.strip(), strict=False)
        except ValueError:
            raise CompileError(f"ServiceCIDR {text!r} is not a CIDR", cluster.source) from None
        if net.version == family:
            out.append(str(net))
    return out


def compile_node_nft(cluster: Cluster, node: str, family: int = 4, stale_chains: tuple[str, ...] = ()) -> str:
    """The ``add ...`` transaction kube-proxy's nftables mode writes on ``node`` for one family.

    Raises ``CompileError`` for a node the cluster does not have or an invalid address.
    """
    if family not in (4, 6):
        raise CompileError(f"family must be 4 or 6, received {family!r}")
    try:
        n = cluster.node(node)
    except KeyError:
        known = ", ".join(x.name for x in cluster.nodes) or "none"
        raise CompileError(f"node {node!r} is not in the cluster (nodes: {known})", cluster.source) from None
    cfg = cluster.proxy
    v6 = family == 6
    ip = "ip6" if v6 else "ip"
    addr_type = "ipv6_addr" if v6 else "ipv4_addr"
    no_localhost = "ip6 daddr != ::1" if v6 else "ip daddr != 127.0.0.0/8"
    mark = mark_text(cfg)
    addresses = node_addresses(n, family)
    primary = ipaddress.ip_address(addresses[0]) if addresses else None
    # nftables mode: nodePortAddresses defaults to the node's primary addresses
    np_cfg = cfg if cfg.node_port_addresses else _with_primary(cfg)
    match_all, _, np_ips = _node_port_destinations(np_cfg, family, addresses)
    detector = nft_detector(cfg, n, family)

    tx = _Tx(ip)
    tx.table = f"add table {ip} {TABLE} {{ comment {_q('rules for kube-proxy')} ; }}"
    for name, ctype, hook, prio in BASE_CHAINS:
        tx.chain(name, f"type {ctype} hook {hook} priority {prio} ;")
    for dst, src, cond in JUMP_CHAINS:
        tx.chain(dst)
        tx.rule(src, f"{cond} jump {dst}" if cond else f"jump {dst}")
    for chain in (SERVICES, CLUSTER_IPS_CHECK, MASQUERADING, MARK_MASQ):
        tx.chain(chain)
    tx.rule(MARK_MASQ, f"mark set mark or {mark}")
    tx.rule(MASQUERADING, f"mark and {mark} == 0 return")
    tx.rule(MASQUERADING, f"mark set mark xor {mark}")
    tx.rule(MASQUERADING, "masquerade fully-random")
    tx.set(CLUSTER_IPS, f"type {addr_type} ; comment {_q('Active ClusterIPs')} ;")
    tx.rule(CLUSTER_IPS_CHECK, f"{ip} daddr @{CLUSTER_IPS} reject", "Reject traffic to invalid ports of ClusterIPs")
    cidrs = _service_cidrs(cluster, family)
    if cidrs:
        tx.rule(CLUSTER_IPS_CHECK, f"{ip} daddr {{ {','.join(cidrs)} }} drop", "Drop traffic to unallocated ClusterIPs")
    if not match_all:
        tx.set(NODEPORT_IPS, f"type {addr_type} ; comment {_q('IPs that accept NodePort traffic')} ;")
        for a in np_ips:
            if not ipaddress.ip_address(a).is_loopback:  # no localhost NodePorts in nftables mode
                tx.element(NODEPORT_IPS, a)
    tx.set(NO_ENDPOINT_SERVICES, f"type {addr_type} . inet_proto . inet_service : verdict ; comment {_q('vmap to drop or reject packets to services with no endpoints')} ;", "map")
    tx.set(NO_ENDPOINT_NODEPORTS, f"type inet_proto . inet_service : verdict ; comment {_q('vmap to drop or reject packets to service nodeports with no endpoints')} ;", "map")
    tx.chain(REJECT_CHAIN, f"comment {_q('helper for @no-endpoint-services / @no-endpoint-nodeports')} ;")
    tx.rule(REJECT_CHAIN, "reject")
    tx.rule(SERVICE_ENDPOINTS_CHECK, f"{ip} daddr . meta l4proto . th dport vmap @{NO_ENDPOINT_SERVICES}")
    np_match = no_localhost if match_all else f"{ip} daddr @{NODEPORT_IPS}"
    tx.rule(NODEPORT_ENDPOINTS_CHECK, f"{np_match} meta l4proto . th dport vmap @{NO_ENDPOINT_NODEPORTS}")
    tx.set(FIREWALL_IPS, f"type {addr_type} . inet_proto . inet_service : verdict ; comment {_q('destinations that are subject to LoadBalancerSourceRanges')} ;", "map")
    tx.chain(FIREWALL_CHECK)
    tx.rule(FIREWALL_CHECK, f"{ip} daddr . meta l4proto . th dport vmap @{FIREWALL_IPS}")
    tx.set(SERVICE_IPS, f"type {addr_type} . inet_proto . inet_service : verdict ; comment {_q('ClusterIP, ExternalIP and LoadBalancer IP traffic')} ;", "map")
    tx.set(SERVICE_NODEPORTS, f"type inet_proto . inet_service : verdict ; comment {_q('NodePort traffic')} ;", "map")
    tx.rule(SERVICES, f"{ip} daddr . meta l4proto . th dport vmap @{SERVICE_IPS}")
    np_services = f"fib daddr type local {no_localhost}" if match_all else f"{ip} daddr @{NODEPORT_IPS}"
    tx.rule(SERVICES, f"{np_services} meta l4proto . th dport vmap @{SERVICE_NODEPORTS}")

    index = endpoint_index(cluster, node, family)
    for sp in service_ports(cluster, family):
        eps = index.get((sp.namespace, sp.name, sp.port_name, sp.protocol), [])
        sel = categorize(eps, sp, n.zone, cfg.terminating_fallback)
        _service(tx, sp, sel.cluster, sel.local, sel.reachable, sel.has_endpoints, cfg, ip, addr_type, detector, primary)
    for chain in stale_chains:
        if chain not in tx.chains:
            tx.chain(chain)
    return tx.text()


def _with_primary(cfg: ProxyConfig) -> ProxyConfig:
    return attrs.evolve(cfg, node_port_addresses=("primary",))


def _service(
    tx: _Tx,
    sp: ServicePortInfo,
    cluster_eps: tuple[EndpointInfo, ...],
    local_eps: tuple[EndpointInfo, ...],
    reachable: tuple[EndpointInfo, ...],
    has_endpoints: bool,
    cfg: ProxyConfig,
    ip: str,
    addr_type: str,
    detector: tuple[str, str] | None,
    primary: ipaddress.IPv4Address | ipaddress.IPv6Address | None,
) -> None:
    proto = sp.proto
    base = names.service_port_base(sp.namespace, sp.name, proto, sp.port_name)
    cluster_chain = names.SERVICE + base
    local_chain = names.LOCAL + base
    ext_chain = names.EXTERNAL + base
    fw_chain = names.FIREWALL + base
    ep_base = {ep.endpoint: names.endpoint_base(sp.namespace, sp.name, proto, sp.port_name, ep.endpoint) for ep in reachable}
    for ep in reachable:
        tx.chain(names.ENDPOINT + ep_base[ep.endpoint])
    uses_cluster_chain = bool(cluster_eps) and sp.uses_cluster_endpoints
    uses_local_chain = bool(local_eps) and sp.uses_local_endpoints
    if uses_cluster_chain:
        tx.chain(cluster_chain)
    if uses_local_chain:
        tx.chain(local_chain)
    internal_chain, has_internal = cluster_chain, has_endpoints
    if sp.internal_local:
        internal_chain = local_chain
        has_internal = has_internal and bool(local_eps)
    external_policy_chain, has_external = cluster_chain, has_endpoints
    if sp.external_local:
        external_policy_chain = local_chain
        has_external = has_external and bool(local_eps)
    uses_ext_chain = has_endpoints and sp.externally_accessible
    if uses_ext_chain:
        tx.chain(ext_chain)
    if not has_endpoints:
        internal_verdict = external_verdict = f"goto {REJECT_CHAIN}"
    else:
        internal_verdict = "" if has_internal else "drop"
        external_verdict = "" if has_external else "drop"

    port = str(sp.port)
    tx.element(CLUSTER_IPS, sp.cluster_ip)
    if has_internal:
        tx.element(SERVICE_IPS, f"{sp.cluster_ip} . {proto} . {port}", f"goto {internal_chain}")
    else:
        tx.element(NO_ENDPOINT_SERVICES, f"{sp.cluster_ip} . {proto} . {port}", internal_verdict, sp.spn)
    for eip in sp.external_ips:
        if has_endpoints:
            tx.element(SERVICE_IPS, f"{eip} . {proto} . {port}", f"goto {ext_chain}")
        if not has_external:
            tx.element(NO_ENDPOINT_SERVICES, f"{eip} . {proto} . {port}", external_verdict, sp.spn)
    uses_fw = bool(sp.lb_ips) and bool(sp.source_ranges)
    if uses_fw:
        tx.chain(fw_chain)
    for lbip in sp.lb_ips:
        if has_endpoints:
            tx.element(SERVICE_IPS, f"{lbip} . {proto} . {port}", f"goto {ext_chain}")
        if uses_fw:
            tx.element(FIREWALL_IPS, f"{lbip} . {proto} . {port}", f"goto {fw_chain}")
    if not has_external:
        for lbip in sp.lb_ips:
            tx.element(NO_ENDPOINT_SERVICES, f"{lbip} . {proto} . {port}", external_verdict, sp.spn)
    if sp.node_port:
        if has_endpoints:
            tx.element(SERVICE_NODEPORTS, f"{proto} . {sp.node_port}", f"goto {ext_chain}")
        if not has_external:
            tx.element(NO_ENDPOINT_NODEPORTS, f"{proto} . {sp.node_port}", external_verdict, sp.spn)

    if has_internal:
        if cfg.masquerade_all:
            tx.rule(internal_chain, f"{ip} daddr {sp.cluster_ip} jump {MARK_MASQ}")
        elif detector is not None:
            # off-cluster traffic to a ClusterIP may be bounced to another node: masquerade it
            tx.rule(internal_chain, f"{ip} daddr {sp.cluster_ip} {detector[1]} jump {MARK_MASQ}")
    if uses_ext_chain:
        if not sp.external_local:
            tx.rule(ext_chain, f"jump {MARK_MASQ}")
        else:
            if detector is not None:
                tx.rule(ext_chain, f"{detector[0]} goto {cluster_chain}", "short-circuit pod traffic")
            tx.rule(ext_chain, f"fib saddr type local jump {MARK_MASQ}", "masquerade local traffic")
            tx.rule(ext_chain, f"fib saddr type local goto {cluster_chain}", "short-circuit local traffic")
        if has_external:
            tx.rule(ext_chain, f"goto {external_policy_chain}")
    if uses_fw:
        sources = list(sp.source_ranges)
        if primary is not None and any(primary in ipaddress.ip_network(c) for c in sp.source_ranges):
            # a VIP bound on the node loops back with the VIP as source: allow it
            sources += list(sp.lb_ips)
        tx.rule(fw_chain, f"{ip} saddr != {{ {' , '.join(sources)} }} drop")
    affinity = sp.affinity_timeout > 0
    if affinity:
        for ep in reachable:
            tx.set(names.AFFINITY + ep_base[ep.endpoint], f"type {addr_type} ; flags dynamic,timeout ; timeout {sp.affinity_timeout}s ;")
    if uses_cluster_chain:
        _to_endpoints(tx, cluster_chain, cluster_eps, ep_base, affinity, ip)
    if uses_local_chain:
        _to_endpoints(tx, local_chain, local_eps, ep_base, affinity, ip)
    for ep in reachable:
        chain = names.ENDPOINT + ep_base[ep.endpoint]
        tx.rule(chain, f"{ip} saddr {ep.ip} jump {MARK_MASQ}")
        if affinity:
            tx.rule(chain, f"update @{names.AFFINITY + ep_base[ep.endpoint]} {{ {ip} saddr }}")
        tx.rule(chain, f"meta l4proto {proto} dnat to {ep.endpoint}")


def _to_endpoints(
    tx: _Tx, chain: str, eps: tuple[EndpointInfo, ...], ep_base: dict[str, str], affinity: bool, ip: str
) -> None:
    if affinity:
        for ep in eps:
            b = ep_base[ep.endpoint]
            tx.rule(chain, f"{ip} saddr @{names.AFFINITY + b} goto {names.ENDPOINT + b}")
    items = " , ".join(f"{i} : goto {names.ENDPOINT + ep_base[ep.endpoint]}" for i, ep in enumerate(eps))
    tx.rule(chain, f"numgen random mod {len(eps)} vmap {{ {items} }}")
