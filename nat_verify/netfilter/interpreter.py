"""The netfilter interpreter: a ruleset and a node turn a packet into a distribution.

Design
------
The first packet of a connection is walked through the hooks in kernel order:

* from outside the node (``external``) or from a pod on it (``pod``): raw, mangle and nat
  PREROUTING; the routing decision (a local address -> INPUT, else FORWARD); then either
  mangle/filter/security INPUT and nat INPUT (verdict ``accept``), or mangle/filter/security
  FORWARD, mangle and nat POSTROUTING (verdict ``forward``);
* from a process on the node (``host``): raw, mangle, nat, filter, security OUTPUT, mangle and
  nat POSTROUTING; a packet whose (translated) destination is local loops back through lo and
  meets raw/mangle PREROUTING and mangle/filter/security INPUT again, but not the nat chains,
  because conntrack already decided its NAT on the way out (``accept``); otherwise it leaves
  the node (``forward``).

NAT is decided once per connection (conntrack): nat chains see only this first packet, and a
packet marked untracked (raw ``NOTRACK``/``CT --notrack``) skips them. ``reply()`` gives the
reply direction: reverse-translated by conntrack when it comes back through this node.

Randomness is exact. ``statistic --mode random --probability p`` matches with probability
``round(p * 2^31) / 2^31`` (the threshold the kernel stores), so the walk forks: one branch
takes the rule, the other continues with the next rule, each weighted. ``recent`` lists are
explicit state (``RecentState``), read by ``--rcheck``/``--update`` and written by ``--set``.

Speed: chains that are long lists of exact-destination matches (kube-proxy's
``KUBE-SERVICES``) get an index from destination address to the rules that can match it,
plus the rules that match any destination; a packet visits only those, in rule order. The
result is identical to a linear walk (``linear=True`` runs one, for tests and the benchmark).

Anything the model cannot decide (an unknown module or target, state it does not hold) ends
that branch as ``inconclusive`` with the reason: nothing is guessed.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from fractions import Fraction

import attrs

from nat_verify.model.cluster import IPAddress
from nat_verify.model.outcome import Outcome, Step, Trace
from nat_verify.model.packet import Packet
from nat_verify.netfilter import summary
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
from nat_verify.netfilter.predicate import Unknown
from nat_verify.netfilter.program import Chain, CompiledRule, Program
from nat_verify.netfilter.ruleset import Ruleset
from nat_verify.netfilter.state import PacketState, RecentState
from nat_verify.netfilter.validate import validate_ruleset

__all__ = ["Interpreter", "PacketState", "RecentState", "Reply", "reply", "returns_through_node", "validate_ruleset"]

ACCEPT, DROP, REJECT, RETURN, INCONCLUSIVE = "ACCEPT", "DROP", "REJECT", "RETURN", "INCONCLUSIVE"
MAX_DEPTH = 64  # nested jumps before a walk gives up as inconclusive (the kernel refuses loops)

Result = tuple[PacketState, str]
_ONE = Fraction(1)
# work items of a chain walk: ("run", state, position) walks on from a rule, ("emit", state,
# verdict) is a result; the walk is a loop over a stack, so its depth does not grow with the
# number of rules that match
_Item = tuple[str, PacketState, object]


class Interpreter:
    """Runs packets through one ruleset on one node. Build once, trace many packets."""

    def __init__(
        self, ruleset: Ruleset, ctx: NodeContext, *, linear: bool = False, memo: bool | None = None,
        replay_after: int = 32, hooks: HookTable = IPTABLES, program: Program | None = None,
    ) -> None:  # fmt: skip
        """``program``: the rules already compiled (another rule language lowered to the same
        chains of compiled rules, or several rulesets of one node at their hook priorities);
        by default ``ruleset`` compiled on ``ctx``."""
        self.ruleset = ruleset
        self.ctx = ctx
        self.hooks = hooks
        self.program = program if program is not None else Program(ruleset, ctx, index=not linear)
        self._routes: dict[IPAddress, Route] = {}
        self.memo = (not linear) if memo is None else memo
        self.analyser = summary.Analyser(self.program)
        self._memo: dict[object, dict[tuple[object, ...], list[summary.Delta]]] = {}
        self._memo_size = 0
        self._traced = 0
        self.replay_after = replay_after
        self._traces: dict[tuple[object, ...], tuple[tuple[Outcome, int], ...]] = {}
        self._at = {(h, nat): hooks.at(h, nat=nat) for h in (PREROUTING, INPUT, FORWARD, OUTPUT, POSTROUTING) for nat in (True, False)}

    @property
    def chains(self) -> dict[tuple[str, str], Chain]:
        return self.program.chains

    # -- public API -----------------------------------------------------------------------

    def trace(self, packet: Packet, recent: RecentState | None = None) -> Trace:
        st = self._initial(packet, recent)
        self._traced += 1
        # whole traces are replayed once the interpreter is in steady use: the analysis of every
        # chain it needs is not worth it for a handful of packets on a large dump
        if not self.memo or self._traced <= self.replay_after or not (whole := self.analyser.whole()).ok:
            return Trace(packet, tuple(o for o, _ in _collect(packet, self._hooks(packet, st))))
        # the whole walk is a function of the packet's class (see summary): replay it
        # (the walk before any chain also asks whether a pod talks to itself: key on that too)
        key = (packet.origin, st.in_iface, packet.dst == packet.src, summary.state_key(whole, st))
        templates = self._traces.get(key)
        if templates is None:
            templates = _collect(packet, self._hooks(packet, st))
            if len(self._traces) < 262144:
                self._traces[key] = templates
            return Trace(packet, tuple(o for o, _ in templates))
        return Trace(packet, tuple(_instantiate(o, keep, packet) for o, keep in templates))

    def route(self, dst: IPAddress) -> Route:
        r = self._routes.get(dst)
        if r is None:
            r = self.ctx.route(dst)
            if len(self._routes) < 65536:
                self._routes[dst] = r
        return r

    # -- hooks ------------------------------------------------------------------------------

    def _initial(self, packet: Packet, recent: RecentState | None) -> PacketState:
        st = PacketState.__new__(PacketState)
        st.src, st.sport, st.dst, st.dport = packet.src, packet.sport, packet.dst, packet.dport
        st.proto, st.mark, st.ctmark = packet.proto, packet.mark, 0
        # the interface as far as the node's facts tell it ("?<fact>" when not known)
        st.in_iface = packet.in_iface or self.ctx.in_iface(packet.origin)
        st.out_iface = ""
        st.prob = Fraction(1)
        st.path = ()
        st.dnat = st.snat_done = st.masq = st.untracked = False
        st.recent = recent.as_dict() if recent else {}
        st.recent_set = ()
        st.orig_src, st.orig_dst, st.orig_sport, st.orig_dport = packet.src, packet.dst, packet.sport, packet.dport
        st.reject_with = st.reason = ""
        st.wlog = ()
        return st

    def _hooks(self, packet: Packet, st: PacketState) -> list[Result]:
        if packet.origin == "pod" and (packet.dst in self.ctx.loopback or packet.dst == packet.src):
            # the pod's own routing table delivers loopback and its own address locally (found by
            # the kernel oracle: such a packet never reaches the node)
            st.reason = "a pod's packet to a loopback address or to itself stays inside the pod; it never reaches the node"
            return [(st, "POD-LOCAL")]
        if packet.origin == "host":
            return self._output_path(st)
        # a loopback destination is judged after PREROUTING: a DNAT may still move it off loopback
        out: list[Result] = []
        for s, v in self._run_hooks([st], self._at[(PREROUTING, True)]):
            if v != ACCEPT:
                out.append((s, v))
                continue
            if s.dst in self.ctx.loopback and not self.ctx.route_localnet:
                s.reason = "martian destination: a loopback address arriving on a network interface (route_localnet=0)"
                out.append((s, DROP))
            elif self.ctx.is_local(s.dst):
                out.extend(self._input_path(s))
            else:
                self._route_out(s)
                hooks = self._at[(FORWARD, True)] + self._at[(POSTROUTING, True)]
                out.extend((s2, "FORWARD" if v2 == ACCEPT else v2) for s2, v2 in self._run_hooks([s], hooks))
        return out

    def _input_path(self, s: PacketState, *, looped: bool = False) -> list[Result]:
        # a packet looped back through lo had its NAT decided on the way out
        hooks = self._at[(INPUT, not looped)]
        return [(s2, "LOCAL" if v == ACCEPT else v) for s2, v in self._run_hooks([s], hooks)]

    def _output_path(self, st: PacketState) -> list[Result]:
        self._route_out(st)
        out: list[Result] = []
        for s2, v2 in self._run_hooks([st], self._at[(OUTPUT, True)] + self._at[(POSTROUTING, True)]):
            if v2 != ACCEPT:
                out.append((s2, v2))
            elif self.ctx.is_local(s2.dst):
                # loops back through lo: PREROUTING and INPUT again, without the nat chains
                s2.in_iface = "lo"
                for s3, v3 in self._run_hooks([s2], self._at[(PREROUTING, False)]):
                    if v3 != ACCEPT:
                        out.append((s3, v3))
                    else:
                        out.extend(self._input_path(s3, looped=True))
            else:
                out.append((s2, "FORWARD"))
        return out

    def _route_out(self, s: PacketState) -> None:
        s.out_iface = self.route(s.dst).iface

    def _run_hooks(self, states: list[PacketState], hooks: tuple[HookEntry, ...]) -> list[Result]:
        """Run each state through the hooks' base chains in order; ACCEPT moves on to the next."""
        results: list[Result] = [(s, ACCEPT) for s in states]
        for e in hooks:
            ch = self.program.chains.get(e.key)
            if ch is None:
                continue
            nxt: list[Result] = []
            for s, v in results:
                if v != ACCEPT or (e.nat and s.untracked):
                    nxt.append((s, v))
                    continue
                nxt.extend(self._run_base(ch, s))
            if e.nat and e.hook == OUTPUT:
                # the local NAT hook re-routes a packet whose destination it changed
                for s, v in nxt:
                    if v == ACCEPT:
                        self._route_out(s)
            results = nxt
        return results

    def _replay(
        self, key: object, info: summary.ChainInfo, s: PacketState, walk: Callable[[PacketState], list[Result]]
    ) -> list[Result]:
        """``walk(s)`` through its summary: replayed when a state of the same class was seen."""
        k = summary.state_key(info, s)
        table = self._memo.setdefault(key, {})
        deltas = table.get(k)
        if deltas is None:
            # walk from probability 1, so that each result's probability is its factor
            before = s.copy()
            before.prob = _ONE
            before.wlog = ()  # the walk logs its own writes (summary.capture replays those)
            deltas = summary.capture(before, walk(before.copy()))
            if self._memo_size < 1_000_000:
                table[k] = deltas
                self._memo_size += 1
        return summary.apply(s, deltas)

    def _run_base(self, ch: Chain, s: PacketState) -> list[Result]:
        out: list[Result] = []
        for s2, v in self._call(ch, s, 0):
            if v == RETURN:
                pol = ch.policy or ACCEPT
                if pol != ACCEPT:
                    s2.path = (*s2.path, Step(ch.table, ch.name, 0, 0, pol))
                out.append((s2, pol))
            else:
                out.append((s2, v))
        return out

    # -- chains -----------------------------------------------------------------------------

    def _call(self, ch: Chain, s: PacketState, depth: int) -> list[Result]:
        """Run a chain from its first rule, through its summary when one applies."""
        if not self.memo:
            return self._run_chain(ch, s, depth)
        info = self.analyser.info(ch.key)
        if not info.ok:
            return self._run_chain(ch, s, depth)
        # keyed by depth too: a walk cut off at the depth limit below this chain is not the
        # walk of the same chain called from nearer a base chain
        return self._replay((ch.key, depth), info, s, lambda s0: self._run_chain(ch, s0, depth))

    def _run_chain(self, ch: Chain, s: PacketState, depth: int) -> list[Result]:
        """Every result of running ``s`` through ``ch`` from its first rule, in walk order."""
        if depth > MAX_DEPTH:
            s.reason = f"jump depth over {MAX_DEPTH} at {ch.table} {ch.name} (a loop?)"
            return [(s, INCONCLUSIVE)]
        results: list[Result] = []
        rules = ch.rules
        stack: list[_Item] = [("run", s, 0)]
        while stack:
            kind, s, arg = stack.pop()
            if kind == "emit":
                results.append((s, arg))  # type: ignore[arg-type]
                continue
            start: int = arg  # type: ignore[assignment]
            cand = ch.candidates(s.dst)
            positions = range(start, len(rules)) if cand is None else cand[bisect.bisect_left(cand, start):]
            items: list[_Item] | None = None
            for i in positions:
                cr = rules[i]
                if cr.error:
                    s.reason = cr.error
                    s.path = (*s.path, cr.step)
                    items = [("emit", s, INCONCLUSIVE)]
                    break
                m = cr.test(s)
                if m is False:
                    continue
                if isinstance(m, Unknown):
                    s.reason = f"{ch.table} {ch.name} rule {cr.index} (line {cr.rule.line}): {m.reason}"
                    s.path = (*s.path, cr.step)
                    items = [("emit", s, INCONCLUSIVE)]
                    break
                if m is True:
                    items = self._fire(ch, cr, i, s, depth)
                    break
                # a random match: fork; the branch that does not match walks on from the next rule
                # (the destination index still applies: the packet is unchanged)
                items = [*self._fire(ch, cr, i, s.scaled(m), depth), ("run", s.scaled(1 - m), i + 1)]
                break
            if items is None:
                results.append((s, RETURN))
            else:
                stack.extend(reversed(items))
        return results

    def _fire(self, ch: Chain, cr: CompiledRule, i: int, s: PacketState, depth: int) -> list[_Item]:
        """What a rule that matched does: results, or states that walk on from rule ``i + 1``."""
        s.path = (*s.path, cr.step)
        if cr.jump:
            sub = self.program.chains[(ch.table, cr.jump)]
            goto = cr.rule.target.goto
            return [
                ("run", s2, i + 1) if v == RETURN and not goto else ("emit", s2, v)
                for s2, v in self._call(sub, s, depth + 1)
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
            verdict = spec.effect(self, ch.table, s, cr.opts)
        except (ValueError, IndexError) as e:
            s.reason = f"line {cr.rule.line}: {e}"
            return [("emit", s, INCONCLUSIVE)]
        if verdict is None:
            return [("run", s, i + 1)]
        return [("emit", s, verdict)]


_VERDICTS = {
    "LOCAL": "accept",
    "FORWARD": "forward",
    "POD-LOCAL": "accept",
    DROP: "drop",
    REJECT: "reject",
    INCONCLUSIVE: "inconclusive",
}


_SRC, _SPORT, _DST, _DPORT, _MARK = 1, 2, 4, 8, 16


def _instantiate(o: Outcome, keep: int, p: Packet) -> Outcome:
    """An outcome template for another packet of the same class: the fields no rule wrote are
    the packet's own."""
    if not keep:
        return o
    # spelled out rather than attrs.evolve: this runs for every outcome of every replayed trace
    return Outcome(
        probability=o.probability, verdict=o.verdict,
        dst=p.dst if keep & _DST else o.dst, dport=p.dport if keep & _DPORT else o.dport,
        src=p.src if keep & _SRC else o.src, sport=p.sport if keep & _SPORT else o.sport,
        dnat=o.dnat, masquerade=o.masquerade, snat=o.snat, reject_with=o.reject_with, path=o.path,
        reason=o.reason, recent_set=o.recent_set, mark=p.mark if keep & _MARK else o.mark,
    )  # fmt: skip


def _untouched(s: PacketState) -> int:
    w = s.wlog
    return (
        (0 if "src" in w else _SRC) | (0 if "sport" in w else _SPORT)
        | (0 if "dst" in w else _DST) | (0 if "dport" in w else _DPORT) | (0 if "mark" in w else _MARK)
    )  # fmt: skip


def _collect(packet: Packet, results: list[Result]) -> tuple[tuple[Outcome, int], ...]:
    """Outcomes (merged when identical) with the fields no rule wrote (for ``_instantiate``)."""
    merged: dict[tuple[object, ...], tuple[Outcome, int]] = {}
    for s, v in results:
        verdict = _VERDICTS.get(v, "inconclusive")
        reason = s.reason if verdict == "inconclusive" or v == "POD-LOCAL" or s.reason else ""
        if v not in _VERDICTS:
            reason = f"unexpected verdict {v}"
        o = Outcome(
            probability=s.prob,
            verdict=verdict,  # type: ignore[arg-type]
            dst=s.dst,
            dport=s.dport,
            src=s.src,
            sport=s.sport,
            dnat=s.dnat,
            masquerade=s.masq,
            snat=s.snat_done and not s.masq,
            reject_with=s.reject_with,
            path=s.path,
            reason=reason,
            recent_set=s.recent_set,
            mark=s.mark,
        )
        key = (o.verdict, o.dst, o.dport, o.src, o.sport, o.dnat, o.masquerade, o.path, o.reason, o.recent_set)
        prev = merged.get(key)
        keep = _untouched(s)
        merged[key] = (o, keep) if prev is None else (
            attrs.evolve(prev[0], probability=prev[0].probability + o.probability), prev[1] & keep)
    return tuple(merged.values())


@attrs.frozen
class Reply:
    """The reply to a translated connection: as the endpoint sends it, and as the client gets it."""

    sent: tuple[IPAddress, int, IPAddress, int]  # (src, sport, dst, dport) leaving the endpoint
    received: tuple[IPAddress, int, IPAddress, int]  # what reaches the client
    through_node: bool  # whether this node's conntrack saw (and reversed) it

    @property
    def broken(self) -> bool:
        """The client gets an answer from an address it did not call: it drops it."""
        # (a reply bypasses the node only when the destination was translated: see
        # returns_through_node, so it then always comes from another address)
        return not self.through_node


def reply(packet: Packet, outcome: Outcome, ctx: NodeContext) -> Reply:
    """The reply direction of a connection the rules translated.

    The endpoint answers ``outcome.dst:dport`` -> ``outcome.src:sport``. If that reply comes
    back through this node, conntrack reverses both translations and the client sees
    ``packet.dst:dport`` -> ``packet.src:sport``, the address it called; if not, the client sees
    the endpoint's own address.
    """
    sent = (outcome.dst, outcome.dport, outcome.src, outcome.sport)
    through = returns_through_node(packet, outcome, ctx)
    if through:
        return Reply(sent, (packet.dst, packet.dport, packet.src, packet.sport), True)
    return Reply(sent, (outcome.dst, outcome.dport, packet.src, packet.sport), False)


def returns_through_node(packet: Packet, outcome: Outcome, ctx: NodeContext) -> bool:
    """Whether the endpoint's reply is routed back through this node's conntrack.

    It is when the source was rewritten to a node address, when the client is on this node
    (a pod or the host), or when the endpoint is a pod on this node (its default route is the
    node). Otherwise the endpoint answers the client directly and the client sees the pod's
    address instead of the one it called: the connection breaks.
    """
    if outcome.verdict not in ("forward", "accept"):
        return True
    if not (outcome.masquerade or outcome.snat) and ctx.reply_bridged(packet.origin, packet.src, outcome.dst):
        return False  # bridge-nf-call-iptables=0: the reply is bridged past conntrack
    if outcome.masquerade or outcome.snat or packet.origin in ("pod", "host"):
        return True
    if not outcome.dnat:
        return True
    return any(outcome.dst in n for n in ctx.local_pod_cidrs) or ctx.is_local(outcome.dst)
