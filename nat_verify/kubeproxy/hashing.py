"""Chain names exactly as kube-proxy (iptables mode) computes them.

A service-port chain is ``prefix + base32(sha256(spn + proto))[:16]`` and an endpoint chain
``KUBE-SEP- + base32(sha256(spn + proto + endpoint))[:16]``, where ``spn`` is the service port
name string (``ns/name:port``, or ``ns/name`` for an unnamed port), ``proto`` the lower-case
protocol and ``endpoint`` the ``ip:port`` string (``[ip]:port`` for IPv6). The hash is over the
readable text only; the prefix is not part of it, so SVC, SVL, EXT, FW (and the legacy XLB)
chains of one service port share the same 16 characters.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

SVC = "KUBE-SVC-"
SVL = "KUBE-SVL-"
EXT = "KUBE-EXT-"
FW = "KUBE-FW-"
XLB = "KUBE-XLB-"  # pre-1.24 name of the "external, Local policy" chain
SEP = "KUBE-SEP-"
SERVICE_PORT_PREFIXES: tuple[str, ...] = (SVC, SVL, EXT, FW, XLB)


_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"  # RFC 4648 standard base32, upper case
# 15 bits -> 3 characters (32768 entries): 80 bits = 5 lookups + one last character.
_TRIPLES = [a + b + c for a in _ALPHABET for b in _ALPHABET for c in _ALPHABET]
_M15 = (1 << 15) - 1


def _hash16(text: str) -> str:
    # The first 16 base32 characters encode exactly the first 10 bytes (80 bits) of the
    # digest; encoding them with a lookup table is ~10x faster than base64.b32encode.
    n = int.from_bytes(hashlib.sha256(text.encode()).digest()[:10], "big")
    t = _TRIPLES
    return (
        t[n >> 65]
        + t[(n >> 50) & _M15]
        + t[(n >> 35) & _M15]
        + t[(n >> 20) & _M15]
        + t[(n >> 5) & _M15]
        + _ALPHABET[n & 31]
    )


def service_port_name(namespace: str, name: str, port_name: str) -> str:
    """``ns/name:port``, or ``ns/name`` when the port has no name (current kube-proxy)."""
    return f"{namespace}/{name}:{port_name}" if port_name else f"{namespace}/{name}"


@lru_cache(maxsize=4096)
def port_proto_hash(spn: str, proto: str) -> str:
    """The 16 characters shared by a service port's SVC/SVL/EXT/FW chains."""
    return _hash16(spn + proto.lower())


def service_port_chain_name(prefix: str, spn: str, proto: str) -> str:
    """E.g. ``service_port_chain_name(SVC, "ns1/svc1:p80", "tcp") == "KUBE-SVC-XPGD46QRK7WJZT7O"``."""
    return prefix + port_proto_hash(spn, proto)


def endpoint_chain_name(spn: str, proto: str, endpoint: str) -> str:
    """``KUBE-SEP-`` chain of one endpoint (``endpoint`` is ``ip:port`` or ``[ip6]:port``)."""
    return SEP + _hash16(spn + proto.lower() + endpoint)
