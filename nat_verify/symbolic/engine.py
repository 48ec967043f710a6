"""The Z3 engine: the packet classes of one destination, found over every source at once.

Design
------
An engine answers, for one Service address (destination address, port, protocol), "which
packets are there, up to what can tell them apart, and what happens to each". The exhaustive
engine cuts the sources by every constant the reachable rules name and traces one packet per
cut; this one lets Z3 do the cutting:

1. *Intent classes.* What Kubernetes allows depends on the source only through a few
   constants (node and pod networks, endpoint addresses, LB source ranges and IPs: those
   ``check.atoms`` is given as intent's constants, with no rule constant among them). Each set
   of sources lying in the same of those constants is an intent class, with one expectation
   and one origin (``external``, ``pod`` or ``host`` follows from the address).
2. *Paths.* One symbolic walk per origin (``walk``) runs every source of the origin's classes,
   every source port, through the rules at once: its paths say which packets take which rules
   and end how.
3. *Semantic classes.* Per intent class, Z3 enumerates the distinct sets of paths that its
   packets take (``classes``), with a packet each, until it proves there is no other. Every
   packet of the intent class behaves like one of them (same expectation, same outcomes up
   to the fields copied from the packet, which no invariant reads), so checking them checks
   all sources and source ports: ``proved`` rests on that last ``unsat``.
4. *Replay.* Each such packet is traced by the interpreter, whose outcomes must equal the ones
   its paths predict (``paths.outcomes``); a difference is a bug in nat-verify, reported as
   such and never as a verdict. The trace then goes through the invariant catalogue like any
   engine's, so a violation is always a replayed, concrete packet.

Exact probabilities (NV007) come from the interpreter's distribution for each packet: the
paths only say which random choices exist, and a packet of each set of choices is traced.

A walk that forks past its limit, or a solver that gives up, makes the destination's
invariants ``inconclusive`` with the reason; so does anything the model cannot decide, as
with every engine.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Mapping

import attrs

from nat_verify.check.atoms import Partition, SourceSpace
from nat_verify.check.compare import compare
from nat_verify.check.nodectx import node_context
from nat_verify.check.runner import (
    CheckReport,
    Progress,
    _Acc,
    _check_affinity,
    _extra_constants,
    _finding,
    _service_location,
    drift_report,
)
from nat_verify.check.structure import structure_issues
from nat_verify.intent import (
    affinity,
    destinations,
    expect,
    find_service_port,
    interesting_sources,
    usable_endpoints,
)
from nat_verify.intent.detector import node_addresses
from nat_verify.model.cluster import Cluster, IPAddress, IPNetwork
from nat_verify.model.outcome import Finding, Outcome, Trace
from nat_verify.model.packet import Packet
from nat_verify.netfilter.context import NodeContext, Premise
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.program import Program
from nat_verify.netfilter.ruleset import Ruleset
from nat_verify.node.facts import NodeFacts
from nat_verify.node.proxyconfig import with_inferred_config
from nat_verify.symbolic import domain
from nat_verify.symbolic.classes import Undecided, classes
from nat_verify.symbolic.domain import Span
from nat_verify.symbolic.paths import outcomes, same_outcomes
from nat_verify.symbolic.state import UNENCODED, Var, initial
from nat_verify.symbolic.walk import Path, TooManyPaths, Walker

SPORTS: Span = ((1, 65535),)  # port 0 is no valid source port


@attrs.frozen
class SourceClass:
    """One semantic class: a packet standing for it, the outcomes its paths predict, and the
    interpreter's trace of it (``agrees``: the two are equal)."""

    packet: Packet
    predicted: tuple[Outcome, ...]
    trace: Trace

    @property
    def agrees(self) -> bool:
        return same_outcomes(self.predicted, self.trace.outcomes)

    @property
    def unencoded(self) -> str:
        """Why a path of this class could not be followed symbolically ("" when all were)."""
        return next((o.reason for o in self.predicted if o.reason.startswith(UNENCODED)), "")


@attrs.frozen
class DestinationClasses:
    """Everything the engine found for one destination."""

    classes: tuple[SourceClass, ...]
    inconclusive: tuple[str, ...] = ()  # why some packets could not be decided (then not proved)


class Z3Engine:
    """Per ruleset and node: the walker, the solver variables and the intent's constants."""

    name = "z3"

    def __init__(self, ruleset: Ruleset, ctx: NodeContext, interp: Interpreter | None = None, *, solve: bool = False) -> None:
        self.ctx = ctx
        self.solve = solve  # ask the solver even where interval sets decide a class (tests)
        # each class is traced once: chain summaries would cost more than they save
        self.interp = interp or Interpreter(ruleset, ctx, memo=False)
        self.program: Program = self.interp.program
        self.walker = Walker(self.program, self.interp.hooks)
        self.space = self.walker.space
        # the intent's constants alone: a space over no rules at all
        self.intent = SourceSpace(Program(Ruleset(ctx.family, ()), ctx))

    def destination(
        self, dst: IPAddress, dport: int, proto: str, extra: list[IPNetwork], preferred: list[IPAddress],
    ) -> DestinationClasses:  # fmt: skip
        ctx = self.ctx
        part = self.intent.partition(ctx, dst, dport, proto, extra)
        reps = self.intent.classes(ctx, dst, dport, proto, extra, preferred)
        regions = [(src, sport, origin, _region(part, int(src))) for src, sport, origin in reps]
        found: list[SourceClass] = []
        why: list[str] = []
        for origin in dict.fromkeys(o for _, _, o, _ in regions):
            mine = [r for r in regions if r[2] == origin]
            union: Span = ()
            for r in mine:
                union = domain.union(union, r[3])
            st = initial(self.space, ctx, origin, src=Var("src"), sport=Var("sport"), dst=dst, dport=dport, proto=proto)
            st.doms = {"src": union, "sport": SPORTS}
            try:
                paths = self.walker.run(origin, st)
            except TooManyPaths:
                why.append(f"{origin} sources: the symbolic walk forks into more than {self.walker.max_paths} branches")
                continue
            for src, sport, _, region in mine:
                try:
                    prefer = {"src": int(src), "sport": sport}
                    for f in classes(self.space, [st for st, _ in paths], {"src": region, "sport": SPORTS}, prefer, solve=self.solve):
                        found.append(self._replay(paths, f.values, f.taken, dst, dport, proto, origin))
                except Undecided as e:
                    why.append(f"{origin} sources in {domain.describe(region, ctx.family)}: {e}")
        return DestinationClasses(tuple(found), tuple(why))

    def _replay(
        self, paths: list[Path], values: Mapping[str, int], taken: tuple[int, ...], dst: IPAddress, dport: int,
        proto: str, origin: str,
    ) -> SourceClass:  # fmt: skip
        src = self.space.concrete("src", values["src"])
        pkt = Packet(src=src, dst=dst, dport=dport, sport=values["sport"], proto=proto, origin=origin)  # type: ignore[arg-type]
        a = {**values, "dst": int(dst), "dport": dport, "mark": 0}
        predicted = outcomes(pkt, [paths[i] for i in taken], a)
        return SourceClass(pkt, predicted, self.interp.trace(pkt))


