"""The node facts a user gives on the command line, as one frozen value, and their parsers.

``NodeFacts`` holds exactly what was said (nothing defaulted): interfaces with their addresses
(``--interface NAME=CIDR,...``, ``--ip-addr FILE``), the interface(s) pods' packets arrive on
(``--pod-interface``, or ``--cni NAME`` for a plugin's convention), routes (``--ip-route FILE``),
ipset members (``--ipset FILE``), the sysctls netfilter's semantics depend on (``--sysctl
KEY=VALUE``), and the older ``--node-ip``/``--pod-cidr``. ``build.node_context`` turns them,
with the cluster's objects when there are any, into the ``NodeContext`` the model runs on,
saying for each fact whether it was given, inferred or assumed.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from pathlib import Path

import attrs

from nat_verify.model.cluster import IPAddress, IPNetwork
from nat_verify.netfilter.context import Interface, IPSet, Route
from nat_verify.netfilter.ifaces import CNI_POD_INTERFACES
from nat_verify.node.errors import FactError

# sysctl name -> the fact it sets (the keys a user may give; per-interface route_localnet too)
SYSCTLS = {
    "net.ipv4.conf.all.route_localnet": "route_localnet",
    "net.bridge.bridge-nf-call-iptables": "bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables": "bridge-nf-call-ip6tables",
}
_PER_IFACE_LOCALNET = re.compile(r"^net\.ipv4\.conf\.([^.]+)\.route_localnet$")
_IFNAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}\+?$")


@attrs.frozen
class NodeFacts:
    """What the user said about the node; every field may be empty (not given)."""

    interfaces: tuple[Interface, ...] = ()
    pod_ifaces: tuple[str, ...] = ()  # names, or "prefix+"
    cni: str = ""
    routes: tuple[Route, ...] | None = None  # None: not given
    ipsets: tuple[IPSet, ...] = ()
    sysctls: tuple[tuple[str, bool], ...] = ()  # (name, value), as given
    node_ips: tuple[IPAddress, ...] = ()
    pod_cidrs: tuple[IPNetwork, ...] = ()
    sources: tuple[tuple[str, str], ...] = ()  # (fact, where it was read), for the premises

    def sysctl(self, name: str) -> bool | None:
        for k, v in self.sysctls:
            if k == name:
                return v
        return None

    def source_of(self, fact: str) -> str:
        return next((w for f, w in self.sources if f == fact), "")

    @property
    def empty(self) -> bool:
        return self == NodeFacts()


def parse_interface(text: str, where: str = "--interface") -> Interface:
    """``NAME=CIDR[,CIDR...]`` (or ``NAME`` / ``NAME=`` for an interface without addresses)."""
    name, _, rest = text.partition("=")
    name = name.strip()
    if not _IFNAME.match(name) or name.endswith("+"):
        raise FactError(where, 0, f"expected NAME=CIDR[,CIDR...], received {text!r}")
    addrs = []
    for part in (p.strip() for p in rest.split(",")):
        if not part:
            continue
        try:
            addrs.append(ipaddress.ip_interface(part))
        except ValueError:
            raise FactError(where, 0, f"{name}: expected an address with its prefix (192.168.1.10/24), received {part!r}") from None
    return Interface(name, tuple(addrs))


def parse_pod_interface(text: str, where: str = "--pod-interface") -> str:
    name = text.strip()
    if not _IFNAME.match(name):
        raise FactError(where, 0, f"expected an interface name or a prefix ending in '+' (cali+), received {text!r}")
    return name


def parse_cni(text: str, where: str = "--cni") -> tuple[str, ...]:
    """The pod interfaces of a CNI plugin's convention (``ifaces.CNI_POD_INTERFACES``)."""
    key = text.strip().lower()
    if key not in CNI_POD_INTERFACES:
        raise FactError(where, 0, f"unknown CNI {text!r} (known: {', '.join(sorted(CNI_POD_INTERFACES))}); or give --pod-interface")
    return CNI_POD_INTERFACES[key]


def parse_sysctl(text: str, where: str = "--sysctl") -> tuple[str, bool]:
    """``KEY=VALUE`` (also ``KEY = VALUE`` as ``sysctl`` prints it), VALUE 0 or 1."""
    key, sep, value = text.partition("=")
    key, value = key.strip().replace("/", "."), value.strip()
    if not sep or value not in ("0", "1"):
        raise FactError(where, 0, f"expected KEY=0 or KEY=1, received {text!r}")
    if key not in SYSCTLS and not _PER_IFACE_LOCALNET.match(key):
        raise FactError(where, 0, f"{key}: not a sysctl the model reads (known: {', '.join(sorted(SYSCTLS))}, net.ipv4.conf.IFACE.route_localnet)")
    return key, value == "1"


def read_text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise FactError(path, 0, f"cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise FactError(path, 0, f"not UTF-8 text ({e.reason})") from None


def gather(
    *,
    interfaces: Sequence[str] = (),
    ip_addr: Sequence[str] = (),
    pod_interfaces: Sequence[str] = (),
    cni: str = "",
    ip_route: Sequence[str] = (),
    ipset: Sequence[str] = (),
    sysctls: Sequence[str] = (),
    node_ips: Sequence[str] = (),
    pod_cidrs: Sequence[str] = (),
) -> NodeFacts:
    """The facts of the command-line options (files are read here: I/O at the edge)."""
    from nat_verify.node.ipaddr import parse_ip_addr
    from nat_verify.node.iproute import parse_ip_route
    from nat_verify.node.ipset import parse_ipset_save

    sources: list[tuple[str, str]] = []
    ifs: list[Interface] = []
    for path in ip_addr:
        ifs.extend(parse_ip_addr(read_text(path), path))
        sources.append(("interfaces", path))
    given = [parse_interface(t) for t in interfaces]
    if given:
        sources.append(("interfaces", "--interface"))
    for i in given:
        ifs = [x for x in ifs if x.name != i.name] + [i]  # an option overrides the file
    pods = tuple(parse_pod_interface(t) for t in pod_interfaces)
    if pods:
        sources.append(("pod interface", "--pod-interface"))
    if cni:
        pods = pods or parse_cni(cni)
        sources.append(("pod interface", f"--cni {cni}"))
    routes: list[Route] | None = None
    for path in ip_route:
        routes = (routes or []) + list(parse_ip_route(read_text(path), path, ifs))
        sources.append(("routes", path))
    sets: list[IPSet] = []
    for path in ipset:
        for s in parse_ipset_save(read_text(path), path):
            if any(x.name == s.name for x in sets):
                raise FactError(path, 0, f"set {s.name!r} is given twice")
            sets.append(s)
        sources.append(("ipsets", path))
    try:
        ips = tuple(ipaddress.ip_address(a.strip()) for a in node_ips)
    except ValueError as e:
        raise FactError("--node-ip", 0, str(e)) from None
    try:
        cidrs = tuple(ipaddress.ip_network(c.strip(), strict=False) for c in pod_cidrs)
    except ValueError as e:
        raise FactError("--pod-cidr", 0, str(e)) from None
    return NodeFacts(
        interfaces=tuple(ifs),
        pod_ifaces=pods,
        cni=cni,
        routes=None if routes is None else tuple(routes),
        ipsets=tuple(sets),
        sysctls=tuple(parse_sysctl(t) for t in sysctls),
        node_ips=ips,
        pod_cidrs=cidrs,
        sources=tuple(sources),
    )
