"""NV015: a node's dump against what kube-proxy would write for the cluster's current state.

Which kube-proxy? The release the user names (``--kube-proxy-version``), else the one the
cluster's KubeProxyConfiguration names, else the layout era the dump's own rules show
(``kubeproxy.infer``); the choice and its evidence are reported.

Two questions, in order:

1. *Which rules differ?* Both rulesets are brought to iptables-save spelling and compared
   chain by chain, over kube-proxy's own chains for that era and its jumps from the built-in
   chains, so other agents' chains (Docker, CNI plugins, cloud SNAT) and kubelet's
   (``KUBE-MARK-DROP``, ``KUBE-FIREWALL`` before 1.27) are not drift. ``-m nfacct`` counters
   and ``--random-fully`` depend on the node's iptables build and are ignored (NV014 reports
   the latter). Rules of the shared chains (``KUBE-SERVICES``, ``KUBE-NODEPORTS``, ...) are
   compared as sets, since kube-proxy writes Services in random order; per-service chains as
   sequences, since order is their meaning (the probability cascade). Each difference is
   attributed to the Service port that owns it, by chain-name hash or by kube-proxy's comment.
2. *Does it change what happens to a packet?* For each Service port whose rules differ, and
   for the node-wide chains, the dump is compared with the same dump in which kube-proxy's
   rules are replaced by the era's (everything else left where it is), packet class by packet
   class (``equivalence.first_difference``) over the Service's addresses and every address the
   differing rules name. A packet treated differently is an error, shown with both outcomes; a
   difference no packet can observe is a note that shows the text (not a failure).
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from typing import Literal

import attrs

from nat_verify.check.equivalence import Difference, first_difference
from nat_verify.intent.destination import service_destinations
from nat_verify.kubeproxy import compile_node
from nat_verify.kubeproxy.eras import Era
from nat_verify.kubeproxy.infer import EraChoice, choose_era
from nat_verify.kubeproxy.owners import _spn_from_comment, chain_owners
from nat_verify.model.cluster import Cluster, IPAddress, IPNetwork
from nat_verify.model.outcome import Finding, Outcome
from nat_verify.model.packet import Packet
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.parse import parse
from nat_verify.netfilter.render import render_rule
from nat_verify.netfilter.ruleset import Chain, Match, Rule, Ruleset, Table, Target
from nat_verify.netfilter.saveform import to_save_form

BUILTIN = ("PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING")
_SERVICE_CHAIN = re.compile(r"^KUBE-(?:SVC|SVL|EXT|FW|XLB|SEP)-[A-Z2-7]{16}$")


def owned_chains(era: Era) -> frozenset[tuple[str, str]]:
    """(table, chain) of the top-level chains kube-proxy of ``era`` writes (service chains aside)."""
    out = {("nat", c) for c in ("KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ")}
    out |= {("filter", c) for c in ("KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-FORWARD")}
    if era.health_checks:
        out.add(("filter", "KUBE-NODEPORTS"))
    if era.proxy_firewall:
        out.add(("filter", "KUBE-PROXY-FIREWALL"))
    if era.writes_kube_firewall:
        out.add(("filter", "KUBE-FIREWALL"))
    return frozenset(out)


def _owned(table: str, chain: str, owned: frozenset[tuple[str, str]]) -> bool:
    return (table, chain) in owned or (table == "nat" and _SERVICE_CHAIN.match(chain) is not None)


def _is_owned_jump(table: str, r: Rule, owned: frozenset[tuple[str, str]]) -> bool:
    return (table, r.target.name) in owned


@attrs.frozen
class DriftItem:
    service: str  # "" for node-wide chains
    message: str
    missing: tuple[str, ...]  # rules kube-proxy would write that the dump lacks
    extra: tuple[str, ...]  # rules in the dump kube-proxy would not write
    line: int = 0  # first dump line involved
    severity: Literal["error", "warning", "note"] = "error"  # warning: undecided
    packet: Packet | None = None  # one packet the difference changes (errors)
    expected: tuple[Outcome, ...] = ()  # its outcomes with the era's rules
    actual: tuple[Outcome, ...] = ()  # its outcomes with the dump's rules


@attrs.frozen
class DriftReport:
    items: tuple[DriftItem, ...]
    era: EraChoice

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.items)


def _strip(r: Rule) -> Rule:
    matches = tuple(m for m in r.matches if m.module != "nfacct")
    t = r.target
    if t.name == "MASQUERADE":
        t = Target(t.name, tuple(o for o in t.options if o.name != "--random-fully"), t.goto)
    return Rule(r.chain, r.core, tuple(Match(m.module, m.options) for m in matches), t, r.line, r.raw, r.counters)


def _kube_rules(rs: Ruleset, owned: frozenset[tuple[str, str]]) -> dict[tuple[str, str], list[tuple[str, int, str]]]:
    """(table, chain) -> [(rule text, dump line, comment)] for kube-proxy's part of the ruleset."""
    out: dict[tuple[str, str], list[tuple[str, int, str]]] = {}
    try:
        tables = to_save_form(rs).tables
    except ValueError:  # a value the save form cannot spell (e.g. a mark 'junk'): compare the text as written
        tables = rs.tables
    for t in tables:
        if t.name not in ("nat", "filter"):
            continue
        for c in t.chains:
            if c.builtin:
                rules = [r for r in c.rules if _is_owned_jump(t.name, r, owned)]
            elif _owned(t.name, c.name, owned):
                rules = list(c.rules)
            else:
                continue
            out[(t.name, c.name)] = [(render_rule(_strip(r)), r.line, r.comment) for r in rules]
    return out


