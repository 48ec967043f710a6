"""Kernel-oracle tests: real netfilter in throwaway network namespaces.

Every test module here sets ``pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("kernel_ok")]``
(``pytest -m "not kernel"`` needs no privileges). The session fixture ``kernel_ok`` decides: when the machine cannot run the oracle the tests are skipped
with the reason, except under ``NAT_VERIFY_REQUIRE_KERNEL=1`` (CI), where a missing kernel is a
failure so that CI can never pass by skipping.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from nat_verify.oracle.oracle import kernel_available


@pytest.fixture(scope="session")
def kernel_ok() -> Iterator[None]:
    reason = kernel_available()
    if reason is not None:
        if os.environ.get("NAT_VERIFY_REQUIRE_KERNEL") == "1":
            pytest.fail(f"NAT_VERIFY_REQUIRE_KERNEL=1 but the kernel oracle is unusable: {reason}")
        pytest.skip(f"kernel oracle unavailable: {reason}")
    yield
