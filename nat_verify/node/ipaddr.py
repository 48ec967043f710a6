"""``ip -j addr`` (iproute2's JSON) -> the node's interfaces and their addresses.

The output is a JSON array with one object per link: ``ifname`` and ``addr_info``, a list of
``{"family": "inet"|"inet6", "local": ADDRESS, "prefixlen": N, ...}``. Other fields (flags,
operstate, link-layer addresses, lifetimes) do not change netfilter decisions and are not read.
``ip -j -p addr`` (pretty-printed) is the same JSON. A down interface still owns its addresses
(``addrtype LOCAL`` matches them), so every listed address counts.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from nat_verify.netfilter.context import Interface
from nat_verify.node.errors import FactError


def _line_of(text: str, needle: str, start: int = 0) -> int:
    i = text.find(needle, start)
    return text.count("\n", 0, i) + 1 if i >= 0 else 0


def parse_ip_addr(text: str, source: str = "<ip -j addr>") -> tuple[Interface, ...]:
    """Every interface of the output with its addresses, in order."""
    if not text.strip():
        raise FactError(source, 0, "empty: expected the JSON output of `ip -j addr`")
    try:
        doc: Any = json.loads(text)
    except json.JSONDecodeError as e:
        hint = " (this looks like `ip addr` text: give `ip -j addr`)" if text.lstrip()[:1].isdigit() else ""
        raise FactError(source, e.lineno, f"not JSON: {e.msg}{hint}") from None
    if not isinstance(doc, list):
        raise FactError(source, 1, "expected a JSON array of links, as `ip -j addr` prints")
    out: list[Interface] = []
    for link in doc:
        if not isinstance(link, dict) or not isinstance(link.get("ifname"), str):
            raise FactError(source, _line_of(text, "{"), 'expected link objects with "ifname"')
        name = link["ifname"]
        where = _line_of(text, f'"{name}"')
        addrs: list[ipaddress.IPv4Interface | ipaddress.IPv6Interface] = []
        info = link.get("addr_info", [])
        if not isinstance(info, list):
            raise FactError(source, where, f'{name}: "addr_info" is not a list')
        for a in info:
            if not isinstance(a, dict) or a.get("family") not in ("inet", "inet6") or "local" not in a:
                continue  # e.g. an empty object for a link without addresses of a family
            local, plen = a["local"], a.get("prefixlen")
            try:
                addr = ipaddress.ip_address(str(local))
                addrs.append(ipaddress.ip_interface(f"{addr}/{addr.max_prefixlen if plen is None else int(plen)}"))
            except (ValueError, TypeError):
                line = _line_of(text, str(local))
                raise FactError(source, line, f"{name}: bad address {local!r}/{plen!r}") from None
        out.append(Interface(name, tuple(addrs)))
    return tuple(out)
