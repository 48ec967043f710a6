"""The contract every input must meet, and the classification of each fuzzed input.

An input ends in a **result** (exit 0, 1 or 3, something on stdout) or a **clean error** (exit 2,
nothing on stdout, one ``nat-verify: error: FILE:LINE: message`` on stderr). Anything else is a
**defect**: a traceback, an error without its file and line, output on stdout next to an error,
more than one message. The commands run in-process through click, as a user would run them.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from nat_verify.cli import main

COUNTS: dict[str, Counter[str]] = {}
"""Per fuzz target, how many inputs ended in each class (printed at the end of the session)."""

RESULT, CLEAN_ERROR, DEFECT = "result", "clean error", "defect"


class Defect(AssertionError):
    """An input that broke the contract; the message says how."""


def run_cli(target: str, path: Path, args: list[str]) -> str:
    """Run ``nat-verify ARGS`` on ``path``; return the class, raise ``Defect`` on a breach."""
    r = CliRunner().invoke(main, args)
    counts = COUNTS.setdefault(target, Counter())
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        counts[DEFECT] += 1
        raise Defect(f"{' '.join(args)}: {type(r.exception).__name__}: {r.exception}") from r.exception
    code = r.exit_code
    if code in (0, 1, 3):
        if not r.stdout:
            counts[DEFECT] += 1
            raise Defect(f"{' '.join(args)}: exit {code} with nothing on stdout")
        counts[RESULT] += 1
        return RESULT
    if code != 2:
        counts[DEFECT] += 1
        raise Defect(f"{' '.join(args)}: exit code {code}")
    err = r.stderr.strip().splitlines()
    errors = [ln for ln in err if ln.startswith("nat-verify: error: ")]
    where = re.escape(str(path))
    problems = []
    if r.stdout:
        problems.append(f"stdout not empty: {r.stdout[:200]!r}")
    if len(errors) != 1:
        problems.append(f"expected one error message, got {len(errors)}: {err[:3]}")
    elif not re.match(rf"nat-verify: error: (?:{where}:[1-9]\d*|--[a-z][a-z-]*): \S", errors[0]):
        problems.append(f"the error does not name the file and a line: {errors[0][:300]!r}")
    if problems:
        counts[DEFECT] += 1
        raise Defect(f"{' '.join(args)}: " + "; ".join(problems))
    counts[CLEAN_ERROR] += 1
    return CLEAN_ERROR


def summary() -> list[str]:
    lines = []
    for target, c in sorted(COUNTS.items()):
        total = sum(c.values())
        parts = ", ".join(f"{c[k]:,} {k}" for k in (RESULT, CLEAN_ERROR, DEFECT))
        lines.append(f"{target}: {total:,} inputs: {parts}")
    return lines
