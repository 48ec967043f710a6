"""Chain-name hashing against the verified examples of the reference (section 4)."""

from __future__ import annotations

import pytest

from nat_verify.kubeproxy.hashing import (
    EXT,
    FW,
    SVC,
    SVL,
    endpoint_chain_name,
    service_port_chain_name,
    service_port_name,
)


@pytest.mark.parametrize(
    ("spn", "proto", "expected"),
    [
        # reference kube-proxy.md section 4 table (matching test literals and real dumps)
        ("ns1/svc1:p80", "tcp", "KUBE-SVC-XPGD46QRK7WJZT7O"),
        ("default/kubernetes:https", "tcp", "KUBE-SVC-NPX46M4PTMTKRN6Y"),
        ("kube-system/kube-dns:dns", "udp", "KUBE-SVC-TCOU7JCQXEZGVUNU"),
        ("kube-system/kube-dns:dns-tcp", "tcp", "KUBE-SVC-ERIFXISQEP7F7OF4"),
        # from corpus dumps: unnamed port (legacy TerminatingEndpoints cases) and ns2..ns5
        ("ns1/svc1", "tcp", "KUBE-SVC-AQI2S6QIMU7PVVRP"),
        ("ns2/svc2:p80", "tcp", "KUBE-SVC-GNZBNJ2PO5MGZ6GT"),
        ("ns5/svc5:p80", "tcp", "KUBE-SVC-NUKIZ6OKUXPJNT4C"),
    ],
)
def test_service_port_chain(spn: str, proto: str, expected: str) -> None:
    assert service_port_chain_name(SVC, spn, proto) == expected


def test_endpoint_chain() -> None:
    # reference section 4: ns1/svc1:p80 + tcp + 10.180.0.1:80
    assert endpoint_chain_name("ns1/svc1:p80", "tcp", "10.180.0.1:80") == "KUBE-SEP-SXIVWICOYRO3J4NJ"
    # corpus legacy__TestOnlyLocalLoadBalancing: the local endpoint 10.180.2.1:80
    assert endpoint_chain_name("ns1/svc1:p80", "tcp", "10.180.2.1:80") == "KUBE-SEP-ZX7GRIZKSNUQ3LAJ"


def test_prefixes_share_the_hash_and_protocol_is_part_of_the_key() -> None:
    # TestOverallIPTablesRules: KUBE-EXT-/KUBE-FW-NUKIZ6OKUXPJNT4C belong to ns5/svc5:p80
    assert service_port_chain_name(EXT, "ns5/svc5:p80", "tcp") == "KUBE-EXT-NUKIZ6OKUXPJNT4C"
    assert service_port_chain_name(FW, "ns5/svc5:p80", "tcp") == "KUBE-FW-NUKIZ6OKUXPJNT4C"
    assert service_port_chain_name(SVL, "ns1/svc1", "tcp") == "KUBE-SVL-AQI2S6QIMU7PVVRP"
    assert service_port_chain_name(SVC, "ns1/svc1:p80", "udp") != "KUBE-SVC-XPGD46QRK7WJZT7O"
    # protocol case does not matter: kube-proxy lower-cases it first
    assert service_port_chain_name(SVC, "ns1/svc1:p80", "TCP") == "KUBE-SVC-XPGD46QRK7WJZT7O"
    assert len(service_port_chain_name(SVC, "a/b:c", "sctp")) == 25


def test_service_port_name() -> None:
    assert service_port_name("ns1", "svc1", "p80") == "ns1/svc1:p80"
    assert service_port_name("ns1", "svc1", "") == "ns1/svc1"
