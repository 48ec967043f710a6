"""Test-wide settings: Hypothesis profiles.

* ``dev`` (default locally): quick feedback.
* ``ci`` (CI=true, or HYPOTHESIS_PROFILE=ci): deterministic, no example database, sized so that
  the whole of .ci/run stays well under 20 minutes on 2 cores.
* ``thorough``: long searches, run on demand: ``HYPOTHESIS_PROFILE=thorough scripts/test.sh``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=30, deadline=None)
settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))