def replace_kube_proxy_rules(dump: Ruleset, compiled: Ruleset, owned: frozenset[tuple[str, str]]) -> Ruleset:
    """``dump`` with kube-proxy's chains and jumps replaced by ``compiled``'s: everything other
    agents (and kubelet) wrote stays where it is. kube-proxy's jumps take the place of the
    dump's first one in each built-in chain (the top when the dump has none)."""
    tables: list[Table] = []
    names = {t.name for t in dump.tables} | {t.name for t in compiled.tables}
    for name in sorted(names):
        d, c = dump.table(name), compiled.table(name)
        if c is None or name not in ("nat", "filter"):
            if d is not None:
                tables.append(d)
            continue
        chains: list[Chain] = []
        d_chains = list(d.chains) if d is not None else []
        for ch in d_chains:
            if ch.builtin:
                kept = [r for r in ch.rules if not _is_owned_jump(name, r, owned)]
                at = next((i for i, r in enumerate(ch.rules) if _is_owned_jump(name, r, owned)), 0)
                at -= sum(1 for r in ch.rules[:at] if _is_owned_jump(name, r, owned))
                cc = c.chain(ch.name)
                jumps = [r for r in cc.rules if _is_owned_jump(name, r, owned)] if cc else []
                chains.append(attrs.evolve(ch, rules=tuple(kept[:at] + jumps + kept[at:])))
            elif not _owned(name, ch.name, owned):
                chains.append(ch)
        have = {ch.name for ch in chains}
        for ch in c.chains:
            if ch.name in have:
                continue
            if ch.builtin:  # a built-in chain the dump does not show
                chains.append(attrs.evolve(ch, rules=tuple(r for r in ch.rules if _is_owned_jump(name, r, owned)),
                                           policy="ACCEPT"))  # fmt: skip
            elif _owned(name, ch.name, owned):
                chains.append(ch)
        tables.append(Table(name, tuple(chains), d.line if d is not None else 0))
    return Ruleset(dump.family, tuple(tables), source=dump.source)


_HOST = re.compile(r"(?:^| )-d (\S+?)(?:/(?:32|128))?(?= |$)")
_DPORT = re.compile(r"--dport (\d+)(?= |$)")
_PROTO = re.compile(r"(?:^| )-p (tcp|udp|sctp)(?= |$)")


def _targets_of_rules(texts: Iterable[str], node_ips: list[str], family: int) -> set[tuple[str, int, str]]:
    """(address, port, protocol) that rules of the shared chains capture."""
    out: set[tuple[str, int, str]] = set()
    for text in texts:
        dport, proto = _DPORT.search(text), _PROTO.search(text)
        if dport is None or proto is None:
            continue
        host = _HOST.search(text)
        if host is not None and "/" not in host.group(1):
            try:
                if ipaddress.ip_address(host.group(1)).version == family:
                    out.add((host.group(1), int(dport.group(1)), proto.group(1)))
            except ValueError:
                pass
        elif " KUBE-NODEPORTS " in f" {text} " or "--dst-type LOCAL" in text:
            out.update((ip, int(dport.group(1)), proto.group(1)) for ip in node_ips)
    return out


