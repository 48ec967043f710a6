"""Object names exactly as kube-proxy's nftables mode computes them.

A service port's chains are ``PREFIX + hash + "-" + base`` with ``base`` =
``namespace/name/protocol/portName`` (an unnamed port leaves the last part empty) and, for an
endpoint, ``base + "__" + ip + "/" + port`` with an IPv6 address's ``:`` written ``.``. The
hash is the first 8 characters of the standard base32 encoding of SHA-256 of ``base`` (the
prefix is not hashed, so ``service-``, ``local-``, ``external-`` and ``firewall-`` chains of a
port share it, as ``endpoint-`` chains and ``affinity-`` sets of an endpoint do). A hashed name
longer than 240 characters keeps its first 237 and ends in ``...``.
"""

from __future__ import annotations

import base64
import hashlib

SERVICE = "service-"
LOCAL = "local-"
EXTERNAL = "external-"
FIREWALL = "firewall-"
ENDPOINT = "endpoint-"
AFFINITY = "affinity-"
NAME_BASE_MAX = 240  # knftables.NameLengthMax (256) minus the longest prefix (16)


def hash_and_truncate(name: str) -> str:
    digest = hashlib.sha256(name.encode()).digest()
    out = base64.b32encode(digest[:5]).decode() + "-" + name
    if len(out) > NAME_BASE_MAX:
        out = out[: NAME_BASE_MAX - 3] + "..."
    return out


def service_port_base(namespace: str, name: str, protocol: str, port_name: str) -> str:
    """E.g. ``ULMVA6XW-ns1/svc1/tcp/p80`` (``protocol`` lower case)."""
    return hash_and_truncate(f"{namespace}/{name}/{protocol}/{port_name}")


def endpoint_base(namespace: str, name: str, protocol: str, port_name: str, endpoint: str) -> str:
    """E.g. ``5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80``; ``endpoint`` is ``ip:port`` or ``[ip6]:port``."""
    host, _, port = endpoint.rpartition(":")
    host = host.strip("[]").replace(":", ".")
    return hash_and_truncate(f"{namespace}/{name}/{protocol}/{port_name}__{host}/{port}")
