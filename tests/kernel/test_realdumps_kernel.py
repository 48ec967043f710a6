"""The real kernel agrees with the model on the published complete dumps of ``tests/realdumps``.

Each complete dump is loaded into a throwaway namespace mirroring its node (the reconstructed
cluster's Node addresses and pod CIDR), and every packet the manifest traces (answers read off
the rules by hand, see ``MANIFEST.json``) is sent as a first connection: the kernel's answer must
be one the model allows. So the hand-read answers, the model and the kernel agree on rules that
real nodes ran, other agents' rules included (Docker, flannel, libvirt, the AWS VPC CNI).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nat_verify.cli import main
from tests.realdumps import corpus

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("kernel_ok")]

COMPLETE = [e["id"] for e in corpus.entries() if "complete" in e["form"] and e.get("packets") and "check" in e]


def test_every_complete_dump_is_here() -> None:
    assert len(COMPLETE) >= 8


@pytest.mark.parametrize("dump_id", COMPLETE)
def test_kernel_allows_only_what_the_model_allows(dump_id: str, tmp_path: Path) -> None:
    e = corpus.entry(dump_id)
    packets = tmp_path / "packets.jsonl"
    packets.write_text("".join(json.dumps(c["packet"]) + "\n" for c in e["packets"]))
    r = CliRunner().invoke(main, ["oracle", str(corpus.path(e)), "--cluster", str(corpus.ROOT / e["cluster"]),
                                  "--node", e["check"]["node"], "--packets", str(packets), "--probes", "2",
                                  "--format", "json"])  # fmt: skip
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["packets"] == len(e["packets"]) and doc["disagreements"] == []
