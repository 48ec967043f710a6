"""What the interpreter must know about the node besides its rules: node facts, as values.

Netfilter decisions depend on the node: ``addrtype LOCAL`` is "an address of this host",
the routing decision between PREROUTING and INPUT/FORWARD depends on the node's addresses,
``-i``/``-o`` test interface names, ``-m set`` tests ipset members, and MASQUERADE picks the
address of the interface the packet leaves by. A ``NodeContext`` holds exactly that.

Design: facts in, assumptions out
---------------------------------
Some facts have a well-founded default (the node's addresses are its Node object's
InternalIPs; kube-proxy sets ``route_localnet`` itself; kubeadm requires
``bridge-nf-call-iptables=1``): a result may rest on such a default, and then the context's
``premises`` say so (``basis="assumed"``), for the report to list. Other facts have none: the
name of the interface a pod's packet arrives on, the route to a remote pod, an ipset's
members. The context keeps which facts it *knows* (given by the user, or inferred from given
facts, ``known``); a rule that tests a fact it does not know gets no answer from a guess:

* ``in_iface(origin)`` gives the name the packet carries: the real name, a name known only by
  its prefix (``"cali+"``: some ``cali...`` interface), or ``"?<fact>"`` when the name is not
  known at all. ``iface_verdict`` answers ``-i``/``-o`` tests on such a value: ``True``,
  ``False``, or the reason the answer is unknown (a string naming the fact).
* An unknown interface is not wholly unknown: a packet from off the node does not arrive on a
  container bridge or a pod's veth, and a pod's packet does not arrive on an overlay device
  (``ifaces``). Those answers are decided, and the premise that allows them is listed.
* ``route(dst).iface`` is ``"?routes"`` where no route was given for ``dst``.
* ``ipset_verdict(name, addr)``: ``True``/``False`` from the members given, or the reason.
* ``route_localnet`` ``None``: not known (the martian decision for a loopback destination
  arriving on an interface is then unknown).

A context built without the ``known`` set (``known=None``: tests, the kernel oracle's own
sandbox, whose every fact is set by the sandbox) knows everything it holds.
"""

from __future__ import annotations

import ipaddress
from typing import Literal

import attrs

from nat_verify.model.cluster import IPAddress, IPNetwork
from nat_verify.netfilter import ifaces
from nat_verify.netfilter.ifaces import decided

LOOPBACK4 = ipaddress.ip_network("127.0.0.0/8")
LOOPBACK6 = ipaddress.ip_network("::1/128")

# The facts a context may know (``NodeContext.known``); ipsets are ``IPSET + name``.
EXTERNAL_IFACE = ifaces.EXTERNAL
POD_IFACE = ifaces.POD
ROUTES = ifaces.ROUTE
ADDRESSES = "node addresses"
ROUTE_LOCALNET = "route_localnet"
BRIDGE_NF = "bridge-nf-call-iptables"
IPSET = "ipset "
UNKNOWN = "?"  # prefix of an interface value whose name is not known

Basis = Literal["given", "inferred", "assumed"]


@attrs.frozen
class Premise:
    """One thing results rest on: a node fact, its value, and whether it was given by the user,
    inferred from what was given (``detail`` says from what), or assumed (a default)."""

    fact: str
    value: str
    basis: Basis
    detail: str = ""

    def to_json(self) -> dict[str, str]:
        return {"fact": self.fact, "value": self.value, "basis": self.basis, "detail": self.detail}

    def __str__(self) -> str:
        tail = f" ({self.detail})" if self.detail else ""
        return f"{self.basis}: {self.fact} = {self.value}{tail}"


@attrs.frozen
class Route:
    """``dst`` reached through interface ``iface``; packets leaving by it masquerade to ``src``."""

    dst: IPNetwork
    iface: str
    src: IPAddress


@attrs.frozen
class Interface:
    """A network interface of the node and its addresses (each with its prefix length)."""

    name: str
    addresses: tuple[ipaddress.IPv4Interface | ipaddress.IPv6Interface, ...] = ()


