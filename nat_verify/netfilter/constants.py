"""The address and port constants a rule compares packets with.

They cut the packet space into classes that no rule can tell apart: chain summaries
(``summary``), the exhaustive checker (``check.atoms``) and the equivalence of two rulesets
(``check.equivalence``) all enumerate one packet per class.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable, Iterator

from nat_verify.model.cluster import IPNetwork
from nat_verify.netfilter.ruleset import Rule

SRC_PORT_OPTIONS = frozenset({"--sport", "--source-port", "--sports", "--source-ports", "--ports", "--ctorigsrcport"})
DST_PORT_OPTIONS = frozenset({"--dport", "--destination-port", "--dports", "--destination-ports", "--ports", "--ctorigdstport"})
ADDR_OPTIONS = {"src": frozenset({"-s", "--src-range", "--ctorigsrc"}), "dst": frozenset({"-d", "--dst-range", "--ctorigdst"})}


@functools.lru_cache(maxsize=1 << 18)
def parse_network(text: str) -> IPNetwork:
    """``ipaddress.ip_network(text, strict=False)``, remembered: dumps repeat their addresses."""
    return ipaddress.ip_network(text, strict=False)


def networks(text: str) -> list[IPNetwork]:
    """The CIDRs of a comma-separated address option (unparsable parts are skipped)."""
    out = []
    for part in text.split(","):
        try:
            out.append(parse_network(part))
        except ValueError:
            continue
    return out


def _range(text: str) -> Iterator[IPNetwork]:
    lo, _, hi = text.partition("-")
    try:
        yield from ipaddress.summarize_address_range(ipaddress.ip_address(lo), ipaddress.ip_address(hi or lo))
    except (ValueError, TypeError):
        return


def address_constants(rule: Rule, side: str = "any") -> Iterator[IPNetwork]:
    """CIDRs the rule compares the source (``side="src"``), destination (``"dst"``) or either with."""
    names = ADDR_OPTIONS["src"] | ADDR_OPTIONS["dst"] if side == "any" else ADDR_OPTIONS[side]
    for o in rule.core:
        if o.name in names:
            yield from networks(o.value)
    for m in rule.matches:
        for o in m.options:
            if o.name not in names:
                continue
            if o.name.endswith("-range"):
                yield from _range(o.value)
            else:
                yield from networks(o.value)


def port_boundaries(rule: Rule, options: Iterable[str]) -> list[int]:
    """For every port (range) the options name, its first port and the one after its last."""
    names = frozenset(options)
    out: list[int] = []
    for m in rule.matches:
        for o in m.options:
            if o.name not in names:
                continue
            for part in o.value.split(","):
                lo, sep, hi = part.partition(":")
                try:
                    a = int(lo) if lo else 0
                    b = int(hi) if (sep and hi) else (65535 if sep else a)
                except ValueError:
                    continue
                out += [a, b + 1]
    return out