def drift(
    cluster: Cluster, node: str, ruleset: Ruleset, *, ctx: NodeContext | None = None, pinned: str = "",
) -> DriftReport:  # fmt: skip
    """Every NV015 difference between ``ruleset`` and kube-proxy's rules for ``cluster`` on ``node``."""
    fam = ruleset.family
    cfg = cluster.proxy
    choice = choose_era(cfg.kube_proxy_version, cfg.legacy_layout, ruleset, pinned)
    era = choice.era
    owned = owned_chains(era)
    expected = parse(compile_node(cluster, node, fam, era=era), source="<compiled>", family=fam)
    want = _kube_rules(expected, owned)
    have = _kube_rules(ruleset, owned)
    owners = chain_owners(cluster, fam)
    per_service: dict[str, dict[str, list]] = defaultdict(lambda: {"missing": [], "extra": [], "lines": []})

    def owner(chain: str, comment: str) -> str:
        if chain in owners:
            return owners[chain]
        return _spn_from_comment(comment) if comment else ""

    for key in sorted(set(want) | set(have)):
        table, chain = key
        w = want.get(key, [])
        h = have.get(key, [])
        if not _SERVICE_CHAIN.match(chain):
            wc = Counter(text for text, _, _ in w)
            hc = Counter(text for text, _, _ in h)
            wanted = Counter(wc)
            for text, _, comment in w:
                if wc[text] > hc.get(text, 0):
                    per_service[owner(chain, comment)]["missing"].append(f"{table} {text}")
                    wc[text] -= 1
            for text, line, comment in h:
                if hc[text] > wanted.get(text, 0):
                    d = per_service[owner(chain, comment)]
                    d["extra"].append(f"{table} {text}")
                    d["lines"].append(line)
                    hc[text] -= 1
        elif [t for t, _, _ in w] != [t for t, _, _ in h]:
            svc = owner(chain, next((c for _, _, c in (w or h) if c), ""))
            d = per_service[svc]
            hs = {t for t, _, _ in h}
            ws = {t for t, _, _ in w}
            d["missing"].extend(f"{table} {t}" for t, _, _ in w if t not in hs)
            d["extra"].extend(f"{table} {t}" for t, _, _ in h if t not in ws)
            d["lines"].extend(line for t, line, _ in h if t not in ws)
            if not (set(d["missing"]) or set(d["extra"])):
                d["missing"].append(f"{table} {chain}: the same rules in another order")
    groups = [(svc, d) for svc, d in sorted(per_service.items()) if d["missing"] or d["extra"]]
    if not groups:
        return DriftReport((), choice)
    return DriftReport(tuple(_judge(cluster, node, ruleset, expected, owned, era, groups, ctx)), choice)


def _judge(
    cluster: Cluster, node: str, ruleset: Ruleset, expected: Ruleset, owned: frozenset[tuple[str, str]],
    era: Era, groups: list[tuple[str, dict]], ctx: NodeContext | None,
) -> Iterable[DriftItem]:  # fmt: skip
    """Each group of differing rules, judged by the packets it changes."""
    from nat_verify.check.nodectx import node_context

    fam = ruleset.family
    if ctx is None:
        ctx = node_context(cluster, node, fam)
    replaced = replace_kube_proxy_rules(ruleset, expected, owned)
    ia, ib = Interpreter(ruleset, ctx), Interpreter(replaced, ctx)
    node_ips = [str(a) for a in ctx.addresses if a.version == fam and not a.is_loopback]
    by_service: dict[str, set[tuple[str, int, str]]] = defaultdict(set)
    itp_local: set[str] = set()
    for service in cluster.services:
        for dest in service_destinations(cluster, node, service, fam):
            by_service[dest.service].add((dest.ip, dest.port, dest.proto))
        if service.internal_traffic_policy == "Local":
            itp_local.update(sp_key(service.key, p.name) for p in service.ports)
    extra = _source_constants(cluster)
    for svc, d in groups:
        missing, extra_rules = tuple(d["missing"]), tuple(d["extra"])
        who = svc or "node-wide kube-proxy chains"
        what = _count(missing, extra_rules)
        line = min(d["lines"]) if d["lines"] else 0
        if svc in itp_local and not era.internal_policy:
            yield DriftItem(svc, f"{who}: {what}; not judged: internalTrafficPolicy=Local is not modelled for kube-proxy {era.releases}",
                            missing, extra_rules, line, "note")  # fmt: skip
            continue
        texts = [t.split(" ", 1)[1] for t in (*missing, *extra_rules)]
        targets = set(_targets_of_rules(texts, node_ips, fam))
        if svc:
            targets |= by_service.get(svc, set())
        else:
            for ts in by_service.values():
                targets |= ts
        diff, undecided = _compare(ia, ib, ctx, targets, extra)
        if diff is None and undecided:
            yield DriftItem(svc, f"{who}: {what}; whether a packet is treated differently is undecided for {undecided} "
                            "packet class(es): a rule the model cannot evaluate decides them", missing, extra_rules, line,
                            "warning")  # fmt: skip
        elif diff is None:
            yield DriftItem(svc, f"{who}: {what}, and no packet is treated differently (kube-proxy {era.releases} writes them so)",
                            missing, extra_rules, line, "note")  # fmt: skip
        else:
            yield DriftItem(svc, f"{who}: {what}; {diff.packet} is treated differently", missing, extra_rules, line,
                            "error", diff.packet, diff.b, diff.a)  # fmt: skip


