"""Small, explicit text edits on an iptables dump, used to plant one defect at a time.

Each edit names the line(s) it touches by substrings ("needles") that must all occur in the
line, and fails loudly when the dump does not contain exactly the expected lines: a planted
bug that silently edits nothing would make the quality suite pass for the wrong reason.
"""

from __future__ import annotations

import re
from collections.abc import Callable


class MutationError(AssertionError):
    """The dump does not have the shape a mutation was written for."""


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _matching(lines: list[str], needles: tuple[str, ...]) -> list[int]:
    return [i for i, line in enumerate(lines) if all(n in line for n in needles)]


def _only(lines: list[str], needles: tuple[str, ...]) -> int:
    hits = _matching(lines, needles)
    if len(hits) != 1:
        raise MutationError(f"expected exactly one line containing {needles!r}, found {len(hits)}")
    return hits[0]


def delete_line(text: str, *needles: str) -> str:
    """Delete the one line that contains every needle."""
    lines = _lines(text)
    del lines[_only(lines, needles)]
    return "\n".join(lines)


def replace_in_line(text: str, needles: tuple[str, ...], old: str, new: str) -> str:
    """In the one line containing every needle, replace ``old`` (which must occur once) by ``new``."""
    lines = _lines(text)
    i = _only(lines, needles)
    if lines[i].count(old) != 1:
        raise MutationError(f"expected {old!r} once in {lines[i]!r}")
    lines[i] = lines[i].replace(old, new)
    return "\n".join(lines)


def replace_in_lines(text: str, needles: tuple[str, ...], old: str, new: str, count: int) -> str:
    """Like ``replace_in_line`` on each of exactly ``count`` lines containing every needle."""
    lines = _lines(text)
    hits = _matching(lines, needles)
    if len(hits) != count:
        raise MutationError(f"expected {count} lines containing {needles!r}, found {len(hits)}")
    for i in hits:
        if lines[i].count(old) != 1:
            raise MutationError(f"expected {old!r} once in {lines[i]!r}")
        lines[i] = lines[i].replace(old, new)
    return "\n".join(lines)


def insert_before(text: str, needles: tuple[str, ...], *new_lines: str) -> str:
    """Insert ``new_lines`` right before the one line containing every needle."""
    lines = _lines(text)
    i = _only(lines, needles)
    lines[i:i] = list(new_lines)
    return "\n".join(lines)


def insert_after(text: str, needles: tuple[str, ...], *new_lines: str) -> str:
    lines = _lines(text)
    i = _only(lines, needles) + 1
    lines[i:i] = list(new_lines)
    return "\n".join(lines)


def delete_chain(text: str, chain: str) -> str:
    """Remove a chain completely: its declaration and every rule appended to it."""
    lines = _lines(text)
    decl = re.compile(rf"^:{re.escape(chain)} ")
    rule = re.compile(rf"^(\[\d+:\d+\] )?-A {re.escape(chain)} ")
    keep = [line for line in lines if not decl.match(line) and not rule.match(line)]
    if len(lines) - len(keep) < 2:
        raise MutationError(f"chain {chain} has no declaration or no rule to delete")
    return "\n".join(keep)


def delete_lines_where(text: str, keep_if_false: Callable[[str], bool], at_least: int) -> str:
    """Delete every line for which the predicate holds (at least ``at_least`` of them)."""
    lines = _lines(text)
    keep = [line for line in lines if not keep_if_false(line)]
    if len(lines) - len(keep) < at_least:
        raise MutationError(f"expected at least {at_least} lines to delete, found {len(lines) - len(keep)}")
    return "\n".join(keep)


def replace_word(text: str, old: str, new: str, at_least: int) -> str:
    """Replace ``old`` where it stands as a whole token (not as a prefix of a longer address)."""
    pattern = re.compile(rf"(?<![\w.]){re.escape(old)}(?![\w.])")
    out, n = pattern.subn(new, text)
    if n < at_least:
        raise MutationError(f"expected {old!r} at least {at_least} times, found {n}")
    return out
