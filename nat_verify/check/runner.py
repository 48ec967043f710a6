"""Run the invariant catalogue over a node's ruleset: results, findings, counterexamples.

``check_ruleset`` is the engine behind ``nat-verify check`` (a real node's dump) and, through
``verify_cluster``, ``nat-verify verify`` (the rules nat-verify compiles). For every Service
address on the node it enumerates every packet class (``atoms.SourceSpace``), asks the intent
what Kubernetes allows and the interpreter what the rules do, and attributes each difference to
an invariant (``compare``). Session affinity (NV011) needs two connections and is checked on
its own; structure (NV014) and drift (NV015) look at the ruleset as a whole. The cluster's
objects (NV016-NV028: selectors, Pods, EndpointSlices) are checked once per cluster
(``check_objects``), with no ruleset involved.

Statuses: ``proved`` when every packet class was checked and nothing was inconclusive; an
outcome the model cannot decide makes the invariants it touches ``inconclusive``; ``violated``
when an error finding exists.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator

import attrs

from nat_verify.check.atoms import SourceSpace
from nat_verify.check.compare import Violation, compare, describe
from nat_verify.check.drift import drift_findings
from nat_verify.check.nodectx import node_context
from nat_verify.check.objects import object_report
from nat_verify.check.structure import structure_issues
from nat_verify.intent import (
    Destination,
    affinity,
    destinations,
    expect,
    find_service_port,
    interesting_sources,
    usable_endpoints,
)
from nat_verify.intent.detector import node_addresses
from nat_verify.intent.expectation import Expectation
from nat_verify.kubeproxy import compile_node
from nat_verify.model.cluster import Cluster, IPNetwork
from nat_verify.model.outcome import Finding, Result, Step, Trace
from nat_verify.model.packet import Packet
from nat_verify.netfilter.context import NodeContext, Premise
from nat_verify.netfilter.interpreter import Interpreter, RecentState
from nat_verify.netfilter.parse import parse
from nat_verify.netfilter.ruleset import Ruleset
from nat_verify.node.facts import NodeFacts
from nat_verify.node.proxyconfig import with_inferred_config

Progress = Callable[[str], None]
MAX_FINDINGS_PER_KEY = 3


@attrs.frozen
class CheckReport:
    results: tuple[Result, ...]
    findings: tuple[Finding, ...]
    packets: int = 0  # packets traced
    # (node, premise): what the results rest on that the user did not give (inferred, assumed)
    assumptions: tuple[tuple[str, Premise], ...] = ()

    def merged(self, other: CheckReport) -> CheckReport:
        return CheckReport(
            self.results + other.results, self.findings + other.findings, self.packets + other.packets,
            self.assumptions + other.assumptions,
        )  # fmt: skip

    def assumptions_json(self) -> list[dict[str, str]]:
        """The assumptions as the report's JSON lists them (one object per node and fact)."""
        return [{"node": node, **p.to_json()} for node, p in self.assumptions]


class _Acc:
    """Per (invariant, service) bookkeeping while checking one node."""

    def __init__(self, node: str, cluster_name: str, location: Callable[[str], str]) -> None:
        self.node = node
        self.cluster = cluster_name
        self.location = location
        self.checked: dict[tuple[str, str], int] = defaultdict(int)
        self.violated: set[tuple[str, str]] = set()
        self.inconclusive: dict[tuple[str, str], str] = {}
        self.findings: list[Finding] = []
        self._per_key: dict[tuple[str, str, str], int] = defaultdict(int)
        self._seen: set[tuple[object, ...]] = set()

    def touch(self, invs: Iterable[str], service: str, n: int = 1) -> None:
        for i in invs:
            self.checked[(i, service)] += n

    def finding(self, inv: str, service: str, sub: str, f: Finding) -> None:
        if f.severity == "error":
            self.violated.add((inv, service))
        self.checked[(inv, service)] += 0
        k = (inv, service, sub)
        p = f.packet
        # two source classes the rules treat alike are one finding (reports tell findings
        # apart by everything but the source, which is only a class's representative)
        same = (inv, service, f.severity, f.expected, f.actual, p.origin, p.proto, p.dst, p.dport) if p else None
        if same is not None and same in self._seen:
            return
        if same is not None:
            self._seen.add(same)
        if self._per_key[k] < (MAX_FINDINGS_PER_KEY if f.severity == "error" else 1):
            self.findings.append(f)
        self._per_key[k] += 1

    def results(self, exhaustive: bool) -> list[Result]:
        out = []
        for (inv, svc), n in sorted(self.checked.items()):
            if (inv, svc) in self.violated:
                status = "violated"
            elif (inv, svc) in self.inconclusive:
                status = "inconclusive"
            else:
                status = "proved" if exhaustive else "holds"
            reason = self.inconclusive.get((inv, svc), "") if status == "inconclusive" else ""
            out.append(Result(inv, svc, self.node, status, "exhaustive" if exhaustive else "concrete", n, self.cluster, reason))  # type: ignore[arg-type]
        return out


