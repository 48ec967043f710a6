"""Normalise a ruleset to the spelling ``iptables-save`` prints.

kube-proxy writes restore input in its own spelling; the kernel stores a binary form and
``iptables-save`` prints it back differently (reference kube-proxy.md section 3.10). This
module performs that translation on typed rules so that a compiled ruleset can be compared
with a real node's dump, and so that ``compile --style save`` prints what a node would show:

* addresses get their prefix length (``/32``, ``/128``);
* ``--or-mark M`` -> ``--set-xmark M/M``, ``--xor-mark M`` -> ``--set-xmark M/0x0``,
  ``--and-mark M`` -> ``--set-xmark 0x0/~M``, ``--set-mark V[/M]`` -> ``--set-xmark V/M``;
  mark values in minimal hex;
* statistic probabilities as the kernel stores them (``round(p * 2^31)``) printed ``%.11f``;
* ``recent`` options in save order with the implicit ``--mask`` and ``--rsource``;
* ``REJECT`` with its default ``--reject-with``.
"""

from __future__ import annotations

import ipaddress

from nat_verify.netfilter.ruleset import Chain, Match, Option, Rule, Ruleset, Table, Target

P31 = 1 << 31


def stored_probability(text: str) -> int:
    """The kernel's integer threshold for ``--probability text`` (libxt_statistic: lround(p * 2^31))."""
    p = float(text)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"probability must be within 0..1, received {text!r}")
    # lround rounds half away from zero; p >= 0 so floor(x + 0.5) is the same
    return min(int(p * P31 + 0.5), P31)


def saved_probability(threshold: int) -> str:
    return f"{threshold / P31:.11f}"


def _hex(v: int) -> str:
    return hex(v)


def _mark_pair(text: str) -> tuple[int, int | None]:
    v, sep, m = text.partition("/")
    return int(v, 0), (int(m, 0) if sep else None)


def _norm_addr(text: str) -> str:
    parts = []
    for p in text.split(","):
        net = ipaddress.ip_network(p, strict=False)
        parts.append(str(net))
    return ",".join(parts)


def _norm_target(t: Target, family: int) -> Target:
    opts = list(t.options)
    if t.name == "MARK":
        out: list[Option] = []
        for o in opts:
            if o.name == "--or-mark":
                v = int(o.value, 0)
                out.append(Option("--set-xmark", (f"{_hex(v)}/{_hex(v)}",)))
            elif o.name == "--xor-mark":
                v = int(o.value, 0)
                out.append(Option("--set-xmark", (f"{_hex(v)}/0x0",)))
            elif o.name == "--and-mark":
                v = int(o.value, 0)
                out.append(Option("--set-xmark", (f"0x0/{_hex(~v & 0xFFFFFFFF)}",)))
            elif o.name == "--set-mark" or o.name == "--set-xmark":
                v, m = _mark_pair(o.value)
                out.append(Option("--set-xmark", (f"{_hex(v)}/{_hex(0xFFFFFFFF if m is None else m)}",)))
            else:
                out.append(o)
        return Target(t.name, tuple(out), t.goto)
    if t.name == "REJECT" and t.get("--reject-with") is None:
        kind = "icmp6-port-unreachable" if family == 6 else "icmp-port-unreachable"
        return Target(t.name, (*opts, Option("--reject-with", (kind,))), t.goto)
    return t


def _norm_match(m: Match) -> Match:
    if m.module == "mark":
        out = []
        for o in m.options:
            if o.name == "--mark":
                v, mask = _mark_pair(o.value)
                val = _hex(v) if mask is None else f"{_hex(v)}/{_hex(mask)}"
                out.append(Option("--mark", (val,), o.negated))
            else:
                out.append(o)
        return Match(m.module, tuple(out))
    if m.module == "statistic":
        out = []
        for o in m.options:
            if o.name == "--probability":
                out.append(Option(o.name, (saved_probability(stored_probability(o.value)),), o.negated))
            else:
                out.append(o)
        return Match(m.module, tuple(out))
    if m.module == "recent":
        order = ["--set", "--rcheck", "--update", "--remove", "--seconds", "--reap", "--hitcount", "--rttl"]
        byname = {o.name: o for o in m.options}
        out = [byname[n] for n in order if n in byname]
        out.append(byname.get("--name", Option("--name", ("DEFAULT",))))
        out.append(byname.get("--mask", Option("--mask", ("255.255.255.255",))))
        out.append(byname.get("--rdest") or byname.get("--rsource") or Option("--rsource"))
        known = set(order) | {"--name", "--mask", "--rdest", "--rsource"}
        out.extend(o for o in m.options if o.name not in known)
        return Match(m.module, tuple(out))
    return m


def _norm_rule(r: Rule, family: int) -> Rule:
    core = tuple(
        Option(o.name, (_norm_addr(o.value),), o.negated) if o.name in ("-s", "-d") else o
        for o in r.core
    )
    return Rule(
        r.chain,
        core,
        tuple(_norm_match(m) for m in r.matches),
        _norm_target(r.target, family),
        r.line,
        r.raw,
        r.counters,
    )


def to_save_form(rs: Ruleset) -> Ruleset:
    tables = []
    for t in rs.tables:
        chains = tuple(
            Chain(c.name, c.policy, tuple(_norm_rule(r, rs.family) for r in c.rules), c.line, c.counters)
            for c in t.chains
        )
        tables.append(Table(t.name, chains, t.line))
    return Ruleset(rs.family, tuple(tables), rs.source)
