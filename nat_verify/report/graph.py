"""Mermaid and DOT drawings of a rule path: chains as nodes, jumps and NAT as edge labels."""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from nat_verify.model.outcome import Outcome, Step
from nat_verify.model.packet import Packet
from nat_verify.report.flow import Hop
from nat_verify.report.path import BUILTIN_CHAINS, Node, target_word, walk
from nat_verify.report.words import packet_text, verdict_text, visible


@attrs.frozen
class Graph:
    """Nodes as (id, label); edges as (from id, to id, label)."""

    nodes: tuple[tuple[str, str], ...]
    edges: tuple[tuple[str, str, str], ...]


def _chain_label(node: Node) -> str:
    table, chain = node
    return f"{table} {chain}" if chain in BUILTIN_CHAINS else chain


def path_graph(
    steps: Sequence[Step], *, start: str = "", end: str = "", nat: dict[str, str] | None = None
) -> Graph:
    """The graph of ``steps``; ``start``/``end`` add the packet and the verdict as nodes.

    ``nat`` maps a NAT target (``DNAT``, ``MASQUERADE``...) to the label its edge gets, for
    example ``{"DNAT": "DNAT 10.42.1.7:8080"}``; otherwise the target's name is used.
    """
    labels = nat or {}
    w = walk(steps, lambda s: labels.get(target_word(s.target).upper(), target_word(s.target)))
    ids = {n: f"c{i}" for i, n in enumerate(w.nodes)}
    nodes = [(ids[n], _chain_label(n)) for n in w.nodes]
    edges: list[tuple[str, str, str]] = []
    if start:
        nodes.insert(0, ("packet", start))
    for e in w.edges:
        if e.src is None:
            if start:
                edges.append(("packet", ids[e.dst], e.label))
        else:
            edges.append((ids[e.src], ids[e.dst], e.label))
    if end:
        nodes.append(("verdict", end))
        if w.last is not None:
            edges.append((ids[w.last], "verdict", w.pending))
        elif start:
            edges.append(("packet", "verdict", w.pending))
    return Graph(tuple(nodes), tuple(edges))


def outcome_graph(outcome: Outcome, packet: Packet | None = None) -> Graph:
    nat = {
        "DNAT": f"DNAT {outcome.destination}",
        "REDIRECT": f"REDIRECT {outcome.destination}",
        "MASQUERADE": "masquerade",
        "SNAT": f"SNAT {outcome.src}",
    }
    return path_graph(
        outcome.path,
        start=packet_text(packet) if packet is not None else "",
        end=verdict_text(outcome),
        nat=nat,
    )


# --- Mermaid -----------------------------------------------------------------------------------

_MERMAID_SAFE = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 .:/-_=,+*@%()"
)


def mermaid_text(text: str) -> str:
    """A label safe inside Mermaid quotes: anything else becomes an entity code (``#60;``)."""
    return "".join(c if c in _MERMAID_SAFE else f"#{ord(c)};" for c in text)


def to_mermaid(graph: Graph, *, direction: str = "LR") -> str:
    lines = [f"flowchart {direction}"]
    for node_id, label in graph.nodes:
        shape = ('(["', '"])') if node_id in ("packet", "verdict") else ('["', '"]')
        lines.append(f"  {node_id}{shape[0]}{mermaid_text(label)}{shape[1]}")
    for a, b, label in graph.edges:
        arrow = f'-->|"{mermaid_text(label)}"|' if label else "-->"
        lines.append(f"  {a} {arrow} {b}")
    return "\n".join(lines) + "\n"


def flow_mermaid(hops: Sequence[Hop]) -> str:
    """The whiteboard flow (``flow.flow``) as a top-down Mermaid chart, the faulty hop marked.

    Each node shows its hop and where its rules are (``rule 2, line 31``); the edges carry the
    address changes. The hop where the rules part from Kubernetes gets the class ``fault``.
    """
    lines = ["flowchart TD"]
    for i, hop in enumerate(hops):
        parts = [mermaid_text(visible(hop.label))]
        if hop.fired:
            parts.append(mermaid_text("; ".join(f.where for f in hop.fired)))
        if hop.fault:
            parts.append(mermaid_text("the rules part from Kubernetes here"))
        label = "<br>".join(parts)
        shape = ('(["', '"])') if hop.kind in ("client", "end") else ('["', '"]')
        lines.append(f"  h{i}{shape[0]}{label}{shape[1]}")
    for i, hop in enumerate(hops[1:], 1):
        arrow = f'-->|"{mermaid_text(visible(hop.edge))}"|' if hop.edge else "-->"
        lines.append(f"  h{i - 1} {arrow} h{i}")
    faults = [i for i, h in enumerate(hops) if h.fault]
    if faults:
        lines.append("  classDef fault fill:#ffebe9,stroke:#cf222e,stroke-width:3px")
        lines += [f"  class h{i} fault" for i in faults]
    return "\n".join(lines) + "\n"


# --- DOT ---------------------------------------------------------------------------------------


def dot_text(text: str) -> str:
    """A DOT double-quoted string body (backslashes, quotes and newlines escaped)."""
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def to_dot(graph: Graph, *, name: str = "path") -> str:
    lines = [f'digraph "{dot_text(name)}" {{', "  rankdir=LR;", "  node [shape=box];"]
    for node_id, label in graph.nodes:
        shape = ", shape=ellipse" if node_id in ("packet", "verdict") else ""
        lines.append(f'  {node_id} [label="{dot_text(label)}"{shape}];')
    for a, b, label in graph.edges:
        attr = f' [label="{dot_text(label)}"]' if label else ""
        lines.append(f"  {a} -> {b}{attr};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def outcome_mermaid(outcome: Outcome, packet: Packet | None = None) -> str:
    """Mermaid flowchart of one outcome's path, from the packet to the verdict."""
    return to_mermaid(outcome_graph(outcome, packet))


def outcome_dot(outcome: Outcome, packet: Packet | None = None) -> str:
    """Graphviz DOT of one outcome's path, from the packet to the verdict."""
    return to_dot(outcome_graph(outcome, packet))