def _region(part: Partition, addr: int) -> Span:
    """The sources with the same signature as ``addr`` (the intent class it stands for)."""
    sig = part.signature(addr)
    bits = 32 if part.family == 4 else 128
    out = domain.full(bits)
    for i, (a, b) in enumerate(part.spans):
        s = ((a, b - 1),)
        out = domain.intersect(out, s) if i in sig else domain.subtract(out, s)
    if part.family == 6:
        out = domain.subtract(out, domain.point(0))  # the unspecified address is no source
    return out



def check_ruleset_z3(
    cluster: Cluster,
    node: str,
    ruleset: Ruleset,
    *,
    drift_check: bool = True,
    progress: Progress | None = None,
    location: Callable[[str], str] | None = None,
    facts: NodeFacts | None = None,
    infer_config: bool = True,
    kube_proxy_version: str = "",
    structure_check: bool = True,
    solve: bool = False,
) -> CheckReport:
    """``check.runner.check_ruleset`` (same arguments and result types) with the packet classes
    found by Z3; results name the engine ``z3``. ``solve``: see ``classes.classes``."""
    family = ruleset.family
    inferred: tuple[Premise, ...] = ()
    if infer_config:
        cluster, inferred = with_inferred_config(cluster, node, ruleset)
    ctx = node_context(cluster, node, family, facts, ruleset)
    own = frozenset(str(a) for a in ctx.addresses) | node_addresses(cluster, node)
    engine = Z3Engine(ruleset, ctx, solve=solve)
    interp = engine.interp
    loc = location or (lambda service: _service_location(cluster, service))
    acc = _Acc(node, cluster.name, loc)
    masq_mark = cluster.proxy.masquerade_mark
    packets = 0
    for dest in destinations(cluster, node, family):
        if progress:
            progress(str(dest))
        svc, sp = find_service_port(cluster, dest.service, dest.proto)
        infos = usable_endpoints(cluster, node, svc, sp, family).all
        dst = ipaddress.ip_address(dest.ip)
        nice = [ipaddress.ip_address(a) for a, _ in interesting_sources(cluster, node, dest)]
        found = engine.destination(dst, dest.port, dest.proto, _extra_constants(cluster, dest), nice)
        sticky_done: set[str] = set()
        touched: set[str] = set()
        for c in found.classes:
            pkt, tr = c.packet, c.trace
            src, origin = str(pkt.src), pkt.origin
            exp = expect(cluster, node, dest, src, origin, node_ips=own)
            packets += 1
            invs = set(exp.invariants) | ({"NV010"} if exp.kind == "dnat" else set())
            touched |= invs
            acc.touch(invs, dest.service)
            if c.unencoded:
                for i in invs:
                    acc.inconclusive.setdefault((i, dest.service), c.unencoded)
                continue
            if not c.agrees:
                reason = replay_failure(c)
                for i in invs:
                    acc.inconclusive.setdefault((i, dest.service), reason)
                acc.findings.append(Finding(
                    invs and sorted(invs)[0] or "NV001", dest.service, node, reason, severity="error", packet=pkt,
                    expected=_show(c.predicted), actual=_show(tr.outcomes), location=loc(dest.service),
                ))  # fmt: skip
                continue
            if tr.inconclusive:
                reason = next(o.reason for o in tr.outcomes if o.verdict == "inconclusive")
                for i in invs:
                    acc.inconclusive.setdefault((i, dest.service), reason)
            for v in compare(dest, src, origin, exp, tr, infos, ctx):
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
        for reason in found.inconclusive:
            for i in touched or {"NV001"}:
                acc.touch([i], dest.service, 0)
                acc.inconclusive.setdefault((i, dest.service), reason)
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
    return attrs.evolve(out, results=tuple(attrs.evolve(r, engine="z3") for r in out.results))


def replay_failure(c: SourceClass) -> str:
    return (
        f"nat-verify bug: the z3 engine's packet {c.packet} replays differently through the interpreter "
        f"(predicted {_show(c.predicted)}; traced {_show(c.trace.outcomes)})"
    )


def _show(outs: tuple[Outcome, ...]) -> str:
    return "; ".join(f"{o.verdict} {o.destination} from {o.source} p={o.probability}" for o in outs) or "nothing"
