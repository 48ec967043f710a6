"""Parsing the address constants of a dump, remembered: dumps repeat their addresses.

The constants a rule compares packets with (which cut the packet space into classes for the
chain summaries, the exhaustive checker and ``diff``) are read off its compiled predicates:
see ``predicate.address_constants`` and ``predicate.port_constants``.
"""

from __future__ import annotations

import functools
import ipaddress

from nat_verify.model.cluster import IPNetwork


@functools.lru_cache(maxsize=1 << 18)
def parse_network(text: str) -> IPNetwork:
    """``ipaddress.ip_network(text, strict=False)``, remembered."""
    return ipaddress.ip_network(text, strict=False)