def _extra_constants(cluster: Cluster, dest: Destination) -> list[IPNetwork]:
    """Addresses the intent distinguishes for this destination's sources."""
    out: list[IPNetwork] = []

    def add(text: str) -> None:
        with contextlib.suppress(ValueError):
            out.append(ipaddress.ip_network(text, strict=False))

    svc, _ = find_service_port(cluster, dest.service, dest.proto)
    for n in cluster.nodes:
        for a in (*n.internal_ips, *n.pod_cidrs):
            add(a)
    for c in cluster.proxy.cluster_cidrs:
        add(c)
    for s in cluster.slices_for(svc):
        for e in s.endpoints:
            for a in e.addresses[:1]:
                add(a)
    for r in svc.lb_source_ranges:
        add(r.strip())
    for ing in svc.lb_ingress:
        if ing.ip:
            add(ing.ip)
    for ip in svc.external_ips:
        add(ip)
    return out


def check_ruleset(
    cluster: Cluster,
    node: str,
    ruleset: Ruleset,
    *,
    drift_check: bool = True,
    progress: Progress | None = None,
    location: Callable[[str], str] | None = None,
    facts: NodeFacts | None = None,
    infer_config: bool = True,
    prepared: tuple[Interpreter, SourceSpace] | None = None,
    structure_check: bool = True,
    kube_proxy_version: str = "",
) -> CheckReport:
    """Every invariant of the catalogue on one node's ruleset.

    ``facts``: what the user said about the node (interfaces, routes, ipsets, sysctls).
    ``infer_config``: without a KubeProxyConfiguration in ``cluster``, read kube-proxy's
    settings back from the dump's rules (``node.proxyconfig``) rather than assume defaults.
    ``prepared``: an interpreter of ``ruleset`` on this node's context and its ``SourceSpace``,
    from an earlier call (``check.sharing`` checks one ruleset in several calls: both cost a
    pass over the whole dump). ``structure_check=False`` leaves out NV014's ruleset-wide
    structure pass (for calls whose ruleset-wide results the caller drops).
    ``kube_proxy_version`` pins the kube-proxy layout NV015 compares with (default: the
    cluster's KubeProxyConfiguration, else the one the dump shows).
    The cluster's objects (NV016-NV028) are ``check_objects``'s, checked once per cluster.
    """
    family = ruleset.family
    inferred: tuple[Premise, ...] = ()
    if infer_config:
        cluster, inferred = with_inferred_config(cluster, node, ruleset)
    ctx = node_context(cluster, node, family, facts, ruleset)
    own = frozenset(str(a) for a in ctx.addresses) | node_addresses(cluster, node)
    interp, space = prepared if prepared is not None else (Interpreter(ruleset, ctx), None)
    space = space if space is not None else SourceSpace(interp)
    loc = location or (lambda service: _service_location(cluster, service))
    acc = _Acc(node, cluster.name, loc)
    masq_mark = cluster.proxy.masquerade_mark
    packets = 0
    dests = destinations(cluster, node, family)
    for dest in dests:
        if progress:
            progress(str(dest))
        svc, sp = find_service_port(cluster, dest.service, dest.proto)
        infos = usable_endpoints(cluster, node, svc, sp, family).all
        dst = ipaddress.ip_address(dest.ip)
        nice = [ipaddress.ip_address(a) for a, _ in interesting_sources(cluster, node, dest)]
        classes = space.classes(ctx, dst, dest.port, dest.proto, _extra_constants(cluster, dest), nice)
        sticky_done: set[str] = set()
        for src, sport, origin in classes:
            exp = expect(cluster, node, dest, str(src), origin, node_ips=own)
            pkt = Packet(src=src, dst=dst, dport=dest.port, sport=sport, proto=dest.proto, origin=origin)  # type: ignore[arg-type]
            tr = interp.trace(pkt)
            packets += 1
            invs = set(exp.invariants) | ({"NV010"} if exp.kind == "dnat" else set())
            acc.touch(invs, dest.service)
            if tr.inconclusive:
                reason = next(o.reason for o in tr.outcomes if o.verdict == "inconclusive")
                for i in invs:
                    acc.inconclusive.setdefault((i, dest.service), reason)
            for v in compare(dest, str(src), origin, exp, tr, infos, ctx):
                acc.finding(v.invariant, dest.service, dest.address_class, _finding(v, dest, node, pkt, loc))
            for o in tr.outcomes:
                if o.masquerade and o.mark & masq_mark:
                    acc.finding("NV014", "", "mark", Finding(
                        "NV014", "", node,
                        f"the masquerade mark {masq_mark:#x} is still set after MASQUERADE: a packet that "
                        "re-enters the stack (e.g. after encapsulation) is masqueraded again (kubernetes "
                        "issue 78948); clear it (--xor-mark) before MASQUERADE",
                        packet=pkt, expected=f"mark & {masq_mark:#x} == 0 after nat POSTROUTING",
                        actual=f"mark {o.mark:#x}", path=o.path,
                    ))  # fmt: skip
            timeout = affinity(cluster, dest) if exp.kind == "dnat" and exp.endpoints else None
            if timeout is not None and origin not in sticky_done:
                sticky_done.add(origin)
                acc.touch(["NV011"], dest.service)
                packets += _check_affinity(interp, acc, dest, node, pkt, tr, exp, timeout, loc)
    for issue in structure_issues(ruleset, ctx) if structure_check else ():
        acc.touch(["NV014"], "")
        acc.finding("NV014", "", f"{issue.table}:{issue.chain}", Finding(
            "NV014", "", node, issue.message, severity=issue.severity,  # type: ignore[arg-type]
            location=f"{ruleset.source}:{issue.line}" if issue.line else ruleset.source,
        ))  # fmt: skip
    acc.touch(["NV014"], "")
    premises = tuple((node, p) for p in (*inferred, *ctx.assumptions))
    out = CheckReport(tuple(acc.results(exhaustive=True)), tuple(acc.findings), packets, premises)
    if drift_check:
        out = out.merged(drift_report(cluster, node, ruleset, ctx, loc, kube_proxy_version))
    return out


