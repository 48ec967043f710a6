"""Fast canonical spelling of IP addresses (as Go's ``net.IP.String()`` and iptables print them).

The compiler normalises every address it writes; ``ipaddress`` is too slow for 100k endpoints,
so IPv4 goes through the C ``inet_pton``/``inet_ntop`` pair. IPv6 keeps ``ipaddress`` (its
compression rules are the RFC 5952 ones Go uses).
"""

from __future__ import annotations

import ipaddress
import socket


def canonical_ip(text: str) -> tuple[str, int] | None:
    """(canonical text, family 4/6) of an address, or None if ``text`` is not one."""
    t = text.strip()
    if ":" not in t:
        try:
            return socket.inet_ntop(socket.AF_INET, socket.inet_pton(socket.AF_INET, t)), 4
        except OSError:
            return None
    try:
        addr = ipaddress.IPv6Address(t)
    except ValueError:
        return None
    return str(addr), 6
