"""``nat-verify trace --kernel``: the kernel's answers in the model's JSON shape, from the
command line and from ``kernel_traces``; bad input is reported at its dump line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from nat_verify.check.nodectx import node_context
from nat_verify.cli import main
from nat_verify.kube import load_clusters
from nat_verify.kubeproxy import compile_node
from nat_verify.model.packet import Packet
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.parse import DumpError, parse, parse_file
from nat_verify.oracle.bridge import kernel_traces

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("kernel_ok")]

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "specs" / "web-svc.yaml"


@pytest.fixture(scope="module")
def web_dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    (cluster,) = [c for c in load_clusters(ROOT / "specs") if c.name == "web-svc"]
    path = tmp_path_factory.mktemp("dumps") / "web-node-1.rules"
    path.write_text(compile_node(cluster, "node-1", 4))
    return path


def _trace(dump: Path, *args: str) -> tuple[int, list[dict[str, object]]]:
    res = CliRunner().invoke(
        main,
        ["trace", str(dump), "--cluster", str(WEB), "--node", "node-1", "--format", "json", *args],
    )
    lines = [json.loads(x) for x in res.output.splitlines() if x.startswith("{")]
    return res.exit_code, lines


def test_trace_kernel_json_has_the_model_shape(web_dump: Path, tmp_path: Path) -> None:
    # Three packets: a pod to the ClusterIP (DNAT to either endpoint), the same pod straight to
    # an address no rule names (forwarded untouched), the host to its own NodePort.
    packets = tmp_path / "p.jsonl"
    packets.write_text(
        '{"src": "10.42.1.30", "dst": "10.43.0.15:80"}\n'
        '{"src": "10.42.1.30", "dst": "10.43.0.99:80", "proto": "udp"}\n'
        '{"src": "192.168.1.10", "dst": "192.168.1.10:30080"}\n'
    )
    code, kernel = _trace(web_dump, "--packets", str(packets), "--kernel")
    assert code == 0, kernel
    mcode, model = _trace(web_dump, "--packets", str(packets))
    assert mcode == 0
    assert len(kernel) == len(model) == 3
    for k, m in zip(kernel, model, strict=True):
        assert k["format"] == m["format"] == "nat_verify.trace/v1"
        assert k["packet"] == m["packet"]
        (ko,) = k["outcomes"]  # type: ignore[misc]
        # the model's split over several endpoints adds its distance from a uniform choice; the
        # kernel observes one connection, so it has no split to compare
        assert set(m["outcomes"][0]) <= set(ko) | {"snat", "uniform", "from_uniform"}  # type: ignore[index]
        assert ko["probability"] == "1" and ko["path"] == [] and "kernel" in ko["reason"]
    first, second, third = (k["outcomes"][0] for k in kernel)  # type: ignore[index]
    # pod traffic inside the cluster CIDR is not masqueraded; the endpoint is one of the two
    assert first["verdict"] == "forward" and first["dnat"] is True and first["masquerade"] is False
    assert first["destination"] in ("10.42.1.7:8080", "10.42.2.3:8080")
    assert first["source"] == "10.42.1.30:40000"  # the CLI's default source port, kept
    assert (second["verdict"], second["destination"], second["dnat"]) == (
        "forward",
        "10.43.0.99:80",
        False,
    )
    # KUBE-EXT marks NodePort traffic for masquerade: the source changes (to the pod gateway
    # or the sandbox's link to node2, the egress interfaces' addresses)
    assert third["dnat"] is True and third["masquerade"] is True
    assert third["source"].split(":")[0] in ("10.42.1.1", "198.18.1.1")


def test_kernel_traces_answers_every_packet(web_dump: Path) -> None:
    ruleset = parse_file(str(web_dump))
    (cluster,) = [c for c in load_clusters(ROOT / "specs") if c.name == "web-svc"]
    ctx = node_context(cluster, "node-1", 4)
    packets = [
        Packet(src="203.0.113.9", dst="10.43.0.15", dport=80),
        Packet(src="10.42.1.30", dst="127.0.0.1", dport=30080, origin="pod"),  # stays in the pod
        Packet(src="203.0.113.9", dst="10.43.0.15", dport=80, origin="host"),  # not a node address
    ]
    traces = list(kernel_traces(str(web_dump), ruleset, ctx, packets))
    assert [t.packet for t in traces] == packets
    ext, lo, bad = (t.outcomes[0] for t in traces)
    # off-cluster source to a ClusterIP: `! -s 10.42.0.0/16 -j KUBE-MARK-MASQ` masquerades it
    assert ext.verdict == "forward" and ext.dnat and ext.masquerade
    # the model says the same about the loopback packet (accept, never reaches the node)
    (model_lo,) = Interpreter(ruleset, ctx).trace(packets[1]).outcomes
    assert (lo.verdict, model_lo.verdict, lo.dnat) == ("accept", "accept", False)
    assert bad.verdict == "inconclusive" and "not a node address" in bad.reason


def test_a_rule_the_kernel_refuses_is_reported_at_its_dump_line(tmp_path: Path) -> None:
    # The parser keeps unknown match modules (as opaque matches), iptables-restore refuses
    # them: the error names the dump and the rule's own line (3), not the rendered text's.
    dump = tmp_path / "bad.rules"
    dump.write_text(
        "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -m nosuchmatch --foo 1 -j ACCEPT\nCOMMIT\n"
    )
    ctx = NodeContext(family=4, addresses=("192.168.1.10",))
    with pytest.raises(DumpError) as e:
        list(
            kernel_traces(
                str(dump),
                parse_file(str(dump)),
                ctx,
                [Packet(src="203.0.113.9", dst="192.168.1.10", dport=80)],
            )
        )
    assert (e.value.file, e.value.line) == (str(dump), 3)
    assert "nosuchmatch" in str(e.value)
    # and the command line turns it into exit code 2 with that message
    res = CliRunner().invoke(
        main,
        [
            "trace",
            str(dump),
            "--node-ip",
            "192.168.1.10",
            "--src",
            "203.0.113.9",
            "--dst",
            "192.168.1.10:80",
            "--kernel",
        ],
    )
    assert res.exit_code == 2
    assert f"{dump}:3:" in res.output


def test_kernel_traces_with_a_bare_node_context(web_dump: Path) -> None:
    # What `trace --kernel --node-ip ... --pod-cidr ...` builds: no cluster, only addresses.
    # An off-cluster client reaches either endpoint, masqueraded (`! -s 10.42.0.0/16`).
    ruleset = parse(web_dump.read_text(), source=str(web_dump))
    ctx = NodeContext(
        family=4,
        addresses=("192.168.1.10",),
        pod_cidrs=("10.42.0.0/16",),
        local_pod_cidrs=("10.42.0.0/16",),
    )
    (t,) = kernel_traces(
        str(web_dump), ruleset, ctx, [Packet(src="203.0.113.9", dst="10.43.0.15", dport=80)]
    )
    o = t.outcomes[0]
    assert (o.verdict, o.masquerade) == ("forward", True)
    assert o.destination in ("10.42.1.7:8080", "10.42.2.3:8080")
