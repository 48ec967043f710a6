"""Cluster + node -> the iptables-restore input kube-proxy (iptables mode) writes.

``compile_node`` follows ``syncProxyRules`` of upstream ``pkg/proxy/iptables/proxier.go``
template by template (see ``/work/shared/reference/kube-proxy.md`` section 3). Output is a full
sync in canonical order, the order upstream's tests sort into (``sortIPTablesRules``): tables
``filter`` then ``nat``; in each, all chain lines then all rules grouped by chain, chains
ordered ``KUBE-NODEPORTS``, ``KUBE-SERVICES``, other ``KUBE-*`` alphabetically, then built-in
chains alphabetically; service blocks in ``KUBE-SERVICES``/``KUBE-NODEPORTS`` ordered by the
``ns/name`` string (ports of one Service in spec order), the "must be the last rule" rule(s)
last.

``base_jumps=True`` adds the jump rules kube-proxy installs outside the restore input
(``EnsureRule(Prepend, ...)``, reference section 2.3), in their final kernel order, under
chain lines of the form ``:PREROUTING - [0:0]``. ``iptables-restore --noflush`` (legacy and
nft backends, checked with iptables 1.8.9) accepts ``-`` for a built-in chain: it neither
flushes the chain nor changes its policy, so the file loads like kube-proxy's own input and the
ruleset is complete for tracing from the built-in hooks (their policy is unknown: ACCEPT on a
fresh node). Loading it twice with ``--noflush`` duplicates those jumps; kube-proxy uses
``-C``/``-I`` for them instead. The jumps to ``KUBE-FIREWALL`` exist in both families (kubelet
and kube-proxy create that chain unconditionally), so when the restore input has no
``KUBE-FIREWALL`` rules the chain is declared empty.

Performance: rules are plain strings appended to per-chain lists; no per-rule objects.
"""

from __future__ import annotations

import ipaddress

from nat_verify.kubeproxy.endpoints import EndpointInfo, Selection, categorize, endpoint_index
from nat_verify.kubeproxy.errors import CompileError
from nat_verify.kubeproxy.hashing import endpoint_chain_name
from nat_verify.kubeproxy.serviceports import ServicePortInfo, service_ports
from nat_verify.model.cluster import Cluster, Node, ProxyConfig

SERVICES = "KUBE-SERVICES"
EXTERNAL_SERVICES = "KUBE-EXTERNAL-SERVICES"
NODEPORTS = "KUBE-NODEPORTS"
POSTROUTING = "KUBE-POSTROUTING"
MARK_MASQ = "KUBE-MARK-MASQ"
FORWARD = "KUBE-FORWARD"
PROXY_FIREWALL = "KUBE-PROXY-FIREWALL"
FIREWALL = "KUBE-FIREWALL"

LAST_RULE_COMMENT = '"kubernetes service nodeports; NOTE: this must be the last rule in this chain"'
NFACCT_INVALID = "ct_state_invalid_dropped_pkts"
NFACCT_LOCALHOST_NP = "localhost_nps_accepted_pkts"

