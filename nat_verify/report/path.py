"""A rule path read as a walk through chains: which chains were entered, in what order.

A path is the list of rules that fired (``Step``). Renderers want the chains instead: the
one-line trace lists them in the order first entered, graphs draw them as nodes with the
jumps between them as edges. Returning from a chain (``RETURN`` or falling off its end) is
not an edge: the walk keeps a call stack, so KUBE-SVC -> KUBE-MARK-MASQ -> (back) -> KUBE-SEP
draws KUBE-SVC -> KUBE-SEP, not a loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from nat_verify.model.outcome import Step
from nat_verify.netfilter.registry import TARGET_NAMES

Node = tuple[str, str]  # (table, chain)

BUILTIN_CHAINS = frozenset({"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"})

# targets that are not chains (iptables extensions and built-in verdicts: the registry's)
TARGETS = TARGET_NAMES
NAT_TARGETS = frozenset({"DNAT", "SNAT", "MASQUERADE", "REDIRECT", "NETMAP"})
_JUMP_WORDS = frozenset({"-j", "-g", "--jump", "--goto", "jump", "goto"})


def target_word(target: str) -> str:
    """The target's name from a ``Step.target`` such as ``-j DNAT --to-destination ...``."""
    if " " not in target:  # the interpreter's form: just the name
        return "" if target in _JUMP_WORDS else target
    words = target.split()
    while words and words[0] in _JUMP_WORDS:
        words = words[1:]
    return words[0] if words else ""


def jump_chain(target: str) -> str | None:
    """The chain a step jumped (or went) to, or None for a verdict or extension target."""
    word = target_word(target)
    if not word or word.upper() in TARGETS:
        return None
    return word


def parse_step(text: str, line: int = 0) -> Step:
    """The inverse of ``str(Step)``: ``"nat KUBE-SVC-X 2"`` or ``"filter INPUT policy"``."""
    parts = text.split()
    if len(parts) != 3:
        raise ValueError(f"expected 'TABLE CHAIN RULE', received {text!r}")
    table, chain, rule = parts
    return Step(table, chain, 0 if rule == "policy" else int(rule), line=line)


def steps_from_json(
    path: Sequence[str], lines: Sequence[int] = (), targets: Sequence[str] = ()
) -> tuple[Step, ...]:
    """Steps from a report's ``path`` / ``lines`` / ``targets`` arrays (the last two optional)."""
    out = []
    for i, text in enumerate(path):
        step = parse_step(text, lines[i] if i < len(lines) else 0)
        if i < len(targets) and targets[i]:
            step = attrs.evolve(step, target=str(targets[i]))
        out.append(step)
    return tuple(out)


@attrs.frozen
class Edge:
    src: Node | None  # None: the packet entering the first chain
    dst: Node
    label: str = ""


@attrs.frozen
class Walk:
    nodes: tuple[Node, ...]  # in the order first entered, each once
    edges: tuple[Edge, ...]
    last: Node | None  # the chain the walk ended in
    pending: str  # NAT label(s) of the last hook, for an edge to the final verdict


def _default_nat_label(step: Step) -> str:
    return target_word(step.target)


def walk(steps: Sequence[Step], nat_label: Callable[[Step], str] = _default_nat_label) -> Walk:
    """Chains entered and the edges between them.

    Jump edges carry the rule number that jumped (``rule 3``); an edge from one hook to the
    next (for example from the KUBE-SEP chain of nat PREROUTING to filter FORWARD) carries the
    NAT done in the hook that ended (``nat_label`` of the step, e.g. ``DNAT 10.0.0.1:80``).
    """
    nodes: list[Node] = []
    edges: list[Edge] = []
    stack: list[Node] = []
    last: Node | None = None
    pending: list[str] = []

    def enter(src: Node | None, dst: Node, label: str) -> None:
        if dst not in nodes:
            nodes.append(dst)
        edge = Edge(src, dst, label)
        if edge not in edges:
            edges.append(edge)

    prev: Step | None = None
    for i, step in enumerate(steps):
        here = (step.table, step.chain)
        if stack and here == stack[-1]:
            pass
        elif here in stack:
            del stack[stack.index(here) + 1 :]  # returned to a caller
        elif stack and step.chain not in BUILTIN_CHAINS and step.table == stack[-1][0]:
            # label the edge with the rule that jumped here, when the path shows it
            label = ""
            if (
                prev is not None
                and (prev.table, prev.chain) == stack[-1]
                and (not prev.target or jump_chain(prev.target) == step.chain)
            ):
                label = f"rule {prev.rule}"
            enter(stack[-1], here, label)
            stack.append(here)
        else:  # a new hook: a built-in chain, or another table
            enter(last, here, " / ".join(pending))
            pending = []
            stack = [here]
        last = here
        chain = jump_chain(step.target)
        following = steps[i + 1] if i + 1 < len(steps) else None
        if chain is not None and (
            following is None or (following.table, following.chain) != (step.table, chain)
        ):
            # entered, but no rule fired in it: it returned at once
            enter(here, (step.table, chain), f"rule {step.rule}")
        if target_word(step.target).upper() in NAT_TARGETS:
            pending.append(nat_label(step))
        prev = step
    return Walk(tuple(nodes), tuple(edges), last, " / ".join(pending))


@attrs.frozen
class Segment:
    """The steps taken in one hook (one built-in chain of one table) and its main line.

    ``main_line`` is the call stack when the hook's last rule fired: the chains through which
    the hook decided the packet's fate, without side trips that returned (KUBE-MARK-MASQ).
    """

    steps: tuple[Step, ...]
    main_line: tuple[Node, ...]
    nat_targets: frozenset[str] = frozenset()  # NAT targets that fired in this hook


def _segment(steps: list[Step], stack: list[Node]) -> Segment:
    nat = frozenset(w for s in steps if (w := target_word(s.target).upper()) in NAT_TARGETS)
    return Segment(tuple(steps), tuple(stack), nat)


def segments(steps: Sequence[Step]) -> tuple[Segment, ...]:
    """``steps`` cut into hooks, with the main line of each."""
    out: list[Segment] = []
    current: list[Step] = []
    stack: list[Node] = []
    for step in steps:
        here = (step.table, step.chain)
        if stack and here == stack[-1]:
            pass
        elif here in stack:
            del stack[stack.index(here) + 1 :]
        elif stack and step.chain not in BUILTIN_CHAINS and step.table == stack[-1][0]:
            stack.append(here)
        else:
            if current:
                out.append(_segment(current, stack))
            current, stack = [], [here]
        current.append(step)
    if current:
        out.append(_segment(current, stack))
    return tuple(out)
