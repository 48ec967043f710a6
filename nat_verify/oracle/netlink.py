"""Raw nfnetlink / ctnetlink: just enough for the oracle's hot path.

Three operations, all on sockets opened inside the node namespace (see ``netns.in_netns``):

* subscribe to conntrack NEW events (``NFNLGRP_CONNTRACK_NEW``): the kernel tells us, per probe,
  the original and reply tuples of the connection it just confirmed, i.e. the DNAT and SNAT it
  decided (reference section 3);
* flush the conntrack table of the namespace (37 us, measured in the reference, section 5);
* a targeted GET of one entry by its original tuple (90 us).

Hand-rolled rather than pyroute2: the reference measured 17 ms per pyroute2 conntrack call
against ~150 us per probe end to end with this parser, and pyroute2 forks a helper per netns
socket. Full dumps are deliberately not offered: they cost O(global buckets) (~12 ms, P6).
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import struct
from collections.abc import Iterator

import attrs

NETLINK_NETFILTER = 12
NFNL_SUBSYS_CTNETLINK = 1
IPCTNL_MSG_CT_NEW = 0
IPCTNL_MSG_CT_GET = 1
IPCTNL_MSG_CT_DELETE = 2
NFNLGRP_CONNTRACK_NEW = 1

NLM_F_REQUEST = 0x1
NLM_F_ACK = 0x4
NLMSG_ERROR = 2
NLMSG_DONE = 3
NLA_TYPE_MASK = 0x3FFF
NLA_F_NESTED = 0x8000

CTA_TUPLE_ORIG = 1
CTA_TUPLE_REPLY = 2
CTA_TUPLE_IP = 1
CTA_TUPLE_PROTO = 2
CTA_IP_V4_SRC = 1
CTA_IP_V4_DST = 2
CTA_IP_V6_SRC = 3
CTA_IP_V6_DST = 4
CTA_PROTO_NUM = 1
CTA_PROTO_SRC_PORT = 2
CTA_PROTO_DST_PORT = 3

SO_RCVBUFFORCE = 33
_HDR = struct.Struct("=IHHII")  # nlmsghdr: len, type, flags, seq, pid
_NFGEN = struct.Struct("=BBH")  # nfgenmsg: family, version, res_id (big-endian, 0 here)
_NLA = struct.Struct("=HH")
_PORT = struct.Struct("!H")

PROTO_NUMBERS = {"tcp": 6, "udp": 17, "sctp": 132, "icmp": 1}
PROTO_NAMES = {v: k for k, v in PROTO_NUMBERS.items()}


class NetlinkError(OSError):
    """The kernel answered a netlink request with an error code."""


@attrs.frozen
class Tuple5:
    proto: str
    src: str
    sport: int
    dst: str
    dport: int


@attrs.frozen
class CtEvent:
    """One conntrack entry as ctnetlink reports it: original and reply direction."""

    orig: Tuple5
    reply: Tuple5


_FAMILY = {4: socket.AF_INET, 16: socket.AF_INET6}


def _parse_tuple(buf: bytes, pos: int, end: int) -> Tuple5:
    """A CTA_TUPLE_* nest at buf[pos:end]; a flat loop (this runs twice per probe)."""
    src = dst = ""
    proto = sport = dport = 0
    unpack = _NLA.unpack_from
    while pos + 4 <= end:
        length, typ = unpack(buf, pos)
        if length < 4:
            break
        typ &= NLA_TYPE_MASK
        inner, iend = pos + 4, pos + length
        if typ == CTA_TUPLE_IP:
            while inner + 4 <= iend:
                ln, t = unpack(buf, inner)
                if ln < 4:
                    break
                v = buf[inner + 4 : inner + ln]
                t &= NLA_TYPE_MASK
                # inet_ntop: ipaddress objects cost a third of the per-probe time
                if t in (CTA_IP_V4_SRC, CTA_IP_V6_SRC):
                    src = socket.inet_ntop(_FAMILY[len(v)], v)
                elif t in (CTA_IP_V4_DST, CTA_IP_V6_DST):
                    dst = socket.inet_ntop(_FAMILY[len(v)], v)
                inner += (ln + 3) & ~3
        elif typ == CTA_TUPLE_PROTO:
            while inner + 4 <= iend:
                ln, t = unpack(buf, inner)
                if ln < 4:
                    break
                t &= NLA_TYPE_MASK
                if t == CTA_PROTO_NUM:
                    proto = buf[inner + 4]
                elif t == CTA_PROTO_SRC_PORT:
                    sport = _PORT.unpack_from(buf, inner + 4)[0]
                elif t == CTA_PROTO_DST_PORT:
                    dport = _PORT.unpack_from(buf, inner + 4)[0]
                inner += (ln + 3) & ~3
        pos += (length + 3) & ~3
    return Tuple5(PROTO_NAMES.get(proto, str(proto)), src, sport, dst, dport)


def parse_messages(buf: bytes) -> Iterator[tuple[int, bytes, int, int]]:
    """Yield (type, message, payload offset, message end) for each nlmsg in ``buf``."""
    pos = 0
    while pos + _HDR.size <= len(buf):
        length, typ, _flags, _seq, _pid = _HDR.unpack_from(buf, pos)
        if length < _HDR.size:
            return
        yield typ, buf, pos + _HDR.size, pos + length
        pos += (length + 3) & ~3


def parse_ct(buf: bytes, payload: int, end: int) -> CtEvent | None:
    """A ctnetlink NEW/GET message (after the nlmsghdr) as a ``CtEvent``."""
    orig = reply = None
    pos = payload + _NFGEN.size
    while pos + 4 <= end and (orig is None or reply is None):
        length, typ = _NLA.unpack_from(buf, pos)
        if length < 4:
            break
        typ &= NLA_TYPE_MASK
        if typ == CTA_TUPLE_ORIG:
            orig = _parse_tuple(buf, pos + 4, pos + length)
        elif typ == CTA_TUPLE_REPLY:
            reply = _parse_tuple(buf, pos + 4, pos + length)
        pos += (length + 3) & ~3
    if orig is None or reply is None:
        return None
    return CtEvent(orig, reply)


def _nla(typ: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return _NLA.pack(length, typ) + payload + b"\0" * ((-length) % 4)


def encode_tuple(t: Tuple5) -> bytes:
    src = ipaddress.ip_address(t.src)
    dst = ipaddress.ip_address(t.dst)
    v6 = src.version == 6
    ip = _nla(CTA_IP_V6_SRC if v6 else CTA_IP_V4_SRC, src.packed) + _nla(
        CTA_IP_V6_DST if v6 else CTA_IP_V4_DST, dst.packed
    )
    proto = (
        _nla(CTA_PROTO_NUM, bytes([PROTO_NUMBERS[t.proto]]))
        + _nla(CTA_PROTO_SRC_PORT, struct.pack("!H", t.sport))
        + _nla(CTA_PROTO_DST_PORT, struct.pack("!H", t.dport))
    )
    return _nla(CTA_TUPLE_IP | NLA_F_NESTED, ip) + _nla(CTA_TUPLE_PROTO | NLA_F_NESTED, proto)


class Ctnetlink:
    """ctnetlink sockets of one namespace: ``events`` (NEW subscription) and ``ctl`` (requests).

    Create it while the calling thread is inside the target namespace: a netlink socket
    belongs to the namespace it was created in, for life.
    """

    def __init__(self, *, subscribe: bool = True, rcvbuf: int = 8 << 20) -> None:
        self.ctl = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        self.ctl.bind((0, 0))
        self.events: socket.socket | None = None
        self._seq = 0
        if subscribe:
            ev = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
            try:
                # A burst of unread NEW events overflows the default buffer (P15).
                ev.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, rcvbuf)
            except OSError:
                ev.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            ev.bind((0, 1 << (NFNLGRP_CONNTRACK_NEW - 1)))
            ev.setblocking(False)
            self.events = ev

    def close(self) -> None:
        self.ctl.close()
        if self.events is not None:
            self.events.close()

    def read_events(self) -> list[CtEvent]:
        """Every NEW event queued now (non-blocking). Raises NetlinkError on overflow."""
        out: list[CtEvent] = []
        assert self.events is not None
        while True:
            try:
                buf = self.events.recv(1 << 16)
            except BlockingIOError:
                return out
            except OSError as e:
                if e.errno == errno.ENOBUFS:
                    raise NetlinkError(errno.ENOBUFS, "conntrack event buffer overflowed") from e
                raise
            for typ, b, payload, end in parse_messages(buf):
                if typ == (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_NEW:
                    ev = parse_ct(b, payload, end)
                    if ev is not None:
                        out.append(ev)

    def _request(self, msg_type: int, family: int, body: bytes, flags: int) -> list[bytes]:
        self._seq += 1
        payload = _NFGEN.pack(family, 0, 0) + body
        typ = (NFNL_SUBSYS_CTNETLINK << 8) | msg_type
        self.ctl.send(_HDR.pack(_HDR.size + len(payload), typ, flags, self._seq, 0) + payload)
        replies: list[bytes] = []
        while True:
            buf = self.ctl.recv(1 << 16)
            for t, b, p, end in parse_messages(buf):
                if t == NLMSG_ERROR:
                    code = -struct.unpack_from("=i", b, p)[0]
                    if code:
                        raise NetlinkError(code, f"ctnetlink: {errno.errorcode.get(code, code)}")
                    return replies
                if t == NLMSG_DONE:
                    return replies
                replies.append(b[p - _HDR.size : end])

    def flush(self, family: int = socket.AF_UNSPEC) -> None:
        """Delete every conntrack entry of this namespace."""
        self._request(IPCTNL_MSG_CT_DELETE, family, b"", NLM_F_REQUEST | NLM_F_ACK)

    def get(self, orig: Tuple5) -> CtEvent | None:
        """The entry whose original tuple is ``orig``, or None."""
        fam = socket.AF_INET6 if ":" in orig.src else socket.AF_INET
        body = _nla(CTA_TUPLE_ORIG | NLA_F_NESTED, encode_tuple(orig))
        try:
            replies = self._request(IPCTNL_MSG_CT_GET, fam, body, NLM_F_REQUEST | NLM_F_ACK)
        except NetlinkError as e:
            if e.errno == errno.ENOENT:
                return None
            raise
        for msg in replies:
            ev = parse_ct(msg, _HDR.size, len(msg))
            if ev is not None:
                return ev
        return None


# -- rtnetlink: the few requests that configure a pod/ext/node2 namespace in process ---------
# One process spawn (nsenter + ip) costs 3-12 ms depending on load; a namespace's whole
# configuration through rtnetlink costs well under 1 ms.

NETLINK_ROUTE = 0
RTM_NEWLINK = 16
RTM_NEWADDR = 20
RTM_NEWROUTE = 24
NLM_F_EXCL = 0x200
NLM_F_CREATE = 0x400
IFF_UP = 0x1
IFA_ADDRESS = 1
IFA_LOCAL = 2
RTA_DST = 1
RTA_OIF = 4
RTA_GATEWAY = 5
RTA_PREFSRC = 7
RT_TABLE_MAIN = 254
RTPROT_BOOT = 3
RT_SCOPE_UNIVERSE = 0
RT_SCOPE_LINK = 253
RTN_UNICAST = 1
_IFINFO = struct.Struct("=BxHiII")
_IFADDR = struct.Struct("=BBBBI")
_RTMSG = struct.Struct("=BBBBBBBBI")


class Rtnetlink:
    """An rtnetlink socket of the namespace the calling thread is in when it is created."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_ROUTE)
        self.sock.bind((0, 0))
        self._seq = 0

    def close(self) -> None:
        self.sock.close()

    def _request(self, msg_type: int, body: bytes, what: str, create: bool = True) -> None:
        self._seq += 1
        flags = NLM_F_REQUEST | NLM_F_ACK | (NLM_F_CREATE | NLM_F_EXCL if create else 0)
        self.sock.send(_HDR.pack(_HDR.size + len(body), msg_type, flags, self._seq, 0) + body)
        while True:
            buf = self.sock.recv(1 << 16)
            for t, b, p, _end in parse_messages(buf):
                if t == NLMSG_ERROR:
                    code = -struct.unpack_from("=i", b, p)[0]
                    if code:
                        raise NetlinkError(
                            code, f"rtnetlink {what}: {errno.errorcode.get(code, code)}"
                        )
                    return

    def link_up(self, index: int) -> None:
        self._request(
            RTM_NEWLINK,
            _IFINFO.pack(socket.AF_UNSPEC, 0, index, IFF_UP, IFF_UP),
            "link up",
            create=False,
        )

    def add_address(self, index: int, addr: str, prefix: int) -> None:
        a = ipaddress.IPv4Address(addr).packed
        body = _IFADDR.pack(socket.AF_INET, prefix, 0, RT_SCOPE_UNIVERSE, index)
        self._request(RTM_NEWADDR, body + _nla(IFA_LOCAL, a) + _nla(IFA_ADDRESS, a), f"addr {addr}")

    def add_route(
        self, dst: str, *, oif: int, gateway: str = "", src: str = "", link_scope: bool = False
    ) -> None:
        net = ipaddress.IPv4Network(dst)
        scope = RT_SCOPE_LINK if link_scope else RT_SCOPE_UNIVERSE
        body = _RTMSG.pack(
            socket.AF_INET, net.prefixlen, 0, 0, RT_TABLE_MAIN, RTPROT_BOOT, scope, RTN_UNICAST, 0
        )
        if net.prefixlen:
            body += _nla(RTA_DST, net.network_address.packed)
        body += _nla(RTA_OIF, struct.pack("=i", oif))
        if gateway:
            body += _nla(RTA_GATEWAY, ipaddress.IPv4Address(gateway).packed)
        if src:
            body += _nla(RTA_PREFSRC, ipaddress.IPv4Address(src).packed)
        self._request(RTM_NEWROUTE, body, f"route {dst}")
