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
import ipaddress
from collections.abc import Callable, Mapping
from fractions import Fraction

import attrs

from nat_verify.model.cluster import IPAddress
from nat_verify.model.outcome import Outcome, Step, Trace
from nat_verify.model.packet import Packet
from nat_verify.netfilter import summary
from nat_verify.netfilter.context import NodeContext, Route
from nat_verify.netfilter.matches import Pred, RuleError, Unknown, compile_matches
from nat_verify.netfilter.parse import DumpError
from nat_verify.netfilter.ruleset import Rule, Ruleset

ACCEPT, DROP, REJECT, RETURN, INCONCLUSIVE = "ACCEPT", "DROP", "REJECT", "RETURN", "INCONCLUSIVE"

NON_TERMINATING = frozenset({"LOG", "NFLOG", "ULOG", "TRACE", "AUDIT", "TCPMSS", "TOS", "DSCP", "TTL", "HL", "CHECKSUM", "CLASSIFY", "SECMARK", "CONNSECMARK", "ECN", "IDLETIMER", "LED", "RATEEST", "SET", "TEE"})  # fmt: skip


@attrs.frozen
class RecentState:
    """``xt_recent`` lists: (list name, address) -> seconds since the address was last set."""

    entries: tuple[tuple[tuple[str, str], float], ...] = ()

    def as_dict(self) -> dict[tuple[str, str], float]:
        return dict(self.entries)

    @classmethod
    def of(cls, d: Mapping[tuple[str, str], float]) -> RecentState:
        return cls(tuple(sorted(d.items())))


class PacketState:
    """The mutable walk state of one branch; copied when the walk forks."""

    __slots__ = (
        "src", "sport", "dst", "dport", "proto", "mark", "ctmark", "in_iface", "out_iface",
        "prob", "path", "dnat", "snat_done", "masq", "untracked", "recent", "recent_set",
        "orig_src", "orig_dst", "orig_sport", "orig_dport", "reject_with", "reason", "wlog",
    )  # fmt: skip

    src: IPAddress
    sport: int
    dst: IPAddress
    dport: int
    proto: str
    mark: int
    ctmark: int
    in_iface: str
    out_iface: str
    prob: Fraction
    path: tuple[Step, ...]
    dnat: bool
    snat_done: bool
    masq: bool
    untracked: bool
    recent: dict[tuple[str, str], float]
    recent_set: tuple[tuple[str, str], ...]
    orig_src: IPAddress
    orig_dst: IPAddress
    orig_sport: int
    orig_dport: int
    reject_with: str
    reason: str
    wlog: tuple[str, ...]  # the fields targets wrote, in order (chain summaries replay them)

    def copy(self) -> PacketState:
        # spelled out: this is the interpreter's hottest function (every fork, every replay)
        n = PacketState.__new__(PacketState)
        n.src, n.sport, n.dst, n.dport, n.proto = self.src, self.sport, self.dst, self.dport, self.proto
        n.mark, n.ctmark, n.in_iface, n.out_iface = self.mark, self.ctmark, self.in_iface, self.out_iface
        n.prob, n.path, n.dnat, n.snat_done, n.masq = self.prob, self.path, self.dnat, self.snat_done, self.masq
        n.untracked, n.recent, n.recent_set = self.untracked, self.recent, self.recent_set
        n.orig_src, n.orig_dst, n.orig_sport, n.orig_dport = self.orig_src, self.orig_dst, self.orig_sport, self.orig_dport
        n.reject_with, n.reason, n.wlog = self.reject_with, self.reason, self.wlog
        return n

    def scaled(self, p: Fraction) -> PacketState:
        n = self.copy()
        n.prob = self.prob * p
        return n

    def recent_add(self, key: tuple[str, str]) -> None:
        self.recent = {**self.recent, key: 0.0}
        if key not in self.recent_set:
            self.recent_set = (*self.recent_set, key)

    def recent_remove(self, key: tuple[str, str]) -> None:
        self.recent = {k: v for k, v in self.recent.items() if k != key}

    def recent_age(self, key: tuple[str, str]) -> float | None:
        return self.recent.get(key)


