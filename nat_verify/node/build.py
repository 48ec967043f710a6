"""Node facts (and the cluster's objects, when given) -> the ``NodeContext`` the model runs on.

For every fact the model reads, in order of preference:

=====================  ===============================  ==========================================
fact                   given / inferred                 otherwise
=====================  ===============================  ==========================================
node addresses         ``--interface``/``--ip-addr``     the Node object's InternalIPs (assumed)
                       (every address), ``--node-ip``
pod network            ``--pod-cidr``; the cluster's     the pod interface's subnets (inferred)
                       CIDRs and Node podCIDRs
external interface     the interface holding the        unknown: ``-i`` tests on it are unknown,
                       node's first address (inferred)  except by the role table (``ifaces``)
pod interface          ``--pod-interface``, ``--cni``,  one pod bridge or veth family among the
                       detectLocal's bridge / prefix    interfaces (inferred), else unknown
routes                 ``--ip-route``                   the interfaces' connected subnets; other
                                                        destinations unknown for ``-o``
ipset members          ``--ipset``                      unknown
route_localnet         ``--sysctl``                     kube-proxy's own setting (assumed, from
                                                        the config or the dump's localhost
                                                        NodePort rules), else unknown
bridge-nf-call-*       ``--sysctl``                     1, as kubeadm's preflight requires
                                                        (assumed)
=====================  ===============================  ==========================================

Every premise is recorded in the context (``premises``), so a report says what a ``proved``
is about; ``known`` lists the facts the model may read without making an answer unknown.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from nat_verify.model.cluster import Cluster, IPNetwork
from nat_verify.netfilter import ifaces
from nat_verify.netfilter.context import (
    ADDRESSES,
    BRIDGE_NF,
    EXTERNAL_IFACE,
    IPSET,
    POD_IFACE,
    ROUTE_LOCALNET,
    ROUTES,
    UNKNOWN,
    NodeContext,
    Premise,
    Route,
)
from nat_verify.netfilter.ruleset import Ruleset
from nat_verify.node.facts import NodeFacts

LOCALNET_ALL = "net.ipv4.conf.all.route_localnet"


def _of_family(texts: Iterable[str], family: int) -> tuple[str, ...]:
    out = []
    for t in texts:
        try:
            if ipaddress.ip_network(t.strip(), strict=False).version == family:
                out.append(t.strip())
        except ValueError:
            continue
    return tuple(out)


def pod_network(cluster: Cluster, family: int) -> tuple[str, ...]:
    """The cluster's pod network: the configured cluster CIDRs, else every node's pod CIDRs."""
    cidrs = _of_family(cluster.proxy.cluster_cidrs, family)
    if cidrs:
        return cidrs
    return tuple(c for n in cluster.nodes for c in _of_family(n.pod_cidrs, family))


def configured_pod_interface(cluster: Cluster) -> str:
    """The interface the configured local-traffic detector names ("" for the CIDR detectors)."""
    p = cluster.proxy
    if p.detect_local_mode == "BridgeInterface" and p.bridge_interface:
        return p.bridge_interface
    if p.detect_local_mode == "InterfaceNamePrefix" and p.interface_name_prefix:
        return p.interface_name_prefix + "+"
    return ""


def localhost_node_ports(cluster: Cluster) -> bool:
    """kube-proxy turns localhost NodePorts (and route_localnet) off when nodePortAddresses is
    set and admits no IPv4 loopback address."""
    p = cluster.proxy
    if not p.localhost_node_ports:
        return False
    if not p.node_port_addresses:
        return True
    lo = ipaddress.ip_address("127.0.0.1")
    for c in p.node_port_addresses:
        if c in ("localhost", "all"):
            return True
        try:
            if lo in ipaddress.ip_network(c, strict=False):
                return True
        except ValueError:
            continue
    return False


class _Premises:
    def __init__(self) -> None:
        self.items: list[Premise] = []
        self.known: set[str] = set()

    def add(self, fact: str, value: str, basis: str, detail: str = "", *, knows: str = "") -> None:
        self.items.append(Premise(fact, value, basis, detail))  # type: ignore[arg-type]
        if knows and basis != "assumed":
            self.known.add(knows)


def _show(values: Iterable[object]) -> str:
    return ", ".join(map(str, values)) or "none"


def node_context(
    family: int,
    facts: NodeFacts | None = None,
    *,
    cluster: Cluster | None = None,
    node: str | None = None,
    ruleset: Ruleset | None = None,
) -> NodeContext:
    """The context for ``family`` from ``facts``, the cluster's Node ``node`` and the dump."""
    facts = facts or NodeFacts()
    pr = _Premises()
    n = cluster.node(node) if cluster is not None and node else None
    node_ips = [ipaddress.ip_address(a) for a in _of_family(n.internal_ips, family)] if n else []

    # -- addresses
    given_ips = [a for a in facts.node_ips if a.version == family]
    if facts.interfaces:
        on_ifaces = [a.ip for i in facts.interfaces for a in i.addresses if a.version == family and not a.ip.is_loopback]
        first = [a for a in (*node_ips, *given_ips) if a in on_ifaces]
        addrs = list(dict.fromkeys([*first, *on_ifaces]))
        pr.add("node addresses", _show(addrs), "given", facts.source_of("interfaces"), knows=ADDRESSES)
        missing = [a for a in (*node_ips, *given_ips) if a not in on_ifaces]
        if missing:
            addrs = list(dict.fromkeys([*missing, *addrs]))
            pr.add("node addresses", _show(missing), "assumed", "named by the Node object or --node-ip but on none of the given interfaces: counted as the node's own")
    elif given_ips:
        addrs = list(dict.fromkeys(given_ips))
        pr.add("node addresses", _show(addrs), "given", "--node-ip", knows=ADDRESSES)
    else:
        addrs = node_ips
        if n is not None:
            pr.add("node addresses", _show(addrs), "assumed", "the Node object's addresses; any other address of the node (a pod bridge's, docker0's) is not known: give --interface or --ip-addr")

    # -- pod interface
    pod_iface, pod_known = "cni0", False
    configured = configured_pod_interface(cluster) if cluster is not None else ""
    if facts.pod_ifaces:
        pod_iface, pod_known = facts.pod_ifaces[0], True
        pr.add("pod interface", _show(facts.pod_ifaces), "given", facts.source_of("pod interface"), knows=POD_IFACE)
    elif configured:
        pod_iface, pod_known = configured, True
        pr.add("pod interface", configured, "given", "the KubeProxyConfiguration's detectLocal interface", knows=POD_IFACE)
    else:
        found = _pod_interface_among(i.name for i in facts.interfaces)
        if found:
            pod_iface, pod_known = found, True
            pr.add("pod interface", found, "inferred", "the one pod bridge or pod veth family among the given interfaces", knows=POD_IFACE)

    # -- pod network
    pod_cidrs: list[IPNetwork] = list(facts.pod_cidrs)
    local_cidrs: list[IPNetwork] = list(facts.pod_cidrs)
    if cluster is not None:
        pod_cidrs = pod_cidrs or [ipaddress.ip_network(c, strict=False) for c in pod_network(cluster, family)]
        if n is not None:
            local_cidrs = local_cidrs or [ipaddress.ip_network(c, strict=False) for c in _of_family(n.pod_cidrs, family)]
    if not local_cidrs and pod_known:
        subnets = [a.network for i in facts.interfaces if i.name == pod_iface for a in i.addresses
                   if a.version == family and a.network.prefixlen < a.max_prefixlen and not a.ip.is_link_local]  # fmt: skip
        if subnets:
            local_cidrs = subnets
            pod_cidrs = pod_cidrs or subnets
            pr.add("pod network", _show(subnets), "inferred", f"the subnet(s) of the pod interface {pod_iface}")

    # -- external interface
    ext_iface, ext_known = "eth0", False
    if facts.interfaces and addrs:
        holder = next((i.name for i in facts.interfaces for a in i.addresses if a.ip == addrs[0]), "")
        if holder:
            ext_iface, ext_known = holder, True
            pr.add("external interface", holder, "inferred", f"it holds the node address {addrs[0]}", knows=EXTERNAL_IFACE)
    if not (ext_known and pod_known):
        pr.add("interface roles", "by name", "assumed", "packets from off the node never arrive on a pod veth, pod bridge (but Weave's), container bridge or dummy; pods' packets never on an overlay device, a container bridge or a dummy (docker0, cni0, cali+, flannel.1, ...)")

    # -- routes
    routes: list[Route] = []
    if facts.routes is not None:
        routes = [r for r in facts.routes if r.dst.version == family]
        pr.add("routes", f"{len(routes)} route(s)", "given", facts.source_of("routes"), knows=ROUTES)
    else:
        for i in facts.interfaces:
            for a in i.addresses:
                if a.version == family and a.network.prefixlen < a.max_prefixlen and not a.ip.is_loopback:
                    routes.append(Route(a.network, i.name, a.ip))
        if not facts.interfaces:
            iface = pod_iface if pod_known else UNKNOWN + POD_IFACE
            routes = [Route(c, iface, c.network_address + 1) for c in local_cidrs]
        where = "the node's own addresses and the given interfaces' subnets" if facts.interfaces else "the node's own addresses"
        pr.add("routes", "not given", "assumed", f"no --ip-route: `-o` is known only towards {where}; MASQUERADE is taken to pick the node's first address")

    # -- ipsets
    for s in facts.ipsets:
        pr.add(f"ipset {s.name}", f"{len(s.members) + len(s.children)} member(s) ({s.type})", "given", facts.source_of("ipsets"), knows=IPSET + s.name)

    # -- sysctls
    localnet = _route_localnet(facts, family, ext_iface, pod_iface, cluster, ruleset, pr)
    bridge_key = "net.bridge.bridge-nf-call-ip6tables" if family == 6 else "net.bridge.bridge-nf-call-iptables"
    bridge = facts.sysctl(bridge_key)
    if bridge is None:
        bridge = True
        pr.add(bridge_key, "1", "assumed", "kubeadm's preflight requires it: replies between pods on one bridge pass conntrack")
    else:
        pr.add(bridge_key, str(int(bridge)), "given", "--sysctl", knows=BRIDGE_NF)
    if facts.sysctl(bridge_key) is None:
        pr.known.add(BRIDGE_NF)  # a listed default, not an unknown

    return NodeContext(
        family=family,
        addresses=tuple(addrs),
        pod_cidrs=tuple(dict.fromkeys(pod_cidrs)),
        local_pod_cidrs=tuple(dict.fromkeys(local_cidrs)),
        ext_iface=ext_iface,
        pod_iface=pod_iface,
        route_localnet=localnet,
        routes=tuple(routes),
        ipsets=facts.ipsets,
        name=node or "",
        interfaces=facts.interfaces,
        bridge_nf_call=bridge,
        known=frozenset(pr.known | {ADDRESSES}),
        premises=tuple(pr.items),
    )