# (table, built-in chain, jump rule text) in final kernel order (reference section 2.3).
_PORTALS = '-m comment --comment "kubernetes service portals"'
_EXTERNAL = '-m comment --comment "kubernetes externally-visible service portals"'
_LB_FIREWALL = '-m comment --comment "kubernetes load balancer firewall"'
_NEW = "-m conntrack --ctstate NEW"
BASE_JUMPS: tuple[tuple[str, str, str], ...] = (
    ("filter", "INPUT", f"-j {FIREWALL}"),
    ("filter", "INPUT", f"{_NEW} {_LB_FIREWALL} -j {PROXY_FIREWALL}"),
    (
        "filter",
        "INPUT",
        f'-m comment --comment "kubernetes health check service ports" -j {NODEPORTS}',
    ),
    ("filter", "INPUT", f"{_NEW} {_EXTERNAL} -j {EXTERNAL_SERVICES}"),
    ("filter", "FORWARD", f"{_NEW} {_LB_FIREWALL} -j {PROXY_FIREWALL}"),
    ("filter", "FORWARD", f'-m comment --comment "kubernetes forwarding rules" -j {FORWARD}'),
    ("filter", "FORWARD", f"{_NEW} {_PORTALS} -j {SERVICES}"),
    ("filter", "FORWARD", f"{_NEW} {_EXTERNAL} -j {EXTERNAL_SERVICES}"),
    ("filter", "OUTPUT", f"-j {FIREWALL}"),
    ("filter", "OUTPUT", f"{_NEW} {_LB_FIREWALL} -j {PROXY_FIREWALL}"),
    ("filter", "OUTPUT", f"{_NEW} {_PORTALS} -j {SERVICES}"),
    ("nat", "PREROUTING", f"{_PORTALS} -j {SERVICES}"),
    ("nat", "OUTPUT", f"{_PORTALS} -j {SERVICES}"),
    ("nat", "POSTROUTING", f'-m comment --comment "kubernetes postrouting rules" -j {POSTROUTING}'),
)


def chain_sort_key(name: str) -> tuple[int, str]:
    """Upstream's chain order: KUBE-NODEPORTS, KUBE-SERVICES, KUBE-*, then the rest."""
    if name == NODEPORTS:
        return (0, name)
    if name == SERVICES:
        return (1, name)
    return (2 if name.startswith("KUBE-") else 3, name)


def mark_text(cfg: ProxyConfig) -> str:
    """The masquerade mark as written: Go ``%#08x`` (real kube-proxy) or the tests' ``0x4000``."""
    value = cfg.masquerade_mark
    if cfg.mark_spelling == "test":
        return f"{value:#x}"
    return f"0x{value:08x}"


def _probability(n: int) -> str:
    return f"{1.0 / n:0.10f}"  # Go "%0.10f"


def _network(
    text: str, what: str, cfg: ProxyConfig
) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    try:
        return ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        raise CompileError(
            f"KubeProxyConfiguration {what}: {text!r} is not a CIDR", cfg.source
        ) from None


def node_addresses(node: Node, family: int) -> list[str]:
    """The node's addresses of one family, in Node order (``Node.internal_ips``)."""
    out = []
    for text in node.internal_ips:
        try:
            addr = ipaddress.ip_address(text)
        except ValueError:
            raise CompileError(
                f"Node {node.name}: {text!r} is not an IP address", node.source
            ) from None
        if addr.version == family and str(addr) not in out:
            out.append(str(addr))
    return out


def local_detector(cfg: ProxyConfig, node: Node, family: int) -> tuple[str, str] | None:
    """(``is local`` match, ``is not local`` match) of the configured detector, or None."""
    mode = cfg.detect_local_mode or ("ClusterCIDR" if cfg.cluster_cidrs else "")
    if mode in ("ClusterCIDR", "NodeCIDR"):
        cidrs = cfg.cluster_cidrs if mode == "ClusterCIDR" else node.pod_cidrs
        for text in cidrs:
            net = _network(text, mode, cfg)
            if net.version == family:  # kube-proxy uses the first CIDR of the family
                return (f"-s {net}", f"! -s {net}")
        return None
    if mode == "BridgeInterface":
        br = cfg.bridge_interface
        return (f"-i {br}", f"! -i {br}") if br else None
    if mode == "InterfaceNamePrefix":
        p = cfg.interface_name_prefix
        return (f"-i {p}+", f"! -i {p}+") if p else None
    if mode == "":
        return None
    raise CompileError(f"KubeProxyConfiguration detectLocalMode: unknown mode {mode!r}", cfg.source)


