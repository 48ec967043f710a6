"""The symbolic walk: every packet of a set through the hooks at once, as a list of paths.

Design
------
The interpreter (``netfilter.interpreter``) walks one packet; this walks a *symbolic* packet,
whose fields are packet variables (``state.Var``) constrained by interval sets and formulas,
through the same hooks, chains and rules, in the same order. Where a rule's verdict depends on
the variables, the walk forks: one branch per piece of ``evaluate.pieces`` (the packets that
match, those that do not, those for which the match is undecidable), exactly as the interpreter
forks a random match. The result is a list of *paths*: a final state (its constraint says which
packets take it; its fields what they become) and the interpreter's verdict for it. For every
packet the paths whose constraint holds for it are exactly the outcomes the interpreter
gives that packet, with the same probabilities, rule paths and reasons; ``paths.outcomes``
instantiates them and the property tests hold the two to that.

Ordered rule lists are first-match (a rule is reached only by packets that matched no earlier
rule that ends the chain): a branch carries the conjunction of every test it passed or failed,
as interval sets per variable (intersections, no solver call) plus Z3 formulas for the rest,
so a chain of ``n`` rules costs ``n`` set operations per branch, and branches no packet can
take are dropped as soon as they appear. A random match (``statistic``) is a fork weighted
``p`` / ``1 - p``: the branches' probabilities are exact fractions, the choice itself is free
(every branch is feasible for every packet its constraint admits).

Slicing: the walk for one destination (a concrete address and port, as ``check`` asks) meets
only the rules the interpreter's destination index offers for it, and every test on the
destination is decided concretely: no formula mentions the rest of the dump. A destination
that is a variable uses the index too: only the index entries its interval set admits.

What is not modelled is never guessed: a path that meets an ``Unknown`` predicate, a target
the model does not evaluate, or a construct of this walk's own limits (``max_paths``) ends
``INCONCLUSIVE`` with the reason, like the interpreter's.
"""

from __future__ import annotations

import bisect
import ipaddress
from collections.abc import Iterator
from fractions import Fraction

import attrs
import z3

from nat_verify.model.cluster import IPAddress, IPNetwork
from nat_verify.model.outcome import Step
from nat_verify.netfilter.context import NodeContext, Route
from nat_verify.netfilter.hooks import (
    FORWARD,
    INPUT,
    IPTABLES,
    OUTPUT,
    POSTROUTING,
    PREROUTING,
    HookEntry,
    HookTable,
)
from nat_verify.netfilter.interpreter import ACCEPT, DROP, INCONCLUSIVE, MAX_DEPTH, RETURN
from nat_verify.netfilter.predicate import AddrIn, Unknown
from nat_verify.netfilter.program import Chain, CompiledRule, Program
from nat_verify.netfilter.spec import TargetSpec
from nat_verify.netfilter.state import RecentState
from nat_verify.symbolic import domain
from nat_verify.symbolic.evaluate import conjunction, leaf_test
from nat_verify.symbolic.state import (
    UNENCODED,
    Space,
    SymState,
    Test,
    Unencoded,
    Var,
    equal,
    initial,
    is_concrete,
    kind_of,
    split,
)

Path = tuple[SymState, str]
_Item = tuple[str, SymState, object]
MAX_PATHS = 200_000


class TooManyPaths(Exception):
    """The walk would fork into more than ``max_paths`` branches."""


def recent_lists(recent: RecentState | None) -> dict[str, tuple[tuple[IPAddress, float], ...]]:
    """The interpreter's ``RecentState`` as the walk reads it: per list, (address, age)."""
    out: dict[str, list[tuple[IPAddress, float]]] = {}
    for (name, text), age in (recent.entries if recent else ()):
        out.setdefault(name, []).append((ipaddress.ip_address(text), age))
    return {k: tuple(v) for k, v in out.items()}


class _Env:
    """What a target's effect may ask (``spec.Env``): routes of concrete destinations from the
    node, that of a variable destination from the branch (``Walker.route_out`` chose it)."""

    def __init__(self, walker: Walker, st: SymState) -> None:
        self.walker = walker
        self.st = st

    @property
    def ctx(self) -> NodeContext:
        return self.walker.ctx

    def route(self, dst: IPAddress) -> Route:
        if is_concrete(dst):
            return self.walker.route(dst)
        if self.st.route is None:
            raise Unencoded("a route to a destination that depends on the packet")
        return self.st.route


