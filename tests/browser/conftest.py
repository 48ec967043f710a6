"""Browser tests: the HTML report in Debian's headless Chromium, driven by Playwright.

``scripts/install-system-deps.sh`` installs Chromium (``/usr/bin/chromium``); Playwright comes
with the test extras. Without either the tests are skipped with the reason, except in CI
(``CI`` set) or under ``NAT_VERIFY_REQUIRE_BROWSER=1``, where that is a failure: CI never passes
by skipping them.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM_ARGS = [
    # as root (CI) Chromium needs --no-sandbox; the rest keep it off a closed network
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


# module scope: Playwright's driver is a child process, and the kernel tests check that this
# process has no children left, so it must be gone before they run
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    required = bool(os.environ.get("CI")) or os.environ.get("NAT_VERIFY_REQUIRE_BROWSER") == "1"
    reason = ""
    exe = _chromium()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        reason = "playwright is not installed (pip install -e '.[test]')"
    if not reason and exe is None:
        reason = "no chromium (scripts/install-system-deps.sh installs Debian's)"
    if reason:
        if required:
            pytest.fail(f"the browser tests must run here: {reason}")
        pytest.skip(reason)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()