@attrs.frozen
class IPSet:
    """An ipset and its members (single-dimension address sets: ``hash:ip``, ``hash:net``,
    ``bitmap:ip``...). ``nomatch`` entries are exceptions: the most specific entry containing an
    address decides (the kernel's ``hash:net`` lookup). ``dims`` > 1 (``hash:ip,port``) or a
    ``list:set`` cannot be decided from addresses alone."""

    name: str
    type: str
    family: int = 4
    members: tuple[IPNetwork, ...] = ()
    nomatch: tuple[IPNetwork, ...] = ()
    children: tuple[str, ...] = ()  # list:set members (set names)

    @property
    def dims(self) -> int:
        kinds = self.type.partition(":")[2]
        return len(kinds.split(",")) if kinds else 1

    @property
    def by_address(self) -> bool:
        return self.dims == 1 and not self.type.startswith("list:")

    def matching_networks(self) -> tuple[IPNetwork, ...]:
        """The addresses the set matches, as disjoint CIDRs: every member minus the ``nomatch``
        entries more specific than it, minus the members more specific than those, and so on
        (each address is decided by the most specific entry containing it)."""
        entries = [(n, True) for n in self.members] + [(n, False) for n in self.nomatch]
        out: list[IPNetwork] = []
        for version in (4, 6):
            mine = [(n, hit) for n, hit in entries if n.version == version]
            if not mine:
                continue
            bounds = sorted({int(n.network_address) for n, _ in mine} | {int(n.broadcast_address) + 1 for n, _ in mine})
            to_ip = ipaddress.IPv4Address if version == 4 else ipaddress.IPv6Address
            runs: list[tuple[int, int]] = []
            for lo, hi in zip(bounds, bounds[1:], strict=False):
                best: tuple[int, bool] | None = None
                for n, hit in mine:
                    if int(n.network_address) <= lo < int(n.broadcast_address) + 1 and (best is None or n.prefixlen > best[0]):
                        best = (n.prefixlen, hit)
                if best is not None and best[1]:
                    if runs and runs[-1][1] == lo:
                        runs[-1] = (runs[-1][0], hi)
                    else:
                        runs.append((lo, hi))
            for lo, hi in runs:
                out.extend(ipaddress.summarize_address_range(to_ip(lo), to_ip(hi - 1)))
        return tuple(out)

    def contains(self, addr: IPAddress) -> bool:
        best: tuple[int, bool] | None = None
        for nets, hit in ((self.members, True), (self.nomatch, False)):
            for n in nets:
                if n.version == addr.version and addr in n and (best is None or n.prefixlen > best[0]):
                    best = (n.prefixlen, hit)
        return best is not None and best[1]


def _addrs(values: object) -> tuple[IPAddress, ...]:
    return tuple(ipaddress.ip_address(str(v)) for v in values)  # type: ignore[attr-defined]


def _nets(values: object) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(str(v), strict=False) for v in values)  # type: ignore[attr-defined]


def _ipsets(values: object) -> tuple[IPSet, ...]:
    """``IPSet`` values, or (name, member CIDRs) pairs for a plain ``hash:net`` set."""
    out: list[IPSet] = []
    for v in values:  # type: ignore[attr-defined]
        if isinstance(v, IPSet):
            out.append(v)
        else:
            name, members = v
            nets = _nets(members)
            out.append(IPSet(name, "hash:net", nets[0].version if nets else 4, nets))
    return tuple(out)


