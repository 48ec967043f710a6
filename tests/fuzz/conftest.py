"""Fuzzing sizes per Hypothesis profile, and the classification of every input at the end.

``ci`` runs a few thousand inputs in all (``EXAMPLES`` per fuzz test); ``thorough`` a million
(run on demand: ``HYPOTHESIS_PROFILE=thorough python -m pytest tests/fuzz``); ``dev`` a quick
look. The terminal summary lists, per fuzz target, how many inputs ended in a result, a clean
error or a defect.
"""

from __future__ import annotations

import os
from typing import Any

from tests.fuzz import contract

PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
# inputs per fuzz test; there are 4 (grammar and mutated dumps, mutated YAML and JSON manifests)
EXAMPLES = {"dev": 40, "ci": 500, "thorough": 250_000}.get(PROFILE, 40)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    lines = contract.summary()
    if lines:
        terminalreporter.section("fuzzing: every input classified")
        for line in lines:
            terminalreporter.write_line(line)
        for message in contract.DEFECTS[:50]:
            terminalreporter.write_line(f"defect: {message[:300]}")


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    if contract.DEFECTS:  # kept going past defects (NAT_VERIFY_FUZZ_KEEP_GOING): still a failure
        session.exitstatus = 1
