"""Which kube-proxy wrote a dump: its layout era, read off the rules themselves.

Every clue is a rule (or chain) that only some releases write, and bounds the era from below or
above: ``KUBE-XLB-*`` chains exist only up to 1.23, ``KUBE-EXT-*`` from 1.24, the probability
cascade printed from five decimals only in 1.16, ``KUBE-PROXY-FIREWALL`` from 1.25, and so on
(the table is ``CLUES``). The clues found give a range of eras; the newest era in the range is
assumed (a node tends to run a recent release) and the report names the range and every clue
with its dump line, so a reader can tell how firm the answer is. No clue: no era (the caller
decides, and says so). Clues that contradict each other are reported; the era that satisfies
the most of them is taken.

The input is the dump's text, not a parsed ruleset, so excerpts (``grep`` output, ``iptables
-S``, a pasted comment with ``> `` quotes or ``[pkts:bytes]`` counters, a cut last line) can be
read too: each line is only matched against the clue patterns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Literal

import attrs

from nat_verify.kubeproxy.eras import (
    ERA_NAMES,
    ERAS,
    LEGACY,
    NEWEST,
    Era,
    before_mark_fix,
    era_for_version,
)
from nat_verify.netfilter.ruleset import Ruleset

# One clue: (name, test on a normalised line, lowest era, highest era, what it means).
Test = Callable[[str], bool]


def _has(*words: str) -> Test:
    return lambda line: all(w in line for w in words)


def _re(pattern: str) -> Test:
    rx = re.compile(pattern)
    return lambda line: rx.search(line) is not None


@attrs.frozen
class Clue:
    name: str
    test: Test
    low: str | None  # the oldest era that writes it (None: no lower bound)
    high: str | None  # the newest era that writes it (None: no upper bound)
    meaning: str


def _v(version: str) -> str:
    return era_for_version(version).name


CLUES: tuple[Clue, ...] = (
    Clue("xlb-chain", _re(r"KUBE-XLB-[A-Z2-7]{16}"), None, _v("1.23"), "KUBE-XLB chain (<= 1.23)"),
    Clue("xlb-comment", _has("Redirect pods trying to reach external loadbalancer VIP"), None, _v("1.23"),
         "KUBE-XLB pod short-circuit rule (<= 1.23)"),
    Clue("xlb-balancing", _re(r'"Balancing rule \d+ for '), None, _v("1.23"), "KUBE-XLB local endpoint rule (<= 1.23)"),
    Clue("ext-chain", _re(r"KUBE-(EXT|SVL)-[A-Z2-7]{16}"), _v("1.24"), None, "KUBE-EXT / KUBE-SVL chain (>= 1.24)"),
    Clue("postrouting-one-rule", _re(r"-A KUBE-POSTROUTING .*-m mark --mark \S+ -j MASQUERADE"), None, _v("1.18"),
         "KUBE-POSTROUTING is one '-m mark --mark ... -j MASQUERADE' rule (<= 1.18, before 1.16.13/1.17.9/1.18.6)"),
    Clue("masq-in-services", _re(r"-A KUBE-SERVICES .*cluster IP.*-j KUBE-MARK-MASQ"), None, _v("1.20"),
         "masquerade rule in nat KUBE-SERVICES (<= 1.20)"),
    Clue("masq-in-svc", _re(r"-A KUBE-SVC-\S+ .*cluster IP.*-j KUBE-MARK-MASQ"), _v("1.21"), None,
         "ClusterIP masquerade rule in a KUBE-SVC chain (>= 1.21)"),
    Clue("nodeport-masq", _re(r"-A KUBE-NODEPORTS (?!.*-s (127\.0\.0\.0/8|::1/128) ).*-j KUBE-MARK-MASQ"), None, _v("1.20"),
         "NodePort masquerade (not only loopback sources) in KUBE-NODEPORTS (<= 1.20)"),
    Clue("nodeport-masq-in-svc", _re(r"-A KUBE-SVC-\S+ (?!.*cluster IP)(?!.*external IP).*--dport \d+ .*-j KUBE-MARK-MASQ"),
         _v("1.21"), _v("1.23"), "NodePort masquerade rule in a KUBE-SVC chain (1.21-1.23)"),
    Clue("externalip-physdev", _has("--physdev-is-in", "-j KUBE-SVC-"), None, _v("1.20"),
         "externalIP rule with '-m physdev ! --physdev-is-in' (<= 1.20)"),
    Clue("health-check-jump", _has('"kubernetes health check service ports"'), _v("1.21"), None,
         "INPUT jumps to KUBE-NODEPORTS 'kubernetes health check service ports' (>= 1.21)"),
    Clue("input-services-jump", _re(r"-A INPUT .*kubernetes service portals.*-j KUBE-SERVICES"), None, _v("1.19"),
         "filter INPUT jumps to KUBE-SERVICES (<= 1.19)"),
    Clue("forward-external-jump", _re(r"-A FORWARD .*-j KUBE-EXTERNAL-SERVICES"), _v("1.20"), None,
         "FORWARD jumps to KUBE-EXTERNAL-SERVICES (>= 1.20)"),
    Clue("forward-cidr-pair", _re(r"-A KUBE-FORWARD (.* )?-[sd] [\d:][\d.:/a-f]*( |$)"),
         None, _v("1.17"), "KUBE-FORWARD rule on the cluster CIDR: the 'pod source' / 'pod destination' rules (<= 1.17)"),
    Clue("forward-pair", _re(r"-A KUBE-FORWARD (?!.* -[sd] [\d:])-m comment --comment \"kubernetes forwarding conntrack pod (source|destination) rule"),
         _v("1.18"), _v("1.22"), "KUBE-FORWARD 'pod source' / 'pod destination' conntrack rules without a CIDR (1.18-1.22)"),
    Clue("forward-single", _has('"kubernetes forwarding conntrack rule"'), _v("1.23"), None,
         "KUBE-FORWARD 'kubernetes forwarding conntrack rule' (>= 1.23)"),
    Clue("arrow-comment", _re(r'-A KUBE-(SVC|SVL)-\S+ .*--comment "[^"]* -> [^"]*"'), _v("1.24"), None,
         "KUBE-SVC -> KUBE-SEP comment 'spn -> ip:port' (>= 1.24)"),
    Clue("plain-sep-comment",
         _re(r'-A KUBE-SVC-\S+ (.* )?--comment (?:"[\w.-]+/[\w.-]+(?::[\w.-]*)?"|[\w.-]+/[\w.-]+(?::[\w.-]*)?) .*-j KUBE-SEP-'), None,
         _v("1.23"), "KUBE-SVC -> KUBE-SEP comment without '-> ip:port' (<= 1.23)"),
    Clue("mark-drop-by-proxy", _re(r"-A KUBE-(SVL|FW|XLB)-\S+ .*-j KUBE-MARK-DROP"), None, _v("1.24"),
         "kube-proxy jumps to KUBE-MARK-DROP (<= 1.24)"),
    Clue("proxy-firewall", _has("KUBE-PROXY-FIREWALL"), _v("1.25"), None, "KUBE-PROXY-FIREWALL (>= 1.25)"),
    Clue("localhost-option", _has("! -d 127.0.0.0/8", "-j KUBE-NODEPORTS"), _v("1.26"), None,
         "localhostNodePorts disabled: '! -d 127.0.0.0/8 ... -j KUBE-NODEPORTS' (>= 1.26)"),
    Clue("nfacct-invalid", _has("ct_state_invalid_dropped_pkts"), _v("1.30"), None,
         "nfacct counter ct_state_invalid_dropped_pkts (>= 1.30)"),
    Clue("nfacct-localhost", _has("localhost_nps_accepted_pkts"), _v("1.31"), None,
         "nfacct counter localhost_nps_accepted_pkts (>= 1.31)"),
    Clue("kubelet-mark-drop", _re(r"-A KUBE-MARK-DROP -j MARK --set-xmark 0x(0000)?8000/0x(0000)?8000"), None,
         _v("1.27"), "kubelet's KUBE-MARK-DROP rule (<= 1.27)"),
    Clue("kubelet-firewall", _has("kubernetes firewall for dropping marked packets"), None, _v("1.27"),
         "kubelet's mark-drop KUBE-FIREWALL rule (<= 1.27)"),
    Clue("unnamed-port-colon", _re(r'--comment "[\w.-]+/[\w.-]+:( [^"]*)?"'), None, _v("1.16"),
         "'ns/name:' comment for an unnamed port: older than 1.16, the oldest layout is assumed"),
)  # fmt: skip

_PROBABILITY = re.compile(r"--probability (0\.\d+)")
_PREFIX = re.compile(r"^(?:>\s?)+|^\s*\[\d+:\d+\]\s*")


@attrs.frozen
class Evidence:
    line: int  # 1-based line of the dump (0 for a clue about the whole dump)
    clue: str
    meaning: str
    low: str | None
    high: str | None
    text: str  # the dump line, as written


@attrs.frozen
class EraInference:
    """The era a dump's rules show, or None, and why."""

    era: Era | None
    low: Era | None  # the range the clues allow (oldest, newest)
    high: Era | None
    evidence: tuple[Evidence, ...]
    conflicts: tuple[str, ...] = ()
    restore_input: bool = False  # spelled as kube-proxy's iptables-restore input, not iptables-save

    def describe(self) -> str:
        if self.era is None:
            return "no rule in the dump tells which kube-proxy wrote it"
        assert self.low is not None and self.high is not None
        span = self.low.releases if self.low == self.high else f"{self.low.name}-{self.high.releases.split('-')[-1]}"
        why = "; ".join(f"line {e.line}: {e.meaning}" if e.line else e.meaning for e in sorted(self.evidence, key=lambda e: e.line))
        extra = f" (conflicting clues: {'; '.join(self.conflicts)})" if self.conflicts else ""
        return f"kube-proxy {self.era.releases} assumed (the rules allow {span}){extra}: {why}"

    def to_json(self) -> dict[str, object]:
        return {
            "era": self.era.name if self.era else None,
            "releases": self.era.releases if self.era else None,
            "range": [self.low.name, self.high.name] if self.low and self.high else None,
            "evidence": [{"line": e.line, "clue": e.clue, "meaning": e.meaning, "text": e.text} for e in self.evidence],
            "conflicts": list(self.conflicts),
        }


