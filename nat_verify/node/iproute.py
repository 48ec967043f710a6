"""``ip -j route`` (and ``ip -j -6 route``) -> the node's routes.

Each entry is ``{"dst": "default"|"CIDR"|"ADDRESS", "dev": NAME, "gateway": ..., "prefsrc": ...,
"type": ...}``; ``type`` is absent for ordinary (unicast) routes. ``blackhole``, ``unreachable``
and ``prohibit`` routes have no device: a packet to them is not forwarded, which the model does
not follow, so they are kept out (a longer unicast route inside such a block, as Calico writes
per pod, still wins). The source MASQUERADE picks for a route is its ``prefsrc`` when given,
otherwise the first address of the device of the same family (the kernel's
``inet_select_addr``), otherwise the node's first address of that family.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Sequence
from typing import Any

from nat_verify.model.cluster import IPAddress
from nat_verify.netfilter.context import Interface, Route
from nat_verify.node.errors import FactError
from nat_verify.node.ipaddr import _line_of

_SKIPPED_TYPES = ("blackhole", "unreachable", "prohibit", "throw", "local", "broadcast", "multicast", "anycast", "nat")


def parse_ip_route(
    text: str, source: str = "<ip -j route>", interfaces: Sequence[Interface] = ()
) -> tuple[Route, ...]:
    """The unicast routes of the output (``interfaces`` resolve each route's source address)."""
    if not text.strip():
        raise FactError(source, 0, "empty: expected the JSON output of `ip -j route`")
    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError as e:
        raise FactError(source, e.lineno, f"not JSON: {e.msg} (give `ip -j route`)") from None
    if not isinstance(doc, list):
        raise FactError(source, 1, "expected a JSON array of routes, as `ip -j route` prints")
    out: list[Route] = []
    for r in doc:
        if not isinstance(r, dict) or not isinstance(r.get("dst"), str):
            raise FactError(source, _line_of(text, "{"), 'expected route objects with "dst"')
        if r.get("type", "unicast") in _SKIPPED_TYPES or not isinstance(r.get("dev"), str):
            continue
        where = _line_of(text, f'"{r["dst"]}"')
        try:
            dst = _dst(r["dst"], r)
        except ValueError:
            raise FactError(source, where, f"bad route destination {r['dst']!r}") from None
        src = _source(r, dst.version, interfaces, source, where)
        if src is None:
            continue  # no address of the family anywhere: nothing could be sent by it
        out.append(Route(dst, r["dev"], src))
    return tuple(out)


def _dst(text: str, r: dict[str, Any]) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    if text == "default":
        six = ":" in str(r.get("gateway", "")) or ":" in str(r.get("prefsrc", ""))
        return ipaddress.ip_network("::/0" if six else "0.0.0.0/0")
    return ipaddress.ip_network(text, strict=False)


def _source(
    r: dict[str, Any], family: int, interfaces: Sequence[Interface], source: str, where: int
) -> IPAddress | None:
    if "prefsrc" in r:
        try:
            return ipaddress.ip_address(str(r["prefsrc"]))
        except ValueError:
            raise FactError(source, where, f"bad prefsrc {r['prefsrc']!r}") from None
    for i in interfaces:
        if i.name == r["dev"]:
            for a in i.addresses:
                if a.version == family and not a.ip.is_link_local:
                    return a.ip
    for i in interfaces:
        for a in i.addresses:
            if a.version == family and not a.ip.is_loopback and not a.ip.is_link_local:
                return a.ip
    return None