def drift_report(
    cluster: Cluster, node: str, ruleset: Ruleset, ctx: NodeContext, location: Callable[[str], str],
    kube_proxy_version: str = "",
) -> CheckReport:  # fmt: skip
    """NV015 alone: a result for the dump as a whole and one per Service that differs; an
    error (a packet's outcome differs) makes it violated, a warning (undecided) inconclusive,
    a note (rule text only) neither."""
    acc = _Acc(node, cluster.name, location)
    acc.touch(["NV015"], "")
    for f in drift_findings(cluster, node, ruleset, ctx, location, kube_proxy_version):
        acc.touch(["NV015"], f.service, 0)
        if f.severity == "warning":
            acc.inconclusive.setdefault(("NV015", f.service), f.message)
        acc.finding("NV015", f.service, f.message, f)
    return CheckReport(tuple(acc.results(exhaustive=True)), tuple(acc.findings))


def check_objects(cluster: Cluster) -> CheckReport:
    """NV016-NV028 on the cluster's objects, and the loader's notes (``check.objects``)."""
    results, findings = object_report(cluster)
    return CheckReport(results, findings)


def _service_location(cluster: Cluster, service: str) -> str:
    name = service.split(":", 1)[0]
    for s in cluster.services:
        if s.key == name:
            return str(s.source)
    return ""