def _normal(raw: str) -> str:
    """A line without what people add when they paste: indentation, ``> `` quotes, counters."""
    line = raw.strip().strip("`")
    prev = None
    while prev != line:
        prev = line
        line = _PREFIX.sub("", line).strip()
    return line


def _probability_clue(p: float) -> tuple[str | None, str | None, str] | None:
    """Five or ten decimals? Only a cascade step 1/k with k >= 3 can tell (1/2 reads the same)."""
    quantum = 2.0**-31  # the kernel stores round(p * 2^31)
    for k in range(3, 2000):
        exact = 1.0 / k
        if abs(p - exact) > 1e-5:
            continue
        five = round(exact, 5)
        if abs(five - exact) < 4 * quantum:
            return None  # 1/k has at most five decimals: both spellings agree
        if abs(p - five) <= 2 * quantum:
            return (None, "1.16", f"probability {p} is 1/{k} written with five decimals (1.16)")
        if abs(p - exact) <= 2 * quantum + 1e-10:
            return ("1.17", None, f"probability {p} is 1/{k} written with ten decimals (>= 1.17)")
    return None


def _chain_list_clues(lines: list[tuple[int, str]]) -> Iterable[Evidence]:
    """Absences that only a whole chain list shows: iptables-save declares the chains of a table
    sorted by name, so once ``KUBE-SERVICES`` is declared in filter, every chain sorting before
    it that exists has been declared too."""
    table = ""
    declared: dict[str, set[str]] = {"filter": set()}
    services_line = 0
    for no, line in lines:
        if line.startswith("*"):
            table = line[1:].strip()
            declared.setdefault(table, set())
        elif line.startswith("-P "):  # iptables -S: the policies tell the table
            table = "nat" if line.split()[1] in ("PREROUTING", "POSTROUTING") else "filter"
            declared.setdefault(table, set())
        elif line.startswith((":", "-N ")) and table:
            name = line[1:].split()[0] if line.startswith(":") else line.split()[1]
            declared[table].add(name)
            if table == "filter" and name == "KUBE-SERVICES":
                services_line = no
    chains = declared["filter"]
    forward_jump = next((no for no, line in lines if line.startswith("-A FORWARD ") and line.endswith("-j KUBE-FORWARD")), 0)
    if forward_jump and not any("KUBE-PROXY-FIREWALL" in line for _, line in lines):
        # 1.25+ prepends its KUBE-PROXY-FIREWALL jump right before this one
        yield Evidence(forward_jump, "no-proxy-firewall-jump", "FORWARD jumps to KUBE-FORWARD with no KUBE-PROXY-FIREWALL jump (<= 1.24)",
                       None, _v("1.24"), "")  # fmt: skip
    if not services_line:
        return
    if "KUBE-PROXY-FIREWALL" not in chains and not forward_jump:
        yield Evidence(services_line, "no-proxy-firewall", "filter declares KUBE-SERVICES but no KUBE-PROXY-FIREWALL (<= 1.24)",
                       None, _v("1.24"), "")  # fmt: skip
    if "KUBE-NODEPORTS" not in chains and "KUBE-EXTERNAL-SERVICES" in chains:
        yield Evidence(services_line, "no-filter-nodeports", "filter declares KUBE-SERVICES but no KUBE-NODEPORTS (<= 1.20)",
                       None, _v("1.20"), "")  # fmt: skip