Result = tuple[PacketState, str]
_ONE = Fraction(1)


@attrs.frozen
class _CompiledRule:
    rule: Rule
    index: int  # 1-based
    preds: tuple[Pred, ...]
    error: str  # a malformed rule: evaluating it is inconclusive
    step: Step  # what the path records when the rule fires


class _Chain:
    """A chain's rules, compiled on first use, with an optional destination index.

    Compiling is lazy because a packet meets a handful of the thousands of chains of a large
    dump: ``nat-verify trace`` on a 10,000-Service node should not compile them all.
    """

    def __init__(
        self, table: str, name: str, policy: str | None, raw: tuple[Rule, ...], index: bool, ctx: NodeContext
    ) -> None:
        self.table = table
        self.name = name
        self.policy = policy
        self.raw = raw
        self.ctx = ctx
        self._rules: list[_CompiledRule] | None = None
        self.by_dst: dict[IPAddress, list[int]] | None = None
        self.any_dst: list[int] = []
        self._cache: dict[IPAddress, list[int]] = {}
        if index and len(raw) >= 8:
            by_dst: dict[IPAddress, list[int]] = {}
            for i, r in enumerate(raw):
                d = r.core_option("-d")
                addr = _exact(d.value) if (d is not None and not d.negated) else None
                if addr is None:
                    self.any_dst.append(i)
                else:
                    by_dst.setdefault(addr, []).append(i)
            # index only when most rules are keyed by an exact destination
            if len(self.any_dst) * 4 <= len(raw):
                self.by_dst = by_dst

    @property
    def rules(self) -> list[_CompiledRule]:
        if self._rules is None:
            compiled = []
            for i, r in enumerate(self.raw, 1):
                try:
                    preds = tuple(compile_matches(r, self.ctx))
                    err = ""
                except RuleError as e:
                    preds, err = (), f"line {r.line}: {e}"
                compiled.append(_CompiledRule(r, i, preds, err, Step(self.table, self.name, i, r.line, r.target.name)))
            self._rules = compiled
        return self._rules

    def candidates(self, dst: IPAddress) -> list[int] | None:
        if self.by_dst is None:
            return None
        c = self._cache.get(dst)
        if c is None:
            c = sorted(self.by_dst.get(dst, []) + self.any_dst)
            if len(self._cache) < 65536:
                self._cache[dst] = c
        return c


def _exact(text: str) -> IPAddress | None:
    if "," in text:
        return None
    try:
        net = ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None
    return net.network_address if net.prefixlen == net.max_prefixlen else None


