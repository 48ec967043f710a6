"""Which Service port a KUBE-* chain belongs to, in any ruleset.

Two sources, because a real dump can hold chains of Services that no longer exist (stale) or
rules written without comments (large-cluster mode):

* hashing: every service port of the cluster (all families' names are derived the same way)
  gives its SVC/SVL/EXT/FW (and legacy XLB) chain names, and every endpoint of its
  EndpointSlices (whatever its conditions) its SEP chain name;
* comments: kube-proxy's own comments name the service port (``"<spn> cluster IP"`` on a jump
  to SVC/SVL/FW/EXT, ``<spn>`` on SEP rules, ``"<spn> -> ip:port"`` on SVC->SEP jumps...).
"""

from __future__ import annotations

import re

from nat_verify.kubeproxy.endpoints import endpoint_index
from nat_verify.kubeproxy.hashing import (
    SERVICE_PORT_PREFIXES,
    endpoint_chain_name,
)
from nat_verify.kubeproxy.serviceports import service_ports
from nat_verify.model.cluster import Cluster

_SERVICE_CHAIN = re.compile(r"^KUBE-(?:SVC|SVL|EXT|FW|XLB|SEP)-[A-Z2-7]{16}$")
_RULE = re.compile(r"^-A (\S+)(.*)$")
_COMMENT = re.compile(r'--comment (?:"([^"]*)"|(\S+))')
_JUMP = re.compile(r"(?:^|\s)-j (\S+)")
# comment suffixes kube-proxy appends to the service port name
_SUFFIXES = (
    " cluster IP",
    " external IP",
    " loadbalancer IP",
    " has no endpoints",
    " has no local endpoints",
    " health check node port",
)


def chain_owners(cluster: Cluster, family: int) -> dict[str, str]:
    """Chain name -> service port name, from hashing the cluster's service ports of ``family``.

    Endpoint chains are computed for every endpoint regardless of readiness or locality, so
    chains of any node's ruleset are covered (node locality does not change names).
    """
    out: dict[str, str] = {}
    index = endpoint_index(cluster, "", family)
    for sp in service_ports(cluster, family):
        for prefix in SERVICE_PORT_PREFIXES:
            out[prefix + sp.hash16] = sp.spn
        for ep in index.get((sp.namespace, sp.name, sp.port_name, sp.protocol), ()):
            out[endpoint_chain_name(sp.spn, sp.proto, ep.endpoint)] = sp.spn
    return out


def _spn_from_comment(comment: str) -> str:
    for prefix in (
        "masquerade traffic for ",
        "pod traffic for ",
        "masquerade LOCAL traffic for ",
        "route LOCAL traffic for ",
        "other traffic to ",
    ):
        if comment.startswith(prefix):
            return comment[len(prefix) :].split(" ", 1)[0]
    if " -> " in comment:
        return comment.split(" -> ", 1)[0]
    for suffix in _SUFFIXES:
        if comment.endswith(suffix):
            return comment[: -len(suffix)]
    if " traffic not accepted by " in comment:
        return comment.split(" ", 1)[0]
    return comment if " " not in comment else ""


def owners_from_comments(text: str) -> dict[str, str]:
    """Chain name -> service port name, read from kube-proxy's comments in a dump.

    A service chain is owned by the service port named in a comment on a rule *in* it or on a
    rule *jumping* to it. Unknown comment shapes are ignored, never guessed.
    """
    out: dict[str, str] = {}
    for raw in text.splitlines():
        m = _RULE.match(raw.strip())
        if m is None:
            continue
        chain, rest = m.group(1), m.group(2)
        c = _COMMENT.search(rest)
        if c is None:
            continue
        spn = _spn_from_comment(c.group(1) if c.group(1) is not None else c.group(2))
        if not spn or "/" not in spn:
            continue
        if _SERVICE_CHAIN.match(chain):
            out.setdefault(chain, spn)
        named = re.search(r" traffic not accepted by (KUBE-FW-[A-Z2-7]{16})", rest)
        if named is not None:
            out.setdefault(named.group(1), spn)
        j = _JUMP.search(rest)
        if j is not None and _SERVICE_CHAIN.match(j.group(1)):
            out.setdefault(j.group(1), spn)
    return out


def chain_owners_for_dump(cluster: Cluster, family: int, text: str) -> dict[str, str]:
    """Both sources merged; hashing the cluster wins where they disagree."""
    return {**owners_from_comments(text), **chain_owners(cluster, family)}
