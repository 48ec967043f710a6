"""The per-service rules of kube-proxy 1.16-1.23 (the ``xlb`` layouts of ``eras``).

This is the body of ``syncProxyRules``' service loop as upstream's ``proxier.go`` wrote it in
1.17 and in 1.23 (both read in full), with the changes between them as switches of the
``Era``. What a rule is for is said where it is written; in short, per service port:

* ClusterIP: ``-A KUBE-SERVICES ... "spn cluster IP" ... -j KUBE-SVC``, preceded by the
  masquerade rule (``! -s <clusterCIDR>``, or unconditional with masqueradeAll; none without a
  cluster CIDR), which 1.21 moved into the ``KUBE-SVC`` chain. No endpoints: filter REJECT.
* externalIPs up to 1.20: masquerade, then two jumps to ``KUBE-SVC``: one for traffic that
  neither came through a bridge nor from the node (``-m physdev ! --physdev-is-in -m addrtype !
  --src-type LOCAL``), one for traffic to an address that is local; externalTrafficPolicy does
  not apply. From 1.21: one jump, to ``KUBE-SVC`` (masquerading off-cluster sources in it) or,
  with the Local policy, to ``KUBE-XLB``.
* LoadBalancer IPs: ``-j KUBE-FW``; the FW chain masquerades (Cluster policy), jumps to
  ``KUBE-SVC`` or ``KUBE-XLB`` (for every source, or only the loadBalancerSourceRanges) and
  ends with ``-j KUBE-MARK-DROP``.
* NodePorts: ``KUBE-NODEPORTS`` masquerades (from 1.21: ``KUBE-SVC`` does) and jumps to
  ``KUBE-SVC``; with the Local policy it masquerades only loopback sources and jumps to
  ``KUBE-XLB``.
* ``KUBE-XLB`` (externalTrafficPolicy=Local): pods (source in the cluster CIDR) and the node
  itself (``--src-type LOCAL``, masqueraded) go to ``KUBE-SVC``; the rest to the local
  endpoints ("Balancing rule i"), or ``KUBE-MARK-DROP`` when there is none.

Only ready endpoints count (the terminating fallback came later) and "local" is the
endpoint's ``nodeName``; internalTrafficPolicy is not modelled for these releases.
"""

from __future__ import annotations

import ipaddress

from nat_verify.kubeproxy.compiler import source_range_rules
from nat_verify.kubeproxy.endpoints import EndpointInfo
from nat_verify.kubeproxy.eras import Era
from nat_verify.kubeproxy.hashing import endpoint_chain_name
from nat_verify.kubeproxy.serviceports import ServicePortInfo

SERVICES = "KUBE-SERVICES"
EXTERNAL_SERVICES = "KUBE-EXTERNAL-SERVICES"
NODEPORTS = "KUBE-NODEPORTS"
MARK_MASQ = "KUBE-MARK-MASQ"
MARK_DROP = "KUBE-MARK-DROP"


def _cidr(ip: str, v6: bool, era: Era) -> str:
    # 1.17's utilproxy.ToCIDR: the restore input spells host addresses with their prefix
    return f"{ip}/{128 if v6 else 32}" if era.cidr_suffix else ip


