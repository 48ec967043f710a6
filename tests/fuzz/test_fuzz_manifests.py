"""Fuzzed manifests (issue 13 item 4): mutated specs and loader fixtures, as YAML and as JSON.

Every input is compiled for a node, and some are checked against a fixed dump; each must end
in a result or one clean ``file:line`` error (``contract``; a wrong ``--node`` is an option
error, which names the option).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz import contract
from tests.fuzz.conftest import EXAMPLES
from tests.fuzz.mutate import mutated
from tests.fuzz.seeds import dumps, manifests

FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _node(data: bytes) -> str:
    # the node the seed names (specs use node-1); a mutated name is an option error, not a defect
    return "node-1"


def _classify(target: str, data: bytes, suffix: str, check: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="nv-fuzz-") as d:
        path = Path(d) / f"cluster{suffix}"
        path.write_bytes(data)
        contract.run_cli(target, path, ["compile", str(path), "--node", _node(data)])
        if check:
            dump = Path(d) / "node.rules"
            dump.write_bytes(dumps()[-1])
            contract.run_cli(target + " check", path, ["check", str(dump), "--cluster", str(path), "--node", "node-1", "--format", "json"])


@FUZZ
@given(seed=st.sampled_from([m for m in manifests() if m[1] == ".yaml"]), data=st.data(), check=st.integers(0, 9))
def test_mutated_yaml_manifests(seed: tuple[bytes, str], data: st.DataObject, check: int) -> None:
    _classify("mutated YAML manifests", data.draw(mutated(seed[0])), ".yaml", check == 0)


@FUZZ
@given(seed=st.sampled_from([m for m in manifests() if m[1] == ".json"]), data=st.data(), check=st.integers(0, 9))
def test_mutated_json_manifests(seed: tuple[bytes, str], data: st.DataObject, check: int) -> None:
    _classify("mutated JSON manifests", data.draw(mutated(seed[0])), ".json", check == 0)
