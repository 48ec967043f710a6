"""The one exception bad Kubernetes input raises: it names the file and the line."""

from __future__ import annotations


class KubeInputError(Exception):
    """A manifest that cannot be turned into a ``Cluster``.

    ``line`` is 1-based; 0 means the problem concerns the file as a whole (missing, unreadable).
    ``str()`` is ``file:line: message`` (``file: message`` when there is no line), the form
    editors and CI annotations understand.
    """

    def __init__(self, file: str, line: int, message: str) -> None:
        super().__init__(file, line, message)
        self.file = file
        self.line = line
        self.message = message

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"
