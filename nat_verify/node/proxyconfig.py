"""Without a KubeProxyConfiguration, the kube-proxy settings a dump's own rules show.

A real cluster's kube-proxy config is often not at hand (``check`` is given a dump and
``kubectl get`` output). The settings that change kube-proxy's rules for a node are written in
those rules, so they are read back from them, each with the dump line that shows it:

* the local-traffic detector and the cluster CIDR: the ClusterIP masquerade rule kube-proxy
  writes in ``KUBE-SVC-*``/``KUBE-SVL-*`` (``KUBE-SERVICES`` before v1.23):
  ``-d <clusterIP> ... ! -s <CIDR> -j KUBE-MARK-MASQ`` is detectLocalMode ClusterCIDR (NodeCIDR
  when the CIDR is the node's own podCIDR), ``! -i <bridge>`` BridgeInterface, ``! -i
  <prefix>+`` InterfaceNamePrefix, and the same rule without a detector match masqueradeAll;
  ClusterIP rules with no such rule at all mean no detector (kube-proxy omits the rule when it
  has no cluster CIDR);
* the masquerade bit: ``-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000`` (``--set-xmark
  0x4000/0x4000`` as iptables-save prints it);
* localhost NodePorts and nodePortAddresses: the ``KUBE-SERVICES`` rule(s) jumping to
  ``KUBE-NODEPORTS``: ``-m addrtype --dst-type LOCAL`` (every local address) with or without
  ``! -d 127.0.0.0/8``, or one ``-d <node IP>`` rule per address nodePortAddresses admits.

A setting the dump does not show keeps kube-proxy's default and is said to be assumed. The
rules are only read where they are unambiguous: conflicting rules infer nothing.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

import attrs

from nat_verify.intent.destination import family_ips, is_proxied
from nat_verify.model.cluster import Cluster, ProxyConfig
from nat_verify.netfilter.context import Premise
from nat_verify.netfilter.ruleset import Rule, Ruleset

MASQ_CHAIN = "KUBE-MARK-MASQ"
LOOPBACK4 = ipaddress.ip_network("127.0.0.0/8")


def proxy_config_given(cluster: Cluster) -> bool:
    """Whether the cluster's objects held a KubeProxyConfiguration (the loader's default value
    stands for "none")."""
    return cluster.proxy != ProxyConfig()


def with_inferred_config(cluster: Cluster, node: str, ruleset: Ruleset) -> tuple[Cluster, tuple[Premise, ...]]:
    """``cluster`` with the settings ``ruleset`` shows when it has no config of its own."""
    if proxy_config_given(cluster):
        return cluster, ()
    cfg, premises = infer_proxy_config(cluster, node, ruleset)
    return attrs.evolve(cluster, proxy=cfg), premises


def _where(ruleset: Ruleset, rule: Rule) -> str:
    text = rule.raw or f"-A {rule.chain} ..."
    return f"{ruleset.source}:{rule.line}: {text}" if rule.line else text


def _nat_rules(ruleset: Ruleset) -> Iterable[Rule]:
    t = ruleset.table("nat")
    if t is None:
        return ()
    return (r for c in t.chains for r in c.rules)


def infer_proxy_config(cluster: Cluster, node: str, ruleset: Ruleset) -> tuple[ProxyConfig, tuple[Premise, ...]]:
    """kube-proxy's settings for ``node`` as ``ruleset`` shows them, and how each was found."""
    premises: list[Premise] = []
    cfg = ProxyConfig()
    cfg, p = _detector(cfg, cluster, node, ruleset)
    premises.extend(p)
    cfg, p = _mark(cfg, ruleset)
    premises.extend(p)
    cfg, p = _node_ports(cfg, ruleset)
    premises.extend(p)
    return cfg, tuple(premises)