@attrs.frozen
class NodeContext:
    family: int
    addresses: tuple[IPAddress, ...] = attrs.field(converter=_addrs)  # the node's own (LOCAL) addresses
    pod_cidrs: tuple[IPNetwork, ...] = attrs.field(default=(), converter=_nets)  # the cluster's pod network
    local_pod_cidrs: tuple[IPNetwork, ...] = attrs.field(default=(), converter=_nets)  # pods on this node
    ext_iface: str = "eth0"  # where packets from off the node arrive
    pod_iface: str = "cni0"  # where a local pod's packets arrive ("cali+": some cali... interface)
    route_localnet: bool | None = True  # kube-proxy sets it when localhost NodePorts are on
    routes: tuple[Route, ...] = ()
    ipsets: tuple[IPSet, ...] = attrs.field(default=(), converter=_ipsets)  # the sets whose members are known
    name: str = ""
    interfaces: tuple[Interface, ...] = ()  # as given (``--interface``, ``--ip-addr``)
    bridge_nf_call: bool | None = True  # net.bridge.bridge-nf-call-ip(6)tables
    known: frozenset[str] | None = None  # the facts given or inferred; None: all of the above
    premises: tuple[Premise, ...] = ()  # what was given, inferred and assumed, for the report

    @property
    def loopback(self) -> IPNetwork:
        return LOOPBACK6 if self.family == 6 else LOOPBACK4

    def knows(self, fact: str) -> bool:
        return self.known is None or fact in self.known

    @property
    def assumptions(self) -> tuple[Premise, ...]:
        """The premises that are not given facts (inferred or assumed), for the report."""
        return tuple(p for p in self.premises if p.basis != "given")

    def is_local(self, addr: IPAddress) -> bool:
        return addr in self.addresses or addr in self.loopback

    def in_pod_network(self, addr: IPAddress) -> bool:
        return any(addr in n for n in self.pod_cidrs)

    def in_iface(self, origin: str) -> str:
        """The input interface of a first packet from ``origin`` (``""`` for the host's own,
        which has none on the OUTPUT path), as ``iface_verdict`` reads it."""
        if origin == "host":
            return ""
        if origin == "pod":
            return self.pod_iface if self.knows(POD_IFACE) else UNKNOWN + POD_IFACE
        return self.ext_iface if self.knows(EXTERNAL_IFACE) else UNKNOWN + EXTERNAL_IFACE

    def reply_bridged(self, origin: str, src: IPAddress, dst: IPAddress) -> bool:
        """Whether the reply of local pod ``dst`` to local pod ``src`` is bridged past netfilter:
        with ``bridge-nf-call-iptables=0`` and pods on one bridge (``ifaces`` kind bridge), a
        reply on the same L2 segment never meets conntrack, so a DNAT is not undone (the kernel:
        the client gets the endpoint's own address back and the connection fails)."""
        if origin != "pod" or self.bridge_nf_call is not False:
            return False
        name = self.pod_iface
        if ifaces.kind(name.rstrip("+"), name.endswith("+")) not in ("bridge", "container"):
            return False
        return any(src in n and dst in n for n in self.local_pod_cidrs)

    def route(self, dst: IPAddress) -> Route:
        """The route to ``dst``: the node's own addresses by lo (the kernel's local table comes
        first), else the longest-prefix given route. Without one: this node's pods by the pod
        interface, anything else by the external interface, with ``iface`` ``"?..."`` when
        routes are not known (the source stays the best guess of the address MASQUERADE would
        pick: the node's first address of the family)."""
        if dst in self.loopback:
            return Route(self.loopback, "lo", dst)
        src = next((a for a in self.addresses if a.version == dst.version), None)
        if src is None:
            src = ipaddress.ip_address("::1" if dst.version == 6 else "127.0.0.1")
        if self.is_local(dst):
            return Route(ipaddress.ip_network(dst), "lo", src)
        best: Route | None = None
        for r in self.routes:
            if dst.version == r.dst.version and dst in r.dst and (
                best is None or r.dst.prefixlen > best.dst.prefixlen
            ):
                best = r
        if best is not None:
            return best
        for n in self.local_pod_cidrs:
            if dst in n:
                iface = self.pod_iface if self.knows(POD_IFACE) else UNKNOWN + POD_IFACE
                return Route(n, iface, self.pod_gateway(n))
        if self.knows(ROUTES):
            iface = self.ext_iface
        else:
            iface = UNKNOWN + (ifaces.REMOTE_POD_ROUTE if self.in_pod_network(dst) else ROUTES)
        return Route(ipaddress.ip_network("::/0" if dst.version == 6 else "0.0.0.0/0"), iface, src)

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
        """The members of a known single-dimension set without ``nomatch`` entries, else None."""
        s = self.ipset_named(name)
        if s is None or not s.by_address or s.nomatch:
            return None
        return s.members

    def ipset_named(self, name: str) -> IPSet | None:
        for s in self.ipsets:
            if s.name == name:
                return s
        return None

    def ipset_verdict(self, name: str, addr: IPAddress) -> bool | str:
        """Whether ``addr`` is in set ``name``, or why that is unknown."""
        s = self.ipset_named(name)
        if s is None:
            return f"ipset {name!r}: its members are not known (give --ipset with `ipset save` output)"
        if s.type.startswith("list:"):
            verdicts = [self.ipset_verdict(c, addr) for c in s.children]
            if any(v is True for v in verdicts):
                return True
            unknown = [v for v in verdicts if isinstance(v, str)]
            return unknown[0] if unknown else False
        if not s.by_address:
            return f"ipset {name!r} is {s.type}: a match on it depends on more than the address"
        if s.family != addr.version:
            return False
        return s.contains(addr)


_UNKNOWN_FACTS = {
    POD_IFACE: ("the interface pods' packets arrive on (the pod interface)", "give --pod-interface, --cni or --ip-addr"),
    EXTERNAL_IFACE: ("the interface packets from off the node arrive on (the external interface)", "give --interface or --ip-addr"),
    ROUTES: ("the interface the packet leaves by (routes)", "give --ip-route"),
    ifaces.REMOTE_POD_ROUTE: ("the interface packets to other nodes' pods leave by (routes)", "give --ip-route"),
}


def iface_verdict(value: str, name: str, prefix: bool) -> bool | str:
    """``-i``/``-o NAME`` (``prefix``: ``NAME+``) on an interface value of ``NodeContext``.

    ``value`` is a real name, ``"P+"`` (some interface whose name starts with ``P``) or
    ``"?fact"`` (not known). A string result is the reason the answer is unknown.
    """
    if value.startswith(UNKNOWN):
        fact = value[len(UNKNOWN) :]
        verdict = decided(fact, name, prefix)
        if verdict is not None:
            return verdict
        shown = name + ("+" if prefix else "")
        what, hint = _UNKNOWN_FACTS.get(fact, (f"the {fact}", "give the node facts"))
        return f"-i/-o {shown}: {what} is not known ({hint})"
    if value.endswith("+"):
        known = value[:-1]
        if prefix:
            if known.startswith(name):
                return True
            if not name.startswith(known):
                return False
        elif not name.startswith(known):
            return False
        shown = name + ("+" if prefix else "")
        return f"{shown}: the interface is only known as {value}"
    return value.startswith(name) if prefix else value == name
