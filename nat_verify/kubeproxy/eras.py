"""kube-proxy's rule layouts, release by release: what changed and which releases share a layout.

An *era* is a run of kube-proxy releases that write the same rules for the same cluster (up to
spelling that iptables-save erases). Each era is a value of switches read by the compiler; the
catalogue below is oldest first and covers 1.16 to the current release. What each switch means,
and where it was read (upstream ``pkg/proxy/iptables/proxier.go`` of the release, release-note
PRs, and the published dumps in ``tests/realdumps``), is documented in ``docs/eras.md``.

Layout families:

* ``xlb`` (1.16-1.23): the ClusterIP masquerade rule sits in ``KUBE-SERVICES`` before the jump
  (1.23: first rule of ``KUBE-SVC-*``); NodePorts masquerade in ``KUBE-NODEPORTS``; every
  LoadBalancer IP goes through ``KUBE-FW-*`` (masquerade, jump, ``KUBE-MARK-DROP``);
  externalTrafficPolicy=Local uses ``KUBE-XLB-*`` (pod and host short-circuit, local endpoints
  or ``KUBE-MARK-DROP``); externalIPs masquerade and are captured by a ``physdev``/``addrtype``
  pair of rules.
* ``ext`` (1.24-): ``KUBE-EXT-*`` (external destinations), ``KUBE-SVL-*`` (Local policy),
  ``KUBE-FW-*`` only for loadBalancerSourceRanges, ``"spn -> ip:port"`` comments; from 1.25 the
  drops are filter rules (``KUBE-PROXY-FIREWALL``, ``"has no local endpoints" -j DROP``) instead
  of kubelet's ``KUBE-MARK-DROP``.
"""

from __future__ import annotations

from typing import Literal

import attrs


@attrs.frozen
class Era:
    name: str  # the first release of the era, "1.17"
    releases: str  # the releases it covers, "1.17-1.18"
    layout: Literal["xlb", "ext"]
    probability_digits: int  # the cascade's probabilities: Go "%0.5f" (<= 1.16) or "%0.10f"
    postrouting_clears_mark: bool  # KUBE-POSTROUTING: RETURN unmarked, xor-mark, MASQUERADE
    masq_in_services: bool  # xlb: ClusterIP masquerade rule in nat KUBE-SERVICES (else in KUBE-SVC)
    forward_rules: Literal["cidr-pair", "single"]  # KUBE-FORWARD's conntrack ACCEPT rule(s)
    health_checks: bool  # filter KUBE-NODEPORTS (healthCheckNodePort ACCEPT) and its INPUT jump
    jumps: Literal["input-services", "external-forward"]  # which base-chain jumps exist (below)
    arrow_comments: bool  # "spn -> ip:port" on KUBE-SVC/SVL -> KUBE-SEP rules
    mark_drop: bool  # kube-proxy jumps to kubelet's KUBE-MARK-DROP (ext: 1.24 only)
    proxy_firewall: bool  # filter KUBE-PROXY-FIREWALL, filter DROPs for missing local endpoints
    localhost_option: bool  # localhostNodePorts=false writes "! -d 127.0.0.0/8" (1.26+)
    writes_kube_firewall: bool  # kube-proxy (not only kubelet) writes KUBE-FIREWALL's localnet rule
    nfacct_invalid: bool  # "-m nfacct --nfacct-name ct_state_invalid_dropped_pkts"
    nfacct_localhost: bool  # "-m nfacct --nfacct-name localhost_nps_accepted_pkts"
    cidr_suffix: bool  # restore input writes "-d 10.0.0.1/32" (utilproxy.ToCIDR) rather than "-d 10.0.0.1"
    terminating_fallback: bool  # serving+terminating endpoints when no ready one (beta 1.26)
    internal_policy: bool  # internalTrafficPolicy is modelled for this era

    @property
    def index(self) -> int:
        return ERA_NAMES.index(self.name)

    def __str__(self) -> str:
        return f"kube-proxy {self.releases}"