class Interpreter:
    """Runs packets through one ruleset on one node. Build once, trace many packets."""

    def __init__(
        self, ruleset: Ruleset, ctx: NodeContext, *, linear: bool = False, memo: bool | None = None, replay_after: int = 32
    ) -> None:
        self.ruleset = ruleset
        self.ctx = ctx
        self._routes: dict[IPAddress, Route] = {}
        self._nat: dict[str, tuple[IPAddress | None, int | None]] = {}
        self.chains: dict[tuple[str, str], _Chain] = {
            (t.name, c.name): _Chain(t.name, c.name, c.policy, c.rules, not linear, ctx)
            for t in ruleset.tables
            for c in t.chains
        }
        self.memo = (not linear) if memo is None else memo
        self.analyser = summary.Analyser({k: ch.raw for k, ch in self.chains.items()}, ctx)
        self._memo: dict[object, dict[tuple[object, ...], list[summary.Delta]]] = {}
        self._memo_size = 0
        self._traced = 0
        self.replay_after = replay_after
        self._traces: dict[tuple[object, ...], tuple[tuple[Outcome, int], ...]] = {}

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

    def nat_to(self, text: str) -> tuple[IPAddress | None, int | None]:
        r = self._nat.get(text)
        if r is None:
            r = self._nat[text] = _nat_to(text)
        return r

    # -- hooks ------------------------------------------------------------------------------

    def _initial(self, packet: Packet, recent: RecentState | None) -> PacketState:
        st = PacketState.__new__(PacketState)
        st.src, st.sport, st.dst, st.dport = packet.src, packet.sport, packet.dst, packet.dport
        st.proto, st.mark, st.ctmark = packet.proto, packet.mark, 0
        if packet.in_iface:
            st.in_iface = packet.in_iface
        else:
            st.in_iface = {"external": self.ctx.ext_iface, "pod": self.ctx.pod_iface, "host": ""}[packet.origin]
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
        if packet.dst in self.ctx.loopback and not self.ctx.route_localnet:
            pass  # decided after PREROUTING: a DNAT may still move it off loopback
        states = self._run_hooks([st], [("raw", "PREROUTING"), ("mangle", "PREROUTING"), ("nat", "PREROUTING")])
        out: list[Result] = []
        for s, v in states:
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
                out.extend(
                    (s2, "FORWARD" if v2 == ACCEPT else v2)
                    for s2, v2 in self._run_hooks(
                        [s],
                        [("mangle", "FORWARD"), ("filter", "FORWARD"), ("security", "FORWARD"),
                         ("mangle", "POSTROUTING"), ("nat", "POSTROUTING")],
                    )
                )  # fmt: skip
        return out

    def _input_path(self, s: PacketState, *, looped: bool = False) -> list[Result]:
        hooks = [("mangle", "INPUT"), ("filter", "INPUT"), ("security", "INPUT")]
        if not looped:
            hooks.append(("nat", "INPUT"))
        return [(s2, "LOCAL" if v == ACCEPT else v) for s2, v in self._run_hooks([s], hooks)]

    def _output_path(self, st: PacketState) -> list[Result]:
        self._route_out(st)
        # a process picks its source address from the route when it did not bind one
        states = self._run_hooks(
            [st],
            [("raw", "OUTPUT"), ("mangle", "OUTPUT"), ("nat", "OUTPUT")],
        )
        out: list[Result] = []
        for s, v in states:
            if v != ACCEPT:
                out.append((s, v))
                continue
            self._route_out(s)  # re-routed after DNAT
            for s2, v2 in self._run_hooks(
                [s], [("filter", "OUTPUT"), ("security", "OUTPUT"), ("mangle", "POSTROUTING"), ("nat", "POSTROUTING")]
            ):
                if v2 != ACCEPT:
                    out.append((s2, v2))
                elif self.ctx.is_local(s2.dst):
                    # loops back through lo: PREROUTING and INPUT again, without the nat chains
                    s2.in_iface = "lo"
                    for s3, v3 in self._run_hooks([s2], [("raw", "PREROUTING"), ("mangle", "PREROUTING")]):
                        if v3 != ACCEPT:
                            out.append((s3, v3))
                        else:
                            out.extend(self._input_path(s3, looped=True))
                else:
                    out.append((s2, "FORWARD"))
        return out

    def _route_out(self, s: PacketState) -> None:
        s.out_iface = self.route(s.dst).iface

    def route(self, dst: IPAddress) -> Route:
        r = self._routes.get(dst)
        if r is None:
            r = self.ctx.route(dst)
            if len(self._routes) < 65536:
                self._routes[dst] = r
        return r

    def _run_hooks(self, states: list[PacketState], hooks: list[tuple[str, str]]) -> list[Result]:
        """Run each state through the hooks in order; ACCEPT moves on to the next hook."""
        results: list[Result] = [(s, ACCEPT) for s in states]
        for table, chain in hooks:
            nxt: list[Result] = []
            for s, v in results:
                if v != ACCEPT:
                    nxt.append((s, v))
                    continue
                if table == "nat" and s.untracked:
                    nxt.append((s, ACCEPT))
                    continue
                nxt.extend(self._run_base(table, chain, s))
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
            deltas = summary.capture(before, walk(before.copy()))
            if self._memo_size < 1_000_000:
                table[k] = deltas
                self._memo_size += 1
        return summary.apply(s, deltas)

    def _run_base(self, table: str, chain: str, s: PacketState) -> list[Result]:
        ch = self.chains.get((table, chain))
        if ch is None:
            return [(s, ACCEPT)]
        out: list[Result] = []
        for s2, v in self._call(ch, s, 0):
            if v == RETURN:
                pol = ch.policy or ACCEPT
                if pol != ACCEPT:
                    s2.path = (*s2.path, Step(table, chain, 0, 0, pol))
                out.append((s2, pol))
            else:
                out.append((s2, v))
        return out

    # -- chains -----------------------------------------------------------------------------

    def _call(self, ch: _Chain, s: PacketState, depth: int) -> list[Result]:
        """Run a chain from its first rule, through its summary when one applies."""
        key = (ch.table, ch.name)
        info = self.analyser.info(key)
        if not (self.memo and info.ok):
            return self._run_chain(ch, s, 0, depth)
        return self._replay(key, info, s, lambda s0: self._run_chain(ch, s0, 0, depth))

    def _run_chain(self, ch: _Chain, s: PacketState, start: int, depth: int) -> list[Result]:
        if depth > 64:
            s.reason = f"jump depth over 64 at {ch.table} {ch.name} (a loop?)"
            return [(s, INCONCLUSIVE)]
        results: list[Result] = []
        rules = ch.rules
        cand = ch.candidates(s.dst)
        if cand is None:
            positions: list[int] | range = range(start, len(rules))
        else:
            positions = cand[bisect.bisect_left(cand, start):]
        for i in positions:
            cr = rules[i]
            if cr.error:
                s.reason = cr.error
                s.path = (*s.path, _step(ch, cr))
                results.append((s, INCONCLUSIVE))
                return results
            m = _evaluate(cr.preds, s)
            if m is False:
                continue
            if isinstance(m, Unknown):
                s.reason = f"{ch.table} {ch.name} rule {cr.index} (line {cr.rule.line}): {m.reason}"
                s.path = (*s.path, _step(ch, cr))
                results.append((s, INCONCLUSIVE))
                return results
            if m is True:
                results.extend(self._fire(ch, cr, i, s, depth))
                return results
            # a random match: fork
            results.extend(self._fire(ch, cr, i, s.scaled(m), depth))
            s = s.scaled(1 - m)
            # after the fork the destination index still applies: the packet is unchanged
        results.append((s, RETURN))
        return results

    def _fire(self, ch: _Chain, cr: _CompiledRule, i: int, s: PacketState, depth: int) -> list[Result]:
        s.path = (*s.path, _step(ch, cr))
        t = cr.rule.target
        name = t.name
        if not name:
            return self._run_chain(ch, s, i + 1, depth)
        sub = self.chains.get((ch.table, name))
        if sub is not None:
            out: list[Result] = []
            for s2, v in self._call(sub, s, depth + 1):
                if v == RETURN and not t.goto:
                    out.extend(self._run_chain(ch, s2, i + 1, depth))
                else:
                    out.append((s2, v))
            return out
        action = _TARGETS.get(name)
        if action is None:
            if name in NON_TERMINATING:
                return self._run_chain(ch, s, i + 1, depth)
            s.reason = f"target {name} (line {cr.rule.line}) is not modelled"
            return [(s, INCONCLUSIVE)]
        try:
            verdict = action(self, ch.table, s, cr.rule)
        except (ValueError, IndexError) as e:
            s.reason = f"line {cr.rule.line}: {e}"
            return [(s, INCONCLUSIVE)]
        if verdict is None:
            return self._run_chain(ch, s, i + 1, depth)
        return [(s, verdict)]


