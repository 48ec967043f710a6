"""NV014: the shape of a ruleset, independent of any packet.

* no orphaned KUBE chain: a ``KUBE-*`` user chain no rule jumps to is dead weight left by a
  failed sync, or a sign that its entry jump was lost (kube-proxy's own test helper
  ``checkIPTablesRuleJumps`` asserts the same);
* no unreachable rule: nothing may follow a rule that matches every packet and ends the chain;
* the masquerade mark is set with a mask (a mark written without one clobbers the bits other
  agents own: kubernetes issue 19983, calico felix 964, cilium 8516);
* MASQUERADE uses ``--random-fully`` (issue 76699: SNAT port collisions drop SYNs) — a warning;
* with localhost NodePorts (``route_localnet=1``) the martian DROP of CVE-2020-8558 must exist.

Jumps to missing chains cannot occur in a dump the kernel accepted; the parser refuses them as
bad input.
"""

from __future__ import annotations

import attrs

from nat_verify.model.packet import Packet
from nat_verify.netfilter.context import NodeContext
from nat_verify.netfilter.interpreter import Interpreter
from nat_verify.netfilter.registry import TERMINAL_TARGETS
from nat_verify.netfilter.ruleset import Rule, Ruleset

TERMINAL = TERMINAL_TARGETS
# per-service chains: one that nothing jumps to is left over (kube-proxy's static chains such as
# KUBE-MARK-MASQ exist whether or not a Service needs them)
SERVICE_CHAINS = ("KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-", "KUBE-SEP-", "KUBE-XLB-")


@attrs.frozen
class StructureIssue:
    message: str
    table: str
    chain: str
    line: int
    severity: str = "error"


def _unconditional(rule: Rule) -> bool:
    return not rule.core and all(m.module in ("comment", "nfacct") for m in rule.matches)


def structure_issues(ruleset: Ruleset, ctx: NodeContext) -> list[StructureIssue]:
    out: list[StructureIssue] = []
    for t in ruleset.tables:
        targets = {r.target.name for c in t.chains for r in c.rules}
        for c in t.chains:
            if c.name.startswith(SERVICE_CHAINS) and c.name not in targets:
                out.append(StructureIssue(f"{t.name} chain {c.name} is never jumped to (orphaned)", t.name, c.name, c.line))
            for i, r in enumerate(c.rules):
                if i + 1 < len(c.rules) and _unconditional(r) and (r.target.name in TERMINAL or r.target.goto):
                    nxt = c.rules[i + 1]
                    out.append(
                        StructureIssue(
                            f"{t.name} {c.name} rule {i + 2} (line {nxt.line}) is unreachable: rule {i + 1} "
                            f"(line {r.line}) ends the chain for every packet",
                            t.name, c.name, nxt.line,
                        )
                    )  # fmt: skip
                if r.target.name == "MARK":
                    for o in r.target.options:
                        unmasked = o.name == "--set-mark" and "/" not in o.value
                        full = o.name in ("--set-xmark", "--set-mark") and o.value.endswith("/0xffffffff")
                        if unmasked or full:
                            out.append(
                                StructureIssue(
                                    f"{t.name} {c.name} line {r.line}: MARK {o.name} {o.value} writes the whole "
                                    "32-bit mark and clobbers bits other agents own; set one bit with a mask "
                                    "(--or-mark / --set-xmark BIT/BIT)",
                                    t.name, c.name, r.line,
                                )
                            )  # fmt: skip
                if r.target.name == "MASQUERADE" and r.target.get("--random-fully") is None and c.name.startswith("KUBE-"):
                    out.append(
                        StructureIssue(
                            f"{t.name} {c.name} line {r.line}: MASQUERADE without --random-fully "
                            "(SNAT port collisions drop connections under load: kubernetes issue 76699)",
                            t.name, c.name, r.line, "warning",
                        )
                    )  # fmt: skip
    if ctx.family == 4 and ctx.route_localnet and ctx.addresses:
        out.extend(_martian_check(ruleset, ctx))
    return out


def _martian_check(ruleset: Ruleset, ctx: NodeContext) -> list[StructureIssue]:
    """CVE-2020-8558: with route_localnet=1 a neighbour can reach 127.0.0.1-bound services
    unless a DROP for loopback destinations from non-loopback sources exists."""
    it = Interpreter(ruleset, ctx)
    probe = Packet(src="198.51.100.77", dst="127.0.0.1", dport=10248, proto="tcp", origin="external")
    tr = it.trace(probe)
    if any(o.verdict == "accept" and not o.dnat for o in tr.outcomes):
        return [
            StructureIssue(
                "a packet from a neighbour to 127.0.0.1:10248 is accepted: route_localnet=1 (localhost "
                "NodePorts) without the martian DROP of CVE-2020-8558 (kube-proxy's KUBE-FIREWALL rule "
                "'-d 127.0.0.0/8 ! -s 127.0.0.0/8 ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP')",
                "filter", "INPUT", 0,
            )
        ]  # fmt: skip
    return []
