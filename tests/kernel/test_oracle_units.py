"""Pure parts of the oracle (no privileges needed): packet building, netlink parsing,
classification, the availability switch and the CI contract of ``kernel_ok``."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from nat_verify.oracle.loader import complete_tables, nfacct_names
from nat_verify.oracle.netlink import (
    CTA_TUPLE_ORIG,
    CTA_TUPLE_REPLY,
    NLA_F_NESTED,
    CtEvent,
    Tuple5,
    _nla,
    encode_tuple,
    parse_ct,
)
from nat_verify.oracle.oracle import classify, kernel_available, to_outcome_key
from nat_verify.oracle.probe import Evidence, _csum, build_packet, crc32c

ROOT = Path(__file__).resolve().parents[2]


def test_crc32c_check_value() -> None:
    # The published CRC-32C (Castagnoli) check value of "123456789" (RFC 3720 B.4 family).
    assert crc32c(b"123456789") == 0xE3069283


def test_tcp_syn_checksums_verify() -> None:
    pkt = build_packet("10.0.0.1", "10.0.0.2", 40000, 80, "tcp")
    # A correct Internet checksum sums (with itself included) to 0xffff, i.e. _csum == 0.
    assert _csum(pkt[:20]) == 0
    pseudo = pkt[12:20] + struct.pack("!BBH", 0, 6, len(pkt) - 20)
    assert _csum(pseudo + pkt[20:]) == 0
    assert pkt[20 + 13] == 0x02  # SYN only


def test_sctp_init_crc_covers_the_packet() -> None:
    pkt = build_packet("10.0.0.1", "10.0.0.2", 40000, 80, "sctp")
    l4 = pkt[20:]
    stored = struct.unpack("<I", l4[8:12])[0]
    assert crc32c(l4[:8] + b"\0\0\0\0" + l4[12:]) == stored
    assert l4[12] == 1  # INIT chunk


def test_ctnetlink_tuples_parse() -> None:
    orig = Tuple5("tcp", "203.0.113.2", 20000, "10.96.0.10", 80)
    reply = Tuple5("tcp", "10.244.1.2", 8080, "10.244.1.1", 61000)
    attrs_ = _nla(CTA_TUPLE_ORIG | NLA_F_NESTED, encode_tuple(orig)) + _nla(
        CTA_TUPLE_REPLY | NLA_F_NESTED, encode_tuple(reply)
    )
    msg = b"\0" * 16 + b"\x02\x00\x00\x00" + attrs_  # nlmsghdr (unused here) + nfgenmsg
    assert parse_ct(msg, 16, len(msg)) == CtEvent(orig, reply)


def _ev(orig: Tuple5, reply: Tuple5) -> Evidence:
    return Evidence(CtEvent(orig, reply))


def test_classify_reads_nat_from_the_reply_tuple() -> None:
    local = frozenset({"192.168.0.2", "10.244.1.1"})
    o = Tuple5("tcp", "203.0.113.2", 20000, "10.96.0.10", 80)
    # reply.src = where the connection really went (DNAT); reply.dst = who the endpoint
    # answers (the SNAT address).
    r = classify(
        _ev(o, Tuple5("tcp", "10.244.1.2", 8080, "10.244.1.1", 5555)),
        local,
        "203.0.113.2",
        20000,
        "10.96.0.10",
        80,
    )
    assert (r.verdict, r.dnat, r.snat_ip) == ("forward", ("10.244.1.2", 8080), "10.244.1.1")
    assert to_outcome_key(r) == ("forward", "10.244.1.2", 8080, True)
    # untranslated, to a node address: delivered locally
    o2 = Tuple5("tcp", "203.0.113.2", 20001, "192.168.0.2", 22)
    r = classify(
        _ev(o2, Tuple5("tcp", "192.168.0.2", 22, "203.0.113.2", 20001)),
        local,
        "203.0.113.2",
        20001,
        "192.168.0.2",
        22,
    )
    assert (r.verdict, r.dnat, r.snat_ip) == ("accept", None, None)
    assert to_outcome_key(r) == ("accept", "192.168.0.2", 22, False)
    assert classify(Evidence(None, icmp=(3, 3)), local).reject_with == "icmp-port-unreachable"
    assert classify(Evidence(None, rst=True), local).reject_with == "tcp-reset"
    assert classify(Evidence(None), local).verdict == "drop"
    assert classify(Evidence(None, never_reached_node=True), local).verdict == "lost"
    assert classify(Evidence(None, send_errno=101), local).verdict == "unreachable"


def test_loader_text_helpers() -> None:
    text = (
        "*filter\n-A INPUT -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP\nCOMMIT\n"
    )
    assert nfacct_names(text) == ["ct_state_invalid_dropped_pkts"]
    full = complete_tables(text)
    assert full.startswith(text)
    assert "*nat\nCOMMIT\n" in full and "*raw\nCOMMIT\n" in full and full.count("*filter") == 1


def test_disable_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KOR_DISABLE", "1")
    assert kernel_available() == "KOR_DISABLE is set"
    monkeypatch.delenv("KOR_DISABLE")
    monkeypatch.setenv("NAT_VERIFY_NO_KERNEL", "1")
    assert kernel_available() == "NAT_VERIFY_NO_KERNEL is set"


@pytest.mark.parametrize(("require", "expect_rc", "word"), [("", 0, "skipped"), ("1", 1, "error")])
def test_missing_kernel_skips_unless_required(require: str, expect_rc: int, word: str) -> None:
    # CI sets NAT_VERIFY_REQUIRE_KERNEL=1: an unusable kernel must then fail, never skip.
    env = dict(os.environ, NAT_VERIFY_NO_KERNEL="1", NAT_VERIFY_REQUIRE_KERNEL=require)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/kernel/test_isolation.py::test_no_leak_over_20_setup_teardown_cycles",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == expect_rc, res.stdout + res.stderr
    assert word in res.stdout.splitlines()[-1]
    assert "NAT_VERIFY_NO_KERNEL is set" in res.stdout