def _step(ch: _Chain, cr: _CompiledRule) -> Step:
    return cr.step


def _evaluate(preds: tuple[Pred, ...], s: PacketState) -> bool | Fraction | Unknown:
    prob: Fraction | None = None
    unknown: Unknown | None = None
    for p in preds:
        v = p(s)
        if v is False:
            return False
        if v is True:
            continue
        if isinstance(v, Unknown):
            unknown = unknown or v
            continue
        prob = v if prob is None else prob * v
    if unknown is not None:
        return unknown
    return True if prob is None else prob


# -- targets: each returns None to continue with the next rule, or a verdict ------------------


def _set(s: PacketState, field: str, value: object) -> None:
    """Write a packet field and log it (chain summaries replay exactly the logged writes)."""
    setattr(s, field, value)
    s.wlog = (*s.wlog, field)


def _accept(it: Interpreter, table: str, s: PacketState, r: Rule) -> str | None:
    return ACCEPT


def _drop(it: Interpreter, table: str, s: PacketState, r: Rule) -> str | None:
    return DROP


def _return(it: Interpreter, table: str, s: PacketState, r: Rule) -> str | None:
    return RETURN


def _reject(it: Interpreter, table: str, s: PacketState, r: Rule) -> str | None:
    o = r.target.get("--reject-with")
    default = "icmp6-port-unreachable" if it.ctx.family == 6 else "icmp-port-unreachable"
    _set(s, "reject_with", o.value if o else default)
    return REJECT


