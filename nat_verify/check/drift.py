"""NV015: a node's dump against what kube-proxy would write for the cluster's current state.

Both rulesets are brought to iptables-save spelling and compared chain by chain, only over
kube-proxy's chains (``KUBE-*``) and its jumps from the built-in chains, so other agents' chains
(Docker, CNI plugins, cloud SNAT) are not drift. Spelling that differs between iptables builds
and does not change meaning is ignored: ``-m nfacct`` counters and ``--random-fully`` (NV014
reports the latter). Rules of the shared chains (``KUBE-SERVICES``, ``KUBE-NODEPORTS``, ...) are
compared as sets, since kube-proxy writes Services in random order; per-service chains as
sequences, since order is their meaning (the probability cascade). Each difference is
attributed to the Service port that owns it, by chain name hash or by kube-proxy's comment.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import attrs

from nat_verify.kubeproxy import compile_node
from nat_verify.kubeproxy.owners import _spn_from_comment, chain_owners
from nat_verify.model.cluster import Cluster
from nat_verify.netfilter.parse import parse
from nat_verify.netfilter.render import render_rule
from nat_verify.netfilter.ruleset import Match, Rule, Ruleset, Target
from nat_verify.netfilter.saveform import to_save_form

SHARED = frozenset({"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-EXTERNAL-SERVICES", "KUBE-PROXY-FIREWALL",
                    "KUBE-FORWARD", "KUBE-POSTROUTING", "KUBE-MARK-MASQ", "KUBE-FIREWALL"})  # fmt: skip
BUILTIN_JUMPS = ("KUBE-",)


@attrs.frozen
class DriftItem:
    service: str  # "" for node-wide chains
    message: str
    missing: tuple[str, ...]  # rules kube-proxy would write that the dump lacks
    extra: tuple[str, ...]  # rules in the dump kube-proxy would not write
    line: int = 0  # first dump line involved


def _strip(r: Rule) -> Rule:
    matches = tuple(m for m in r.matches if m.module != "nfacct")
    t = r.target
    if t.name == "MASQUERADE":
        t = Target(t.name, tuple(o for o in t.options if o.name != "--random-fully"), t.goto)
    return Rule(r.chain, r.core, tuple(Match(m.module, m.options) for m in matches), t, r.line, r.raw, r.counters)


def _kube_rules(rs: Ruleset) -> dict[tuple[str, str], list[tuple[str, int, str]]]:
    """(table, chain) -> [(rule text, dump line, comment)] for kube-proxy's part of the ruleset."""
    out: dict[tuple[str, str], list[tuple[str, int, str]]] = {}
    for t in to_save_form(rs).tables:
        if t.name not in ("nat", "filter"):
            continue
        for c in t.chains:
            if c.builtin:
                rules = [r for r in c.rules if r.target.name.startswith(BUILTIN_JUMPS)]
            elif c.name.startswith("KUBE-"):
                rules = list(c.rules)
            else:
                continue
            out[(t.name, c.name)] = [(render_rule(_strip(r)), r.line, r.comment) for r in rules]
    return out


def drift(cluster: Cluster, node: str, ruleset: Ruleset) -> list[DriftItem]:
    expected = parse(compile_node(cluster, node, ruleset.family), source="<compiled>", family=ruleset.family)
    want = _kube_rules(expected)
    have = _kube_rules(ruleset)
    owners = chain_owners(cluster, ruleset.family)
    per_service: dict[str, dict[str, list]] = defaultdict(lambda: {"missing": [], "extra": [], "lines": []})

    def owner(chain: str, comment: str) -> str:
        if chain in owners:
            return owners[chain]
        spn = _spn_from_comment(comment) if comment else ""
        return spn

    for key in sorted(set(want) | set(have)):
        table, chain = key
        w = want.get(key, [])
        h = have.get(key, [])
        if chain in SHARED or chain in ("PREROUTING", "OUTPUT", "POSTROUTING", "INPUT", "FORWARD"):
            wc = Counter(text for text, _, _ in w)
            hc = Counter(text for text, _, _ in h)
            for text, _, comment in w:
                if wc[text] > hc.get(text, 0):
                    per_service[owner(chain, comment)]["missing"].append(f"{table} {text}")
                    wc[text] -= 1
            for text, line, comment in h:
                if hc[text] > Counter(t for t, _, _ in w).get(text, 0):
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
    items = []
    for svc, d in sorted(per_service.items()):
        missing, extra = tuple(d["missing"]), tuple(d["extra"])
        if not missing and not extra:
            continue
        who = svc or "node-wide kube-proxy chains"
        if missing and not extra:
            what = f"{len(missing)} rule(s) kube-proxy would write are missing"
        elif extra and not missing:
            what = f"{len(extra)} rule(s) are stale (kube-proxy would not write them for the current cluster state)"
        else:
            what = f"{len(missing)} rule(s) missing and {len(extra)} stale"
        items.append(DriftItem(svc, f"{who}: {what}", missing, extra, min(d["lines"]) if d["lines"] else 0))
    return items
