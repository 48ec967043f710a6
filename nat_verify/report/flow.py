"""A packet's path as people draw it on a whiteboard: client, address, hook, chains, NAT, pod.

A rule path (``Step`` s) says which rules fired; a reader wants the flow they fired along:

    client -> node address:port -> nat PREROUTING -> KUBE-SERVICES -> KUBE-NODEPORTS -> KUBE-EXT
    -> KUBE-SVC -> KUBE-SEP -> DNAT -> routing -> nat POSTROUTING (MASQUERADE) -> pod

``flow`` turns a finding of a report document (or a trace outcome) into that list of ``Hop`` s.
Each hop lists the steps that fired in it (rule number, dump line, rule text when the document
carries it); the edge into a hop carries the address change made just before it (``dst
192.168.1.10:30080 -> 10.42.1.7:8080``, ``src 203.0.113.9 -> 192.168.1.10 (masquerade)``).

The hop where the rules part from what Kubernetes promises is marked ``fault``. Which hop that is
follows from what the invariant is about (``ASPECT``): where the packet's destination was decided
(the DNAT, DROP or REJECT rule), where its source should or should not have been rewritten (nat
POSTROUTING, or its MASQUERADE), or the Service's probability cascade (its KUBE-SVC chain).
The hops are plain values: the SVG of the HTML report and the Mermaid chart of the Markdown
report draw the same list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from nat_verify.model.outcome import Step
from nat_verify.model.packet import parse_endpoint
from nat_verify.report.path import (
    BUILTIN_CHAINS,
    NAT_TARGETS,
    segments,
    steps_from_json,
    target_word,
)

HopKind = Literal["client", "address", "hook", "chain", "nat", "routing", "end"]

# what each invariant is about, for placing the fault
ASPECT: Mapping[str, str] = {
    "NV001": "destination",
    "NV002": "destination",
    "NV003": "destination",
    "NV005": "destination",  # or the source, when the packet was masqueraded
    "NV006": "destination",
    "NV012": "destination",
    "NV013": "destination",
    "NV004": "source",
    "NV008": "source",
    "NV009": "source",
    "NV010": "source",
    "NV014": "source",  # the mark still set at MASQUERADE; other NV014 findings have no path
    "NV007": "cascade",
    "NV011": "cascade",
}
_DECIDING = frozenset({"DNAT", "REDIRECT", "DROP", "REJECT"})
_ORIGIN = {"external": "client", "pod": "pod", "host": "process on the node"}


@attrs.frozen
class Fired:
    """One rule that fired in a hop."""

    step: Step
    text: str = ""  # the rule as the dump has it, "" when unknown

    @property
    def where(self) -> str:
        rule = f"rule {self.step.rule}" if self.step.rule else "policy"
        return f"{rule}, line {self.step.line}" if self.step.line else rule


@attrs.frozen
class Hop:
    kind: HopKind
    label: str
    fired: tuple[Fired, ...] = ()
    edge: str = ""  # the address change on the edge into this hop
    note: str = ""  # a second line under the label
    fault: str = ""  # why the rules part from Kubernetes here ("" = not here)


def _addr(endpoint: str) -> str:
    try:
        return str(parse_endpoint(endpoint)[0])
    except ValueError:
        return endpoint


def _hook_label(table: str, chain: str) -> str:
    return f"{table} {chain}"


def flow(f: Mapping[str, Any]) -> tuple[Hop, ...]:
    """The whiteboard flow of a report finding (``counterexample``, ``path``, ``outcome`` ...).

    Empty when the finding has no packet and no path (structure and drift findings).
    """
    packet = f.get("counterexample") or {}
    path = [str(p) for p in f.get("path", [])]
    if not packet and not path:
        return ()
    steps = steps_from_json(
        path, [int(x) for x in f.get("lines", [])], [str(t) for t in f.get("targets", [])]
    )
    texts = [str(t) for t in f.get("rules", [])]
    outcome: Mapping[str, Any] = f.get("outcome") or {}
    hops: list[Hop] = []
    src, dst = str(packet.get("src", "")), str(packet.get("dst", ""))
    if packet:
        origin = str(packet.get("from", "external"))
        hops.append(Hop("client", f"{_ORIGIN.get(origin, origin)} {_addr(src)}"))
        hops.append(Hop("address", f"to {dst}", edge=str(packet.get("proto", "tcp"))))
    text_of = {i: texts[i] for i in range(len(texts))}
    index = 0
    routed = False
    pending_edge = ""
    for seg in segments(steps):
        table, hook = seg.main_line[0]
        main = list(seg.main_line)
        per_chain: dict[tuple[str, str], list[Fired]] = {n: [] for n in main}
        last_main = main[0]
        for step in seg.steps:
            node = (step.table, step.chain)
            if node in per_chain:
                last_main = node
            per_chain[last_main].append(Fired(step, text_of.get(index, "")))
            index += 1
        first = len(hops)
        for node in main:
            kind: HopKind = "hook" if node[1] in BUILTIN_CHAINS else "chain"
            label = _hook_label(*node) if kind == "hook" else node[1]
            hops.append(Hop(kind, label, tuple(per_chain[node]), edge=pending_edge))
            pending_edge = ""
        nat = [s for s in seg.steps if _target(s) in NAT_TARGETS]
        for s in nat:
            word = _target(s)
            if word in ("DNAT", "REDIRECT"):
                after = str(outcome.get("destination", ""))
                hops.append(Hop("nat", word))
                pending_edge = f"dst {dst} -> {after}" if after and after != dst else ""
            elif word in ("MASQUERADE", "SNAT"):
                after = _addr(str(outcome.get("source", "")))
                hops.append(Hop("nat", word))
                how = "masquerade" if word == "MASQUERADE" else "SNAT"
                if after and after == _addr(src):
                    pending_edge = f"src stays {after} ({how}: already this node's address)"
                else:
                    pending_edge = f"src {_addr(src)} -> {after} ({how})" if after else ""
        if table == "nat" and hook in ("PREROUTING", "OUTPUT") and not routed:
            routed = True
            hops.append(Hop("routing", "routing decision", note=_route_note(outcome), edge=pending_edge))
            pending_edge = ""
        if table == "nat" and hook == "POSTROUTING" and not nat and outcome:
            hops[first] = attrs.evolve(
                hops[first], note=f"no source NAT: the source stays {_addr(src)}"
            )
    hops.append(Hop("end", _end_label(f, outcome), edge=pending_edge))
    return _mark_fault(tuple(hops), f, steps)


def _target(step: Step) -> str:
    return target_word(step.target).upper()


def _route_note(outcome: Mapping[str, Any]) -> str:
    verdict = outcome.get("verdict")
    if verdict == "forward":
        return f"forward: {outcome.get('destination', '')} is not on this node's own addresses"
    if verdict == "accept":
        return "local delivery: to a process on this node"
    return ""


def _end_label(f: Mapping[str, Any], outcome: Mapping[str, Any]) -> str:
    verdict = outcome.get("verdict")
    if verdict == "forward" and outcome.get("dnat"):
        return f"endpoint {outcome.get('destination', '')}"
    if verdict == "forward":
        return f"forwarded un-NATed to {outcome.get('destination', '')}"
    if verdict == "accept":
        return f"delivered on the node to {outcome.get('destination', '')}"
    if verdict == "reject":
        how = outcome.get("reject_with", "")
        return f"REJECT ({how})" if how else "REJECT"
    if verdict == "drop":
        return "DROP"
    if verdict == "inconclusive":
        return f"inconclusive: {outcome.get('reason', '')}".rstrip(": ")
    return str(f.get("actual", "")) or "end of the path"


def _mark_fault(hops: tuple[Hop, ...], f: Mapping[str, Any], steps: Sequence[Step]) -> tuple[Hop, ...]:
    if str(f.get("severity", "error")) == "note":
        return hops
    inv = str(f.get("invariant", ""))
    outcome: Mapping[str, Any] = f.get("outcome") or {}
    aspect = ASPECT.get(inv, "destination")
    if inv == "NV005" and outcome.get("masquerade"):
        aspect = "source"
    at = _fault_index(hops, aspect, steps)
    if at is None:
        return hops
    why = str(f.get("expected", "")).split("\n")[0]
    out = list(hops)
    out[at] = attrs.evolve(out[at], fault=f"Kubernetes promises: {why}" if why else "the rules part here")
    return tuple(out)


def _fault_index(hops: Sequence[Hop], aspect: str, steps: Sequence[Step]) -> int | None:
    def find(pred: Any) -> int | None:
        return next((i for i in range(len(hops) - 1, -1, -1) if pred(hops[i])), None)

    if aspect == "cascade":
        at = find(lambda h: h.kind == "chain" and h.label.startswith(("KUBE-SVC-", "KUBE-SVL-")))
        return at if at is not None else _fault_index(hops, "destination", steps)
    if aspect == "source":
        at = find(lambda h: h.kind == "nat" and h.label in ("MASQUERADE", "SNAT"))
        if at is None:
            at = find(lambda h: h.kind == "hook" and h.label == "nat POSTROUTING")
        return at if at is not None else len(hops) - 1
    # destination: the hop whose rule decided where the packet goes
    at = find(lambda h: h.kind == "nat" and h.label in ("DNAT", "REDIRECT"))
    if at is not None:
        return at
    at = find(lambda h: any(_target(x.step) in _DECIDING for x in h.fired))
    return at if at is not None else len(hops) - 1
