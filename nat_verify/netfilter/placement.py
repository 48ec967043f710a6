"""Where the kernel accepts what: rulesets no kernel would load, found before any proof.

A dump that came off a real node was accepted by its kernel. One that the kernel would refuse
(a hand edit, a generator's bug, a paste from the wrong place) describes no node: proving
anything about it would be proving a guess. The loaders (``iptables-restore`` with either
backend, and the kernel behind them) refuse, and so does this module:

* a target outside the tables or hooks it is registered for in the kernel (``DNAT`` only in
  nat PREROUTING/OUTPUT, ``REJECT`` only in filter INPUT/FORWARD/OUTPUT, ...; see the entries
  in ``targets``). A user chain is checked against every hook whose base chain reaches it;
  a chain that no base chain reaches is not checked (the kernel does not either);
* a jump loop reachable from a base chain (both backends refuse it; an unreachable one loads);
* with the nf_tables backend, a chain nested more than ``NFT_MAX_DEPTH`` jumps below a base
  chain (the kernel's jump stack is 16 deep; legacy x_tables sizes its stack to the ruleset);
* ``-i`` in a built-in OUTPUT or POSTROUTING chain, ``-o`` in PREROUTING or INPUT
  (iptables-restore refuses them: there is no such interface at that hook);
* a target the backend does not have (``QUEUE`` with nf_tables).

Which backend wrote the dump comes from its header (``Ruleset.backend``); when it is not known,
only what both backends refuse is refused. ``tests/kernel/test_target_placement.py`` checks
every rule here against the real kernel.
"""

from __future__ import annotations

from collections.abc import Iterator

import attrs

from nat_verify.netfilter.hooks import INPUT, IPTABLES, OUTPUT, POSTROUTING, PREROUTING, HookTable
from nat_verify.netfilter.registry import TARGETS
from nat_verify.netfilter.ruleset import Rule, Ruleset, Table
from nat_verify.netfilter.spec import TargetSpec

NFT_MAX_DEPTH = 15  # jumps below a base chain the nf_tables backend accepts (NFT_JUMP_STACK_SIZE 16)
BACKENDS = ("legacy", "nft")


@attrs.frozen
class Refusal:
    line: int
    message: str


def _edges(table: Table) -> dict[str, list[Rule]]:
    names = set(table.by_name)
    out: dict[str, list[Rule]] = {c.name: [] for c in table.chains}
    for c in table.chains:
        for r in c.rules:
            if r.target.name in names:
                out[c.name].append(r)
    return out


def _reach(table: Table, edges: dict[str, list[Rule]], hooks: HookTable) -> dict[str, set[str]]:
    """For every chain, the hooks whose base chains reach it (through jumps and gotos)."""
    reach: dict[str, set[str]] = {c.name: set(hooks.hooks_of(table.name, c.name)) for c in table.chains}
    todo = [c for c, h in reach.items() if h]
    while todo:
        c = todo.pop()
        for r in edges[c]:
            t = r.target.name
            if not reach[c] <= reach[t]:
                reach[t] |= reach[c]
                todo.append(t)
    return reach


