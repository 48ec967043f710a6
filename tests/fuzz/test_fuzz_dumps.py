"""Fuzzed dumps (issue 13 item 4): grammar-generated iptables-save text and mutated real dumps.

Every input is run through ``trace`` strictly and with ``--partial``, and some through
``check``; each must end in a result or one clean ``file:line`` error (``contract``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import lark
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.lark import from_lark

from tests.fuzz import contract
from tests.fuzz.conftest import EXAMPLES
from tests.fuzz.mutate import mutated
from tests.fuzz.seeds import SPEC, dumps

_LARK = (Path(__file__).parent / "iptables_save.lark").read_text()
DUMP_GRAMMAR = lark.Lark(_LARK, start="dump")
LINES_GRAMMAR = lark.Lark(_LARK, start="start")
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
TRACE = ["--node-ip", "192.168.1.11", "--pod-cidr", "10.42.0.0/16", "--src", "10.42.1.7", "--dst", "10.43.0.15:80"]


def _classify(target: str, data: bytes, check: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="nv-fuzz-") as d:
        path = Path(d) / "node.rules"
        path.write_bytes(data)
        contract.run_cli(target, path, ["trace", str(path), *TRACE, "--format", "json"])
        contract.run_cli(target + " --partial", path, ["trace", str(path), *TRACE, "--partial"])
        if check:
            contract.run_cli(target + " check", path, ["check", str(path), "--cluster", str(SPEC), "--node", "node-1", "--format", "json"])


@FUZZ
@given(text=st.one_of(from_lark(DUMP_GRAMMAR, start="dump"), from_lark(LINES_GRAMMAR)), check=st.integers(0, 9))
def test_grammar_generated_dumps(text: str, check: int) -> None:
    _classify("dumps from the grammar", text.encode(), check == 0)


@FUZZ
@given(data=st.sampled_from(dumps()).flatmap(mutated), check=st.integers(0, 9))
# (seeds: every published dump once, the complete ones several times: see seeds.dumps)
def test_mutated_real_dumps(data: bytes, check: int) -> None:
    _classify("mutated dumps", data, check == 0)