def sp_key(svc_key: str, port_name: str) -> str:
    return f"{svc_key}:{port_name}" if port_name else svc_key


def _count(missing: tuple[str, ...], extra: tuple[str, ...]) -> str:
    if missing and not extra:
        return f"{len(missing)} rule(s) kube-proxy would write are missing"
    if extra and not missing:
        return f"{len(extra)} rule(s) are stale (kube-proxy would not write them for the current cluster state)"
    return f"{len(missing)} rule(s) missing and {len(extra)} stale"


def _source_constants(cluster: Cluster) -> list[IPNetwork]:
    out: list[IPNetwork] = []
    for text in (*cluster.proxy.cluster_cidrs, *(a for n in cluster.nodes for a in (*n.internal_ips, *n.pod_cidrs)),
                 *(e.addresses[0] for s in cluster.slices for e in s.endpoints if e.addresses),
                 *(r.strip() for s in cluster.services for r in s.lb_source_ranges)):  # fmt: skip
        try:
            out.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            continue
    return out


def _compare(
    ia: Interpreter, ib: Interpreter, ctx: NodeContext, targets: set[tuple[str, int, str]], extra: list[IPNetwork]
) -> tuple[Difference | None, int]:
    parsed: list[tuple[IPAddress, int, str]] = []
    for ip, port, proto in sorted(targets):
        try:
            parsed.append((ipaddress.ip_address(ip), port, proto))
        except ValueError:
            continue
    eq = first_difference(ia, ib, ctx, parsed, extra)
    return eq.difference, eq.inconclusive


def drift_findings(
    cluster: Cluster, node: str, ruleset: Ruleset, ctx: NodeContext | None = None,
    location: Callable[[str], str] | None = None, pinned: str = "",
) -> list[Finding]:  # fmt: skip
    """NV015 as findings: the layout assumed (a note), then each difference."""
    rep = drift(cluster, node, ruleset, ctx=ctx, pinned=pinned)
    out = [Finding("NV015", "", node, f"rules compared with {rep.era.describe()}", severity="note")]
    for item in rep.items:
        where = f"{ruleset.source}:{item.line}" if item.line else (location(item.service) if location else ruleset.source)
        if item.severity == "error" and item.packet is not None:
            expected = _show(item.expected)
            actual = _show(item.actual)
        else:
            expected = "\n".join(item.missing[:20]) or "(nothing)"
            actual = "\n".join(item.extra[:20]) or "(nothing)"
        out.append(Finding("NV015", item.service, node, item.message, severity=item.severity, packet=item.packet,
                           expected=expected, actual=actual, location=where))  # fmt: skip
    return out


def _show(outcomes: tuple[Outcome, ...]) -> str:
    parts = []
    for o in outcomes:
        what = o.verdict + (f" {o.reject_with}" if o.reject_with else "")
        nat = f" to {o.destination}" if o.dnat else ""
        masq = " masqueraded" if o.masquerade else ""
        reason = f" ({o.reason})" if o.reason else ""
        parts.append(f"{o.probability}: {what}{nat}{masq}{reason}")
    return "; ".join(parts) or "(no outcome)"
