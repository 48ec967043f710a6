"""Send one probe through the sandboxed node and collect the kernel's evidence.

A probe is the first packet of a new connection (TCP SYN, UDP datagram, SCTP INIT). Evidence,
in the order the kernel produces it (reference section 3):

1. a conntrack NEW event from the node namespace: the connection was confirmed (routed and
   accepted by every hook); its reply tuple carries the DNAT target and the SNAT address;
2. otherwise an ICMP error (REJECT) or a TCP RST (REJECT --reject-with tcp-reset) back at the
   client: read from the probing socket's error queue (``IP_RECVERR``), or for raw probes from
   an ICMP sniffer in the node namespace (spoofed sources are not reachable, so no socket
   receives their ICMP);
3. otherwise nothing before the deadline: dropped.

On veth the whole traversal runs synchronously inside ``connect()``/``send()`` (softirq at
bottom-half enable), so the evidence is normally queued when the call returns and the deadline
only costs time for drops.

Sockets are created inside the source namespace with ``setns`` (~10 us), never through a
subprocess. Every probe gets a fresh source port (P7: a reused 5-tuple with a live conntrack
entry is not NATed again and yields no event); when the port range wraps the node's conntrack
table is flushed so that no old entry can shadow a new probe.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import ipaddress
import os
import random
import select
import socket
import struct
import time

import attrs

from nat_verify.oracle.netlink import PROTO_NUMBERS, CtEvent, Ctnetlink
from nat_verify.oracle.netns import Topology, in_netns

SPORT_FIRST = 20000
SPORT_LAST = 59999
IP_RECVERR = 11
SO_EE_ORIGIN_ICMP = 2
ETH_P_IP = 0x0800
ETH_P_ALL = 0x0003
SO_ATTACH_FILTER = 26
PACKET_OUTGOING = 4
_EE = struct.Struct("=IBBBBII")  # struct sock_extended_err
# Whether this kernel has an SCTP stack (CONFIG_IP_SCTP): without one, SCTP delivered to the
# node draws ICMP protocol unreachable, which tells delivery from a silent DROP.
_KERNEL_SPEAKS_SCTP = os.path.exists("/proc/net/sctp") or os.path.exists("/proc/sys/net/sctp")

# REJECT --reject-with names by ICMP (type, code); iptables' own spelling.
REJECT_WITH = {
    (3, 0): "icmp-net-unreachable",
    (3, 1): "icmp-host-unreachable",
    (3, 2): "icmp-proto-unreachable",
    (3, 3): "icmp-port-unreachable",
    (3, 9): "icmp-net-prohibited",
    (3, 10): "icmp-host-prohibited",
    (3, 13): "icmp-admin-prohibited",
}


class ProbeError(ValueError):
    """A probe that cannot be sent as asked (e.g. a host probe from a non-node address)."""


@attrs.frozen
class Evidence:
    """What the kernel showed for one probe, before classification."""

    event: CtEvent | None
    icmp: tuple[int, int] | None = None
    rst: bool = False
    send_errno: int = 0  # synchronous failure of connect/send (e.g. ENETUNREACH)
    never_reached_node: bool = False  # destination is local to the source namespace


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC32C = _crc32c_table()


def crc32c(data: bytes) -> int:
    c = 0xFFFFFFFF
    for b in data:
        c = _CRC32C[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def build_packet(src: str, dst: str, sport: int, dport: int, proto: str) -> bytes:
    """An IPv4 packet opening a connection: TCP SYN, UDP datagram or SCTP INIT."""
    s = ipaddress.IPv4Address(src).packed
    d = ipaddress.IPv4Address(dst).packed
    num = PROTO_NUMBERS[proto]
    if proto == "tcp":
        hdr = struct.pack(
            "!HHIIBBHHH", sport, dport, random.getrandbits(32), 0, 5 << 4, 0x02, 65535, 0, 0
        )
        pseudo = s + d + struct.pack("!BBH", 0, num, len(hdr))
        l4 = hdr[:16] + struct.pack("!H", _csum(pseudo + hdr)) + hdr[18:]
    elif proto == "udp":
        payload = b"nat-verify"
        hdr = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0)
        pseudo = s + d + struct.pack("!BBH", 0, num, len(hdr) + len(payload))
        c = _csum(pseudo + hdr + payload) or 0xFFFF
        l4 = hdr[:6] + struct.pack("!H", c) + payload
    elif proto == "sctp":
        init = struct.pack("!BBHIIHHI", 1, 0, 20, random.getrandbits(31) | 1, 65535, 10, 65535, 1)
        common = struct.pack("!HHII", sport, dport, 0, 0)
        # SCTP's CRC32c goes on the wire little-endian (the kernel stores cpu_to_le32).
        l4 = common[:8] + struct.pack("<I", crc32c(common + init)) + init
    else:
        raise ProbeError(f"protocol must be tcp, udp or sctp, received {proto!r}")
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 0, 0x4000, 64, num, 0, s, d)
    ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
    return ip + l4


def _icmp_sniffer() -> socket.socket:
    """AF_PACKET socket (in the current namespace) that sees only ICMP the node sends."""
    # ETH_P_ALL: protocol-specific packet sockets never see transmitted packets.
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))
    # Classic BPF: outgoing IPv4 ICMP, or TCP with RST set; everything else is cut in the
    # kernel so probes do not pay for reading their own packets.
    insns = [
        (0x28, 0, 0, 0xFFFFF000),  # 0 ldh [SKF_AD_OFF + SKF_AD_PROTOCOL]
        (0x15, 0, 9, ETH_P_IP),  # 1 jeq #0x800 ? 2 : drop
        (0x20, 0, 0, 0xFFFFF004),  # 2 ld [SKF_AD_OFF + SKF_AD_PKTTYPE]
        (0x15, 0, 7, PACKET_OUTGOING),  # 3 jeq #OUTGOING ? 4 : drop
        (0x30, 0, 0, 9),  # 4 ldb [9] (IP protocol; SOCK_DGRAM starts at the IP header)
        (0x15, 4, 0, 1),  # 5 jeq #ICMP ? accept : 6
        (0x15, 0, 4, 6),  # 6 jeq #TCP ? 7 : drop
        (0xB1, 0, 0, 0),  # 7 ldxb 4*([0]&0xf)  (IP header length)
        (0x50, 0, 0, 13),  # 8 ldb [x+13]  (TCP flags)
        (0x45, 0, 1, 0x04),  # 9 jset #RST ? accept : drop
        (0x06, 0, 0, 0xFFFF),  # 10 accept
        (0x06, 0, 0, 0),  # 11 drop
    ]
    prog = b"".join(struct.pack("=HBBI", *i) for i in insns)
    buf = ctypes.create_string_buffer(prog)
    fprog = struct.pack("=HxxxxxxQ", len(insns), ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
    sock.setblocking(False)
    # Anything queued before the filter was attached is unfiltered: drop it.
    with contextlib.suppress(BlockingIOError):
        while True:
            sock.recv(65535)
    return sock


def _parse_reply(pkt: bytes) -> tuple[tuple[str, str, int], tuple[int, int] | None] | None:
    """((proto, probe src, probe sport), (type, code)) of an ICMP error, or (..., None) for a
    TCP RST (its destination is the probe's source); None for anything else."""
    ihl = (pkt[0] & 0x0F) * 4
    if pkt[9] == 6 and len(pkt) >= ihl + 14:
        if not pkt[ihl + 13] & 0x04:
            return None
        dst = str(ipaddress.IPv4Address(pkt[16:20]))
        return ("tcp", dst, struct.unpack("!H", pkt[ihl + 2 : ihl + 4])[0]), None
    if len(pkt) < ihl + 8 + 20 + 4:
        return None
    typ, code = pkt[ihl], pkt[ihl + 1]
    if typ not in (3, 11, 12):
        return None
    inner = pkt[ihl + 8 :]
    iihl = (inner[0] & 0x0F) * 4
    if len(inner) < iihl + 4:
        return None
    proto = inner[9]
    src = str(ipaddress.IPv4Address(inner[12:16]))
    sport = struct.unpack("!H", inner[iihl : iihl + 2])[0]
    name = {6: "tcp", 17: "udp", 132: "sctp"}.get(proto, str(proto))
    return (name, src, sport), (typ, code)


@functools.lru_cache(maxsize=4096)
def _v4(text: str) -> ipaddress.IPv4Address:
    try:
        a = ipaddress.ip_address(text)
    except ValueError:
        raise ProbeError(f"expected an IPv4 address, received {text!r}") from None
    if a.version != 4:
        raise ProbeError(f"only IPv4 probes are supported, received {text}")
    return a


class Prober:
    """Sends probes through a built ``Topology``; owns the node's ctnetlink and sniffer sockets."""

    def __init__(self, topo: Topology, *, timeout: float = 0.05) -> None:
        self.topo = topo
        self.timeout = timeout
        with in_netns(topo.node):
            self.ct = Ctnetlink()
        self._sniffer: socket.socket | None = None
        self._raw: dict[int, socket.socket] = {}
        self._events: dict[tuple[str, str, int, str, int], CtEvent] = {}
        # (proto, src, sport) -> ICMP (type, code), or None for a TCP RST, seen by the sniffer
        self._replies: dict[tuple[str, str, int], tuple[int, int] | None] = {}
        self._next_port = SPORT_FIRST
        # Ports (by protocol) that DNAT may send a host's packet to on the node itself; a
        # host probe to a node address listens on them too (see ``_host_local``).
        self.local_ports: dict[str, set[int]] = {}
        self._host_listeners: dict[int, socket.socket] = {}
        spec = topo.spec
        self._ext_local = frozenset(spec.external_clients)
        self._node_local = spec.node_local()

    def close(self) -> None:
        self.ct.close()
        if self._sniffer is not None:
            self._sniffer.close()
            self._sniffer = None
        for s in self._raw.values():
            s.close()
        self._raw = {}

    def flush(self) -> None:
        """Forget every conntrack entry and any evidence not yet claimed."""
        self.ct.flush()
        self._drain()
        self._events.clear()
        self._replies.clear()

    def next_sport(self) -> int:
        port = self._next_port
        self._next_port += 1
        if self._next_port > SPORT_LAST:
            self._next_port = SPORT_FIRST
            self.flush()  # the range wrapped: old entries must not shadow new probes (P7)
        return port

    # -- sending -------------------------------------------------------------------------

    def _source_ns(self, src: str, dst: str, origin: str) -> tuple[int, bool, bool]:
        """(namespace fd, use a raw packet, stays local in the source namespace)."""
        spec = self.topo.spec
        a = _v4(src)
        d = _v4(dst)
        if origin == "external":
            if src in self._ext_local:
                return self.topo.ext, False, dst in self._ext_local or d.is_loopback
            return self.topo.ext, True, False
        if origin == "pod":
            if src not in self.topo.pods:
                raise ProbeError(
                    f"pod probe source {src} is not a pod of the topology ({', '.join(spec.pods) or 'none'})"
                )
            return self.topo.pods[src], False, d.is_loopback or dst == src
        if origin == "host":
            if not (a.is_loopback or src in self._node_local):
                raise ProbeError(
                    f"host probe source {src} is not a node address ({', '.join(sorted(self._node_local))}) or 127.0.0.0/8"
                )
            return self.topo.node, False, False
        raise ProbeError(f"origin must be external, pod or host, received {origin!r}")

    def _raw_socket(self, ns: int) -> socket.socket:
        sock = self._raw.get(ns)
        if sock is None:
            with in_netns(ns):
                sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
            self._raw[ns] = sock
        return sock

    def _ensure_sniffer(self) -> socket.socket:
        if self._sniffer is None:
            with in_netns(self.topo.node):
                self._sniffer = _icmp_sniffer()
        return self._sniffer

    def probe(
        self, src: str, dst: str, dport: int, proto: str, origin: str, sport: int | None = None
    ) -> tuple[Evidence, int]:
        """Send one probe and wait for its evidence; returns (evidence, source port used)."""
        if proto not in ("tcp", "udp", "sctp"):
            raise ProbeError(f"protocol must be tcp, udp or sctp, received {proto!r}")
        if not 0 < dport < 65536:
            raise ProbeError(f"destination port must be 1-65535, received {dport}")
        ns, raw, stays_local = self._source_ns(src, dst, origin)
        if stays_local:
            return Evidence(None, never_reached_node=True), sport or 0
        sp = sport if sport is not None else self.next_sport()
        if raw or proto == "sctp":
            return self._probe_raw(ns, src, dst, sp, dport, proto), sp
        return self._probe_socket(ns, src, dst, sp, dport, proto), sp

    def _probe_socket(
        self, ns: int, src: str, dst: str, sport: int, dport: int, proto: str
    ) -> Evidence:
        kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
        listeners: dict[int, socket.socket] = {}
        if ns == self.topo.node and (dst in self._node_local or _v4(dst).is_loopback):
            listeners = self._listen(proto, {dport, *self.local_ports.get(proto, ())})
        with in_netns(ns):
            sock = socket.socket(socket.AF_INET, kind)
        self._host_listeners = listeners
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.SOL_IP, IP_RECVERR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((src, sport))
            key = (proto, src, sport, dst, dport)
            if proto == "tcp":
                rc = sock.connect_ex((dst, dport))
                # EPERM: netfilter dropped it on the node's own OUTPUT path (REJECT or DROP);
                # the evidence that tells which comes next, as for any other probe.
                if rc not in (0, errno.EINPROGRESS, errno.EPERM):
                    return self._finish(key, Evidence(None, send_errno=rc))
            else:
                try:
                    sock.connect((dst, dport))
                    sock.send(b"nat-verify")
                except OSError as e:
                    if e.errno not in (errno.ECONNREFUSED, errno.EPERM):
                        return self._finish(key, Evidence(None, send_errno=e.errno or 0))
            return self._wait(key, sock, host=ns == self.topo.node)
        finally:
            sock.close()
            for lst in listeners.values():
                _drain_listener(lst)
                lst.close()
            self._host_listeners = {}

    def _listen(self, proto: str, ports: set[int]) -> dict[int, socket.socket]:
        """Listening sockets on 0.0.0.0:port in the node namespace (see ``_host_local``)."""
        out: dict[int, socket.socket] = {}
        kind = socket.SOCK_STREAM if proto == "tcp" else socket.SOCK_DGRAM
        with in_netns(self.topo.node):
            for port in ports:
                lst = socket.socket(socket.AF_INET, kind)
                try:
                    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    lst.setblocking(False)
                    lst.bind(("0.0.0.0", port))
                    if proto == "tcp":
                        lst.listen(64)
                except OSError:
                    lst.close()  # e.g. the port is one of our own probing sockets'
                    continue
                out[port] = lst
        return out

    def _probe_raw(
        self, ns: int, src: str, dst: str, sport: int, dport: int, proto: str
    ) -> Evidence:
        self._ensure_sniffer()
        sock = self._raw_socket(ns)
        key = (proto, src, sport, dst, dport)
        try:
            sock.sendto(build_packet(src, dst, sport, dport, proto), (dst, 0))
        except OSError as e:
            if e.errno != errno.EPERM:  # EPERM: dropped by OUTPUT, see _probe_socket
                return self._finish(key, Evidence(None, send_errno=e.errno or 0))
        return self._wait(key, None, host=ns == self.topo.node)

    # -- collecting ----------------------------------------------------------------------

    def _drain(self) -> None:
        for ev in self.ct.read_events():
            o = ev.orig
            self._events[(o.proto, o.src, o.sport, o.dst, o.dport)] = ev
        if self._sniffer is not None:
            while True:
                try:
                    pkt = self._sniffer.recv(65535)
                except BlockingIOError:
                    break
                parsed = _parse_reply(pkt)
                if parsed is not None:
                    self._replies[parsed[0]] = parsed[1]
        # Unclaimed evidence (late events, ICMP for other traffic) must not grow forever.
        if len(self._events) > 50000:
            self._events.clear()
        if len(self._replies) > 50000:
            self._replies.clear()

    def _finish(self, key: tuple[str, str, int, str, int], ev: Evidence) -> Evidence:
        self._drain()
        event = self._events.pop(key, None)
        self._replies.pop(key[:3], None)
        return Evidence(event) if event is not None else ev

    def _socket_error(self, sock: socket.socket) -> tuple[tuple[int, int] | None, bool]:
        """(ICMP type/code from the error queue, RST seen) for a probing socket."""
        icmp = None
        with contextlib.suppress(BlockingIOError, OSError):
            _data, anc, _flags, _addr = sock.recvmsg(512, 512, socket.MSG_ERRQUEUE)
            for level, typ, data in anc:
                if level == socket.SOL_IP and typ == IP_RECVERR and len(data) >= _EE.size:
                    _err, origin, etype, ecode, _pad, _info, _d = _EE.unpack_from(data)
                    if origin == SO_EE_ORIGIN_ICMP:
                        icmp = (etype, ecode)
        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        rst = icmp is None and err == errno.ECONNREFUSED and sock.type == socket.SOCK_STREAM
        return icmp, rst

    def _ends_local(self, event: CtEvent) -> bool:
        final = event.reply.src
        return final in self._node_local or final.startswith("127.")

    def _host_local(self, event: CtEvent, sock: socket.socket, deadline: float) -> Evidence:
        """Evidence for a host's packet that stays on the node.

        Conntrack confirms a locally generated packet at the end of POSTROUTING, *before* it
        loops back through lo into INPUT, so the NEW event does not mean it was accepted:
        filter INPUT may still REJECT or DROP it. The client socket tells: ICMP in its error
        queue is a REJECT; a completed handshake (TCP) or a datagram at our listener (UDP) is
        delivery; a RST is delivery to a closed port unless one of our listeners holds that
        port (then it is REJECT --reject-with tcp-reset); nothing at all is a DROP.
        """
        final_port = event.reply.sport
        listener = self._host_listeners.get(final_port)
        poller = select.poll()
        poller.register(sock, select.POLLERR | select.POLLOUT | select.POLLHUP)
        while True:
            icmp, rst = self._socket_error(sock)
            if icmp is not None:
                return Evidence(None, icmp=icmp)
            if sock.type == socket.SOCK_STREAM:
                if rst:
                    return Evidence(None, rst=True) if listener is not None else Evidence(event)
                err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                writable = any(ev & select.POLLOUT for _fd, ev in poller.poll(0))
                if writable and err == 0:
                    return Evidence(event)  # the handshake completed: delivered
            elif listener is not None and _drain_listener(listener):
                return Evidence(event)
            left = deadline - time.monotonic()
            if left <= 0:
                if sock.type != socket.SOCK_STREAM and listener is None:
                    # a datagram to a port nobody listens on draws ICMP 3/3 from the stack;
                    # silence here means it was delivered... or dropped: the evidence ends
                    return Evidence(event)
                return Evidence(None)
            poller.poll(max(1, int(left * 1000)))

    def _raw_host_local(
        self, event: CtEvent, key: tuple[str, str, int, str, int], deadline: float
    ) -> Evidence:
        """A raw (SCTP) probe from the node to itself: as in ``_host_local`` the NEW event
        comes before filter INPUT, so the sniffer decides. An ICMP error is a REJECT, except
        protocol unreachable (3/2): that is the node's own stack answering a protocol it does
        not speak (a kernel without SCTP), i.e. the packet was delivered (kube-proxy never
        writes ``--reject-with icmp-proto-unreachable``). On such a kernel silence is a DROP;
        a kernel with SCTP answers delivery with an SCTP ABORT the sniffer does not see, so
        there silence still reads as delivery."""
        poller = select.poll()
        assert self._sniffer is not None
        poller.register(self._sniffer, select.POLLIN)
        while True:
            self._drain()
            if key[:3] in self._replies:
                icmp = self._replies.pop(key[:3])
                if icmp is None or icmp == (3, 2):
                    return Evidence(event)
                return Evidence(None, icmp=icmp)
            left = deadline - time.monotonic()
            if left <= 0:
                return Evidence(event) if _KERNEL_SPEAKS_SCTP else Evidence(None)
            poller.poll(max(1, int(left * 1000)))

    def _wait(
        self,
        key: tuple[str, str, int, str, int],
        sock: socket.socket | None,
        *,
        host: bool = False,
    ) -> Evidence:
        deadline = time.monotonic() + self.timeout
        poller = select.poll()
        assert self.ct.events is not None
        poller.register(self.ct.events, select.POLLIN)
        if sock is not None:
            poller.register(sock, select.POLLERR | select.POLLHUP)
        elif self._sniffer is not None:
            poller.register(self._sniffer, select.POLLIN)
        while True:
            self._drain()
            event = self._events.pop(key, None)
            if event is not None:
                if host and self._ends_local(event):
                    # confirmed before filter INPUT: the verdict is still to come
                    if sock is not None:
                        return self._host_local(event, sock, deadline)
                    return self._raw_host_local(event, key, deadline)
                self._replies.pop(key[:3], None)
                return Evidence(event)
            icmp: tuple[int, int] | None = None
            rst = False
            if sock is not None:
                icmp, rst = self._socket_error(sock)
            elif key[:3] in self._replies:
                icmp = self._replies.pop(key[:3])
                rst = icmp is None
            if icmp is not None or rst:
                # The NEW event (if any) is queued before any reply exists: one last look.
                self._drain()
                event = self._events.pop(key, None)
                return Evidence(event) if event is not None else Evidence(None, icmp=icmp, rst=rst)
            left = deadline - time.monotonic()
            if left <= 0:
                return Evidence(None)
            poller.poll(max(1, int(left * 1000)))


def _drain_listener(lst: socket.socket) -> bool:
    """Accept (and close) or read whatever reached a listener; True if anything had."""
    got = False
    with contextlib.suppress(BlockingIOError, OSError):
        while True:
            if lst.type == socket.SOCK_STREAM:
                conn, _ = lst.accept()
                conn.close()
            else:
                lst.recv(65535)
            got = True
    return got


def own_pid_fds() -> int:
    """Open fds of this process (leak checks in tests)."""
    return len(os.listdir("/proc/self/fd"))
