"""Reading kube-proxy's conformance corpus (tests/conformance/data/kube-proxy, Apache-2.0,
The Kubernetes Authors) into rulesets, node contexts, packets and expectations."""

from __future__ import annotations

import ipaddress
import json
from pathlib import Path
from typing import Any

import attrs

from nat_verify.model.packet import Packet
from nat_verify.netfilter.context import NodeContext

DATA = Path(__file__).parent / "data" / "kube-proxy"


def cases() -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) | {"_file": p.stem} for p in sorted(DATA.glob("*.json"))]


def observations() -> dict[tuple[str, str], dict[str, Any]]:
    obs = json.loads((DATA / "kernel" / "observations.json").read_text())
    return {(o["case"], o["flow"]): o for o in obs}


def flows() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(c, f) for c in cases() for f in c["flows"]]


def dump_with_implicit_rules(case: dict[str, Any]) -> str:
    """The case's dump with the base-chain jumps the Go fake held outside the literal.

    They are appended to their table (before its COMMIT) in the order given, which is the
    kernel's final order (kube-proxy prepends them one by one).
    """
    text: str = case["dump"]
    implicit: dict[str, list[str]] = dict(case.get("implicit_rules") or {})
    # a literal that already holds its base-chain jumps (current__TestTracePacket) is used verbatim
    for table in list(implicit):
        builtin = {"nat": ("PREROUTING", "OUTPUT", "POSTROUTING", "INPUT"), "filter": ("INPUT", "FORWARD", "OUTPUT")}
        if any(f"\n-A {c} " in text for c in builtin.get(table, ())):
            del implicit[table]
    lines = text.split("\n")
    out: list[str] = []
    table = ""
    for line in lines:
        if line.startswith("*"):
            table = line[1:].strip()
            out.append(line)
            # kubelet owns KUBE-FIREWALL; where kube-proxy's literal lacks it, it is an empty chain here
            for rule in implicit.get(table, []):
                target = rule.rsplit("-j ", 1)[-1].split()[0]
                decl = f":{target} - [0:0]"
                if target.startswith("KUBE-") and f":{target} " not in text and decl not in out:
                    out.append(decl)
            continue
        if line.strip() == "COMMIT" and table in implicit:
            out.extend(implicit[table])
        out.append(line)
    # tables the literal lacks entirely
    for table, rules in implicit.items():
        if f"*{table}" not in text:
            out[-1:-1] = [f"*{table}", *rules, "COMMIT"]
    return "\n".join(out)


def node_context(case: dict[str, Any]) -> NodeContext:
    """The node the test's fake proxier stands for.

    LOCAL is what the kernel uses: the node's addresses (the corpus lists them; the current
    tracer and the real kernel agree on it) plus loopback.
    """
    return NodeContext(
        family=4,
        addresses=tuple(case["node_ips"]),
        pod_cidrs=(case["pod_cidr"],),
        local_pod_cidrs=(case["pod_cidr"],),
        route_localnet=bool(case.get("proxier_config", {}).get("localhostNodePorts", True)),
        name=case.get("node_name", "test-node"),
    )


def packet(case: dict[str, Any], flow: dict[str, Any]) -> Packet:
    ctx = node_context(case)
    src = ipaddress.ip_address(flow["source_ip"])
    origin = ctx.origin_of(src)
    return Packet(src=src, dst=flow["dest_ip"], dport=flow["dest_port"], proto=flow["protocol"], origin=origin)  # type: ignore[arg-type]


@attrs.frozen
class Expected:
    kind: str  # "dnat" | "REJECT" | "DROP" | "ACCEPT" | "none"
    endpoints: frozenset[str]
    masq: bool


def expected(flow: dict[str, Any]) -> Expected:
    out: str = flow["output"]
    if out in ("REJECT", "DROP", "ACCEPT"):
        return Expected(out, frozenset(), flow["masq"])
    if out == "":
        return Expected("none", frozenset(), flow["masq"])
    return Expected("dnat", frozenset(x.strip() for x in out.split(",")), flow["masq"])