def _loop(table: Table, edges: dict[str, list[Rule]], roots: list[str]) -> Refusal | None:
    """The first jump that closes a loop reachable from a base chain (iterative DFS)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in roots:
        if root in state:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        path = [root]
        state[root] = 1
        while stack:
            c, i = stack[-1]
            if i < len(edges[c]):
                stack[-1] = (c, i + 1)
                r = edges[c][i]
                t = r.target.name
                if state.get(t) == 1:
                    cycle = " -> ".join([*path[path.index(t):], t])
                    return Refusal(r.line, f"{table.name} chain {c} jumps to {t}, closing a loop ({cycle}): the kernel refuses loops")
                if t not in state:
                    state[t] = 1
                    stack.append((t, 0))
                    path.append(t)
            else:
                state[c] = 2
                stack.pop()
                path.pop()
    return None


def _too_deep(table: Table, edges: dict[str, list[Rule]], roots: list[str]) -> Refusal | None:
    """The first jump that nests a chain deeper than the nf_tables backend allows (the jump
    graph reachable from the roots has no loop here)."""
    # longest path from any root, relaxed in topological order (Kahn)
    reachable: set[str] = set()
    todo = list(roots)
    while todo:
        c = todo.pop()
        if c in reachable:
            continue
        reachable.add(c)
        todo.extend(r.target.name for r in edges[c])
    indeg = dict.fromkeys(reachable, 0)
    for c in reachable:
        for r in edges[c]:
            indeg[r.target.name] += 1
    depth = dict.fromkeys(reachable, 0)
    ready = [c for c in reachable if indeg[c] == 0]
    while ready:
        c = ready.pop()
        for r in edges[c]:
            t = r.target.name
            if depth[c] + 1 > depth[t]:
                depth[t] = depth[c] + 1
                if depth[t] > NFT_MAX_DEPTH:
                    return Refusal(
                        r.line,
                        f"{table.name} chain {t} is nested {depth[t]} jumps below a base chain; the nf_tables "
                        f"backend allows {NFT_MAX_DEPTH}",
                    )
            indeg[t] -= 1
            if indeg[t] == 0:
                ready.append(t)
    return None


def _allowed(spec: TargetSpec, rule: Rule, table: str, hooks: set[str], backend: str) -> str | None:
    """Why ``spec`` may not stand in ``table`` at ``hooks`` for ``backend`` (None: it may).
    With the backend unknown, only what every backend refuses is refused."""
    backends = [backend] if backend in BACKENDS else list(BACKENDS)
    reasons = [_refused_by(spec, rule, table, hooks, b) for b in backends]
    return reasons[0] if all(reasons) else None


def _refused_by(spec: TargetSpec, rule: Rule, table: str, hooks: set[str], backend: str) -> str | None:
    if backend not in spec.backends:
        return f"target {spec.name} does not exist with the {backend} backend"
    if spec.nft_anywhere and backend == "nft":
        return None
    if spec.tables is not None and table not in spec.tables:
        return f"target {spec.name} is valid only in the {'/'.join(sorted(spec.tables))} table"
    allowed = spec.hooks
    for option, narrowed in spec.option_hooks:
        if rule.target.get(option) is not None:
            allowed = narrowed if allowed is None else allowed & narrowed
    if allowed is not None and hooks - allowed:
        bad = ", ".join(sorted(hooks - allowed))
        return f"target {spec.name} is valid only in {'/'.join(sorted(allowed))}, and this chain is reached from {bad}"
    return None


_NO_IN = {OUTPUT, POSTROUTING}
_NO_OUT = {PREROUTING, INPUT}


def refusals(ruleset: Ruleset, hooks: HookTable = IPTABLES) -> Iterator[Refusal]:
    """Everything in ``ruleset`` a kernel would refuse to load, in dump order per kind."""
    backend = ruleset.backend
    for table in ruleset.tables:
        edges = _edges(table)
        roots = [c.name for c in table.chains if hooks.hooks_of(table.name, c.name)]
        loop = _loop(table, edges, roots)
        if loop is not None:
            yield loop
            continue  # depth and reach are undefined around a loop
        if backend == "nft":
            deep = _too_deep(table, edges, roots)
            if deep is not None:
                yield deep
        reach = _reach(table, edges, hooks)
        for c in table.chains:
            base = c.builtin and c.name in reach and hooks.hooks_of(table.name, c.name)
            for r in c.rules:
                if base and c.name in _NO_IN and r.core_option("-i") is not None:
                    yield Refusal(r.line, f"-i cannot be used in the built-in {c.name} chain (no input interface there)")
                if base and c.name in _NO_OUT and r.core_option("-o") is not None:
                    yield Refusal(r.line, f"-o cannot be used in the built-in {c.name} chain (no output interface there)")
                spec = TARGETS.get(r.target.name)
                if spec is None or r.target.name in table.by_name:
                    continue
                why = _allowed(spec, r, table.name, reach[c.name], backend)
                if why is not None:
                    yield Refusal(r.line, f"{why}: the kernel refuses this rule ({table.name} {c.name})")