class Walker:
    """Symbolic walks through one compiled ruleset on one node."""

    def __init__(self, program: Program, hooks: HookTable = IPTABLES, *, max_paths: int = MAX_PATHS) -> None:
        self.program = program
        self.ctx = program.ctx
        self.space = Space(program.ctx.family)
        self.hooks = hooks
        self.max_paths = max_paths
        self._at = {(h, nat): hooks.at(h, nat=nat) for h in (PREROUTING, INPUT, FORWARD, OUTPUT, POSTROUTING) for nat in (True, False)}
        self._routes: dict[IPAddress, Route] = {}
        self._candidates: dict[tuple[tuple[str, str], domain.Span], list[int]] = {}
        self._forks = 0
        ctx = self.ctx
        fam = ctx.family
        self._local: tuple[IPNetwork, ...] = (*(ipaddress.ip_network(a) for a in ctx.addresses if a.version == fam), ctx.loopback)
        # the constants ctx.route compares a destination with (see route_out)
        self._route_cuts = sorted({
            b for n in (*self._local, *(r.dst for r in ctx.routes), *ctx.local_pod_cidrs, *ctx.pod_cidrs)
            if n.version == fam for b in (int(n.network_address), int(n.broadcast_address) + 1)
        })  # fmt: skip

    # -- entry --------------------------------------------------------------------------------

    def run(self, origin: str, st: SymState) -> list[Path]:
        """Every path of a first packet from ``origin`` (the state's fields: its variables).
        Raises ``TooManyPaths`` past ``max_paths`` branches."""
        self._forks = 0
        return self._hooks(origin, st)

    def every_packet(
        self, origin: str, proto: str, *, mark: object = 0, in_iface: str = "", recent: RecentState | None = None,
    ) -> list[Path]:  # fmt: skip
        """The paths of every first packet from ``origin`` with protocol ``proto``: every source,
        destination and their ports (``mark``: a value, or ``Var("mark")`` for any mark;
        ``recent``: the xt_recent lists before the packet, as the interpreter takes them)."""
        self.space.recent_lists = recent_lists(recent)
        st = initial(
            self.space, self.ctx, origin, src=Var("src"), sport=Var("sport"), dst=Var("dst"), dport=Var("dport"),
            proto=proto, mark=mark, in_iface=in_iface,
        )  # fmt: skip
        return self.run(origin, st)

    def route(self, dst: IPAddress) -> Route:
        r = self._routes.get(dst)
        if r is None:
            r = self._routes[dst] = self.ctx.route(dst)
        return r

    # -- hooks (as Interpreter._hooks, _input_path, _output_path, _run_hooks) ----------------

    def _is(self, st: SymState, field: str, nets: tuple[IPNetwork, ...]) -> Test:
        t = leaf_test(AddrIn(field, nets), st)
        return t if not isinstance(t, Fraction | Unknown) else False

    def _hooks(self, origin: str, st: SymState) -> list[Path]:
        ctx = self.ctx
        out: list[Path] = []
        if origin == "pod":
            # the pod's own routing table delivers loopback and its own address locally
            why = "a pod's packet to a loopback address or to itself stays inside the pod; it never reaches the node"
            loop, rest = split(st, self._is(st, "dst", (ctx.loopback,)))
            stays = [loop] if loop is not None else []
            if rest is not None:
                itself, rest = split(rest, equal(rest, rest.dst, rest.src, "addr"))
                if itself is not None:
                    stays.append(itself)
            for s in stays:
                s.reason = why
                out.append((s, "POD-LOCAL"))
            if rest is None:
                return out
            st = rest
        if origin == "host":
            return out + self._output_path(st)
        for s, v in self._run_hooks([st], self._at[(PREROUTING, True)]):
            if v != ACCEPT:
                out.append((s, v))
                continue
            loop, rest = split(s, self._is(s, "dst", (ctx.loopback,)))
            if loop is not None and not ctx.route_localnet:
                loop.reason = "martian destination: a loopback address arriving on a network interface (route_localnet=0)"
                out.append((loop, DROP))
                loop = None
            for s2 in (loop, rest):
                if s2 is None:
                    continue
                local, fwd = split(s2, self._is(s2, "dst", self._local))
                if local is not None:
                    out.extend(self._input_path(local))
                if fwd is not None:
                    hooks = self._at[(FORWARD, True)] + self._at[(POSTROUTING, True)]
                    for r in self.route_out(fwd):
                        out.extend((s3, "FORWARD" if v3 == ACCEPT else v3) for s3, v3 in self._run_hooks([r], hooks))
        return out

    def _input_path(self, s: SymState, *, looped: bool = False) -> list[Path]:
        hooks = self._at[(INPUT, not looped)]
        return [(s2, "LOCAL" if v == ACCEPT else v) for s2, v in self._run_hooks([s], hooks)]

    def _output_path(self, st: SymState) -> list[Path]:
        out: list[Path] = []
        hooks = self._at[(OUTPUT, True)] + self._at[(POSTROUTING, True)]
        for r in self.route_out(st):
            for s2, v2 in self._run_hooks([r], hooks):
                if v2 != ACCEPT:
                    out.append((s2, v2))
                    continue
                local, fwd = split(s2, self._is(s2, "dst", self._local))
                if local is not None:
                    local = local.copy()
                    local.in_iface = "lo"
                    for s3, v3 in self._run_hooks([local], self._at[(PREROUTING, False)]):
                        if v3 != ACCEPT:
                            out.append((s3, v3))
                        else:
                            out.extend(self._input_path(s3, looped=True))
                if fwd is not None:
                    out.append((fwd, "FORWARD"))
        return out

    def route_out(self, s: SymState) -> list[SymState]:
        """The branches of ``s`` by the route to its destination (``out_iface``, and the route
        MASQUERADE reads): one when it is concrete, else one per set of destinations the node
        routes alike (cut at every constant ``NodeContext.route`` compares with)."""
        if is_concrete(s.dst):
            n = s.copy()
            n.out_iface = self.route(s.dst).iface  # type: ignore[arg-type]
            return [n]
        if not isinstance(s.dst, Var):
            raise Unencoded("the route to a computed destination")
        var = s.dst.name
        dom = s.dom(var)
        bounds = [0, *self._route_cuts, 1 << s.space.bits(var)]
        loopback = domain.of_nets((self.ctx.loopback,), s.space.family)
        groups: dict[tuple[str, object], domain.Span] = {}
        routes: dict[tuple[str, object], Route] = {}
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            part = domain.intersect(dom, ((lo, hi - 1),))
            if not part:
                continue
            r = self.ctx.route(s.space.concrete(var, domain.pick(part)))  # type: ignore[arg-type]
            # the loopback route's source is the destination itself (MASQUERADE keeps it)
            follows = domain.subset(part, loopback)
            via: tuple[str, object] = (r.iface, "dst" if follows else r.src)
            groups[via] = domain.union(groups.get(via, ()), part)
            routes.setdefault(via, attrs.evolve(r, src=s.dst) if follows else r)  # type: ignore[arg-type]
        out: list[SymState] = []
        for via, span in groups.items():
            branch = s.refined(var, span)
            if branch is None:
                continue
            branch.route = routes[via]
            branch.out_iface = via[0]
            out.append(branch)
        return out

    def _run_hooks(self, states: list[SymState], hooks: tuple[HookEntry, ...]) -> list[Path]:
        results: list[Path] = [(s, ACCEPT) for s in states]
        for e in hooks:
            ch = self.program.chains.get(e.key)
            if ch is None:
                continue
            nxt: list[Path] = []
            for s, v in results:
                if v != ACCEPT or (e.nat and s.untracked):
                    nxt.append((s, v))
                    continue
                nxt.extend(self._run_base(ch, s))
            if e.nat and e.hook == OUTPUT:
                # the local NAT hook re-routes a packet whose destination it changed
                rerouted: list[Path] = []
                for s, v in nxt:
                    if v == ACCEPT:
                        rerouted.extend((r, v) for r in self.route_out(s))
                    else:
                        rerouted.append((s, v))
                nxt = rerouted
            results = nxt
        return results

    def _run_base(self, ch: Chain, s: SymState) -> list[Path]:
        out: list[Path] = []
        for s2, v in self._run_chain(ch, s, 0):
            if v == RETURN:
                pol = ch.policy or ACCEPT
                if pol != ACCEPT:
                    s2.path = (*s2.path, Step(ch.table, ch.name, 0, 0, pol))
                out.append((s2, pol))
            else:
                out.append((s2, v))
        return out

    # -- chains (as Interpreter._run_chain and _fire) ---------------------------------------

    def positions(self, ch: Chain, s: SymState, start: int) -> Iterator[int]:
        """The rules from ``start`` on that a packet of ``s`` can meet (the chain's destination
        index, applied to the destination's value or to its interval set)."""
        dst = s.dst
        by_dst = getattr(ch, "by_dst", None)  # (a chain without an index: every rule)
        if by_dst is None or not (is_concrete(dst) or isinstance(dst, Var)):
            return iter(range(start, len(ch.rules)))
        if is_concrete(dst):
            cand = ch.candidates(dst)  # type: ignore[arg-type]
        else:
            dom = s.dom(dst.name)  # type: ignore[attr-defined]
            key = (ch.key, dom)
            cand = self._candidates.get(key)
            if cand is None:
                keys = [k for k in by_dst if domain.contains(dom, int(k))]
                cand = sorted([i for k in keys for i in by_dst[k]] + ch.any_dst)
                if len(self._candidates) < 4096:
                    self._candidates[key] = cand
        assert cand is not None
        return iter(cand[bisect.bisect_left(cand, start):])

    def _fork(self, n: int) -> None:
        self._forks += n
        if self._forks > self.max_paths:
            raise TooManyPaths

    def _run_chain(self, ch: Chain, s: SymState, depth: int) -> list[Path]:
        if depth > MAX_DEPTH:
            s.reason = f"jump depth over {MAX_DEPTH} at {ch.table} {ch.name} (a loop?)"
            return [(s, INCONCLUSIVE)]
        results: list[Path] = []
        rules = ch.rules
        stack: list[_Item] = [("run", s, 0)]
        while stack:
            kind, s, arg = stack.pop()
            if kind == "emit":
                results.append((s, arg))  # type: ignore[arg-type]
                continue
            items: list[_Item] | None = None
            for i in self.positions(ch, s, arg):  # type: ignore[arg-type]
                cr = rules[i]
                if cr.error:
                    s = s.copy()
                    s.reason = cr.error
                    s.path = (*s.path, cr.step)
                    items = [("emit", s, INCONCLUSIVE)]
                    break
                try:
                    ps = conjunction(cr.preds, s)
                except Unencoded as e:
                    s = s.copy()
                    s.reason = f"{UNENCODED}{ch.table} {ch.name} rule {cr.index} (line {cr.rule.line}): {e}"
                    s.path = (*s.path, cr.step)
                    items = [("emit", s, INCONCLUSIVE)]
                    break
                if len(ps) == 1 and ps[0][1] is False:
                    s = ps[0][0]
                    continue
                self._fork(len(ps) - 1)
                items = []
                for s2, m in ps:
                    if m is False:
                        items.append(("run", s2, i + 1))
                    elif isinstance(m, Unknown):
                        s2 = s2.copy()
                        s2.reason = f"{ch.table} {ch.name} rule {cr.index} (line {cr.rule.line}): {m.reason}"
                        s2.path = (*s2.path, cr.step)
                        items.append(("emit", s2, INCONCLUSIVE))
                    elif m is True:
                        items.extend(self._fire(ch, cr, i, s2, depth))
                    else:
                        items.extend(self._fire(ch, cr, i, s2.scaled(m), depth))
                        items.append(("run", s2.scaled(1 - m), i + 1))
                break
            if items is None:
                results.append((s, RETURN))
            else:
                stack.extend(reversed(items))
        return results

    def _fire(self, ch: Chain, cr: CompiledRule, i: int, s: SymState, depth: int) -> list[_Item]:
        s = s.copy()
        s.path = (*s.path, cr.step)
        if cr.jump:
            sub = self.program.chains[(ch.table, cr.jump)]
            goto = cr.rule.target.goto
            return [
                ("run", s2, i + 1) if v == RETURN and not goto else ("emit", s2, v)
                for s2, v in self._run_chain(sub, s, depth + 1)
            ]
        spec = cr.spec
        if spec is None:
            if not cr.rule.target.name:
                return [("run", s, i + 1)]
            s.reason = f"target {cr.rule.target.name} (line {cr.rule.line}) does not exist in Linux"
            return [("emit", s, INCONCLUSIVE)]
        if spec.effect is None:
            if spec.passive:
                return [("run", s, i + 1)]
            s.reason = f"target {spec.name} (line {cr.rule.line}) is not modelled"
            return [("emit", s, INCONCLUSIVE)]
        try:
            return [self._effect(ch, cr, spec, s2, i) for s2 in self._before_effect(spec, s)]
        except Unencoded as e:
            s.reason = f"{UNENCODED}target {spec.name} (line {cr.rule.line}): {e}"
            return [("emit", s, INCONCLUSIVE)]

    def _before_effect(self, spec: TargetSpec, s: SymState) -> list[SymState]:
        """The branches a target's effect can run on: marks it computes with as Z3 terms, and
        a variable destination split by route when the target reads the destination."""
        for f in ("mark", "ctmark"):
            if f in spec.reads and isinstance(getattr(s, f), Var):
                s.write(f, s.space.term(getattr(s, f), kind_of(f)))
        if "dst" in spec.reads and not is_concrete(s.dst) and s.route is None:
            return self.route_out(s)
        return [s]

    def _effect(self, ch: Chain, cr: CompiledRule, spec: TargetSpec, s: SymState, i: int) -> _Item:
        assert spec.effect is not None
        try:
            verdict = spec.effect(_Env(self, s), ch.table, s, cr.opts)  # type: ignore[arg-type]
        except (ValueError, IndexError) as e:
            s.reason = f"line {cr.rule.line}: {e}"
            return ("emit", s, INCONCLUSIVE)
        except (TypeError, z3.Z3Exception) as e:
            # an effect computing with a packet variable in a way Z3 terms do not support
            s.reason = f"{UNENCODED}target {spec.name} (line {cr.rule.line}): {e}"
            return ("emit", s, INCONCLUSIVE)
        if verdict is None:
            return ("run", s, i + 1)
        return ("emit", s, verdict)