def _pod_interface_among(names: Iterable[str]) -> str:
    """The pod interface a CNI convention gives, when the interfaces show exactly one."""
    names = list(names)
    bridges = [b for b in ifaces.POD_BRIDGES if b in names]
    if len(bridges) == 1:
        return bridges[0]
    if bridges:
        return ""
    fams = {p for p in ifaces.POD_VETH_PREFIXES if p != "veth" and any(x.startswith(p) for x in names)}
    if len(fams) == 1:
        return fams.pop() + "+"
    return ""


def _route_localnet(
    facts: NodeFacts, family: int, ext: str, pod: str, cluster: Cluster | None, ruleset: Ruleset | None, pr: _Premises
) -> bool | None:
    if family == 6:
        return True  # IPv6 has no route_localnet: ::1 arriving on an interface is simply not routed
    given = [v for k, v in facts.sysctls if k in (LOCALNET_ALL, f"net.ipv4.conf.{ext}.route_localnet", f"net.ipv4.conf.{pod}.route_localnet")]
    if given:
        value = any(given)  # the kernel ORs conf.all with the interface's own setting
        pr.add("route_localnet", str(int(value)), "given", "--sysctl", knows=ROUTE_LOCALNET)
        return value
    if cluster is not None:
        value = localhost_node_ports(cluster)
        why = "kube-proxy sets net.ipv4.conf.all.route_localnet=1 for localhost NodePorts" if value else "the kernel default: kube-proxy does not set it with localhost NodePorts off"
        pr.add("route_localnet", str(int(value)), "assumed", why)
        return value
    seen = _localhost_node_ports_in(ruleset) if ruleset is not None else None
    if seen is None:
        pr.add("route_localnet", "unknown", "assumed", "no --sysctl, no cluster, and the dump shows no kube-proxy NodePort rule: a loopback destination arriving on an interface has no known fate")
        return None
    why = "the dump's NodePort rules accept 127.0.0.0/8 (localhost NodePorts), for which kube-proxy sets it" if seen else "the dump's NodePort rules exclude 127.0.0.0/8; kube-proxy then leaves the kernel default"
    pr.add("route_localnet", str(int(seen)), "assumed", why)
    return seen


def _localhost_node_ports_in(ruleset: Ruleset) -> bool | None:
    """Whether kube-proxy's nat ``KUBE-SERVICES`` NodePort rules admit loopback: ``-m addrtype
    --dst-type LOCAL [! -d 127.0.0.0/8] -j KUBE-NODEPORTS``, or one ``-d CIDR`` rule per
    nodePortAddresses entry; None when the dump has no such rule."""
    table = ruleset.table("nat")
    chain = table.chain("KUBE-SERVICES") if table is not None else None
    if chain is None:
        return None
    loopback = ipaddress.ip_network("127.0.0.0/8")
    seen: bool | None = None
    for r in chain.rules:
        if r.target.name != "KUBE-NODEPORTS":
            continue
        d = r.core_option("-d")
        try:
            net = ipaddress.ip_network(d.value, strict=False) if d is not None else None
        except ValueError:
            continue
        if net is None or net.version != 4:
            seen = seen or (net is None and r.module("addrtype") is not None)
        elif d is not None and d.negated:
            seen = seen or not net.overlaps(loopback)
        else:
            seen = seen or net.overlaps(loopback)
    return seen