def _finding(v: Violation, dest: Destination, node: str, pkt: Packet, loc: Callable[[str], str]) -> Finding:
    path: tuple[Step, ...] = v.outcome.path if v.outcome else ()
    return Finding(
        v.invariant, dest.service, node, v.message, severity=v.severity,  # type: ignore[arg-type]
        packet=pkt, expected=v.expected, actual=v.actual, path=path, location=loc(dest.service),
    )  # fmt: skip


def _check_affinity(
    interp: Interpreter, acc: _Acc, dest: Destination, node: str, pkt: Packet, first: Trace,
    exp: Expectation, timeout: int, loc: Callable[[str], str],
) -> int:  # fmt: skip
    """NV011: after a first connection to endpoint E, the same client's next connections within
    the timeout go to E. Returns the number of packets traced."""
    traced = 0
    for o in first.outcomes:
        if not (o.dnat and (str(o.dst), o.dport) in exp.endpoints):
            continue
        if not o.recent_set:
            acc.finding("NV011", dest.service, "record", Finding(
                "NV011", dest.service, node,
                f"{dest}: sessionAffinity=ClientIP, but a connection to {o.destination} does not record the "
                "client (no 'recent --set' on its path): the next connection may go elsewhere",
                packet=pkt, expected=f"the client is remembered for {timeout}s", actual=describe(o), path=o.path,
                location=loc(dest.service),
            ))  # fmt: skip
            continue
        # xt_recent --rcheck --seconds T matches while the entry is younger than T: probe right
        # after the first connection and just before the timeout
        for age in sorted({0.0, max(0.0, timeout - 0.5)}):
            state = RecentState.of({k: age for k in o.recent_set})
            again = attrs.evolve(pkt, sport=pkt.sport + 1)
            tr = interp.trace(again, state)
            traced += 1
            wrong = [x for x in tr.outcomes if not (x.dnat and x.dst == o.dst and x.dport == o.dport)]
            if wrong:
                acc.finding("NV011", dest.service, "sticky", Finding(
                    "NV011", dest.service, node,
                    f"{dest}: sessionAffinity=ClientIP, the client's first connection went to {o.destination}, "
                    f"but a connection {age:g}s later goes to {describe(wrong[0])}",
                    packet=again, expected=f"DNAT {o.destination} (timeout {timeout}s)", actual=describe(wrong[0]),
                    path=wrong[0].path, location=loc(dest.service),
                ))  # fmt: skip
                break
    return traced


def families(cluster: Cluster, node: str) -> tuple[int, ...]:
    n = cluster.node(node)
    fams = sorted({ipaddress.ip_address(a).version for a in n.internal_ips})
    return tuple(fams) or (4,)


def verify_cluster(cluster: Cluster, *, progress: Progress | None = None, objects: bool = True) -> CheckReport:
    """Compile what kube-proxy writes on every node and family, then check every invariant;
    ``objects``: also the cluster's objects (off for generated clusters, whose Pods are drawn to
    exercise the rules, not to be healthy)."""
    report = check_objects(cluster) if objects else CheckReport((), ())
    for node, rs in compiled_rulesets(cluster):
        report = report.merged(
            check_ruleset(cluster, node, rs, drift_check=False, progress=progress, infer_config=False)
        )
    return report


def compiled_rulesets(cluster: Cluster) -> Iterator[tuple[str, Ruleset]]:
    """(node, ruleset) for every node and family: the rules nat-verify compiles for it."""
    for n in cluster.nodes:
        for fam in families(cluster, n.name):
            text = compile_node(cluster, n.name, fam)
            yield n.name, parse(text, source=f"<compiled {cluster.name or 'cluster'} {n.name} IPv{fam}>", family=fam)
