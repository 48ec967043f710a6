"""The whole kube-proxy conformance corpus replayed as real packets through the real kernel.

For each case: its dump (plus the base-chain jumps the Go fake kept outside the literal) is
loaded into a sandboxed node, and each flow is sent as a probe. The expected output comes from
kube-proxy's own tests (``tests/conformance/data/kube-proxy``), not from nat-verify.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from typing import Any

import pytest

from nat_verify.oracle.oracle import KernelOracle, KernelResult, TopologySpec
from tests.conformance.corpus import cases, dump_with_implicit_rules, expected

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("kernel_ok")]

# An unquoted comment runs until the next option ("-x", "--xyz") or "!"; comment words never
# start with "-".
_UNQUOTED_COMMENT = re.compile(r'--comment (?!")(.+?)(?= -{1,2}[A-Za-z]| !|$)')


def quote_comments(text: str) -> str:
    """Quote multi-word comments the Go fake renders bare; iptables-restore needs quotes."""

    def fix(m: re.Match[str]) -> str:
        body = m.group(1)
        return f'--comment "{body}"' if " " in body else m.group(0)

    return "\n".join(_UNQUOTED_COMMENT.sub(fix, line) for line in text.split("\n"))


def restore_text(case: dict[str, Any]) -> str:
    return quote_comments(dump_with_implicit_rules(case))


_DNAT = re.compile(r"--to-destination (\d+\.\d+\.\d+\.\d+)")


def origin_of(case: dict[str, Any], src: str) -> str:
    """The README's rule: node address or loopback -> host; pod CIDR -> pod; else external."""
    a = ipaddress.ip_address(src)
    if a.is_loopback or src in case["node_ips"]:
        return "host"
    if a in ipaddress.ip_network(case["pod_cidr"]):
        return "pod"
    return "external"


def topology(case: dict[str, Any]) -> TopologySpec:
    flows = case["flows"]
    node_ips = [a for a in case["node_ips"] if ipaddress.ip_address(a).version == 4]
    pods = sorted({f["source_ip"] for f in flows if origin_of(case, f["source_ip"]) == "pod"})
    endpoints = set(_DNAT.findall(case["dump"]))
    dests = {f["dest_ip"] for f in flows}
    # A source that is also some flow's destination (e.g. an LB IP probing itself) cannot be
    # owned by the ext namespace: the oracle then spoofes it with a raw packet.
    clients = sorted(
        {f["source_ip"] for f in flows if origin_of(case, f["source_ip"]) == "external"} - dests
    )
    return TopologySpec(
        node_ips=tuple(node_ips),
        pod_cidr=case["pod_cidr"],
        pods=tuple(pods),
        remote=tuple(sorted(endpoints - set(pods))),
        external_clients=tuple(clients) or ("203.0.113.250",),
    )


def _case_id(c: dict[str, Any]) -> str:
    return str(c["_file"])


def check_flow(k: KernelOracle, case: dict[str, Any], flow: dict[str, Any]) -> str | None:
    """None if the kernel agrees with the flow's expectation, else what differed."""
    exp = expected(flow)
    src, dst, port, proto = flow["source_ip"], flow["dest_ip"], flow["dest_port"], flow["protocol"]
    origin = origin_of(case, src)
    if origin == "pod" and ipaddress.ip_address(dst).is_loopback:
        # Vacuous: a pod's packet to 127.0.0.1 stays on the pod's own loopback and never
        # reaches the node; kube-proxy's tracer says "no match", the kernel says "never seen".
        r = k.probe(src, dst, port, proto, origin)
        return None if r.verdict == "lost" else f"pod->localhost reached the node: {r}"
    n = 60 if len(exp.endpoints) > 1 else 2
    seen: Counter[str] = Counter()
    for _ in range(n):
        # Fresh affinity state each probe: a ClientIP-affinity service may send a client's
        # first connection to any endpoint (the corpus lists them all), later ones stick.
        k.reset()
        r = k.probe(src, dst, port, proto, origin)
        problem = _compare(exp, r, flow)
        if problem:
            return f"{origin} probe {src} -> {dst}:{port}/{proto}: {problem}; kernel: {r}"
        if r.dnat:
            seen[f"{r.dnat[0]}:{r.dnat[1]}"] += 1
    if exp.kind == "dnat" and set(seen) != exp.endpoints:
        return f"over {n} probes the kernel reached {dict(seen)}, expected all of {sorted(exp.endpoints)}"
    return None


def _compare(exp: Any, r: KernelResult, flow: dict[str, Any]) -> str | None:
    masq = r.snat_ip is not None
    if exp.kind == "REJECT":
        ok = r.verdict == "reject" and r.icmp == (3, 3)  # kube-proxy's REJECT default
    elif exp.kind == "DROP":
        ok = r.verdict == "drop"
    elif exp.kind == "ACCEPT":
        ok = r.verdict == "accept" and r.dnat is None
    elif exp.kind == "none":
        ok = r.verdict in ("forward", "accept") and r.dnat is None and not masq
    else:
        ok = (
            r.verdict == "forward"
            and r.dnat is not None
            and f"{r.dnat[0]}:{r.dnat[1]}" in exp.endpoints
            and masq == exp.masq
        )
    return None if ok else f"expected {flow['output'] or 'no match'!r} masq={exp.masq}"


@pytest.mark.parametrize("case", cases(), ids=_case_id)
@pytest.mark.parametrize("backend", ["nft", "legacy"])
def test_corpus_case_agrees_with_kernel(case: dict[str, Any], backend: str) -> None:
    with KernelOracle(topology(case), backend=backend) as k:
        k.load(restore_text(case), source=f"{case['_file']}.json dump")
        problems = [p for f in case["flows"] if (p := check_flow(k, case, f))]
    assert not problems, "\n".join(problems)


def test_corpus_is_complete() -> None:
    # The README promises 29 cases / 78 flows; a lost file must not shrink the test silently.
    cs = cases()
    assert len(cs) == 29
    assert sum(len(c["flows"]) for c in cs) == 78


def test_quote_comments() -> None:
    line = "-A FORWARD -m conntrack --ctstate NEW -m comment --comment kubernetes externally-visible service portals -j KUBE-EXTERNAL-SERVICES"
    assert quote_comments(line) == (
        '-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible'
        ' service portals" -j KUBE-EXTERNAL-SERVICES'
    )
    kept = "-A X -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80"
    assert quote_comments(kept) == kept
    quoted = '-A X -m comment --comment "a b" -j Y'
    assert quote_comments(quoted) == quoted