def _split_hostport(text: str) -> tuple[str, str]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, rest[1:] if rest.startswith(":") else ""
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        return host, port
    return text, ""


def _nat_to(text: str) -> tuple[IPAddress | None, int | None]:
    host, port = _split_hostport(text)
    if "-" in host or "-" in port:
        raise ValueError(f"NAT to a range ({text!r}) picks an address by hash: not modelled")
    addr = ipaddress.ip_address(host) if host else None
    p = int(port) if port else None
    return addr, p


def _dnat(it: Interpreter, table: str, s: PacketState, r: Rule) -> str | None:
    if table != "nat":
        raise ValueError("DNAT outside the nat table")
    o = r.target.get("--to-destination")
    if o is None:
        raise ValueError("DNAT without --to-destination")
    addr, port = it.nat_to(o.value)
    if addr is not None:
        _set(s, "dst", addr)
    if port is not None:
        _set(s, "dport", port)
    _set(s, "dnat", True)
    return ACCEPT


def _redirect(it: Interpreter, table: str, s: PacketState, r: Rule) -> str | None:
    o = r.target.get("--to-ports")
    if o is not None:
        if "-" in o.value:
            raise ValueError("REDIRECT to a port range is not modelled")
        _set(s, "dport", int(o.value))
    if s.in_iface in ("", "lo"):
        _set(s, "dst", ipaddress.ip_address("::1" if it.ctx.family == 6 else "127.0.0.1"))
    else:
        _set(s, "dst", next(a for a in it.ctx.addresses if a.version == it.ctx.family))
    _set(s, "dnat", True)
    return ACCEPT


def _snat(it: Interpreter, table: str, s: PacketState, r: Rule) -> str | None:
    o = r.target.get("--to-source")
    if o is None:
        raise ValueError("SNAT without --to-source")
    addr, port = it.nat_to(o.value)
    if addr is not None:
        _set(s, "src", addr)
    if port is not None:
        _set(s, "sport", port)
    _set(s, "snat_done", True)
    return ACCEPT


def _masquerade(it: Interpreter, table: str, s: PacketState, r: Rule) -> str | None:
    route = it.route(s.dst)
    _set(s, "src", route.src)
    o = r.target.get("--to-ports")
    if o is not None and "-" not in o.value:
        _set(s, "sport", int(o.value))
    _set(s, "snat_done", True)
    _set(s, "masq", True)
    return ACCEPT


def _mark_values(text: str) -> tuple[int, int | None]:
    v, sep, m = text.partition("/")
    return int(v, 0), (int(m, 0) if sep else None)


def _mark(it: Interpreter, table: str, s: PacketState, r: Rule) -> str | None:
    _set(s, "mark", _apply_mark(s.mark, r, "MARK"))
    return None


