"""What the interpreter must know about the node besides its rules.

Netfilter decisions depend on the node: ``addrtype LOCAL`` is "an address of this host",
the routing decision between PREROUTING and INPUT/FORWARD depends on the node's addresses,
and MASQUERADE picks the address of the interface the packet leaves by. A ``NodeContext``
holds exactly that, as values.
"""

from __future__ import annotations

import ipaddress

import attrs

from nat_verify.model.cluster import IPAddress, IPNetwork

LOOPBACK4 = ipaddress.ip_network("127.0.0.0/8")

# Node facts a rule's meaning may rest on; ``NodeContext.facts`` names those the user gave (or
# that the caller vouches for). A registry entry that reads a fact not given compiles to
# ``Unknown`` naming it (see ``registry``).
FACT_ADDRESSES = "addresses"  # the node's own addresses (addrtype, REDIRECT)
FACT_INTERFACES = "interfaces"  # which interface a packet arrives on or leaves by (-i/-o, physdev)
FACT_ROUTES = "routes"  # the routes (MASQUERADE's source address)
FACT_IPSETS = "ipsets"  # ipset members (which sets are known: ``NodeContext.ipset(name)``)
FACTS = frozenset({FACT_ADDRESSES, FACT_INTERFACES, FACT_ROUTES, FACT_IPSETS})
LOOPBACK6 = ipaddress.ip_network("::1/128")


@attrs.frozen
class Route:
    """``dst`` reached through interface ``iface``; packets leaving by it masquerade to ``src``."""

    dst: IPNetwork
    iface: str
    src: IPAddress


def _addrs(values: object) -> tuple[IPAddress, ...]:
    return tuple(ipaddress.ip_address(str(v)) for v in values)  # type: ignore[attr-defined]


def _nets(values: object) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(str(v), strict=False) for v in values)  # type: ignore[attr-defined]


@attrs.frozen
class NodeContext:
    family: int
    addresses: tuple[IPAddress, ...] = attrs.field(converter=_addrs)  # the node's own (LOCAL) addresses
    pod_cidrs: tuple[IPNetwork, ...] = attrs.field(default=(), converter=_nets)  # the cluster's pod network
    local_pod_cidrs: tuple[IPNetwork, ...] = attrs.field(default=(), converter=_nets)  # pods on this node
    ext_iface: str = "eth0"
    pod_iface: str = "cni0"
    route_localnet: bool = True  # kube-proxy sets it when localhost NodePorts are on
    routes: tuple[Route, ...] = ()
    ipsets: tuple[tuple[str, tuple[str, ...]], ...] = ()  # name -> members (CIDRs), when known
    name: str = ""
    # the node facts given (default: all of them, the interface names and addresses above
    # included); an entry reading one that is missing compiles to Unknown
    facts: frozenset[str] = attrs.field(default=FACTS, converter=frozenset)

    @property
    def loopback(self) -> IPNetwork:
        return LOOPBACK6 if self.family == 6 else LOOPBACK4

    def is_local(self, addr: IPAddress) -> bool:
        return addr in self.addresses or addr in self.loopback

    def in_pod_network(self, addr: IPAddress) -> bool:
        return any(addr in n for n in self.pod_cidrs)

    def route(self, dst: IPAddress) -> Route:
        """The longest-prefix route to ``dst``; default: the external interface."""
        best: Route | None = None
        for r in self.routes:
            if dst.version == r.dst.version and dst in r.dst and (
                best is None or r.dst.prefixlen > best.dst.prefixlen
            ):
                best = r
        if best is not None:
            return best
        if dst in self.loopback:
            return Route(self.loopback, "lo", dst)
        for n in self.local_pod_cidrs:
            if dst in n:
                return Route(n, self.pod_iface, self.pod_gateway(n))
        src = next((a for a in self.addresses if a.version == dst.version), None)
        if src is None:
            src = ipaddress.ip_address("::1" if dst.version == 6 else "127.0.0.1")
        return Route(ipaddress.ip_network("::/0" if dst.version == 6 else "0.0.0.0/0"), self.ext_iface, src)

    def pod_gateway(self, net: IPNetwork) -> IPAddress:
        """The node's address on the pod network (first host address, as cni0/bridge plugins assign)."""
        for a in self.addresses:
            if a in net:
                return a
        return net.network_address + 1

    def origin_of(self, src: IPAddress) -> str:
        if self.is_local(src):
            return "host"
        if self.in_pod_network(src):
            return "pod"
        return "external"

    def ipset(self, name: str) -> tuple[IPNetwork, ...] | None:
        for n, members in self.ipsets:
            if n == name:
                return _nets(members)
        return None
