"""Progress of long work, on stderr only: a bar on a terminal, plain lines elsewhere.

``verify``, ``check`` and fleet runs count Services (and nodes). On a terminal a rich bar shows
the count, the rate and an estimate of the time left, and disappears when the work is done.
Anywhere else (a pipe, a CI log) the same facts go out as plain lines, at most one every
``interval`` seconds and none before the work has run for ``interval`` seconds, so short runs
print nothing. Nothing is ever written to stdout: reports and JSON go there.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

PLAIN_INTERVAL = 5.0


def _eta(done: int, total: int, elapsed: float) -> str:
    if done <= 0 or total <= done:
        return ""
    left = elapsed / done * (total - done)
    return f", ~{left:.0f} s left" if left < 120 else f", ~{left / 60:.1f} min left"


class Task:
    """One counted piece of work (``total`` items of one ``unit``)."""

    def __init__(self, owner: Progress, description: str, total: int, unit: str) -> None:
        self.owner, self.description, self.total, self.unit = owner, description, total, unit
        self.done = 0
        self.started = time.monotonic()
        self._last_line = self.started
        self._bar_id: Any = None

    def advance(self, n: int = 1, description: str | None = None) -> None:
        self.done = min(self.total, self.done + n) if self.total else self.done + n
        if description is not None:
            self.description = description
        self.owner._update(self)

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        pct = f" ({100 * self.done / self.total:.0f}%)" if self.total else ""
        return (f"{self.description}: {self.done}/{self.total} {self.unit}{pct}, {rate:.1f} {self.unit}/s"
                f"{_eta(self.done, self.total, elapsed)}")  # fmt: skip


class Progress:
    """``with Progress() as p: t = p.task("checking node-0", 1000, "Services"); t.advance()``.

    ``stream`` defaults to stderr; ``terminal`` (default: ``stream.isatty()``) picks the bar.
    ``enabled=False`` makes every call a no-op.
    """

    def __init__(
        self, stream: TextIO | None = None, *, terminal: bool | None = None, enabled: bool = True,
        interval: float = PLAIN_INTERVAL,
    ) -> None:  # fmt: skip
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.terminal = bool(enabled and (self.stream.isatty() if terminal is None else terminal))
        self.interval = interval
        self._bar: Any = None

    def __enter__(self) -> Progress:
        if self.terminal:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as Bar

            self._bar = Bar(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[unit]}"), TaskProgressColumn(),
                TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("left"),
                TimeRemainingColumn(), console=Console(file=self.stream, force_terminal=True), transient=True,
            )  # fmt: skip
            self._bar.__enter__()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.__exit__(et, e, tb)
            self._bar = None

    def task(self, description: str, total: int, unit: str = "Services") -> Task:
        t = Task(self, description, total, unit)
        if self._bar is not None:
            t._bar_id = self._bar.add_task(description, total=total, unit=unit, rate="")
        return t

    def _update(self, t: Task) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self._bar is not None:
            elapsed = now - t.started
            rate = f"{t.done / elapsed:.1f}/s" if elapsed > 0 else ""
            self._bar.update(t._bar_id, completed=t.done, description=t.description, rate=rate)
        elif now - t._last_line >= self.interval:
            t._last_line = now
            print(t.line(), file=self.stream, flush=True)

    def services(self, task: Task) -> Callable[[str], None]:
        """A ``check_ruleset(progress=...)`` callback that advances ``task`` once per Service.

        The checker calls it with each destination (``"ns/name:port class proto ip:port"``), a
        Service's destinations one after another; a new Service name starts the next one, so
        the same callback can follow a check over several nodes."""
        last = [""]

        def step(dest: str) -> None:
            service = dest.split(" ", 1)[0]
            if service != last[0]:
                last[0] = service
                task.advance()

        return step