def _node_port_destinations(
    cfg: ProxyConfig, family: int, addresses: list[str]
) -> tuple[bool, bool, list[str]]:
    """(match all local addresses?, contains the IPv4 loopback?, matching node addresses).

    As ``proxyutil.NewNodePortAddresses``: CIDRs of other families are dropped; none left or a
    zero CIDR means "all local addresses"; ``primary`` means the node's first address of the
    family. The node's addresses are its ``internal_ips`` plus the loopback address.
    """
    nets = []
    for text in cfg.node_port_addresses:
        if text.strip() == "primary":
            if addresses:
                nets.append(ipaddress.ip_network(addresses[0]))
            continue
        net = _network(text, "nodePortAddresses", cfg)
        if net.version == family:
            nets.append(net)
    if not nets or any(n.prefixlen == 0 for n in nets):
        return True, family == 4, []
    loop4 = ipaddress.ip_address("127.0.0.0")
    contains_loopback = family == 4 and any(
        n.network_address.is_loopback or loop4 in n for n in nets
    )
    loopback = "127.0.0.1" if family == 4 else "::1"
    matches = [a for a in [*addresses, loopback] if any(ipaddress.ip_address(a) in n for n in nets)]
    return False, contains_loopback, matches


def compile_node(cluster: Cluster, node: str, family: int = 4, base_jumps: bool = True) -> str:
    """The ``*filter ... COMMIT *nat ... COMMIT`` text kube-proxy writes on ``node``.

    ``family`` is 4 (iptables) or 6 (ip6tables): each family's proxier only sees its own
    ClusterIPs, externalIPs, LB IPs and EndpointSlices. Raises ``CompileError``.
    """
    if family not in (4, 6):
        raise CompileError(f"family must be 4 or 6, received {family!r}")
    try:
        n = cluster.node(node)
    except KeyError:
        known = ", ".join(x.name for x in cluster.nodes) or "none"
        raise CompileError(
            f"node {node!r} is not in the cluster (nodes: {known})", cluster.source
        ) from None
    cfg = cluster.proxy
    v6 = family == 6
    addresses = node_addresses(n, family)
    primary_ip = ipaddress.ip_address(addresses[0]) if addresses else None
    match_all, contains_loopback, np_ips = _node_port_destinations(cfg, family, addresses)
    localhost_np = not v6 and cfg.localhost_node_ports and contains_loopback
    nfacct = cfg.nfacct and not cfg.legacy_layout
    detector = local_detector(cfg, n, family)
    mark = mark_text(cfg)
    zone = n.zone

    ports = service_ports(cluster, family)
    index = endpoint_index(cluster, node, family)
    per_port = [index.get((sp.namespace, sp.name, sp.port_name, sp.protocol), []) for sp in ports]
    large = sum(len(eps) for eps in per_port) > cfg.large_cluster_threshold

    f_services: list[str] = []
    f_external: list[str] = []
    f_nodeports: list[str] = []
    f_firewall: list[str] = []
    f_forward: list[str] = []
    filter_chains: dict[str, list[str]] = {
        SERVICES: f_services,
        EXTERNAL_SERVICES: f_external,
        FORWARD: f_forward,
        NODEPORTS: f_nodeports,
        PROXY_FIREWALL: f_firewall,
    }
    n_services: list[str] = []
    n_nodeports: list[str] = []
    nat_chains: dict[str, list[str]] = {
        SERVICES: n_services,
        NODEPORTS: n_nodeports,
        POSTROUTING: [
            f"-A {POSTROUTING} -m mark ! --mark {mark}/{mark} -j RETURN",
            f"-A {POSTROUTING} -j MARK --xor-mark {mark}",
            f'-A {POSTROUTING} -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE'
            + (" --random-fully" if cfg.random_fully else ""),
        ],
        MARK_MASQ: [f"-A {MARK_MASQ} -j MARK --or-mark {mark}"],
    }
    if localhost_np:
        filter_chains[FIREWALL] = [
            f'-A {FIREWALL} -m comment --comment "block incoming localnet connections"'
            " -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP"
        ]

    for sp, eps in zip(ports, per_port, strict=True):
        _service_port(
            sp,
            categorize(eps, sp, zone, cfg.terminating_fallback),
            filter_chains,
            nat_chains,
            detector=detector,
            masquerade_all=cfg.masquerade_all,
            localhost_nfacct=localhost_np and nfacct,
            primary_ip=primary_ip,
            large=large,
        )

    # Tail-call to KUBE-NODEPORTS: must stay the last rule of nat KUBE-SERVICES.
    if match_all:
        dest = "-m addrtype --dst-type LOCAL"
        if v6:
            dest += " ! -d ::1/128"
        elif not localhost_np:
            dest += " ! -d 127.0.0.0/8"
        n_services.append(
            f"-A {SERVICES} -m comment --comment {LAST_RULE_COMMENT} {dest} -j {NODEPORTS}"
        )
    else:
        for ip in np_ips:
            if ipaddress.ip_address(ip).is_loopback and (v6 or not localhost_np):
                continue
            n_services.append(
                f"-A {SERVICES} -m comment --comment {LAST_RULE_COMMENT} -d {ip} -j {NODEPORTS}"
            )

    f_forward.append(
        f"-A {FORWARD} -m conntrack --ctstate INVALID"
        + (f" -m nfacct --nfacct-name {NFACCT_INVALID}" if nfacct else "")
        + " -j DROP"
    )
    f_forward.append(
        f'-A {FORWARD} -m comment --comment "kubernetes forwarding rules" -m mark --mark {mark}/{mark} -j ACCEPT'
    )
    f_forward.append(
        f'-A {FORWARD} -m comment --comment "kubernetes forwarding conntrack rule"'
        " -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"
    )

    builtin: dict[str, dict[str, list[str]]] = {"filter": {}, "nat": {}}
    if base_jumps:
        filter_chains.setdefault(FIREWALL, [])
        for table, chain, text in BASE_JUMPS:
            builtin[table].setdefault(chain, []).append(f"-A {chain} {text}")
    out: list[str] = []
    _render(out, "filter", filter_chains, builtin["filter"])
    _render(out, "nat", nat_chains, builtin["nat"])
    return "\n".join(out) + "\n"