def xlb_service_port(
    sp: ServicePortInfo,
    endpoints: list[EndpointInfo],
    filter_chains: dict[str, list[str]],
    nat_chains: dict[str, list[str]],
    *,
    era: Era,
    cluster_cidr: str,
    masquerade_all: bool,
    primary_ip: ipaddress.IPv4Address | ipaddress.IPv6Address | None,
    large: bool,
    v6: bool,
) -> None:
    """All rules of one service port, as kube-proxy of ``era`` (an ``xlb`` era) writes them."""
    spn, proto, h = sp.spn, sp.proto, sp.hash16
    svc_chain, xlb_chain, fw_chain = "KUBE-SVC-" + h, "KUBE-XLB-" + h, "KUBE-FW-" + h
    ready = [ep for ep in endpoints if ep.ready]
    has_endpoints = bool(ready)
    only_local = sp.external_local and bool(sp.node_port or sp.lb_ips)
    pp = f"-m {proto} -p {proto}"
    dport = f"--dport {sp.port}"
    comment = "" if large else f" -m comment --comment {_quote(spn)}"
    f_services, f_external = filter_chains[SERVICES], filter_chains[EXTERNAL_SERVICES]
    n_services = nat_chains[SERVICES]

    if has_endpoints:
        nat_chains.setdefault(svc_chain, [])
    if only_local:
        nat_chains.setdefault(xlb_chain, [])  # declared even without endpoints (then empty)

    # ClusterIP
    cip = _cidr(sp.cluster_ip, v6, era)
    head = f'-A {SERVICES} -m comment --comment "{spn} cluster IP" {pp} -d {cip} {dport}'
    if has_endpoints:
        if era.masq_in_services:
            if masquerade_all:
                n_services.append(f"{head} -j {MARK_MASQ}")
            elif cluster_cidr:
                n_services.append(f"{head} ! -s {cluster_cidr} -j {MARK_MASQ}")
        else:  # 1.21 (kubernetes#96959): the same rule, first in the service's own chain
            svc_head = f'-A {svc_chain} -m comment --comment "{spn} cluster IP" {pp} -d {cip} {dport}'
            if masquerade_all:
                nat_chains[svc_chain].append(f"{svc_head} -j {MARK_MASQ}")
            elif cluster_cidr:
                nat_chains[svc_chain].append(f"{svc_head} ! -s {cluster_cidr} -j {MARK_MASQ}")
        n_services.append(f"{head} -j {svc_chain}")
    else:
        f_services.append(_reject(SERVICES, spn, f"{pp} -d {cip} {dport}"))

    # externalIPs
    for ip in sp.external_ips:
        eip = _cidr(ip, v6, era)
        if has_endpoints and era.external_ips_as_cluster_ips:
            # 1.21 (kubernetes#96296): like a ClusterIP; off-cluster sources masqueraded (all
            # of them without a cluster CIDR) unless the Local policy applies (then KUBE-XLB)
            args = f'-m comment --comment "{spn} external IP" {pp} -d {eip} {dport}'
            if not only_local:
                masq_if = f" ! -s {cluster_cidr}" if cluster_cidr else ""
                nat_chains[svc_chain].append(f"-A {svc_chain} {args}{masq_if} -j {MARK_MASQ}")
            n_services.append(f"-A {SERVICES} {args} -j {xlb_chain if only_local else svc_chain}")
        elif has_endpoints:
            head = f'-A {SERVICES} -m comment --comment "{spn} external IP" {pp} -d {eip} {dport}'
            n_services.append(f"{head} -j {MARK_MASQ}")
            n_services.append(f"{head} -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j {svc_chain}")
            n_services.append(f"{head} -m addrtype --dst-type LOCAL -j {svc_chain}")
        else:
            f_external.append(_reject(EXTERNAL_SERVICES, spn, f"{pp} -d {eip} {dport}"))

    # LoadBalancer ingress IPs
    for ip in sp.lb_ips:
        lbip = _cidr(ip, v6, era)
        if has_endpoints:
            rules = nat_chains.setdefault(fw_chain, [])
            n_services.append(
                f'-A {SERVICES} -m comment --comment "{spn} loadbalancer IP" {pp} -d {lbip} {dport} -j {fw_chain}'
            )
            fw = f'-A {fw_chain} -m comment --comment "{spn} loadbalancer IP"'
            chosen = xlb_chain
            if not only_local:  # proxying anywhere: masquerade in case we cross nodes
                rules.append(f"{fw} -j {MARK_MASQ}")
                chosen = svc_chain
            if not sp.source_ranges:
                rules.append(f"{fw} -j {chosen}")
            else:  # here only this LB IP is allowed as a source (1.24 allows all of them)
                rules.extend(source_range_rules(fw, sp.source_ranges, (lbip,), primary_ip, chosen))
            # reaching the end of the chain means not DNATed: the source was refused
            rules.append(f"{fw} -j {MARK_DROP}")
        else:
            # 1.17 writes this REJECT in KUBE-SERVICES (reached from INPUT, FORWARD and OUTPUT);
            # from 1.19 INPUT no longer jumps there and the REJECT is in KUBE-EXTERNAL-SERVICES
            chain = SERVICES if era.jumps == "input-services" else EXTERNAL_SERVICES
            (f_services if chain == SERVICES else f_external).append(_reject(chain, spn, f"{pp} -d {lbip} {dport}"))

    # NodePort
    if sp.node_port:
        if has_endpoints:
            head = f"-A {NODEPORTS} -m comment --comment {_quote(spn)} {pp} --dport {sp.node_port}"
            n_nodeports = nat_chains[NODEPORTS]
            if not only_local:
                if era.masq_in_services:
                    n_nodeports.append(f"{head} -j {MARK_MASQ}")
                else:  # 1.21 (kubernetes#96959): the masquerade rule moved into KUBE-SVC
                    rest = head.split(" ", 2)[2]
                    nat_chains[svc_chain].append(f"-A {svc_chain} {rest} -j {MARK_MASQ}")
                n_nodeports.append(f"{head} -j {svc_chain}")
            else:  # "Fix localhost martian source error"
                loopback = "::1/128" if v6 else "127.0.0.0/8"
                n_nodeports.append(f"{head} -s {loopback} -j {MARK_MASQ}")
                n_nodeports.append(f"{head} -j {xlb_chain}")
        else:
            f_external.append(_reject(EXTERNAL_SERVICES, spn, f"-m addrtype --dst-type LOCAL {pp} --dport {sp.node_port}"))
    if era.health_checks and sp.health_check_node_port:
        filter_chains[NODEPORTS].append(
            f'-A {NODEPORTS} -m comment --comment "{spn} health check node port" -m tcp -p tcp'
            f" --dport {sp.health_check_node_port} -j ACCEPT"
        )

    if not has_endpoints:
        return

    seps = [endpoint_chain_name(spn, proto, ep.endpoint) for ep in ready]
    svc_rules = nat_chains[svc_chain]
    if sp.affinity_timeout:
        for sep in seps:
            svc_rules.append(
                f"-A {svc_chain}{comment} -m recent --name {sep} --rcheck --seconds {sp.affinity_timeout} --reap -j {sep}"
            )
    n = len(ready)
    local_seps = []
    for i, (ep, sep) in enumerate(zip(ready, seps, strict=True)):
        if only_local and ep.is_local:
            local_seps.append(sep)
        chance = f" -m statistic --mode random --probability {_probability(n - i, era)}" if i < n - 1 else ""
        svc_rules.append(f"-A {svc_chain}{comment}{chance} -j {sep}")
        recent = f" -m recent --name {sep} --set" if sp.affinity_timeout else ""
        nat_chains[sep] = [
            f"-A {sep}{comment} -s {_cidr(ep.ip, v6, era)} -j {MARK_MASQ}",
            f"-A {sep}{comment}{recent} {pp} -j DNAT --to-destination {ep.endpoint}",
        ]

    if not only_local:
        return
    xlb = nat_chains[xlb_chain]
    if cluster_cidr:
        xlb.append(
            f'-A {xlb_chain} -m comment --comment "Redirect pods trying to reach external loadbalancer VIP to clusterIP"'
            f" -s {cluster_cidr} -j {svc_chain}"
        )
    xlb.append(
        f'-A {xlb_chain} -m comment --comment "masquerade LOCAL traffic for {spn} LB IP"'
        f" -m addrtype --src-type LOCAL -j {MARK_MASQ}"
    )
    xlb.append(
        f'-A {xlb_chain} -m comment --comment "route LOCAL traffic for {spn} LB IP to service chain"'
        f" -m addrtype --src-type LOCAL -j {svc_chain}"
    )
    if not local_seps:
        xlb.append(f'-A {xlb_chain} -m comment --comment "{spn} has no local endpoints" -j {MARK_DROP}')
        return
    if sp.affinity_timeout:
        for sep in local_seps:
            xlb.append(
                f"-A {xlb_chain} -m comment --comment {_quote(spn)} -m recent --name {sep}"
                f" --rcheck --seconds {sp.affinity_timeout} --reap -j {sep}"
            )
    m = len(local_seps)
    for i, sep in enumerate(local_seps):
        chance = f" -m statistic --mode random --probability {_probability(m - i, era)}" if i < m - 1 else ""
        xlb.append(f'-A {xlb_chain} -m comment --comment "Balancing rule {i} for {spn}"{chance} -j {sep}')


def _reject(chain: str, spn: str, match: str) -> str:
    """A service with no endpoints: REJECT (ICMP port unreachable) what would have been DNATed."""
    return f'-A {chain} -m comment --comment "{spn} has no endpoints" {match} -j REJECT'


def _probability(n: int, era: Era) -> str:
    return f"{1.0 / n:0.{era.probability_digits}f}"


def _quote(text: str) -> str:
    # kube-proxy passes the bare service port name; a space would need quotes (never happens)
    return f'"{text}"' if " " in text else text
