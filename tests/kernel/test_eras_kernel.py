"""The kernel agrees with the model on the rules of every kube-proxy layout era.

The golden cluster of ``tests/golden/eras`` is compiled for node-1 in each era, with the
base-chain jumps (and, for the eras that drop through ``KUBE-MARK-DROP``, kubelet's
``KUBE-MARK-DROP``/``KUBE-FIREWALL`` rules), loaded into a sandbox mirroring the node, and every
packet intent calls interesting, plus random packets aimed at the dump, is probed as a first
connection. Each kernel answer must be one the model gives (``OracleSession.check``): the old
layouts (``KUBE-XLB``, ``KUBE-FW`` with mark-drop, the one-rule ``KUBE-POSTROUTING``) are held to
what Linux does. The one thing the model may not decide is the 1.16-1.23 externalIP capture,
whose ``-m physdev ! --physdev-is-in`` depends on whether the packet crossed a bridge: packets to
the externalIP may come out inconclusive there (and only there), never different.
"""

from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from nat_verify.check.nodectx import node_context
from nat_verify.kube import load_cluster
from nat_verify.kubeproxy import compile_node
from nat_verify.kubeproxy.eras import ERA_NAMES, era_named
from nat_verify.netfilter.parse import parse
from nat_verify.oracle.differential import OracleSession
from nat_verify.oracle.targets import packets_for_ruleset
from tests.kernel.test_specs_kernel import intent_packets

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("kernel_ok")]

CLUSTER = load_cluster(Path(__file__).parents[1] / "golden" / "eras" / "cluster.yaml")


@pytest.mark.parametrize("era", ERA_NAMES)
def test_kernel_agrees_with_model_in_era(era: str) -> None:
    ruleset = parse(compile_node(CLUSTER, "node-1", 4, era=era_named(era)), source=f"eras/{era}")
    ctx = node_context(CLUSTER, "node-1", 4)
    packets = intent_packets(CLUSTER, "node-1")
    randoms = packets_for_ruleset(ruleset, ctx, 12, seed=zlib.crc32(era.encode()))
    problems: list[str] = []
    with OracleSession.open(ruleset, ctx, packets + randoms) as s:
        found = [d for p in packets for d in s.check(p, 4)] + [d for p in randoms for d in s.check(p, 1)]
    for d in found:
        physdev = era_named(era).layout == "xlb" and "192.0.2.50" in d.message and "physdev" in d.message
        if not (d.kind == "inconclusive" and physdev):
            problems.append(d.message)
    assert not problems, "\n".join(problems)
