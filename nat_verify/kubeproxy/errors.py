"""The error the compiler raises for input it cannot compile."""

from __future__ import annotations

from nat_verify.model.cluster import SourceRef


class CompileError(Exception):
    """A cluster (or a request about it) that cannot be compiled.

    Carries the ``file``/``line`` of the offending object when known, so the CLI can print
    ``file:line: message`` and exit with code 2.
    """

    def __init__(self, message: str, source: SourceRef | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.file = source.file if source else ""
        self.line = source.line if source else 0

    def __str__(self) -> str:
        if not self.file:
            return self.message
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"
