"""Mappings and sequences that remember the 1-based lines they were read from."""

from __future__ import annotations

from typing import Any


class YamlMap(dict[str, Any]):
    """A mapping plus the 1-based line of itself and of each of its keys."""

    line: int = 0
    key_lines: dict[str, int]

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line) if hasattr(self, "key_lines") else self.line


class YamlSeq(list[Any]):
    """A sequence plus the 1-based line of itself and of each item."""

    line: int = 0
    item_lines: list[int]

    def line_at(self, index: int) -> int:
        lines = getattr(self, "item_lines", [])
        return lines[index] if index < len(lines) else self.line
