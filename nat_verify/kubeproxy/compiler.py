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

``era`` (``eras.Era``) selects the layout of a kube-proxy release; the default is the era the
cluster's KubeProxyConfiguration names (``ProxyConfig.kube_proxy_version``, or the v1.27
``legacy_layout``), else the newest. The ``xlb`` layouts (1.16-1.23) are written by ``xlb.py``;
this module writes the base chains of every era and the per-service rules of the ``ext`` ones.

Performance: rules are plain strings appended to per-chain lists; no per-rule objects.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from nat_verify.kubeproxy.endpoints import EndpointInfo, Selection, categorize, endpoint_index
from nat_verify.kubeproxy.eras import LEGACY, NEWEST, Era, UnknownVersion, era_for_version
from nat_verify.kubeproxy.errors import CompileError
from nat_verify.kubeproxy.hashing import endpoint_chain_name
from nat_verify.kubeproxy.serviceports import ServicePortInfo, service_ports
from nat_verify.model.cluster import Cluster, Node, ProxyConfig

SERVICES = "KUBE-SERVICES"
EXTERNAL_SERVICES = "KUBE-EXTERNAL-SERVICES"
NODEPORTS = "KUBE-NODEPORTS"
POSTROUTING = "KUBE-POSTROUTING"
MARK_MASQ = "KUBE-MARK-MASQ"
MARK_DROP = "KUBE-MARK-DROP"  # kubelet's chain, which kube-proxy used until 1.24
FORWARD = "KUBE-FORWARD"
PROXY_FIREWALL = "KUBE-PROXY-FIREWALL"
FIREWALL = "KUBE-FIREWALL"

LAST_RULE_COMMENT = '"kubernetes service nodeports; NOTE: this must be the last rule in this chain"'
NFACCT_INVALID = "ct_state_invalid_dropped_pkts"
NFACCT_LOCALHOST_NP = "localhost_nps_accepted_pkts"

# Base-chain jump rules (table, built-in chain, rule text) in final kernel order (reference
# section 2.3): kube-proxy prepends each one, so the last one it ensures comes first.
_PORTALS = '-m comment --comment "kubernetes service portals"'
_EXTERNAL = '-m comment --comment "kubernetes externally-visible service portals"'
_LB_FIREWALL = '-m comment --comment "kubernetes load balancer firewall"'
_HEALTH = '-m comment --comment "kubernetes health check service ports"'
_FORWARDING = '-m comment --comment "kubernetes forwarding rules"'
_NEW = "-m conntrack --ctstate NEW"
_NAT_JUMPS: tuple[tuple[str, str, str], ...] = (
    ("nat", "PREROUTING", f"{_PORTALS} -j {SERVICES}"),
    ("nat", "OUTPUT", f"{_PORTALS} -j {SERVICES}"),
    ("nat", "POSTROUTING", f'-m comment --comment "kubernetes postrouting rules" -j {POSTROUTING}'),
)


def era_base_jumps(era: Era) -> tuple[tuple[str, str, str], ...]:
    """The jump rules kube-proxy of ``era`` installs in the built-in chains."""
    out: list[tuple[str, str, str]] = []

    def add(chain: str, text: str) -> None:
        out.append(("filter", chain, text))

    if era.jumps == "input-services":
        # 1.16-1.19 (read in 1.17's proxier.go and in the dumps of that time; 1.20's
        # kubernetes#95252 dropped the INPUT jump to KUBE-SERVICES)
        add("INPUT", f"{_NEW} {_PORTALS} -j {SERVICES}")
        add("INPUT", f"{_NEW} {_EXTERNAL} -j {EXTERNAL_SERVICES}")
        add("FORWARD", f"{_FORWARDING} -j {FORWARD}")
        add("FORWARD", f"{_NEW} {_PORTALS} -j {SERVICES}")
        add("OUTPUT", f"{_NEW} {_PORTALS} -j {SERVICES}")
        return (*out, *_NAT_JUMPS)
    fw = era.writes_kube_firewall
    pf = era.proxy_firewall
    if fw:
        add("INPUT", f"-j {FIREWALL}")
    if pf:
        add("INPUT", f"{_NEW} {_LB_FIREWALL} -j {PROXY_FIREWALL}")
    if era.health_checks:
        add("INPUT", f"{_HEALTH} -j {NODEPORTS}")
    add("INPUT", f"{_NEW} {_EXTERNAL} -j {EXTERNAL_SERVICES}")
    if pf:
        add("FORWARD", f"{_NEW} {_LB_FIREWALL} -j {PROXY_FIREWALL}")
    add("FORWARD", f"{_FORWARDING} -j {FORWARD}")
    add("FORWARD", f"{_NEW} {_PORTALS} -j {SERVICES}")
    add("FORWARD", f"{_NEW} {_EXTERNAL} -j {EXTERNAL_SERVICES}")
    if fw:
        add("OUTPUT", f"-j {FIREWALL}")
    if pf:
        add("OUTPUT", f"{_NEW} {_LB_FIREWALL} -j {PROXY_FIREWALL}")
    add("OUTPUT", f"{_NEW} {_PORTALS} -j {SERVICES}")
    return (*out, *_NAT_JUMPS)