def _detector(cfg: ProxyConfig, cluster: Cluster, node: str, ruleset: Ruleset) -> tuple[ProxyConfig, list[Premise]]:
    fam = ruleset.family
    cips = {ipaddress.ip_address(a) for s in cluster.services if is_proxied(s) for a in family_ips(s.cluster_ips, fam)}
    seen: dict[tuple[str, str], Rule] = {}  # (kind, value) -> first rule
    cluster_ip_rules = 0
    for r in _nat_rules(ruleset):
        d = r.core_option("-d")
        if d is None or d.negated:
            continue
        try:
            dst = ipaddress.ip_network(d.value, strict=False)
        except ValueError:
            continue
        if dst.num_addresses != 1 or dst.network_address not in cips:
            continue
        if r.target.name != MASQ_CHAIN:
            cluster_ip_rules += r.chain == "KUBE-SERVICES"
            continue
        s, i = r.core_option("-s"), r.core_option("-i")
        if s is not None and s.negated:
            seen.setdefault(("cidr", s.value), r)
        elif i is not None and i.negated:
            seen.setdefault(("prefix" if i.value.endswith("+") else "bridge", i.value.rstrip("+")), r)
        elif s is None and i is None:
            seen.setdefault(("all", ""), r)
    if len(seen) > 1:
        shown = "; ".join(_where(ruleset, r) for r in seen.values())
        return cfg, [Premise("detect-local", "none", "assumed", f"the dump's ClusterIP masquerade rules disagree ({shown}): kube-proxy's default (no detector) is assumed")]
    if not seen:
        if cluster_ip_rules:
            return cfg, [Premise("detect-local", "none", "inferred", "the dump's ClusterIP rules have no masquerade rule: kube-proxy writes none without a cluster CIDR")]
        return cfg, [Premise("detect-local", "none", "assumed", "no KubeProxyConfiguration, and the dump shows no ClusterIP rule of the cluster's Services")]
    ((kind, value), rule) = next(iter(seen.items()))
    where = _where(ruleset, rule)
    if kind == "all":
        return attrs.evolve(cfg, masquerade_all=True), [Premise("masqueradeAll", "true", "inferred", where)]
    if kind == "bridge":
        return attrs.evolve(cfg, detect_local_mode="BridgeInterface", bridge_interface=value), [Premise("detect-local", f"BridgeInterface {value}", "inferred", where)]
    if kind == "prefix":
        return attrs.evolve(cfg, detect_local_mode="InterfaceNamePrefix", interface_name_prefix=value), [Premise("detect-local", f"InterfaceNamePrefix {value}", "inferred", where)]
    try:
        cidr = str(ipaddress.ip_network(value, strict=False))
    except ValueError:
        return cfg, [Premise("detect-local", "none", "assumed", f"unreadable CIDR in {where}")]
    own = {str(ipaddress.ip_network(c, strict=False)) for c in _node_pod_cidrs(cluster, node)}
    if cidr in own:
        return attrs.evolve(cfg, detect_local_mode="NodeCIDR"), [Premise("detect-local", f"NodeCIDR ({cidr}, the node's podCIDR)", "inferred", where)]
    return attrs.evolve(cfg, cluster_cidrs=(cidr,), detect_local_mode="ClusterCIDR"), [Premise("cluster CIDR", cidr, "inferred", where)]


def _node_pod_cidrs(cluster: Cluster, node: str) -> tuple[str, ...]:
    for n in cluster.nodes:
        if n.name == node:
            return n.pod_cidrs
    return ()


def _mark(cfg: ProxyConfig, ruleset: Ruleset) -> tuple[ProxyConfig, list[Premise]]:
    t = ruleset.table("nat")
    chain = t.chain(MASQ_CHAIN) if t is not None else None
    values: dict[int, Rule] = {}
    for r in chain.rules if chain is not None else ():
        if r.target.name != "MARK":
            continue
        for o in r.target.options:
            text = o.value.partition("/")[0]
            if o.name in ("--or-mark", "--set-xmark", "--set-mark"):
                try:
                    values.setdefault(int(text, 0), r)
                except ValueError:
                    continue
    bits = {v.bit_length() - 1: r for v, r in values.items() if v > 0 and v & (v - 1) == 0}
    if len(values) == 1 and len(bits) == 1:
        bit, rule = next(iter(bits.items()))
        return attrs.evolve(cfg, masquerade_bit=bit), [Premise("masquerade bit", f"{bit} ({1 << bit:#x})", "inferred", _where(ruleset, rule))]
    why = "the dump's KUBE-MARK-MASQ sets no single mark bit" if values else "the dump has no KUBE-MARK-MASQ rule"
    return cfg, [Premise("masquerade bit", "14 (0x4000)", "assumed", f"kube-proxy's default; {why}")]


def _node_ports(cfg: ProxyConfig, ruleset: Ruleset) -> tuple[ProxyConfig, list[Premise]]:
    t = ruleset.table("nat")
    chain = t.chain("KUBE-SERVICES") if t is not None else None
    rules = [r for r in (chain.rules if chain is not None else ()) if r.target.name == "KUBE-NODEPORTS"]
    if not rules:
        return cfg, [Premise("nodePortAddresses", "all local addresses", "assumed", "kube-proxy's default; the dump has no KUBE-SERVICES -> KUBE-NODEPORTS rule")]
    addresses: list[str] = []
    localhost = False
    for r in rules:
        d = r.core_option("-d")
        if d is None:
            localhost = localhost or ruleset.family == 4
            continue
        try:
            net = ipaddress.ip_network(d.value, strict=False)
        except ValueError:
            continue
        if d.negated:
            localhost = localhost or not (net.version == 4 and net.overlaps(LOOPBACK4))
        else:
            addresses.append(str(net))
            localhost = localhost or (net.version == 4 and net.overlaps(LOOPBACK4))
    where = _where(ruleset, rules[0])
    out = [Premise("localhostNodePorts", str(localhost).lower(), "inferred", where)] if ruleset.family == 4 else []
    if addresses:
        cfg = attrs.evolve(cfg, node_port_addresses=tuple(addresses))
        out.append(Premise("nodePortAddresses", ", ".join(addresses), "inferred", where))
    return attrs.evolve(cfg, localhost_node_ports=localhost or ruleset.family == 6), out
