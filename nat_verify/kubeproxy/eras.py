"""kube-proxy's rule layouts, release by release: what changed and which releases share a layout.

An *era* is a run of kube-proxy releases that write the same rules for the same cluster (up to
spelling that iptables-save erases). Each era is a value of switches read by the compiler; the
catalogue below is oldest first and covers 1.16 to the current release. What each switch means,
and where it was read (upstream ``pkg/proxy/iptables/proxier.go`` of the release, release-note
PRs, and the published dumps in ``tests/realdumps``), is documented in ``docs/eras.md``.

Layout families:

* ``xlb`` (1.16-1.23): every LoadBalancer IP goes through ``KUBE-FW-*`` (masquerade, jump,
  ``KUBE-MARK-DROP``); externalTrafficPolicy=Local uses ``KUBE-XLB-*`` (pod and host
  short-circuit, local endpoints or ``KUBE-MARK-DROP``). Up to 1.20 the masquerade rules sit in
  ``KUBE-SERVICES``/``KUBE-NODEPORTS`` before the jumps and externalIPs are captured by a
  ``physdev``/``addrtype`` pair of rules; from 1.21 the masquerade rules are in ``KUBE-SVC-*``
  and externalIPs are matched like ClusterIPs.
* ``ext`` (1.24-): ``KUBE-EXT-*`` (external destinations), ``KUBE-SVL-*`` (Local policy),
  ``KUBE-FW-*`` only for loadBalancerSourceRanges, ``"spn -> ip:port"`` comments; from 1.25 the
  drops are filter rules (``KUBE-PROXY-FIREWALL``, ``"has no local endpoints" -j DROP``) instead
  of kubelet's ``KUBE-MARK-DROP``.
"""

from __future__ import annotations

import re
from typing import Literal

import attrs


@attrs.frozen
class Era:
    name: str  # the first release of the era, "1.17"
    releases: str  # the releases it covers, "1.17-1.18"
    layout: Literal["xlb", "ext"]
    probability_digits: int  # the cascade's probabilities: Go "%0.5f" (<= 1.16) or "%0.10f"
    postrouting_clears_mark: bool  # KUBE-POSTROUTING: RETURN unmarked, xor-mark, MASQUERADE
    masq_in_services: bool  # xlb: masquerade rules in KUBE-SERVICES / KUBE-NODEPORTS (else in KUBE-SVC)
    external_ips_as_cluster_ips: bool  # xlb: externalIPs like ClusterIPs (else the physdev/addrtype pair)
    forward_rules: Literal["cidr-pair", "pair", "single"]  # KUBE-FORWARD's conntrack ACCEPT rule(s)
    health_checks: bool  # filter KUBE-NODEPORTS (healthCheckNodePort ACCEPT) and its INPUT jump
    jumps: Literal["input-services", "external-forward"]  # which base-chain jumps exist (compiler)
    arrow_comments: bool  # "spn -> ip:port" on KUBE-SVC/SVL -> KUBE-SEP rules
    mark_drop: bool  # kube-proxy jumps to kubelet's KUBE-MARK-DROP (ext: 1.24 only)
    proxy_firewall: bool  # filter KUBE-PROXY-FIREWALL, filter DROPs for missing local endpoints
    localhost_option: bool  # localhostNodePorts=false writes "! -d 127.0.0.0/8" (1.26+, #108250)
    writes_kube_firewall: bool  # kube-proxy (not only kubelet) writes KUBE-FIREWALL's localnet rule
    nfacct_invalid: bool  # "-m nfacct --nfacct-name ct_state_invalid_dropped_pkts"
    nfacct_localhost: bool  # "-m nfacct --nfacct-name localhost_nps_accepted_pkts"
    cidr_suffix: bool  # restore input writes "-d 10.0.0.1/32" (utilproxy.ToCIDR) rather than "-d 10.0.0.1"
    terminating_fallback: bool  # serving+terminating endpoints when no ready one (ProxyTerminatingEndpoints, beta 1.26)
    internal_policy: bool  # internalTrafficPolicy is modelled for this era
    # 1.16-1.18: the first patch release that clears the mark (kubernetes#92035, backported in
    # July 2020). The era is its last patch release; ``before_mark_fix`` gives the earlier ones.
    mark_fix_patch: str = ""

    @property
    def index(self) -> int:
        return ERA_NAMES.index(self.name)

    def __str__(self) -> str:
        return f"kube-proxy {self.releases}"


_XLB = {"layout": "xlb", "arrow_comments": False, "mark_drop": True, "proxy_firewall": False,
        "localhost_option": False, "writes_kube_firewall": False, "nfacct_invalid": False,
        "nfacct_localhost": False, "terminating_fallback": False, "internal_policy": False,
        "probability_digits": 10, "postrouting_clears_mark": True}  # fmt: skip