_XLB = {"layout": "xlb", "arrow_comments": False, "mark_drop": True, "proxy_firewall": False,
        "localhost_option": False, "writes_kube_firewall": False, "nfacct_invalid": False,
        "nfacct_localhost": False, "cidr_suffix": True, "terminating_fallback": False,
        "internal_policy": False}  # fmt: skip
_EXT = {"layout": "ext", "probability_digits": 10, "postrouting_clears_mark": True,
        "masq_in_services": False, "forward_rules": "single", "health_checks": True,
        "jumps": "external-forward", "arrow_comments": True, "cidr_suffix": False,
        "internal_policy": True}  # fmt: skip

ERAS: tuple[Era, ...] = (
    Era("1.16", "1.16", probability_digits=5, postrouting_clears_mark=False, masq_in_services=True,
        forward_rules="cidr-pair", health_checks=False, jumps="input-services", **_XLB),  # type: ignore[arg-type]
    Era("1.17", "1.17-1.18", probability_digits=10, postrouting_clears_mark=False, masq_in_services=True,
        forward_rules="cidr-pair", health_checks=False, jumps="input-services", **_XLB),  # type: ignore[arg-type]
    Era("1.19", "1.19-1.22", probability_digits=10, postrouting_clears_mark=True, masq_in_services=True,
        forward_rules="single", health_checks=True, jumps="external-forward", **_XLB),  # type: ignore[arg-type]
    Era("1.23", "1.23", probability_digits=10, postrouting_clears_mark=True, masq_in_services=False,
        forward_rules="single", health_checks=True, jumps="external-forward", **_XLB),  # type: ignore[arg-type]
    Era("1.24", "1.24", mark_drop=True, proxy_firewall=False, localhost_option=False, writes_kube_firewall=False,
        nfacct_invalid=False, nfacct_localhost=False, terminating_fallback=False, **_EXT),  # type: ignore[arg-type]
    Era("1.25", "1.25-1.26", mark_drop=False, proxy_firewall=True, localhost_option=False, writes_kube_firewall=False,
        nfacct_invalid=False, nfacct_localhost=False, terminating_fallback=True, **_EXT),  # type: ignore[arg-type]
    Era("1.27", "1.27-1.29", mark_drop=False, proxy_firewall=True, localhost_option=True, writes_kube_firewall=True,
        nfacct_invalid=False, nfacct_localhost=False, terminating_fallback=True, **_EXT),  # type: ignore[arg-type]
    Era("1.30", "1.30", mark_drop=False, proxy_firewall=True, localhost_option=True, writes_kube_firewall=True,
        nfacct_invalid=True, nfacct_localhost=False, terminating_fallback=True, **_EXT),  # type: ignore[arg-type]
    Era("1.31", "1.31 and later", mark_drop=False, proxy_firewall=True, localhost_option=True, writes_kube_firewall=True,
        nfacct_invalid=True, nfacct_localhost=True, terminating_fallback=True, **_EXT),  # type: ignore[arg-type]
)  # fmt: skip
ERA_NAMES: tuple[str, ...] = tuple(e.name for e in ERAS)
NEWEST = ERAS[-1]
OLDEST = ERAS[0]
LEGACY = ERAS[ERA_NAMES.index("1.27")]  # the v1.27 layout of upstream's test corpus


class UnknownVersion(ValueError):
    """A kube-proxy version outside the catalogue, or not of the form X.Y."""


def _minor(version: str) -> int:
    text = version.strip().lstrip("v")
    parts = text.split(".")
    if len(parts) < 2 or parts[0] != "1" or not parts[1].isdigit():
        raise UnknownVersion(f"{version!r} is not a Kubernetes version of the form 1.Y (e.g. 1.27)")
    return int(parts[1])


def era_for_version(version: str) -> Era:
    """The era of a kube-proxy release: ``"1.21"`` -> the 1.19-1.22 era; ``v1.30.2`` works too."""
    minor = _minor(version)
    if minor < 16:
        raise UnknownVersion(
            f"kube-proxy {version} is older than the oldest layout nat-verify knows (1.16)"
        )
    chosen = OLDEST
    for era in ERAS:
        if _minor(era.name) <= minor:
            chosen = era
    return chosen


def era_named(name: str) -> Era:
    return ERAS[ERA_NAMES.index(name)]
