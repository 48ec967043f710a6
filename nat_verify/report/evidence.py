"""What a reader needs beside a finding, taken from the ruleset it was found in.

The checker reports a finding as the rules that fired (``Step`` s: chain, rule number, dump
line). A person also wants the text of each of those rules and the outcome the packet took
(where it was DNATed to, what its source became), and for each Service the share each endpoint
gets. These come from the ruleset itself: the rule text from the dump's own lines, the outcome
and the shares from running the counterexample (or one packet per Service) through the
interpreter again. Nothing here decides anything: it only annotates.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from nat_verify.model.cluster import Cluster
from nat_verify.model.outcome import Finding, Trace
from nat_verify.model.packet import Packet
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.ruleset import Ruleset


def with_evidence(
    findings: Iterable[Finding], interpreter: Interpreter, lines: Sequence[str]
) -> tuple[Finding, ...]:
    """``findings`` with the text of each step's rule and the outcome their packet took.

    ``lines`` is the ruleset's text split in lines (the steps' line numbers index it). A finding
    whose path the packet no longer takes (it needed recent-list state, for example) keeps no
    outcome; it is never given another one.
    """
    out = []
    for f in findings:
        rules = tuple(
            lines[s.line - 1].rstrip("\r\n") if 0 < s.line <= len(lines) else "" for s in f.path
        )
        outcome = f.outcome
        if outcome is None and f.packet is not None and f.path:
            trace = interpreter.trace(f.packet)
            outcome = next((o for o in trace.outcomes if o.path == f.path), None)
        out.append(attrs.evolve(f, rules=rules, outcome=outcome))
    return tuple(out)


def compiled_ruleset(cluster: Cluster, node: str, family: int) -> tuple[Ruleset, list[str]]:
    """The ruleset nat-verify compiles for ``node`` (as ``verify`` checks it) and its lines."""
    from nat_verify.kubeproxy import compile_node
    from nat_verify.netfilter.parse import parse

    text = compile_node(cluster, node, family)
    source = f"<compiled {cluster.name or 'cluster'} {node} IPv{family}>"
    return parse(text, source=source, family=family), text.split("\n")


def _family(f: Finding) -> int:
    return f.packet.dst.version if f.packet is not None else 4


def verify_evidence(cluster: Cluster, findings: Sequence[Finding]) -> tuple[tuple[Finding, ...], list[Share]]:
    """For ``verify``: the findings with ``with_evidence`` and every node's ``service_shares``,
    from the rules compiled per node and family (as ``verify`` checks them)."""
    from nat_verify.check.nodectx import node_context
    from nat_verify.check.runner import families

    out: list[Finding] = [f for f in findings if f.node not in {n.name for n in cluster.nodes}]
    done = set(out)  # the findings already in ``out`` (as given, or annotated)
    shares: list[Share] = []
    for n in cluster.nodes:
        for family in families(cluster, n.name):
            ruleset, lines = compiled_ruleset(cluster, n.name, family)
            interp = Interpreter(ruleset, node_context(cluster, n.name, family))
            mine = [f for f in findings if f.node == n.name and _family(f) == family]
            out.extend(with_evidence(mine, interp, lines))
            done.update(mine)
            shares.extend(service_shares(cluster, n.name, interp))
    # a finding of a family the node has no address of still belongs in the report
    out.extend(f for f in findings if f not in done)
    return tuple(out), shares


@attrs.frozen
class Share:
    """Where a packet to one Service address goes on one node: each endpoint's probability."""

    service: str
    node: str
    trace: Trace
    probes: int = 0  # first connections the kernel oracle made with the same packet
    observed: tuple[tuple[str, int], ...] = ()  # (destination, how many of them went there)

    def to_json(self) -> dict[str, Any]:
        doc = self.trace.to_json()
        outcomes: list[dict[str, Any]] = doc["outcomes"]  # type: ignore[assignment]
        endpoints: list[dict[str, Any]] = [
            {k: o[k] for k in ("destination", "probability", "verdict", "uniform") if k in o}
            for o in outcomes
        ]
        out: dict[str, Any] = {"service": self.service, "node": self.node, "packet": doc["packet"]}
        if self.probes:
            seen = dict(self.observed)
            for e in endpoints:
                e["observed"] = seen.pop(e["destination"], 0)
            # where the kernel sent connections the model never does: shown, with p = 0
            endpoints += [
                {"destination": d, "probability": "0", "verdict": "forward", "observed": n}
                for d, n in sorted(seen.items())
            ]
            out["probes"] = self.probes
        out["endpoints"] = endpoints
        return out


def service_shares(cluster: Cluster, node: str, interpreter: Interpreter) -> list[Share]:
    """For each Service port with a ClusterIP, the shares of a pod's packet to it on ``node``.

    A pod's packet to the ClusterIP is the one every Service has and every policy but
    internalTrafficPolicy leaves alone, so it shows the probability cascade as written.
    """
    from nat_verify.intent import destinations, interesting_sources

    out = []
    for dest in destinations(cluster, node, interpreter.ctx.family):
        if dest.address_class != "cluster-ip":
            continue
        sources = [ip for ip, origin in interesting_sources(cluster, node, dest) if origin == "pod"]
        if not sources:
            continue
        packet = Packet(
            src=ipaddress.ip_address(sources[0]), dst=ipaddress.ip_address(dest.ip),
            dport=dest.port, sport=40000, proto=dest.proto, origin="pod",
        )  # fmt: skip
        out.append(Share(dest.service, node, interpreter.trace(packet)))
    return out


def kernel_shares(ruleset: Ruleset, ctx: Any, shares: Sequence[Share], probes: int, *, source: str) -> list[Share]:
    """``shares`` with what the kernel does: each packet sent as ``probes`` first connections
    through the same rules in a throwaway network namespace (``nat_verify.oracle``), counted by
    where they were DNATed to. Needs root; the oracle's own errors say why it cannot run."""
    from collections import Counter

    from nat_verify.model.packet import format_endpoint
    from nat_verify.oracle.bridge import load_ruleset, probe_packet, topology_for
    from nat_verify.oracle.oracle import KernelOracle

    packets = [s.trace.packet for s in shares]
    spec, _ = topology_for(ruleset, ctx, packets=packets)
    out = []
    with KernelOracle(spec) as k:
        load_ruleset(k, ruleset, source=source)
        for share in shares:
            counts: Counter[str] = Counter()
            for _ in range(probes):
                r = probe_packet(k, share.trace.packet, fresh_port=True)
                if r.dnat is not None:
                    counts[format_endpoint(ipaddress.ip_address(r.dnat[0]), r.dnat[1])] += 1
                else:
                    counts[r.verdict] += 1
            out.append(attrs.evolve(share, probes=probes, observed=tuple(sorted(counts.items()))))
    return out
