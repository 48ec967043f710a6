"""Check a fleet: every node's dump against the cluster, identical nodes grouped.

Nodes of one cluster run the same kube-proxy over the same Services, so their dumps differ
only in node-local parts (the local endpoints of eTP/iTP=Local Services, the node's own
addresses elsewhere in its context). Dumps that are identical once comments and packet
counters are blanked out form a *group*: the group's dump is read, parsed and validated once,
and each node of the group is then checked against that one parsed ruleset with its own node
context (its addresses and pod CIDRs decide which packets are local, so a node is never
assumed to equal another). Groups are the unit of work handed to the executor, so a group's
parse is never repeated on two workers.

What the nodes' rules have in common is verified once: each node is checked with
``check.sharing`` (one exhaustive check per shape of Service port) and the shapes proved on
one node are reused on every other node checked in the same process, since a shape names no
node (``check.shape``). A Service port whose rules or facts differ on a node (its local
endpoints, a drifted rule) has another shape there and is checked there.

The result is one ``CheckReport`` per node (the ``node`` field of every result and finding
says which), and the grouping. Results do not depend on the executor or on how many workers
it has: each group's work is a pure function of the cluster and the group's files.
"""

from __future__ import annotations

import hashlib
import re
import weakref
from collections.abc import Callable
from pathlib import Path

import attrs

from nat_verify.check import CheckReport
from nat_verify.check.sharing import ShapeMemo, check_shared
from nat_verify.executors import Executor, LocalExecutor
from nat_verify.fleet.inventory import Fleet, NodeDump
from nat_verify.model.cluster import Cluster
from nat_verify.netfilter.parse import DumpError

_COUNTERS = re.compile(r"\[\d+:\d+\]")


@attrs.frozen
class NodeReport:
    node: str
    dumps: tuple[str, ...]
    group: int  # index into FleetReport.groups
    report: CheckReport


@attrs.frozen
class FleetReport:
    nodes: tuple[NodeReport, ...]  # sorted by node name
    groups: tuple[tuple[str, ...], ...]  # the nodes of each group of identical dumps
    missing: tuple[str, ...] = ()  # cluster nodes without a dump

    def merged(self) -> CheckReport:
        out = CheckReport((), ())
        for n in self.nodes:
            out = out.merged(n.report)
        return out

    @property
    def group_of(self) -> dict[str, int]:
        return {n: g for g, nodes in enumerate(self.groups) for n in nodes}


@attrs.frozen
class _Group:
    """One unit of work: a dump text shared by ``members`` (node, path) of one family."""

    index: int
    family: int | None
    members: tuple[tuple[str, str], ...]


def normalized_digest(text: str) -> str:
    """A digest of ``text`` that ignores comment lines and packet counters, keeping line numbers."""
    h = hashlib.blake2b(digest_size=20)
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("#"):
            s = ""
        h.update(_COUNTERS.sub("", s).encode("utf-8", "surrogateescape"))
        h.update(b"\n")
    return h.hexdigest()


_MEMOS: weakref.WeakKeyDictionary[Cluster, ShapeMemo] = weakref.WeakKeyDictionary()


def _memo(cluster: Cluster) -> ShapeMemo:
    """The shapes proved so far for ``cluster`` in this process (shared by every node checked
    here: a worker keeps it from one group to the next). It only saves work: a shape is
    recorded after a clean exhaustive check, and its results are the same wherever it was."""
    memo = _MEMOS.get(cluster)
    if memo is None:
        memo = _MEMOS[cluster] = ShapeMemo()
    return memo


def forget_shapes() -> None:
    """Drop the shapes proved so far in this process (benchmarks time each run from nothing)."""
    _MEMOS.clear()


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="surrogateescape")
    except OSError as e:
        raise DumpError(path, 0, f"cannot read: {e.strerror}") from None


def _check_group(cluster: Cluster, group: _Group) -> list[tuple[str, str, CheckReport]] | tuple[str, int, str]:
    """Parse the group's dump once and check every node of the group; a dump error comes back
    as (file, line, message), because exceptions do not always cross process boundaries whole."""
    from nat_verify.check.nodectx import node_context
    from nat_verify.netfilter.interpreter import Interpreter, validate_ruleset
    from nat_verify.netfilter.parse import parse
    from nat_verify.report.evidence import with_evidence

    first = group.members[0][1]
    text = _read(first)
    try:
        ruleset = parse(text, source=first, family=group.family)
        validate_ruleset(ruleset)
    except DumpError as e:
        return (e.file, e.line, e.message)
    lines = text.split("\n")
    out = []
    for node, path in group.members:
        rs = attrs.evolve(ruleset, source=path)
        rep = check_shared(cluster, node, rs, memo=_memo(cluster))
        if rep.findings:
            interp = Interpreter(rs, node_context(cluster, node, rs.family))
            rep = attrs.evolve(rep, findings=with_evidence(rep.findings, interp, lines))
        out.append((node, path, rep))
    return out


def plan(fleet: Fleet) -> list[_Group]:
    """Group the fleet's dumps by (normalized text, family); groups in order of first node."""
    by_key: dict[tuple[str, int | None], list[NodeDump]] = {}
    for d in fleet.dumps:
        by_key.setdefault((normalized_digest(_read(d.path)), d.family), []).append(d)
    return [
        _Group(i, key[1], tuple((d.node, d.path) for d in members))
        for i, (key, members) in enumerate(by_key.items())
    ]


def check_fleet(
    cluster: Cluster,
    fleet: Fleet,
    executor: Executor | None = None,
    progress: Callable[[int], None] | None = None,
) -> FleetReport:
    """Every node of ``fleet`` checked against ``cluster``; ``progress(n)`` as n nodes finish."""
    groups = plan(fleet)

    def done(_i: int, result: object) -> None:
        if progress and isinstance(result, list):
            progress(len(result))

    results = (executor or LocalExecutor()).run(_check_group, cluster, groups, done)
    per_node: dict[str, tuple[list[str], set[int], CheckReport]] = {}
    for g, res in zip(groups, results, strict=True):
        if isinstance(res, tuple):
            raise DumpError(*res)
        for node, path, rep in res:
            paths, gs, acc = per_node.get(node, ([], set(), CheckReport((), ())))
            per_node[node] = ([*paths, path], gs | {g.index}, acc.merged(rep))
    # a node with two dumps (IPv4 and IPv6) belongs to the group of its set of dumps
    signature: dict[str, tuple[int, ...]] = {n: tuple(sorted(gs)) for n, (_, gs, _) in per_node.items()}
    distinct = list(dict.fromkeys(signature[n] for n in sorted(per_node)))
    node_groups = tuple(tuple(n for n in sorted(per_node) if signature[n] == s) for s in distinct)
    index = {s: i for i, s in enumerate(distinct)}
    nodes = tuple(
        NodeReport(n, tuple(paths), index[signature[n]], rep) for n, (paths, _, rep) in sorted(per_node.items())
    )
    missing = tuple(sorted({n.name for n in cluster.nodes} - set(per_node)))
    return FleetReport(nodes, node_groups, missing)
