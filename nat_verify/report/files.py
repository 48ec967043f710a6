"""Report files: the format a file name asks for, and writing several files all or nothing.

``--report FILE`` takes its format from the extension. Every file is rendered first, then
written to a temporary file beside its target and renamed into place, so a failure leaves
neither a half-written file nor some of the files written. New files get the mode the umask
allows (0666 & ~umask), as a shell redirection would give them; an existing file keeps its
own mode.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

EXTENSIONS: dict[str, str] = {
    ".html": "html",
    ".htm": "html",
    ".md": "md",
    ".markdown": "md",
    ".sarif": "sarif",
    ".xml": "junit",
    ".json": "json",
    ".txt": "text",
}


class OutputError(Exception):
    """A report file that cannot be written; ``str()`` names the file."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


def format_of(path: str) -> str:
    """The report format ``path`` asks for by its extension (``.sarif.json`` is SARIF)."""
    name = Path(path).name.lower()
    if name.endswith(".sarif.json"):
        return "sarif"
    fmt = EXTENSIONS.get(Path(name).suffix)
    if fmt is None:
        known = ", ".join(sorted(EXTENSIONS))
        raise OutputError(path, f"cannot tell the report format from the extension (known: {known})")
    return fmt


def check_writable(path: str) -> None:
    """Refuse, before any work is done, a file whose directory does not exist."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise OutputError(path, "is a directory")
    if not parent.is_dir():
        raise OutputError(path, f"cannot write: no directory {str(parent)!r}")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_all(files: Sequence[tuple[str, str]]) -> None:
    """Write every (path, text) or none of them."""
    staged: list[tuple[str, Path]] = []
    mode = 0o666 & ~_umask()
    current = ""
    try:
        for path, text in files:
            current = path
            check_writable(path)
            target = Path(path)
            fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=str(target.parent or "."))
            staged.append((path, Path(tmp)))
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(tmp, os.stat(path).st_mode & 0o7777 if target.exists() else mode)
        for path, staged_tmp in staged:
            current = path
            os.replace(staged_tmp, path)
    except OSError as e:
        for _, staged_tmp in staged:
            staged_tmp.unlink(missing_ok=True)
        raise OutputError(current, f"cannot write: {e.strerror or e}") from None