def infer_era(text: str) -> EraInference:
    """The layout era the rules in ``text`` show (see the module docstring)."""
    return infer_era_lines(enumerate(text.splitlines(), 1))


def infer_era_lines(numbered: Iterable[tuple[int, str]]) -> EraInference:
    """``infer_era`` over (dump line number, line text) pairs."""
    lines = [(i, _normal(raw)) for i, raw in numbered]
    found: list[Evidence] = []
    seen: set[str] = set()
    restore_input = False
    for no, line in lines:
        if not line.startswith(("-A ", "-I ", ":", "-N ")):
            continue
        if "0x00004000" in line:
            restore_input = True
        for clue in CLUES:
            if clue.name not in seen and clue.test(line):
                seen.add(clue.name)
                found.append(Evidence(no, clue.name, clue.meaning, clue.low, clue.high, line))
        if "probability-digits" not in seen:
            m = _PROBABILITY.search(line)
            if m is not None:
                pc = _probability_clue(float(m.group(1)))
                if pc is not None:
                    seen.add("probability-digits")
                    found.append(Evidence(no, "probability-digits", pc[2], pc[0], pc[1], line))
    found.extend(e for e in _chain_list_clues(lines) if e.clue not in seen)
    return _decide(tuple(found), restore_input)


def _decide(evidence: tuple[Evidence, ...], restore_input: bool) -> EraInference:
    if not evidence:
        return EraInference(None, None, None, (), (), restore_input)
    n = len(ERAS)
    lo = max((ERA_NAMES.index(e.low) for e in evidence if e.low), default=0)
    hi = min((ERA_NAMES.index(e.high) for e in evidence if e.high), default=n - 1)
    conflicts: tuple[str, ...] = ()
    if lo > hi:
        # keep the era that satisfies the most clues (the newest among equals), and say which disagree
        def score(i: int) -> int:
            return sum(
                (not e.low or ERA_NAMES.index(e.low) <= i) and (not e.high or i <= ERA_NAMES.index(e.high))
                for e in evidence
            )

        best = max(range(n), key=lambda i: (score(i), i))
        conflicts = tuple(
            e.meaning for e in evidence
            if (e.low and ERA_NAMES.index(e.low) > best) or (e.high and best > ERA_NAMES.index(e.high))
        )  # fmt: skip
        lo = hi = best
    era = ERAS[hi]
    if any(e.clue == "postrouting-one-rule" for e in evidence):
        era = before_mark_fix(era)  # a 1.16-1.18 patch release from before kubernetes#92035
    return EraInference(era, ERAS[lo], ERAS[hi], evidence, conflicts, restore_input)


