"""Bad node-fact input: one message with the file (or option) and line."""

from __future__ import annotations


class FactError(ValueError):
    """A node fact that cannot be read; ``str()`` is ``where:line: message``."""

    def __init__(self, where: str, line: int, message: str) -> None:
        super().__init__(f"{where}:{line}: {message}" if line else f"{where}: {message}")
        self.where = where
        self.line = line
        self.message = message