BASE_JUMPS: tuple[tuple[str, str, str], ...] = era_base_jumps(NEWEST)


def era_of(cfg: ProxyConfig) -> Era:
    """The era a KubeProxyConfiguration asks for: its version, the v1.27 layout, or the newest."""
    if cfg.kube_proxy_version:
        try:
            return era_for_version(cfg.kube_proxy_version)
        except UnknownVersion as e:
            raise CompileError(f"KubeProxyConfiguration: {e}", cfg.source) from None
    return LEGACY if cfg.legacy_layout else NEWEST


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


def probability(n: int, digits: int = 10) -> str:
    return f"{1.0 / n:0.{digits}f}"  # Go "%0.10f" (1.17+), "%0.5f" before


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


def compile_node(
    cluster: Cluster, node: str, family: int = 4, base_jumps: bool = True, era: Era | None = None
) -> str:
    """The ``*filter ... COMMIT *nat ... COMMIT`` text kube-proxy writes on ``node``.

    ``family`` is 4 (iptables) or 6 (ip6tables): each family's proxier only sees its own
    ClusterIPs, externalIPs, LB IPs and EndpointSlices. ``era`` is the kube-proxy layout
    (default: ``era_of(cluster.proxy)``). Raises ``CompileError``.
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
    if era is None:
        era = era_of(cfg)
    v6 = family == 6
    addresses = node_addresses(n, family)
    primary_ip = ipaddress.ip_address(addresses[0]) if addresses else None
    match_all, contains_loopback, np_ips = _node_port_destinations(cfg, family, addresses)
    # Before localhostNodePorts (1.26) every IPv4 loopback address took NodePorts.
    localhost_np = not v6 and (cfg.localhost_node_ports or not era.localhost_option) and contains_loopback
    nfacct_invalid = cfg.nfacct and era.nfacct_invalid
    nfacct_localhost = cfg.nfacct and era.nfacct_localhost and localhost_np
    detector = local_detector(cfg, n, family)
    mark = mark_text(cfg)
    zone = n.zone if era.layout == "ext" else ""  # topology hints: 1.21+, ext eras here

    ports = service_ports(cluster, family)
    index = endpoint_index(cluster, node, family)
    per_port = [index.get((sp.namespace, sp.name, sp.port_name, sp.protocol), []) for sp in ports]
    large = sum(len(eps) for eps in per_port) > cfg.large_cluster_threshold

    f_services: list[str] = []
    f_external: list[str] = []
    f_forward: list[str] = []
    filter_chains: dict[str, list[str]] = {
        SERVICES: f_services,
        EXTERNAL_SERVICES: f_external,
        FORWARD: f_forward,
    }
    if era.health_checks:
        filter_chains[NODEPORTS] = []
    if era.proxy_firewall:
        filter_chains[PROXY_FIREWALL] = []
    n_services: list[str] = []
    n_nodeports: list[str] = []
    masq = " --random-fully" if cfg.random_fully else ""
    if era.postrouting_clears_mark:
        postrouting = [
            f"-A {POSTROUTING} -m mark ! --mark {mark}/{mark} -j RETURN",
            f"-A {POSTROUTING} -j MARK --xor-mark {mark}",
            f'-A {POSTROUTING} -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE{masq}',
        ]
        mark_masq = f"-A {MARK_MASQ} -j MARK --or-mark {mark}"
    else:  # before kubernetes#92035 (1.19; 1.16.13, 1.17.9, 1.18.6): one rule, the mark kept
        postrouting = [
            f'-A {POSTROUTING} -m comment --comment "kubernetes service traffic requiring SNAT"'
            f" -m mark --mark {mark}/{mark} -j MASQUERADE{masq}"
        ]
        mark_masq = f"-A {MARK_MASQ} -j MARK --set-xmark {mark}/{mark}"
    nat_chains: dict[str, list[str]] = {
        SERVICES: n_services,
        NODEPORTS: n_nodeports,
        POSTROUTING: postrouting,
        MARK_MASQ: [mark_masq],
    }
    if localhost_np and era.writes_kube_firewall:
        filter_chains[FIREWALL] = [
            f'-A {FIREWALL} -m comment --comment "block incoming localnet connections"'
            " -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP"
        ]

    if era.layout == "xlb":
        from nat_verify.kubeproxy.xlb import xlb_service_port

        cidr = _first_cluster_cidr(cfg, family)
        for sp, eps in zip(ports, per_port, strict=True):
            xlb_service_port(
                sp, eps, filter_chains, nat_chains, era=era, cluster_cidr=cidr,
                masquerade_all=cfg.masquerade_all, primary_ip=primary_ip, large=large, v6=v6,
            )  # fmt: skip
    else:
        for sp, eps in zip(ports, per_port, strict=True):
            _service_port(
                sp,
                categorize(eps, sp, zone, cfg.terminating_fallback and era.terminating_fallback),
                filter_chains,
                nat_chains,
                era=era,
                detector=detector,
                masquerade_all=cfg.masquerade_all,
                localhost_nfacct=nfacct_localhost,
                primary_ip=primary_ip,
                large=large,
            )

    # Tail-call to KUBE-NODEPORTS: must stay the last rule of nat KUBE-SERVICES.
    if match_all:
        dest = "-m addrtype --dst-type LOCAL"
        if era.localhost_option:
            if v6:
                dest += " ! -d ::1/128"
            elif not localhost_np:
                dest += " ! -d 127.0.0.0/8"
        n_services.append(
            f"-A {SERVICES} -m comment --comment {LAST_RULE_COMMENT} {dest} -j {NODEPORTS}"
        )
    else:
        for ip in np_ips:
            if era.localhost_option and ipaddress.ip_address(ip).is_loopback and (v6 or not localhost_np):
                continue
            n_services.append(
                f"-A {SERVICES} -m comment --comment {LAST_RULE_COMMENT} -d {ip} -j {NODEPORTS}"
            )

    f_forward.append(
        f"-A {FORWARD} -m conntrack --ctstate INVALID"
        + (f" -m nfacct --nfacct-name {NFACCT_INVALID}" if nfacct_invalid else "")
        + " -j DROP"
    )
    f_forward.append(
        f'-A {FORWARD} -m comment --comment "kubernetes forwarding rules" -m mark --mark {mark}/{mark} -j ACCEPT'
    )
    if era.forward_rules == "single":
        f_forward.append(
            f'-A {FORWARD} -m comment --comment "kubernetes forwarding conntrack rule"'
            " -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"
        )
    elif era.forward_rules == "pair":  # 1.18-1.22 (kubernetes#87748): the same two rules, no CIDR
        for which in ("source", "destination"):
            f_forward.append(
                f'-A {FORWARD} -m comment --comment "kubernetes forwarding conntrack pod {which} rule"'
                " -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"
            )
    else:  # 1.16-1.17: two rules, written only when the cluster CIDR is known
        cidr = _first_cluster_cidr(cfg, family)
        if cidr:
            f_forward.append(
                f"-A {FORWARD} -s {cidr} -m comment --comment"
                ' "kubernetes forwarding conntrack pod source rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT'
            )
            f_forward.append(
                f'-A {FORWARD} -m comment --comment "kubernetes forwarding conntrack pod destination rule"'
                f" -d {cidr} -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"
            )

    builtin: dict[str, dict[str, list[str]]] = {"filter": {}, "nat": {}}
    if base_jumps:
        jumps = era_base_jumps(era)
        if any(text == f"-j {FIREWALL}" for _, _, text in jumps):
            filter_chains.setdefault(FIREWALL, [])
        for table, chain, text in jumps:
            builtin[table].setdefault(chain, []).append(f"-A {chain} {text}")
        if not era.writes_kube_firewall:
            _kubelet_rules(filter_chains, nat_chains, builtin["filter"], localnet=not v6)
    out: list[str] = []
    _render(out, "filter", filter_chains, builtin["filter"])
    _render(out, "nat", nat_chains, builtin["nat"])
    return "\n".join(out) + "\n"


def _kubelet_rules(
    filter_chains: dict[str, list[str]],
    nat_chains: dict[str, list[str]],
    builtin: dict[str, list[str]],
    localnet: bool,
) -> None:
    """kubelet's KUBE-MARK-DROP and KUBE-FIREWALL, which the layouts before 1.27 rely on.

    Not kube-proxy's rules, but a complete ruleset of those releases has them: the 1.16-1.24
    layouts drop what they mark through them, and the localnet DROP (the CVE-2020-8558 fix,
    kubelet 1.16.11, 1.17.7, 1.18.4 and later, IPv4 only) is kubelet's until kube-proxy writes
    its own copy in 1.27. They are written as the last patch release of each era writes them;
    kubelet created them before kube-proxy prepended its own jumps, so its jumps come last.
    """
    nat_chains[MARK_DROP] = [f"-A {MARK_DROP} -j MARK --set-xmark 0x00008000/0x00008000"]
    rules = filter_chains.setdefault(FIREWALL, [])
    rules.append(
        f'-A {FIREWALL} -m comment --comment "kubernetes firewall for dropping marked packets"'
        " -m mark --mark 0x00008000/0x00008000 -j DROP"
    )
    if localnet:
        rules.append(
            f'-A {FIREWALL} -m comment --comment "block incoming localnet connections"'
            " -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP"
        )
    for chain in ("INPUT", "OUTPUT"):
        builtin.setdefault(chain, []).append(f"-A {chain} -j {FIREWALL}")


def source_range_rules(
    head: str,
    ranges: tuple[str, ...],
    lb_ips: Iterable[str],
    primary_ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None,
    target: str,
) -> list[str]:
    """The KUBE-FW rules that let loadBalancerSourceRanges in (every release writes them so).

    When a range holds the node's own address, the LB IPs are allowed as sources too: an LB
    VIP bound on the node makes node->VIP traffic arrive with the VIP as its source.
    """
    rules = [f"{head} -s {cidr} -j {target}" for cidr in ranges]
    if primary_ip is not None and any(primary_ip in ipaddress.ip_network(c) for c in ranges):
        rules.extend(f"{head} -s {ip} -j {target}" for ip in lb_ips)
    return rules


def _first_cluster_cidr(cfg: ProxyConfig, family: int) -> str:
    """The first ``clusterCIDR`` of ``family`` (what releases before the local-traffic detector used)."""
    for text in cfg.cluster_cidrs:
        net = _network(text, "clusterCIDR", cfg)
        if net.version == family:
            return str(net)
    return ""


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
    era: Era,
    detector: tuple[str, str] | None,
    masquerade_all: bool,
    localhost_nfacct: bool,
    primary_ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None,
    large: bool,
) -> None:
    """All rules of one service port (the body of syncProxyRules' per-service loop).

    1.24 (``era.mark_drop``) differs from later releases only where a Local policy finds no
    local endpoint and where loadBalancerSourceRanges refuse a source: it keeps the nat jumps
    and ends the Local chain (``KUBE-SVL``) and the ``KUBE-FW`` chain with ``-j KUBE-MARK-DROP``
    (kubelet's ``KUBE-FIREWALL`` drops the marked packet) where 1.25+ writes filter DROPs.
    """
    spn, proto, h = sp.spn, sp.proto, sp.hash16
    mark_drop = era.mark_drop
    svc_chain, svl_chain = "KUBE-SVC-" + h, "KUBE-SVL-" + h
    ext_chain, fw_chain = "KUBE-EXT-" + h, "KUBE-FW-" + h
    has_endpoints = sel.has_endpoints
    pp = f"-m {proto} -p {proto}"
    dport = f"--dport {sp.port}"

    uses_cluster_chain = bool(sel.cluster) and sp.uses_cluster_endpoints
    uses_local_chain = (has_endpoints if mark_drop else bool(sel.local)) and sp.uses_local_endpoints
    internal_chain, has_internal = svc_chain, has_endpoints
    if sp.internal_local:
        internal_chain = svl_chain
        has_internal = has_internal and (mark_drop or bool(sel.local))
    external_policy_chain, has_external = svc_chain, has_endpoints
    if sp.external_local:
        external_policy_chain = svl_chain
        has_external = has_external and (mark_drop or bool(sel.local))
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
        if uses_fw_chain and not mark_drop:
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
        rules.extend(source_range_rules(head, sp.source_ranges, sp.lb_ips, primary_ip, ext_chain))
        if mark_drop:
            rules.append(f"{head} -j {MARK_DROP}")
        else:
            rules.append(
                f'-A {fw_chain} -m comment --comment "other traffic to {spn} will be dropped by KUBE-PROXY-FIREWALL"'
            )

    seps: dict[str, str] = {}  # endpoint string -> SEP chain name
    if uses_cluster_chain:
        _dispatch(nat_chains.setdefault(svc_chain, []), svc_chain, sp, sel.cluster, seps, large)
    if uses_local_chain:
        rules = nat_chains.setdefault(svl_chain, [])
        if sel.local:
            _dispatch(rules, svl_chain, sp, sel.local, seps, large)
        else:  # 1.24: "Blackhole all traffic since there are no local endpoints"
            rules.append(f'-A {svl_chain} -m comment --comment "{spn} has no local endpoints" -j {MARK_DROP}')

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
                f"-A {chain}{comment} -m statistic --mode random --probability {probability(n - i)} -j {sep}"
            )
        else:
            rules.append(f"-A {chain}{comment} -j {sep}")
