"""The endpoint chart's kernel side: ``check --kernel-probes N`` counts where the kernel sends
N first connections of each Service's ClusterIP packet, beside the model's exact shares.

web-svc (README): two Ready endpoints, so kube-proxy's cascade gives each probability 1/2 (one
statistic rule at 0.5, which the kernel stores as 2^30 / 2^31 exactly). Of 400 connections
each endpoint then gets Binomial(400, 1/2): mean 200, standard deviation 10; the bounds below
(140..260) are six deviations out, a false failure about once in 10^9 runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.test_cli import run

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("kernel_ok")]
SPECS = Path(__file__).resolve().parents[2] / "specs"
WEB = str(SPECS / "web-svc.yaml")


def test_observed_shares_beside_the_model(tmp_path: Path) -> None:
    code, dump, _ = run("compile", WEB, "--node", "node-1", "--style", "save")
    assert code == 0
    (tmp_path / "n1.save").write_text(dump)
    code, out, err = run("check", str(tmp_path / "n1.save"), "--cluster", WEB, "--node", "node-1",
                         "--kernel-probes", "400", "--format", "json", "--report", str(tmp_path / "r.html"))  # fmt: skip
    assert code == 0, err
    (share,) = json.loads(out)["shares"]
    assert share["probes"] == 400
    seen = {e["destination"]: (e["probability"], e["observed"]) for e in share["endpoints"]}
    assert set(seen) == {"10.42.1.7:8080", "10.42.2.3:8080"}
    assert sum(n for _, n in seen.values()) == 400
    for p, n in seen.values():
        assert p == "1/2" and 140 <= n <= 260
    html = (tmp_path / "r.html").read_text()
    assert html.count('<rect class="obs"') == 2  # the kernel's bar beside each model bar