def _render(
    out: list[str], table: str, chains: dict[str, list[str]], builtin: dict[str, list[str]]
) -> None:
    merged = {**chains, **builtin}
    # chain_sort_key order, without a Python key function over ~100k names
    heads = [n for n in (NODEPORTS, SERVICES) if n in merged]
    kube = sorted(n for n in chains if n.startswith("KUBE-") and n not in (NODEPORTS, SERVICES))
    names = heads + kube + sorted(n for n in merged if not n.startswith("KUBE-"))
    out.append(f"*{table}")
    out.extend(f":{name} - [0:0]" for name in names)
    for name in names:
        out.extend(merged[name])
    out.append("COMMIT")


def _service_port(
    sp: ServicePortInfo,
    sel: Selection,
    filter_chains: dict[str, list[str]],
    nat_chains: dict[str, list[str]],
    *,
    detector: tuple[str, str] | None,
    masquerade_all: bool,
    localhost_nfacct: bool,
    primary_ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None,
    large: bool,
) -> None:
    """All rules of one service port (the body of syncProxyRules' per-service loop)."""
    spn, proto, h = sp.spn, sp.proto, sp.hash16
    svc_chain, svl_chain = "KUBE-SVC-" + h, "KUBE-SVL-" + h
    ext_chain, fw_chain = "KUBE-EXT-" + h, "KUBE-FW-" + h
    has_endpoints = sel.has_endpoints
    pp = f"-m {proto} -p {proto}"
    dport = f"--dport {sp.port}"

    uses_cluster_chain = bool(sel.cluster) and sp.uses_cluster_endpoints
    uses_local_chain = bool(sel.local) and sp.uses_local_endpoints
    internal_chain, has_internal = svc_chain, has_endpoints
    if sp.internal_local:
        internal_chain = svl_chain
        has_internal = has_internal and bool(sel.local)
    external_policy_chain, has_external = svc_chain, has_endpoints
    if sp.external_local:
        external_policy_chain = svl_chain
        has_external = has_external and bool(sel.local)
    uses_ext_chain = has_endpoints and sp.externally_accessible
    uses_fw_chain = has_endpoints and bool(sp.lb_ips) and bool(sp.source_ranges)
    lb_chain = fw_chain if uses_fw_chain else ext_chain

    if not has_endpoints:
        int_target = ext_target = "REJECT"
        int_comment = ext_comment = f'"{spn} has no endpoints"'
    else:
        int_target = ext_target = "DROP"
        int_comment = ext_comment = f'"{spn} has no local endpoints"'

    f_services = filter_chains[SERVICES]
    f_external = filter_chains[EXTERNAL_SERVICES]
    n_services = nat_chains[SERVICES]

    # ClusterIP
    if has_internal:
        n_services.append(
            f'-A {SERVICES} -m comment --comment "{spn} cluster IP" {pp} -d {sp.cluster_ip} {dport} -j {internal_chain}'
        )
    else:
        f_services.append(
            f"-A {SERVICES} -m comment --comment {int_comment} {pp} -d {sp.cluster_ip} {dport} -j {int_target}"
        )
    # externalIPs
    for ip in sp.external_ips:
        if has_endpoints:
            n_services.append(
                f'-A {SERVICES} -m comment --comment "{spn} external IP" {pp} -d {ip} {dport} -j {ext_chain}'
            )
        if not has_external:
            f_external.append(
                f"-A {EXTERNAL_SERVICES} -m comment --comment {ext_comment} {pp} -d {ip} {dport} -j {ext_target}"
            )
    # LoadBalancer ingress IPs
    for ip in sp.lb_ips:
        if has_endpoints:
            n_services.append(
                f'-A {SERVICES} -m comment --comment "{spn} loadbalancer IP" {pp} -d {ip} {dport} -j {lb_chain}'
            )
        if uses_fw_chain:
            filter_chains[PROXY_FIREWALL].append(
                f'-A {PROXY_FIREWALL} -m comment --comment "{spn} traffic not accepted by {fw_chain}" {pp} -d {ip} {dport} -j DROP'
            )
    if not has_external:
        for ip in sp.lb_ips:
            f_external.append(
                f"-A {EXTERNAL_SERVICES} -m comment --comment {ext_comment} {pp} -d {ip} {dport} -j {ext_target}"
            )
    # NodePort
    if sp.node_port:
        if has_endpoints:
            n_nodeports = nat_chains[NODEPORTS]
            if localhost_nfacct:
                n_nodeports.append(
                    f"-A {NODEPORTS} -m comment --comment {spn} {pp} -d 127.0.0.0/8 --dport {sp.node_port}"
                    f" -m nfacct --nfacct-name {NFACCT_LOCALHOST_NP} -j {ext_chain}"
                )
            n_nodeports.append(
                f"-A {NODEPORTS} -m comment --comment {spn} {pp} --dport {sp.node_port} -j {ext_chain}"
            )
        if not has_external:
            f_external.append(
                f"-A {EXTERNAL_SERVICES} -m comment --comment {ext_comment} -m addrtype --dst-type LOCAL"
                f" {pp} --dport {sp.node_port} -j {ext_target}"
            )
    # health check NodePort: ACCEPT whatever the endpoints
    if sp.health_check_node_port:
        filter_chains[NODEPORTS].append(
            f'-A {NODEPORTS} -m comment --comment "{spn} health check node port" -m tcp -p tcp'
            f" --dport {sp.health_check_node_port} -j ACCEPT"
        )

    # Per-service nat chains. Chain lines are implied by the dict keys.
    if has_internal:
        rules = nat_chains.setdefault(internal_chain, [])
        match = f'-A {internal_chain} -m comment --comment "{spn} cluster IP" {pp} -d {sp.cluster_ip} {dport}'
        if masquerade_all:
            rules.append(f"{match} -j {MARK_MASQ}")
        elif detector is not None:
            rules.append(f"{match} {detector[1]} -j {MARK_MASQ}")

    if uses_ext_chain:
        rules = nat_chains.setdefault(ext_chain, [])
        if not sp.external_local:
            rules.append(
                f'-A {ext_chain} -m comment --comment "masquerade traffic for {spn} external destinations" -j {MARK_MASQ}'
            )
        else:
            if detector is not None:
                rules.append(
                    f'-A {ext_chain} -m comment --comment "pod traffic for {spn} external destinations" {detector[0]} -j {svc_chain}'
                )
            rules.append(
                f'-A {ext_chain} -m comment --comment "masquerade LOCAL traffic for {spn} external destinations"'
                f" -m addrtype --src-type LOCAL -j {MARK_MASQ}"
            )
            rules.append(
                f'-A {ext_chain} -m comment --comment "route LOCAL traffic for {spn} external destinations"'
                f" -m addrtype --src-type LOCAL -j {svc_chain}"
            )
        if has_external:
            rules.append(f"-A {ext_chain} -j {external_policy_chain}")

    if uses_fw_chain:
        rules = nat_chains.setdefault(fw_chain, [])
        head = f'-A {fw_chain} -m comment --comment "{spn} loadbalancer IP"'
        allow_from_node = False
        for cidr in sp.source_ranges:
            rules.append(f"{head} -s {cidr} -j {ext_chain}")
            if primary_ip is not None and primary_ip in ipaddress.ip_network(cidr):
                allow_from_node = True
        # An LB VIP bound locally makes node->VIP traffic arrive with the VIP as source.
        if allow_from_node:
            for ip in sp.lb_ips:
                rules.append(f"{head} -s {ip} -j {ext_chain}")
        rules.append(
            f'-A {fw_chain} -m comment --comment "other traffic to {spn} will be dropped by KUBE-PROXY-FIREWALL"'
        )

    seps: dict[str, str] = {}  # endpoint string -> SEP chain name
    if uses_cluster_chain:
        _dispatch(nat_chains.setdefault(svc_chain, []), svc_chain, sp, sel.cluster, seps, large)
    if uses_local_chain:
        _dispatch(nat_chains.setdefault(svl_chain, []), svl_chain, sp, sel.local, seps, large)

    comment = "" if large else f" -m comment --comment {spn}"
    for ep in sel.reachable:
        sep = seps.get(ep.endpoint) or endpoint_chain_name(spn, proto, ep.endpoint)
        recent = f" -m recent --name {sep} --set" if sp.affinity_timeout else ""
        nat_chains[sep] = [
            f"-A {sep}{comment} -s {ep.ip} -j {MARK_MASQ}",
            f"-A {sep}{comment}{recent} {pp} -j DNAT --to-destination {ep.endpoint}",
        ]


