"""Packets and the addresses they carry.

A ``Packet`` is the first packet of a connection as it enters the node: addresses are
``ipaddress`` objects so that comparisons with CIDRs are exact, ports are ints (0 for
protocols without ports). ``origin`` says where it enters:

* ``external``: arrives on a node interface from off the node (nat PREROUTING),
* ``pod``: arrives from a pod on this node (nat PREROUTING, then usually FORWARD),
* ``host``: sent by a process on the node (nat OUTPUT).
"""

from __future__ import annotations

import ipaddress
from typing import Literal

import attrs

from nat_verify.model.cluster import IPAddress

Origin = Literal["external", "pod", "host"]
Proto = Literal["tcp", "udp", "sctp", "icmp"]
ORIGINS: tuple[Origin, ...] = ("external", "pod", "host")
PROTOS: tuple[str, ...] = ("tcp", "udp", "sctp")


def ip(text: str | IPAddress) -> IPAddress:
    return ipaddress.ip_address(text) if isinstance(text, str) else text


def format_endpoint(addr: IPAddress, port: int) -> str:
    """``IP:PORT``, IPv6 as ``[IP]:PORT``; the bare address when there is no port."""
    if not port:
        return str(addr)
    return f"[{addr}]:{port}" if addr.version == 6 else f"{addr}:{port}"


def parse_endpoint(text: str, *, port_required: bool = False) -> tuple[IPAddress, int]:
    """Parse ``IP``, ``IP:PORT`` or ``[IPv6]:PORT``; raises ValueError with what was expected."""
    t = text.strip()
    try:
        if t.startswith("["):
            host, _, rest = t[1:].partition("]")
            if not rest.startswith(":"):
                raise ValueError
            return ipaddress.ip_address(host), _port(rest[1:])
        if t.count(":") == 1:
            host, _, port = t.partition(":")
            return ipaddress.ip_address(host), _port(port)
        addr = ipaddress.ip_address(t)
    except ValueError:
        raise ValueError(
            f"expected IP, IP:PORT or [IPv6]:PORT, received {text!r}"
        ) from None
    if port_required:
        raise ValueError(f"expected IP:PORT (a port is required), received {text!r}")
    return addr, 0


def _port(text: str) -> int:
    p = int(text)
    if not 0 < p < 65536:
        raise ValueError
    return p


@attrs.frozen
class Packet:
    src: IPAddress = attrs.field(converter=ip)
    dst: IPAddress = attrs.field(converter=ip)
    dport: int = 0
    sport: int = 40000
    proto: str = "tcp"
    origin: Origin = "external"
    in_iface: str = ""  # "" = derived from origin by the node context
    mark: int = 0

    @property
    def family(self) -> int:
        return self.dst.version

    def to_json(self) -> dict[str, object]:
        return {
            "src": format_endpoint(self.src, self.sport),
            "dst": format_endpoint(self.dst, self.dport),
            "proto": self.proto,
            "from": self.origin,
        }

    def __str__(self) -> str:
        return (
            f"{self.origin} {self.proto} {format_endpoint(self.src, self.sport)}"
            f" -> {format_endpoint(self.dst, self.dport)}"
        )
