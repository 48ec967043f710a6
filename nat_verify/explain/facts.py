"""The facts people get wrong about Service traffic, each stated with the packet that shows it.

Every fact is read off the flows (real traces), never assumed: a NodePort that reaches an
endpoint on another node, a DNAT that rewrites the port as well as the address, and, for a
ClusterIP, that the kernel rewrites the packet by rules kube-proxy wrote (the DNAT rule and its
dump line are named). When the flows show none of it, the fact is not stated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nat_verify.model.outcome import probability_text
from nat_verify.report.words import packet_json_text


def _dnat_rule(outcome: Mapping[str, Any]) -> str:
    trace = outcome.get("trace", {})
    for target, text, line in zip(trace.get("targets", []), trace.get("rules", []), trace.get("lines", []), strict=False):
        if target == "DNAT":
            return f"the rule, line {line}: {text}" if text else f"the rule at line {line}"
    return ""


def _p(outcome: Mapping[str, Any]) -> str:
    from fractions import Fraction

    return probability_text(Fraction(str(outcome.get("probability", "1"))))


ORDER = ("nodeport-reaches-other-nodes", "dnat-rewrites-port", "kernel-rewrites", "masquerade-hides-client")
_PREFER = {"external": 0, "pod": 1, "host": 2}


def facts(flows: Sequence[Mapping[str, Any]], node: str) -> list[dict[str, Any]]:
    """Each fact once, shown with a packet from outside where one shows it, in ``ORDER``."""
    found: dict[str, dict[str, Any]] = {}

    def add(kind: str, text: str, flow: Mapping[str, Any], evidence: str = "") -> None:
        if kind not in found:
            found[kind] = {"fact": kind, "text": text, "packet": flow["packet"], "evidence": evidence}

    for f in sorted(flows, key=lambda f: _PREFER.get(str(f["origin"]), 3)):
        pkt = packet_json_text(f["packet"])
        for o in f["outcomes"]:
            ep = o.get("endpoint") or {}
            if f["class"] == "node-port" and o.get("dnat") and ep.get("node") and ep["node"] != node:
                add(
                    "nodeport-reaches-other-nodes",
                    f"A NodePort also reaches endpoints on other nodes: {pkt} is DNATed to "
                    f"{o['destination']} on {ep['node']} (p={_p(o)}), not only to pods on {node}.",
                    f, _dnat_rule(o),
                )  # fmt: skip
            dst = f["packet"]["dst"]
            if o.get("dnat") and dst.rsplit(":", 1)[-1] != o["destination"].rsplit(":", 1)[-1]:
                add(
                    "dnat-rewrites-port",
                    f"DNAT rewrites the port as well as the address: {pkt} leaves as "
                    f"{dst} -> {o['destination']}.",
                    f, _dnat_rule(o),
                )  # fmt: skip
            if f["class"] == "cluster-ip" and o.get("dnat"):
                add(
                    "kernel-rewrites",
                    f"kube-proxy only writes rules; the kernel rewrites the packet: {pkt} is DNATed by "
                    "the rule below when the connection's first packet passes "
                    f"nat {'OUTPUT' if f['origin'] == 'host' else 'PREROUTING'}, and conntrack "
                    "rewrites the replies back. kube-proxy is not on the packet's path.",
                    f, _dnat_rule(o),
                )  # fmt: skip
            if o.get("masquerade") and f["origin"] != "host":
                add(
                    "masquerade-hides-client",
                    f"Masquerade hides the client: {pkt} reaches {o['destination']} from "
                    f"{o['source'].rsplit(':', 1)[0]}, so the endpoint cannot see {f['packet']['src'].rsplit(':', 1)[0]}.",
                    f,
                )  # fmt: skip
    return [found[k] for k in ORDER if k in found]
