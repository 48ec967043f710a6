"""Properties of the kube-proxy compiler over generated clusters (every node, both families).

(a) the output parses and survives parse -> render -> parse;
(b) every service chain is named by kube-proxy's hash of the service port its comments name
    (and, for KUBE-SEP, of the endpoint it DNATs to), and that endpoint is one the cluster has;
(c) every jump lands on a declared chain, and every service chain is jumped to.

Ownership is read from the rules alone: a chain's service port is the one named in a comment on
a rule in it or on a rule jumping to it, and it is inherited along jumps between service chains.
Large-cluster mode (``large_cluster_threshold=1`` in the strategies) drops comments from SEP rules
and SVC->SEP jumps, so there SEP chains are owned through the SVC/SVL chain that jumps to them.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st

from nat_verify import strategies as nvst
from nat_verify.kubeproxy import compile_node, endpoint_chain_name, service_port_chain_name
from nat_verify.model.cluster import Cluster, Service, ServicePort
from nat_verify.netfilter.parse import parse
from nat_verify.netfilter.render import render
from nat_verify.netfilter.ruleset import Rule, Ruleset, Table

CLUSTERS = st.sampled_from([(4,), (4, 6), (6,)]).flatmap(lambda f: nvst.clusters(families=f))
SERVICE_CHAIN = re.compile(r"^KUBE-(SVC|SVL|EXT|FW|SEP)-[A-Z2-7]{16}$")
# targets that are iptables extensions, not chains
STANDARD_TARGETS = frozenset(
    {"", "ACCEPT", "DROP", "RETURN", "REJECT", "DNAT", "SNAT", "MASQUERADE", "MARK", "CONNMARK",
     "LOG", "NFLOG", "REDIRECT", "CT", "NOTRACK", "TRACE"}
)  # fmt: skip


def compiled(c: Cluster, base_jumps: bool = True) -> Iterator[tuple[str, int, Ruleset]]:
    for node in c.nodes:
        for family in (4, 6):
            text = compile_node(c, node.name, family, base_jumps=base_jumps)
            yield node.name, family, parse(text, family=family)


def comment_spn(rule: Rule) -> str | None:
    """The service port a kube-proxy comment names: its one word with a '/' (``ns/name[:port]``;
    endpoints ``ip:port`` and ``[ip6]:port`` have none)."""
    words = [w for w in rule.comment.split() if "/" in w]
    assert len(words) <= 1, rule.raw
    return words[0] if words else None


def owners(table: Table) -> dict[str, set[str]]:
    """Service chain -> the service port names its rules and the jumps into it name."""
    out: dict[str, set[str]] = {c.name: set() for c in table.chains if SERVICE_CHAIN.match(c.name)}
    edges: list[tuple[str, str]] = []
    for chain in table.chains:
        for rule in chain.rules:
            spn = comment_spn(rule)
            target = rule.target.name
            if spn is not None:
                if chain.name in out:
                    out[chain.name].add(spn)
                if target in out:
                    out[target].add(spn)
            if chain.name in out and target in out:
                edges.append((chain.name, target))
    changed = True
    while changed:  # inherit along service-chain -> service-chain jumps
        changed = False
        for src, dst in edges:
            if not out[src] <= out[dst]:
                out[dst] |= out[src]
                changed = True
    return out


def service_port(c: Cluster, spn: str) -> tuple[Service, ServicePort]:
    key, _, port_name = spn.partition(":")
    for svc in c.services:
        if svc.key == key:
            for sp in svc.ports:
                if sp.name == port_name:
                    return svc, sp
    raise AssertionError(f"comment names {spn!r}, which is not a service port of the cluster")


def dnat_destination(rules: tuple[Rule, ...]) -> str:
    dests = [
        o.value for r in rules if r.target.name == "DNAT" for o in r.target.options if o.name == "--to-destination"
    ]  # fmt: skip
    assert len(dests) == 1, [r.raw for r in rules]
    return dests[0]


def cluster_endpoints(c: Cluster, svc: Service, sp: ServicePort, family: int) -> set[str]:
    """``ip:port`` (``[ip]:port``) of every endpoint of the service port, whatever its state."""
    out = set()
    for sl in c.slices_for(svc):
        if sl.address_type != ("IPv4" if family == 4 else "IPv6"):
            continue
        for p in sl.ports:
            if p.name == sp.name and p.protocol == sp.protocol:
                for e in sl.endpoints:
                    ip = e.addresses[0]
                    out.add(f"[{ip}]:{p.port}" if family == 6 else f"{ip}:{p.port}")
    return out


@given(CLUSTERS, st.booleans())
def test_output_parses_and_round_trips(c: Cluster, base_jumps: bool) -> None:
    for node in c.nodes:
        for family in (4, 6):
            text = compile_node(c, node.name, family, base_jumps=base_jumps)
            once = parse(text, family=family)
            assert sorted(t.name for t in once.tables) == ["filter", "nat"]
            assert parse(render(once), family=family) == once


@given(CLUSTERS)
def test_chain_names_are_the_hashes_of_their_owners(c: Cluster) -> None:
    comments_on_seps = c.proxy.large_cluster_threshold >= 1000  # generated clusters are smaller
    for node, family, rs in compiled(c):
        nat = rs.table("nat")
        assert nat is not None
        for chain, spns in owners(nat).items():
            assert len(spns) == 1, f"{node} v{family}: {chain} owned by {sorted(spns)}"
            (spn,) = spns
            svc, sp = service_port(c, spn)
            proto = sp.protocol.lower()
            prefix = chain[: -len("0123456789ABCDEF")]
            if prefix != "KUBE-SEP-":
                assert chain == service_port_chain_name(prefix, spn, proto), (node, family, spn)
                continue
            rules = nat.by_name[chain].rules
            endpoint = dnat_destination(rules)
            assert chain == endpoint_chain_name(spn, proto, endpoint), (node, family, spn, endpoint)
            assert endpoint in cluster_endpoints(c, svc, sp, family)
            # the hairpin rule masquerades the endpoint's own address
            host = endpoint.rsplit(":", 1)[0].strip("[]")
            (hairpin,) = [r for r in rules if r.target.name == "KUBE-MARK-MASQ"]
            src = hairpin.core_option("-s")
            assert src is not None
            assert ipaddress.ip_network(src.value) == ipaddress.ip_network(host)
            if comments_on_seps:
                assert {comment_spn(r) for r in rules} == {spn}


@given(CLUSTERS)
def test_jumps_land_on_declared_chains_and_service_chains_are_used(c: Cluster) -> None:
    for node, family, rs in compiled(c):
        for table in rs.tables:
            declared = {ch.name for ch in table.chains}
            jumped = set()
            for chain in table.chains:
                for rule in chain.rules:
                    target = rule.target.name
                    if target not in STANDARD_TARGETS:
                        assert target in declared, f"{node} v{family} {table.name}: {rule.raw}"
                        jumped.add(target)
            unused = {n for n in declared if SERVICE_CHAIN.match(n)} - jumped
            assert not unused, f"{node} v{family} {table.name}: nothing jumps to {sorted(unused)}"