def _apply_mark(cur: int, r: Rule, what: str) -> int:
    for o in r.target.options:
        if o.name == "--set-xmark":
            v, m = _mark_values(o.value)
            return (cur & ~(0xFFFFFFFF if m is None else m) & 0xFFFFFFFF) ^ v
        if o.name == "--set-mark":
            v, m = _mark_values(o.value)
            return (cur & ~(0xFFFFFFFF if m is None else m) & 0xFFFFFFFF) | v
        if o.name == "--or-mark":
            return cur | int(o.value, 0)
        if o.name == "--and-mark":
            return cur & int(o.value, 0)
        if o.name == "--xor-mark":
            return cur ^ int(o.value, 0)
    raise ValueError(f"{what} without a mark operation")


def _connmark(it: Interpreter, table: str, s: PacketState, r: Rule) -> str | None:
    t = r.target
    if t.get("--save-mark") is not None:
        nf = int(t.get("--nfmask").value, 0) if t.get("--nfmask") else 0xFFFFFFFF  # type: ignore[union-attr]
        ct = int(t.get("--ctmask").value, 0) if t.get("--ctmask") else 0xFFFFFFFF  # type: ignore[union-attr]
        _set(s, "ctmark", (s.ctmark & ~ct & 0xFFFFFFFF) ^ (s.mark & nf))
        return None
    if t.get("--restore-mark") is not None:
        nf = int(t.get("--nfmask").value, 0) if t.get("--nfmask") else 0xFFFFFFFF  # type: ignore[union-attr]
        ct = int(t.get("--ctmask").value, 0) if t.get("--ctmask") else 0xFFFFFFFF  # type: ignore[union-attr]
        _set(s, "mark", (s.mark & ~nf & 0xFFFFFFFF) ^ (s.ctmark & ct))
        return None
    _set(s, "ctmark", _apply_mark(s.ctmark, r, "CONNMARK"))
    return None


def _notrack(it: Interpreter, table: str, s: PacketState, r: Rule) -> str | None:
    _set(s, "untracked", True)
    return None


def _ct(it: Interpreter, table: str, s: PacketState, r: Rule) -> str | None:
    if r.target.get("--notrack") is not None:
        _set(s, "untracked", True)
    return None


_TARGETS: dict[str, Callable[[Interpreter, str, PacketState, Rule], str | None]] = {
    "ACCEPT": _accept,
    "DROP": _drop,
    "RETURN": _return,
    "REJECT": _reject,
    "DNAT": _dnat,
    "SNAT": _snat,
    "MASQUERADE": _masquerade,
    "REDIRECT": _redirect,
    "MARK": _mark,
    "CONNMARK": _connmark,
    "NOTRACK": _notrack,
    "CT": _ct,
}

_VERDICTS = {
    "LOCAL": "accept",
    "FORWARD": "forward",
    "POD-LOCAL": "accept",
    DROP: "drop",
    REJECT: "reject",
    INCONCLUSIVE: "inconclusive",
}


_SRC, _SPORT, _DST, _DPORT = 1, 2, 4, 8


def _instantiate(o: Outcome, keep: int, p: Packet) -> Outcome:
    """An outcome template for another packet of the same class: the fields no rule wrote are
    the packet's own."""
    if not keep:
        return o
    return attrs.evolve(
        o,
        src=p.src if keep & _SRC else o.src,
        sport=p.sport if keep & _SPORT else o.sport,
        dst=p.dst if keep & _DST else o.dst,
        dport=p.dport if keep & _DPORT else o.dport,
    )


def _untouched(s: PacketState) -> int:
    w = s.wlog
    return (
        (0 if "src" in w else _SRC) | (0 if "sport" in w else _SPORT)
        | (0 if "dst" in w else _DST) | (0 if "dport" in w else _DPORT)
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


def validate_ruleset(ruleset: Ruleset, ctx: NodeContext | None = None) -> None:
    """Raise DumpError for a rule whose options are malformed (a bad port, mark or probability),
    so that bad input is refused at load rather than found per packet."""
    ctx = ctx or NodeContext(family=ruleset.family, addresses=())
    for t in ruleset.tables:
        for c in t.chains:
            for r in c.rules:
                try:
                    compile_matches(r, ctx)
                except RuleError as e:
                    raise DumpError(ruleset.source, r.line, str(e)) from None
