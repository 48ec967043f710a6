"""The input classes issue 13 found by fuzzing, each asserted against the final contract.

Every case is a real node's rules (``web-svc`` compiled for node-1) with one construct planted
where a packet meets it, run through ``trace`` and ``check``: each must end in a result or one
clean ``file:line`` error, never a traceback (``contract``). Which answer is right (refusing
the dump, or inconclusive) is the semantics registry's to decide; this file only holds the line.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz import contract
from tests.fuzz.seeds import SPEC, dumps

PORTALS = '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES'

PLANTED = {
    # a value the model reads as a number, written with a unit
    "recent-seconds-1h": "-A PREROUTING -p tcp -m recent --rcheck --seconds 1h --name x -j KUBE-SERVICES",
    "recent-seconds-huge": "-A PREROUTING -p tcp -m recent --rcheck --seconds " + "9" * 5000 + " -j KUBE-SERVICES",
    "mark-junk": "-A PREROUTING -p tcp -j MARK --set-xmark junk",
    "mark-missing": "-A PREROUTING -p tcp -j MARK",
    "dport-out-of-range": "-A PREROUTING -p tcp -m tcp --dport 70000 -j KUBE-SERVICES",
    "mark-huge": "-A PREROUTING -m mark --mark 0x" + "f" * 5000 + " -j KUBE-SERVICES",
    "probability-nan": "-A PREROUTING -m statistic --mode random --probability nan -j KUBE-SERVICES",
    "nth-every-zero": "-A PREROUTING -m statistic --mode nth --every 0 --packet 0 -j KUBE-SERVICES",
    "dnat-port-out-of-range": "-A PREROUTING -p tcp -j DNAT --to-destination 10.42.1.7:99999",
    "dnat-v6-in-v4": "-A PREROUTING -p tcp -j DNAT --to-destination [fd00::1]:80",
    "unknown-module": "-A PREROUTING -m frobnicate --level 3 -j KUBE-SERVICES",
    "set-without-flags": "-A PREROUTING -m set --match-set kube-ips -j KUBE-SERVICES",
}


def _save() -> str:
    return dumps()[-1].decode()  # the compiled save form of web-svc, node-1


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_planted_option_values_end_in_a_result_or_a_clean_error(tmp_path: Path, name: str) -> None:
    text = _save()
    assert PORTALS in text
    path = tmp_path / f"{name}.rules"
    path.write_text(text.replace(PORTALS, PLANTED[name], 1))
    pkt = ["--src", "10.42.1.7", "--dst", "10.43.0.15:80"]
    contract.run_cli("known classes", path, ["trace", str(path), "--cluster", str(SPEC), "--node", "node-1", *pkt])
    contract.run_cli("known classes", path, ["check", str(path), "--cluster", str(SPEC), "--node", "node-1"])


def test_a_thousand_matching_non_terminating_rules_in_a_row(tmp_path: Path) -> None:
    # 474 such rules exhausted the recursion limit (issue 13)
    lines = ["*nat", ":PREROUTING ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]", ":POSTROUTING ACCEPT [0:0]", ":X - [0:0]",
             "-A PREROUTING -j X", *["-A X -j MARK --set-xmark 0x1/0x1"] * 1000, "COMMIT"]  # fmt: skip
    path = tmp_path / "marks.rules"
    path.write_text("\n".join(lines) + "\n")
    contract.run_cli("known classes", path, ["trace", str(path), "--node-ip", "192.168.1.11", "--src", "203.0.113.5", "--dst", "10.43.0.15:80"])