def ruleset_lines(rs: Ruleset) -> list[tuple[int, str]]:
    """The dump's lines that a Ruleset keeps (headers, chain lines, rules) with their numbers."""
    lines: list[tuple[int, str]] = []
    for t in rs.tables:
        lines.append((t.line, f"*{t.name}"))
        for c in t.chains:
            lines.append((c.line, f":{c.name} {c.policy or '-'}"))
            lines.extend((r.line, r.raw) for r in c.rules)
    return sorted(lines, key=lambda x: x[0])


@attrs.frozen
class EraChoice:
    """The era NV015 compares a dump with, and how it was chosen."""

    era: Era
    how: Literal["pinned", "config", "inferred", "default"]
    inference: EraInference | None = None
    version: str = ""  # the release asked for (pinned or config)

    def describe(self) -> str:
        if self.how == "pinned":
            return f"kube-proxy {self.era.releases} layout, as --kube-proxy-version {self.version} asks"
        if self.how == "config":
            return f"kube-proxy {self.era.releases} layout, as the KubeProxyConfiguration asks ({self.version})"
        assert self.inference is not None
        if self.how == "default":
            return f"kube-proxy {self.era.releases} layout assumed: {self.inference.describe()}"
        return self.inference.describe()

    def to_json(self) -> dict[str, object]:
        return {"era": self.era.name, "releases": self.era.releases, "how": self.how, "version": self.version,
                "inference": self.inference.to_json() if self.inference else None}  # fmt: skip


def choose_era(cfg_version: str, legacy_layout: bool, rs: Ruleset, pinned: str = "") -> EraChoice:
    """``--kube-proxy-version`` first, then the cluster's KubeProxyConfiguration, then the dump."""
    if pinned:
        return EraChoice(era_for_version(pinned), "pinned", version=pinned)
    if cfg_version:
        return EraChoice(era_for_version(cfg_version), "config", version=cfg_version)
    if legacy_layout:
        return EraChoice(LEGACY, "config", version="nat-verify.io/legacy-layout")
    inf = infer_era_lines(ruleset_lines(rs))
    if inf.era is None:
        return EraChoice(NEWEST, "default", inf)
    return EraChoice(inf.era, "inferred", inf)