_OLD = {**_XLB, "masq_in_services": True, "external_ips_as_cluster_ips": False, "health_checks": False,
        "cidr_suffix": True}  # fmt: skip
_EXT = {"layout": "ext", "probability_digits": 10, "postrouting_clears_mark": True,
        "masq_in_services": False, "external_ips_as_cluster_ips": True, "forward_rules": "single",
        "health_checks": True, "jumps": "external-forward", "arrow_comments": True, "cidr_suffix": False,
        "internal_policy": True}  # fmt: skip

ERAS: tuple[Era, ...] = (
    Era("1.16", "1.16", forward_rules="cidr-pair", jumps="input-services", mark_fix_patch="1.16.13",
        **{**_OLD, "probability_digits": 5}),  # type: ignore[arg-type]
    Era("1.17", "1.17", forward_rules="cidr-pair", jumps="input-services", mark_fix_patch="1.17.9", **_OLD),  # type: ignore[arg-type]
    Era("1.18", "1.18-1.19", forward_rules="pair", jumps="input-services", mark_fix_patch="1.18.6", **_OLD),  # type: ignore[arg-type]
    Era("1.20", "1.20", forward_rules="pair", jumps="external-forward", **_OLD),  # type: ignore[arg-type]
    Era("1.21", "1.21-1.22", masq_in_services=False, external_ips_as_cluster_ips=True, forward_rules="pair",
        health_checks=True, jumps="external-forward", cidr_suffix=True, **_XLB),  # type: ignore[arg-type]
    Era("1.23", "1.23", masq_in_services=False, external_ips_as_cluster_ips=True, forward_rules="single",
        health_checks=True, jumps="external-forward", cidr_suffix=False, **_XLB),  # type: ignore[arg-type]
    Era("1.24", "1.24", mark_drop=True, proxy_firewall=False, localhost_option=False, writes_kube_firewall=False,
        nfacct_invalid=False, nfacct_localhost=False, terminating_fallback=False, **_EXT),  # type: ignore[arg-type]
    Era("1.25", "1.25", mark_drop=False, proxy_firewall=True, localhost_option=False, writes_kube_firewall=False,
        nfacct_invalid=False, nfacct_localhost=False, terminating_fallback=False, **_EXT),  # type: ignore[arg-type]
    Era("1.26", "1.26", mark_drop=False, proxy_firewall=True, localhost_option=True, writes_kube_firewall=False,
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


def before_mark_fix(era: Era) -> Era:
    """The patch releases of a 1.16-1.18 era before kubernetes#92035 reached them: one
    ``KUBE-POSTROUTING`` rule that masquerades and leaves the mark set (``era`` itself if it
    has no such releases)."""
    if not era.mark_fix_patch or not era.postrouting_clears_mark:
        return era
    minor, patch = era.mark_fix_patch.rsplit(".", 1)
    return attrs.evolve(era, postrouting_clears_mark=False, releases=f"{minor}.0-{minor}.{int(patch) - 1}")


class UnknownVersion(ValueError):
    """A kube-proxy version outside the catalogue, or not of the form X.Y."""


def _minor(version: str) -> int:
    text = version.strip().lstrip("v")
    parts = text.split(".")
    if len(parts) < 2 or parts[0] != "1" or not parts[1].isdigit():
        raise UnknownVersion(f"{version!r} is not a Kubernetes version of the form 1.Y (e.g. 1.27)")
    return int(parts[1])


def era_for_version(version: str) -> Era:
    """The era of a kube-proxy release: ``"1.22"`` -> the 1.21-1.22 era; ``v1.30.2`` works too.
    A patch release of 1.16-1.18 before the mark fix (``1.18.2``) gets ``before_mark_fix``;
    a minor version alone stands for its last patch release."""
    minor = _minor(version)
    if minor < 16:
        raise UnknownVersion(
            f"kube-proxy {version} is older than the oldest layout nat-verify knows (1.16)"
        )
    chosen = OLDEST
    for era in ERAS:
        if _minor(era.name) <= minor:
            chosen = era
    patch = _patch(version)
    if chosen.mark_fix_patch and patch is not None:
        fix_minor, fix_patch = chosen.mark_fix_patch.rsplit(".", 1)
        if _minor(fix_minor) == minor and patch < int(fix_patch):
            return before_mark_fix(chosen)
    return chosen


def _patch(version: str) -> int | None:
    m = re.match(r"v?1\.\d+\.(\d+)", version.strip())
    return int(m.group(1)) if m else None


def era_named(name: str) -> Era:
    return ERAS[ERA_NAMES.index(name)]