def _dispatch(
    rules: list[str],
    chain: str,
    sp: ServicePortInfo,
    endpoints: tuple[EndpointInfo, ...],
    seps: dict[str, str],
    large: bool,
) -> None:
    """SVC/SVL -> SEP rules: affinity checks, then the random cascade (writeServiceToEndpointRules)."""
    spn, proto = sp.spn, sp.proto
    names = []
    for ep in endpoints:
        sep = seps.get(ep.endpoint)
        if sep is None:
            sep = seps[ep.endpoint] = endpoint_chain_name(spn, proto, ep.endpoint)
        names.append(sep)
    if sp.affinity_timeout:
        for ep, sep in zip(endpoints, names, strict=True):
            comment = "" if large else f' -m comment --comment "{spn} -> {ep.endpoint}"'
            rules.append(
                f"-A {chain}{comment} -m recent --name {sep} --rcheck --seconds {sp.affinity_timeout} --reap -j {sep}"
            )
    n = len(endpoints)
    for i, (ep, sep) in enumerate(zip(endpoints, names, strict=True)):
        comment = "" if large else f' -m comment --comment "{spn} -> {ep.endpoint}"'
        if i < n - 1:
            rules.append(
                f"-A {chain}{comment} -m statistic --mode random --probability {_probability(n - i)} -j {sep}"
            )
        else:
            rules.append(f"-A {chain}{comment} -j {sep}")
