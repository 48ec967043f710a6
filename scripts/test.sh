#!/usr/bin/env bash
# Install what the tests need, then run them. The README's test command and .ci/run both call this.
#   scripts/test.sh [pytest args...]
# HYPOTHESIS_PROFILE selects the search effort (dev, ci, thorough); CI=true picks ci.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -eq 0 ]; then
    sh scripts/install-system-deps.sh
else
    echo "test.sh: not root: kernel-oracle tests will be skipped (system packages not installed)" >&2
fi
python3 -m pip install --quiet --disable-pip-version-check -e '.[test]'
# the style the project holds itself to: ruff and mypy clean
python3 -m ruff check nat_verify tests bench
python3 -m mypy nat_verify
python3 -m pytest "$@"
