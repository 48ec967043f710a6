"""The contract every input must meet, and the classification of each fuzzed input.

An input ends in a **result** (exit 0, 1 or 3, something on stdout) or a **clean error** (exit 2,
nothing on stdout, one ``nat-verify: error: FILE:LINE: message`` on stderr). Anything else is a
**defect**: a traceback, an error without its file and line, output on stdout next to an error,
more than one message. The commands run in-process through click, as a user would run them.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from nat_verify.cli import main

COUNTS: dict[str, Counter[str]] = {}
"""Per fuzz target, how many inputs ended in each class (printed at the end of the session)."""

RESULT, CLEAN_ERROR, DEFECT = "result", "clean error", "defect"

# problems of a file as a whole, which name the file and no line (KubeInputError line 0)
_WHOLE_FILE = "no Service found|cannot read|no such file"


class Defect(AssertionError):
    """An input that broke the contract; the message says how."""


DEFECTS: list[str] = []
"""Under ``NAT_VERIFY_FUZZ_KEEP_GOING=DIR`` (long runs): each defect's message; its input is
copied into DIR and the run goes on, so that one defect does not end a million-input search
(the session still fails). Otherwise a defect fails its test at once and Hypothesis shrinks it."""


def _defect(counts: Counter[str], path: Path, message: str, cause: BaseException | None = None) -> str:
    counts[DEFECT] += 1
    keep = os.environ.get("NAT_VERIFY_FUZZ_KEEP_GOING")
    if not keep:
        raise Defect(message) from cause
    out = Path(keep)
    out.mkdir(parents=True, exist_ok=True)
    n = len(DEFECTS)
    (out / f"defect-{n:04d}{path.suffix}").write_bytes(path.read_bytes())
    (out / f"defect-{n:04d}.txt").write_text(message + "\n")
    DEFECTS.append(message)
    return DEFECT


def run_cli(target: str, path: Path, args: list[str]) -> str:
    """Run ``nat-verify ARGS`` on ``path``; return the class, raise ``Defect`` on a breach."""
    r = CliRunner().invoke(main, args)
    counts = COUNTS.setdefault(target, Counter())
    _save_now_and_then()
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        return _defect(counts, path, f"{' '.join(args)}: {type(r.exception).__name__}: {r.exception}", r.exception)
    code = r.exit_code
    if code in (0, 1, 3):
        if not r.stdout:
            return _defect(counts, path, f"{' '.join(args)}: exit {code} with nothing on stdout")
        counts[RESULT] += 1
        return RESULT
    if code != 2:
        return _defect(counts, path, f"{' '.join(args)}: exit code {code}")
    err = r.stderr.strip().splitlines()
    errors = [ln for ln in err if ln.startswith("nat-verify: error: ")]
    where = re.escape(str(path))
    problems = []
    if r.stdout:
        problems.append(f"stdout not empty: {r.stdout[:200]!r}")
    if len(errors) != 1:
        problems.append(f"expected one error message, got {len(errors)}: {err[:3]}")
    elif not re.match(rf"nat-verify: error: (?:{where}:[1-9]\d*|--[a-z][a-z-]*): \S", errors[0]) and not re.match(
        rf"nat-verify: error: {where}: (?:{_WHOLE_FILE})", errors[0]
    ):
        problems.append(f"the error does not name the file and a line: {errors[0][:300]!r}")
    if problems:
        return _defect(counts, path, f"{' '.join(args)}: " + "; ".join(problems))
    counts[CLEAN_ERROR] += 1
    return CLEAN_ERROR


_SEEN = [0]


def _save_now_and_then() -> None:
    # long runs (thorough) may be stopped before the summary: NAT_VERIFY_FUZZ_COUNTS=FILE keeps
    # the counts so far in FILE (JSON), rewritten every 200 inputs
    _SEEN[0] += 1
    path = os.environ.get("NAT_VERIFY_FUZZ_COUNTS")
    if path and _SEEN[0] % 200 == 0:
        with open(path, "w") as f:
            json.dump({t: dict(c) for t, c in COUNTS.items()}, f, indent=1)


def summary() -> list[str]:
    lines = []
    for target, c in sorted(COUNTS.items()):
        total = sum(c.values())
        parts = ", ".join(f"{c[k]:,} {k}" for k in (RESULT, CLEAN_ERROR, DEFECT))
        lines.append(f"{target}: {total:,} inputs: {parts}")
    return lines
