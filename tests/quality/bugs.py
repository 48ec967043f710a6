"""The planted-bug registry: correct kube-proxy dumps with one realistic defect each.

Idea from Hypothesis' own ``quality/`` suite: a verifier is only as good as the bugs it
finds. Every ``PlantedBug`` starts from the dump kube-proxy writes for a cluster and node
(``compile_node``, restore form, or the ``iptables-save`` spelling of it), applies ONE
explicit text edit (a function below, whose docstring says which real-world bug it stands
for and which invariant must catch it and why), and names the invariant IDs ``check_ruleset``
must report. ``witness`` is a packet whose model trace the edit changes: it proves (without
the checker) that the mutation has the effect its docstring claims.

``expected`` entries are alternatives joined by ``|``: ``("NV001", "NV015")`` means both must
be reported, ``("NV004|NV010",)`` means either one. History numbers refer to section 8 of
``/work/shared/reference/kube-proxy.md``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Literal

import attrs

from nat_verify.kube import load_cluster
from nat_verify.kubeproxy import compile_node
from nat_verify.kubeproxy.hashing import (
    EXT,
    FW,
    SVC,
    SVL,
    endpoint_chain_name,
    service_port_chain_name,
)
from nat_verify.model.cluster import Cluster
from nat_verify.model.packet import Packet
from nat_verify.netfilter.parse import parse
from nat_verify.netfilter.render import render
from nat_verify.netfilter.saveform import to_save_form
from tests.quality.edits import (
    delete_chain,
    delete_line,
    delete_lines_where,
    insert_before,
    replace_in_line,
    replace_in_lines,
    replace_word,
)

ROOT = Path(__file__).resolve().parents[2]
QUALITY = Path(__file__).resolve().parent / "clusters"

Mutation = Callable[[str], str]


@attrs.frozen
class PlantedBug:
    name: str
    cluster: str  # path relative to the repository root
    node: str
    mutate: Mutation
    expected: tuple[str, ...]  # every entry must be reported; "A|B" = either
    note: str
    family: Literal[4, 6] = 4
    form: Literal["restore", "save"] = "restore"
    severities: tuple[str, ...] = ("error",)  # severities that count as "caught"
    witness: Packet | None = None  # a packet whose trace the defect changes
    witness_recent: tuple[tuple[tuple[str, str], float], ...] = ()  # xt_recent state for it
    not_flagged: tuple[str, ...] = ()  # IDs that must NOT be reported (by-design behaviour)
    parse_error: bool = False  # the defect makes the dump unloadable (the parser refuses it)
    history: str = ""  # reference kube-proxy.md section 8 bug number(s)
    service: str = ""  # the Service port the packet findings must name ("" = node-wide bug)


# ---------------------------------------------------------------------------------------------
# chain names (kube-proxy's hashing, so the edits read like the dumps)


def _chain(prefix: str, spn: str, proto: str = "tcp") -> str:
    return service_port_chain_name(prefix, spn, proto)


def _sep(spn: str, endpoint: str, proto: str = "tcp") -> str:
    return endpoint_chain_name(spn, proto, endpoint)


WEB = "default/web-svc:http"
THREE = "default/three:http"
LB = "default/lb-restricted:http"
EXTIP = "default/ext-ip:admin"
ETP = "default/etp-local:http"
ITPNP = "default/itp-np:http"
MIXED = "default/mixed:http"
STICKY = "default/sticky:https"
INGRESS = "ingress-nginx/ingress-nginx-controller:http"


# ---------------------------------------------------------------------------------------------
# mutations


def remove_middle_endpoint_jump(text: str) -> str:
    """Lose the SVC->SEP jump of the 2nd of 3 endpoints (a hand edit or a torn partial restore).

    The cascade becomes 1/3 for the first endpoint and 2/3 for the last; the second gets
    nothing though the cluster lists it. Every packet still lands on a usable endpoint, so the
    fault is the distribution (NV007), and the dump no longer matches the cluster's endpoints
    (NV015). The SEP chain left behind is also orphaned (NV014, not required).
    """
    return delete_line(text, f"-A {_chain(SVC, THREE)} ", f'"{THREE} -> 10.42.2.31:8080"')


def remove_last_endpoint_jump(text: str) -> str:
    """Lose the final, unconditional SVC->SEP jump of a 2-endpoint Service.

    The first jump still fires with probability 1/2; the other half falls out of the SVC chain
    and leaves nat un-DNATed, forwarded to the ClusterIP itself: "never elsewhere" breaks
    (NV001), and the endpoint 10.42.2.3 is missing from the dump (NV015).
    """
    return delete_line(text, f"-A {_chain(SVC, WEB)} ", f'"{WEB} -> 10.42.2.3:8080"')


def dnat_to_not_ready_pod(text: str) -> str:
    """DNAT to api-3 (10.42.2.22), whose readiness probe fails, instead of api-2 (10.42.2.21).

    api-3 is neither ready nor serving-terminating, so it is not a usable endpoint at all:
    NV001 ("DNAT to a usable endpoint, never elsewhere"), not NV013 (which is about serving
    terminating endpoints).
    """
    return replace_in_line(
        text, ("DNAT --to-destination 10.42.2.21:8080",), "10.42.2.21:8080", "10.42.2.22:8080"
    )


def dnat_to_other_services_pod(text: str) -> str:
    """lb-restricted's endpoint chain DNATs to ext-ip's pod (10.42.2.15:9443).

    A copy-paste or chain-hash collision style bug: the packet reaches a real, ready pod, but of
    another Service, so it is not one of this Service's endpoints (NV001).
    """
    return replace_in_line(
        text, ("DNAT --to-destination 10.42.2.14:8080",), "10.42.2.14:8080", "10.42.2.15:9443"
    )


def dnat_to_service_port(text: str) -> str:
    """DNAT to the pod on the Service port (80) instead of the targetPort (8080).

    The classic "port vs targetPort" mix-up: right pod, wrong port, connection refused (NV001
    requires port = the endpoint's targetPort).
    """
    return replace_in_line(
        text, ("DNAT --to-destination 10.42.1.7:8080",), "10.42.1.7:8080", "10.42.1.7:80"
    )


def ext_without_mark_masq(text: str) -> str:
    """Drop the ``-j KUBE-MARK-MASQ`` rule from KUBE-EXT of an eTP=Cluster Service.

    NodePort traffic from outside is DNATed but keeps its client source: with
    externalTrafficPolicy=Cluster it must be masqueraded (NV004), also because replies from a
    pod on another node would bypass this node's conntrack.
    """
    return delete_line(text, f'"masquerade traffic for {WEB} external destinations"')


def postrouting_without_xor(text: str) -> str:
    """Drop ``-j MARK --xor-mark`` from KUBE-POSTROUTING (the fix of kubernetes#78948).

    The masquerade mark survives MASQUERADE; when the packet is re-sent through the stack
    (VXLAN/IPIP encapsulation re-uses the skb) the outer packet is masqueraded again. NV014:
    "the masquerade mark is ... cleared before MASQUERADE".
    """
    return delete_line(text, "-A KUBE-POSTROUTING -j MARK --xor-mark")


def mark_without_mask(text: str) -> str:
    """KUBE-MARK-MASQ writes the whole mark: ``--set-mark 0x4000`` instead of ``--or-mark``.

    ``--set-mark V`` is ``--set-xmark V/0xffffffff``: every other agent's mark bit (Calico,
    Cilium) is wiped, the bug of kubernetes#19983 / felix#964. NV014: mark set without mask.
    """
    return replace_in_line(
        text, ("-A KUBE-MARK-MASQ -j MARK",), "--or-mark 0x00004000", "--set-mark 0x4000"
    )


def mark_full_mask_saveform(text: str) -> str:
    """In ``iptables-save`` spelling: ``--set-xmark 0x4000/0x4000`` becomes ``0x4000/0xffffffff``.

    Same defect as ``mark_without_mask`` as it shows in a real node's dump (NV014).
    """
    return replace_in_line(
        text, ("-A KUBE-MARK-MASQ -j MARK",), "--set-xmark 0x4000/0x4000", "--set-xmark 0x4000/0xffffffff"
    )


def cascade_half_for_three(text: str) -> str:
    """The first of three endpoints gets ``--probability 0.5`` instead of 1/3 (off-by-one n).

    Shares become 1/2, 1/4, 1/4: all packets land on usable endpoints, but not uniformly (NV007).
    """
    return replace_in_line(
        text, (f'"{THREE} -> 10.42.1.31:8080"', "--probability"), "0.3333333333", "0.5000000000"
    )


def five_decimal_probabilities(text: str) -> str:
    """The probabilities pre-kubernetes#83599 kube-proxy wrote: ``%0.5f``, i.e. 0.33333.

    The kernel stores round(0.33333 * 2^31); iptables-save prints ``0.33332999982``
    (reference 3.10). The first endpoint gets 0.33333 and the others 0.333335 each: off by
    about 7000 quantisation steps, well outside the kernel's 2^-31 rounding (NV007).
    """
    return replace_in_line(
        text, (f'"{THREE} -> 10.42.1.31:8080"', "--probability"), "0.33333333349", "0.33332999982"
    )


def no_reject_for_endpointless_clusterip(text: str) -> str:
    """Drop the filter REJECT of a Service with no usable endpoints (kubernetes#17359, #31328).

    The ClusterIP is not DNATed (no nat rule) and nothing rejects it: the pod's connection is
    forwarded un-NATed towards a virtual IP and hangs until timeout (NV003).
    """
    return delete_line(text, "-A KUBE-SERVICES ", '"default/broken:http has no endpoints"')


def no_reject_for_endpointless_nodeport(text: str) -> str:
    """Drop the KUBE-EXTERNAL-SERVICES REJECT of an endpoint-less NodePort (kubernetes#31435).

    External traffic to node:30040 is neither DNATed nor rejected; it is delivered to the
    host, where nothing listens (or something unrelated does). NV003.
    """
    return delete_line(text, "-A KUBE-EXTERNAL-SERVICES ", '"default/broken:http has no endpoints"')


def reject_not_hooked_from_forward(text: str) -> str:
    """Filter KUBE-SERVICES is reachable from OUTPUT only, not from FORWARD (kubernetes#60124).

    Host traffic is rejected, but a pod's packet to the endpoint-less ClusterIP takes the
    FORWARD path and is forwarded un-NATed (NV003, checked per hook).
    """
    return delete_line(text, "-A FORWARD ", '"kubernetes service portals"', "-j KUBE-SERVICES")


def foreign_forward_accept(text: str) -> str:
    """Another agent (flannel-style ``-s <pod CIDR> -j ACCEPT``) inserted at the top of FORWARD.

    calico#1055 / reference bug #3: the ACCEPT runs before kube-proxy's jumps, so the REJECT of
    an endpoint-less Service is never reached for pod traffic (NV003). Only a whole-node dump
    shows it.
    """
    return insert_before(
        text,
        ("-A FORWARD ", '"kubernetes load balancer firewall"'),
        '-A FORWARD -s 10.42.0.0/16 -m comment --comment "flanneld forward" -j ACCEPT',
    )


def foreign_prerouting_accept(text: str) -> str:
    """A foreign ``-A PREROUTING -d <clusterIP> -j ACCEPT`` in nat before kube-proxy's jump.

    Docker/Calico-style rules inserted at position 1 of a built-in chain run before
    kube-proxy's (reference 2.3); ACCEPT ends the nat table for the packet, so the ClusterIP is
    never DNATed and is forwarded as is (NV001).
    """
    return insert_before(
        text,
        ("-A PREROUTING ", "-j KUBE-SERVICES"),
        "-A PREROUTING -d 10.43.0.15/32 -p tcp -m tcp --dport 80 -j ACCEPT",
    )


def etp_local_without_pod_short_circuit(text: str) -> str:
    """eTP=Local on a node without local endpoints, minus the pod short-circuit (kubernetes#66354).

    Pods on node-2 reaching the LB IP fall through KUBE-EXT un-DNATed and hit the filter DROP
    "has no local endpoints" although a cluster endpoint exists: NV005 says pod and host sources
    are short-circuited to cluster endpoints.
    """
    return delete_line(text, f'"pod traffic for {ETP} external destinations"')


def etp_local_without_host_short_circuit(text: str) -> str:
    """eTP=Local without the "route LOCAL traffic" rule, the state before kubernetes PR 77523.

    A process on node-2 connecting to the LB IP is masquerade-marked but not sent anywhere:
    the packet leaves un-DNATed towards the LB, which hashes it back to a node that may have
    no endpoint (blackhole, NV005).
    """
    return delete_line(text, f'"route LOCAL traffic for {ETP} external destinations"')


def etp_local_without_pod_short_circuit_local_endpoints(text: str) -> str:
    """eTP=Local, an endpoint on this node and one on the other, minus the pod short-circuit.

    Pods on node-1 reaching the ingress LB IP go through KUBE-SVL like external clients and
    land on node-1's controller only: every outcome is an allowed endpoint, but the other
    node's controller is never chosen. NV005 says pod traffic is short-circuited to every
    cluster endpoint (kubernetes#66354, PR 77523); this is its finding, not only a skewed
    share (NV007).
    """
    return delete_line(text, f'"pod traffic for {INGRESS} external destinations"')


def etp_local_without_host_short_circuit_local_endpoints(text: str) -> str:
    """The same with the host: without "route LOCAL traffic" a process on node-1 is sent to
    KUBE-SVL, i.e. to node-1's controller only (NV005: host traffic is short-circuited)."""
    return delete_line(text, f'"route LOCAL traffic for {INGRESS} external destinations"')


def etp_local_masquerades_external(text: str) -> str:
    """eTP=Local KUBE-EXT marks everything for masquerade before jumping to KUBE-SVL.

    External clients lose their source IP, which is the whole point of externalTrafficPolicy
    Local (NV005: external traffic keeps its client IP).
    """
    ext = _chain(EXT, ETP)
    return insert_before(text, (f"-A {ext} -j {_chain(SVL, ETP)}",), f"-A {ext} -j KUBE-MARK-MASQ")


def nodeport_straight_to_svc(text: str) -> str:
    """KUBE-NODEPORTS jumps straight to KUBE-SVC, skipping KUBE-EXT (and its masquerade).

    External NodePort traffic is DNATed without masquerade: the client IP survives although
    eTP=Cluster (NV004) and a reply from the pod on node-2 goes straight to the client,
    bypassing this node's conntrack (NV010). The localhost NodePort rule still uses KUBE-EXT.
    """
    return replace_in_line(
        text,
        ("-A KUBE-NODEPORTS ", "--dport 30080 -j"),
        f"-j {_chain(EXT, WEB)}",
        f"-j {_chain(SVC, WEB)}",
    )


def source_ranges_not_enforced(text: str) -> str:
    """The LB IP rule jumps to KUBE-EXT directly; the KUBE-FW chain is gone.

    Looks like a Service whose loadBalancerSourceRanges were added after its chains were last
    written. Traffic from outside 198.51.100.0/24 and 192.168.1.0/24 is DNATed, and the
    KUBE-PROXY-FIREWALL DROP (which matches the LB IP, not the pod) no longer sees it (NV012).
    """
    text = replace_in_line(
        text, (f'"{LB} loadbalancer IP"', "-A KUBE-SERVICES "), f"-j {_chain(FW, LB)}", f"-j {_chain(EXT, LB)}"
    )
    return delete_chain(text, _chain(FW, LB))


def hairpin_masq_missing(text: str) -> str:
    """Drop the ``-s <endpoint> -j KUBE-MARK-MASQ`` hairpin rule of a SEP (kubernetes#20475).

    nginx-1 (10.42.1.7) reaching its own Service is DNATed to itself with its own source; the
    reply never goes back through conntrack and the connection fails (NV008).
    """
    return delete_line(text, "-A KUBE-SEP-", "-s 10.42.1.7/32", "-j KUBE-MARK-MASQ")


def svc_masq_rule_missing(text: str) -> str:
    """Drop the ``! -s <cluster CIDR> -j KUBE-MARK-MASQ`` rule from KUBE-SVC.

    ClusterIP traffic from outside the cluster (a node process, a routed off-cluster client)
    is DNATed but not masqueraded, so replies from a pod on another node bypass this node (NV009
    with the ClusterCIDR detector).
    """
    return delete_line(text, f"-A {_chain(SVC, WEB)} ", "! -s 10.42.0.0/16", "-j KUBE-MARK-MASQ")


def itp_local_uses_cluster_chain(text: str) -> str:
    """iTP=Local ClusterIP rule jumps to KUBE-SVC (all endpoints) instead of KUBE-SVL.

    ClusterIP traffic on node-1 reaches the endpoint on node-2 half of the time although
    internalTrafficPolicy=Local (NV006). (The SVL chain is orphaned, and its masquerade rule
    skipped, as side effects.)
    """
    return replace_in_line(
        text,
        (f'"{ITPNP} cluster IP"', "-A KUBE-SERVICES "),
        f"-j {_chain(SVL, ITPNP)}",
        f"-j {_chain(SVC, ITPNP)}",
    )


def itp_local_drop_missing(text: str) -> str:
    """Drop the "has no local endpoints" DROP of an iTP=Local Service on a node without one.

    ClusterIP traffic on node-2 is neither DNATed nor dropped: it is forwarded to the virtual IP
    (NV006: none local -> DROP).
    """
    return delete_line(text, "-A KUBE-SERVICES ", '"default/itp-local:redis has no local endpoints"')


def terminating_used_with_ready(text: str) -> str:
    """Add the serving-terminating endpoint 10.42.2.51 to the cascade next to the ready one.

    The terminating fallback (KEP-1669) applied although a Ready endpoint exists: half of the
    new connections go to a pod that is shutting down (NV013). Realistic output of a proxy that
    filters on ``serving`` instead of ``ready``.
    """
    svc = _chain(SVC, MIXED)
    sep_ready = _sep(MIXED, "10.42.1.51:8080")
    sep_term = _sep(MIXED, "10.42.2.51:8080")
    text = replace_in_line(
        text,
        (f"-A {svc} ", f'"{MIXED} -> 10.42.1.51:8080"'),
        f"-j {sep_ready}",
        f"-m statistic --mode random --probability 0.5000000000 -j {sep_ready}",
    )
    text = insert_before(
        text,
        (f"-A {svc} ", f'"{MIXED} cluster IP"', "-j KUBE-MARK-MASQ"),
        f"-A {sep_term} -m comment --comment {MIXED} -s 10.42.2.51 -j KUBE-MARK-MASQ",
        f"-A {sep_term} -m comment --comment {MIXED} -m tcp -p tcp -j DNAT --to-destination 10.42.2.51:8080",
    )
    text = insert_before(text, (f":{svc} - ",), f":{sep_term} - [0:0]")
    lines = text.split("\n")
    last = max(i for i, line in enumerate(lines) if line.startswith(f"-A {svc} "))
    lines.insert(last + 1, f'-A {svc} -m comment --comment "{MIXED} -> 10.42.2.51:8080" -j {sep_term}')
    return "\n".join(lines)


def affinity_recent_set_missing(text: str) -> str:
    """SEP DNAT rules without ``-m recent --name KUBE-SEP-... --set``.

    The SVC chain checks the per-endpoint lists but nothing ever fills them, so a ClientIP
    client is re-balanced on every connection (NV011: it must keep its endpoint).
    """
    seps = [_sep(STICKY, "10.42.1.13:8443"), _sep(STICKY, "10.42.2.13:8443")]
    for sep in seps:
        text = replace_in_line(text, (f"-A {sep} ", "-j DNAT"), f"-m recent --name {sep} --set ", "")
    return text


def affinity_timeout_too_short(text: str) -> str:
    """The sticky rules check ``--seconds 60`` though the Service asks for 600 s.

    A client that comes back after two minutes is re-balanced although it is still within its
    affinity timeout (NV011).
    """
    return replace_in_lines(text, ("-A KUBE-SVC-", "--rcheck"), "--seconds 600 ", "--seconds 60 ", 2)


def prerouting_base_jump_missing(text: str) -> str:
    """The nat ``PREROUTING -> KUBE-SERVICES`` jump is gone (flushed by another tool; kube-proxy
    only restores base jumps on full syncs).

    Pod and external traffic to every Service is forwarded un-DNATed (NV001). The service
    chains are still reachable from OUTPUT, so nothing is orphaned; the missing hook is a rule
    kube-proxy would write (drift, NV015) or, read as structure, NV014: either is accepted.
    """
    return delete_line(text, "-A PREROUTING ", '"kubernetes service portals"', "-j KUBE-SERVICES")


def jump_to_missing_chain(text: str) -> str:
    """The SEP chain of 10.42.2.3 is deleted while KUBE-SVC still jumps to it.

    A partial restore that removed a chain still referenced. The kernel refuses such a table
    (iptables-restore fails: "Couldn't load target"), and so does nat-verify's parser: the
    bug is reported as bad input at the jump's line rather than as an NV014 finding.
    """
    return delete_chain(text, _sep(WEB, "10.42.2.3:8080"))


def orphaned_sep_chain(text: str) -> str:
    """A leftover KUBE-SEP chain of a deleted pod (10.42.2.9) that nothing jumps to.

    Stale-chain cleanup missed it (it runs at most once per syncPeriod in large-cluster mode).
    Harmless for packets, but it is an orphaned KUBE chain (NV014).
    """
    sep = _sep(WEB, "10.42.2.9:8080")
    text = insert_before(text, (":KUBE-SVC-",), f":{sep} - [0:0]")
    return insert_before(
        text,
        (f"-A {_chain(SVC, WEB)} ", "! -s 10.42.0.0/16"),
        f"-A {sep} -m comment --comment {WEB} -s 10.42.2.9 -j KUBE-MARK-MASQ",
        f"-A {sep} -m comment --comment {WEB} -m tcp -p tcp -j DNAT --to-destination 10.42.2.9:8080",
    )


def stale_endpoint_after_pod_restart(text: str) -> str:
    """nginx-2 was recreated with IP 10.42.2.3, but the node still DNATs to its old IP 10.42.2.99.

    The whole endpoint (SVC comment, SEP chain name, hairpin rule, DNAT) is that of the old pod,
    as a missed EndpointSlice update leaves it: half the connections go to an address that no
    longer belongs to the Service (NV001) and the dump disagrees with the cluster (NV015).
    """
    old_sep, new_sep = _sep(WEB, "10.42.2.3:8080"), _sep(WEB, "10.42.2.99:8080")
    text = replace_word(text, old_sep, new_sep, 4)  # declaration, 2 rules, the SVC jump
    return replace_word(text, "10.42.2.3", "10.42.2.99", 3)  # SVC comment, hairpin, DNAT


def missing_service(text: str) -> str:
    """Every rule and chain of the Service ext-ip is missing (a sync that never happened).

    Traffic to its ClusterIP and externalIP is forwarded un-NATed although it has a ready
    endpoint (NV001), and the dump lacks a Service of the cluster (NV015).
    """
    owned = (_chain(SVC, EXTIP), _chain(EXT, EXTIP), _sep(EXTIP, "10.42.2.15:9443"))
    return delete_lines_where(
        text,
        lambda line: EXTIP in line or any(c in line for c in owned),
        at_least=9,
    )


def masquerade_without_random_fully(text: str) -> str:
    """``-j MASQUERADE`` without ``--random-fully`` (kubernetes#76699, fixed by PR 78547).

    SNAT source-port collisions drop SYNs under load. Not a wrong outcome for any single packet,
    so a structure warning (NV014), not an error.
    """
    return replace_in_line(text, ("-A KUBE-POSTROUTING ", "-j MASQUERADE"), " --random-fully", "")


def martian_drop_missing(text: str) -> str:
    """The KUBE-FIREWALL rule dropping non-local traffic to 127.0.0.0/8 is gone (CVE-2020-8558).

    kube-proxy sets route_localnet=1 for localhost NodePorts, so without this rule a neighbour
    can reach services bound to 127.0.0.1 on the node. DESIGN has no specific invariant; it is
    a structural omission (NV014).
    """
    return delete_line(text, "-A KUBE-FIREWALL ", "-d 127.0.0.0/8", "-j DROP")


def nodeport_reject_on_service_port(text: str) -> str:
    """The REJECT of the endpoint-less NodePort matches the Service port 80 instead of 30040.

    It now rejects every connection to port 80 on the node's addresses, shadowing a host
    process listening there (kubernetes#97360), while NodePort 30040 itself is no longer
    rejected (NV003).
    """
    return replace_in_line(
        text, ("-A KUBE-EXTERNAL-SERVICES ", "--dst-type LOCAL"), "--dport 30040", "--dport 80"
    )


def unchanged(text: str) -> str:
    """No defect: kube-proxy's own rules (for behaviour that is correct by design)."""
    return text


def ipv6_dnat_to_service_port(text: str) -> str:
    """IPv6 (ip6tables) dump: DNAT to ``[fd00:42:0:1::20]:80`` instead of the targetPort 8080 (NV001)."""
    return replace_in_line(
        text,
        ("DNAT --to-destination [fd00:42:0:1::20]:8080",),
        "[fd00:42:0:1::20]:8080",
        "[fd00:42:0:1::20]:80",
    )


def udp_service_matched_as_tcp(text: str) -> str:
    """The UDP DNS port's ClusterIP rule matches ``-p tcp`` (protocol lost in a template).

    UDP queries to 10.43.0.10:53 are not DNATed and are forwarded to the virtual IP (NV001).
    """
    return replace_in_line(
        text, ('"kube-system/dns:dns cluster IP"', "-A KUBE-SERVICES "), "-m udp -p udp", "-m tcp -p tcp"
    )


# ---------------------------------------------------------------------------------------------
# the registry


def _spec(name: str) -> str:
    return f"specs/{name}.yaml"


def _q(name: str) -> str:
    return f"tests/quality/clusters/{name}.yaml"


def _pkt(src: str, dst: str, dport: int, origin: str, proto: str = "tcp", mark: int = 0) -> Packet:
    return Packet(src=src, dst=dst, dport=dport, origin=origin, proto=proto, mark=mark)  # type: ignore[arg-type]


EXTERNAL_CLIENT = "198.51.100.7"

BUGS: tuple[PlantedBug, ...] = (
    PlantedBug(
        "missing-middle-endpoint-jump", _q("three-endpoints"), "node-1", remove_middle_endpoint_jump,
        ("NV007", "NV015"), "3 endpoints, 2nd jump removed: shares 1/3, 0, 2/3",
        witness=_pkt("10.42.1.5", "10.43.0.60", 80, "pod"),
        service=THREE,
    ),
    PlantedBug(
        "missing-last-endpoint-jump", _spec("web-svc"), "node-1", remove_last_endpoint_jump,
        ("NV001", "NV015"), "2 endpoints, unconditional jump removed: 1/2 un-DNATed",
        witness=_pkt("10.42.1.5", "10.43.0.15", 80, "pod"),
        service=WEB,
    ),
    PlantedBug(
        "dnat-to-not-ready-pod", _spec("pods-only"), "node-1", dnat_to_not_ready_pod,
        ("NV001",), "DNAT to a pod that is neither ready nor serving",
        witness=_pkt("10.42.1.5", "10.43.0.55", 80, "pod"),
        service="default/api:http",
    ),
    PlantedBug(
        "dnat-to-other-services-pod", _spec("loadbalancer-source-ranges"), "node-1",
        dnat_to_other_services_pod, ("NV001",), "endpoint chain DNATs to another Service's pod",
        witness=_pkt("10.42.1.5", "10.43.0.35", 80, "pod"),
        service=LB,
    ),
    PlantedBug(
        "dnat-to-service-port", _spec("web-svc"), "node-1", dnat_to_service_port,
        ("NV001",), "wrong targetPort in DNAT (service port used)",
        witness=_pkt("10.42.1.5", "10.43.0.15", 80, "pod"),
        service=WEB,
    ),
    PlantedBug(
        "ext-without-mark-masq", _spec("web-svc"), "node-1", ext_without_mark_masq,
        ("NV004",), "KUBE-EXT of eTP=Cluster without KUBE-MARK-MASQ",
        witness=_pkt(EXTERNAL_CLIENT, "192.168.1.10", 30080, "external"),
        service=WEB,
    ),
    PlantedBug(
        "postrouting-without-xor", _spec("web-svc"), "node-1", postrouting_without_xor,
        ("NV014",), "mark not cleared before MASQUERADE", history="11",
        witness=_pkt(EXTERNAL_CLIENT, "192.168.1.10", 30080, "external"),
    ),
    PlantedBug(
        "mark-set-without-mask", _spec("web-svc"), "node-1", mark_without_mask,
        ("NV014",), "--set-mark 0x4000 clobbers other agents' mark bits", history="9",
        witness=_pkt(EXTERNAL_CLIENT, "192.168.1.10", 30080, "external", mark=0x1),
    ),
    PlantedBug(
        "mark-full-mask-saveform", _spec("web-svc"), "node-1", mark_full_mask_saveform,
        ("NV014",), "--set-xmark 0x4000/0xffffffff in an iptables-save dump", form="save",
        history="9", witness=_pkt(EXTERNAL_CLIENT, "192.168.1.10", 30080, "external", mark=0x1),
    ),
    PlantedBug(
        "cascade-half-for-three", _q("three-endpoints"), "node-1", cascade_half_for_three,
        ("NV007",), "0.5 for the first of 3 endpoints",
        witness=_pkt("10.42.1.5", "10.43.0.60", 80, "pod"),
        service=THREE,
    ),
    PlantedBug(
        "five-decimal-probabilities", _q("three-endpoints"), "node-1", five_decimal_probabilities,
        ("NV007",), "pre-#83599 0.33333 probability, save form", form="save", history="17",
        witness=_pkt("10.42.1.5", "10.43.0.60", 80, "pod"),
        service=THREE,
    ),
    PlantedBug(
        "no-reject-endpointless-clusterip", _spec("no-endpoints"), "node-1",
        no_reject_for_endpointless_clusterip, ("NV003",), "ClusterIP of an endpoint-less Service not rejected",
        history="1", witness=_pkt("10.42.1.5", "10.43.0.40", 80, "pod"),
        service="default/broken:http",
    ),
    PlantedBug(
        "no-reject-endpointless-nodeport", _spec("no-endpoints"), "node-1",
        no_reject_for_endpointless_nodeport, ("NV003",), "NodePort of an endpoint-less Service not rejected",
        history="1", witness=_pkt(EXTERNAL_CLIENT, "192.168.1.10", 30040, "external"),
        service="default/broken:http",
    ),
    PlantedBug(
        "reject-not-hooked-from-forward", _spec("no-endpoints"), "node-1", reject_not_hooked_from_forward,
        ("NV003",), "filter KUBE-SERVICES not reachable from FORWARD", history="2",
        witness=_pkt("10.42.1.5", "10.43.0.40", 80, "pod"),
        service="default/broken:http",
    ),
    PlantedBug(
        "foreign-forward-accept", _spec("no-endpoints"), "node-1", foreign_forward_accept,
        ("NV003",), "flannel-style FORWARD ACCEPT before kube-proxy's jumps", history="3",
        witness=_pkt("10.42.1.5", "10.43.0.40", 80, "pod"),
        service="default/broken:http",
    ),
    PlantedBug(
        "foreign-prerouting-accept", _spec("web-svc"), "node-1", foreign_prerouting_accept,
        ("NV001",), "nat PREROUTING ACCEPT for the ClusterIP before KUBE-SERVICES", history="3",
        witness=_pkt("10.42.1.5", "10.43.0.15", 80, "pod"),
        service=WEB,
    ),
    PlantedBug(
        "etp-local-no-pod-short-circuit", _spec("etp-local"), "node-2",
        etp_local_without_pod_short_circuit, ("NV005",), "pod -> LB IP (eTP=Local, no local endpoint) dropped",
        history="4", witness=_pkt("10.42.2.5", "203.0.113.10", 80, "pod"),
        service=ETP,
    ),
    PlantedBug(
        "etp-local-no-host-short-circuit", _spec("etp-local"), "node-2",
        etp_local_without_host_short_circuit, ("NV005",), "host -> LB IP (eTP=Local, no local endpoint) not routed",
        history="4", witness=_pkt("192.168.1.11", "203.0.113.10", 80, "host"),
        service=ETP,
    ),
    PlantedBug(
        "etp-local-no-pod-short-circuit-with-local-endpoint", _spec("hostnetwork-daemonset"), "node-1",
        etp_local_without_pod_short_circuit_local_endpoints, ("NV005",),
        "pod -> LB IP (eTP=Local, local endpoint) only to the local endpoint",
        history="4", witness=_pkt("10.42.1.2", "203.0.113.20", 80, "pod"),
        service=INGRESS, not_flagged=("NV007",),
    ),
    PlantedBug(
        "etp-local-no-host-short-circuit-with-local-endpoint", _spec("hostnetwork-daemonset"), "node-1",
        etp_local_without_host_short_circuit_local_endpoints, ("NV005",),
        "host -> LB IP (eTP=Local, local endpoint) only to the local endpoint",
        history="4", witness=_pkt("192.168.1.10", "203.0.113.20", 80, "host"),
        service=INGRESS, not_flagged=("NV007",),
    ),
    PlantedBug(
        "etp-local-masquerades-external", _spec("etp-local"), "node-1", etp_local_masquerades_external,
        ("NV005",), "eTP=Local external traffic masqueraded (client IP lost)",
        witness=_pkt(EXTERNAL_CLIENT, "203.0.113.10", 80, "external"),
        service=ETP,
    ),
    PlantedBug(
        "nodeport-straight-to-svc", _spec("web-svc"), "node-1", nodeport_straight_to_svc,
        ("NV004|NV010",), "NodePort skips KUBE-EXT: no masquerade, remote endpoint's reply bypasses node",
        witness=_pkt(EXTERNAL_CLIENT, "192.168.1.10", 30080, "external"),
        service=WEB,
    ),
    PlantedBug(
        "source-ranges-not-enforced", _spec("loadbalancer-source-ranges"), "node-1",
        source_ranges_not_enforced, ("NV012",), "KUBE-FW chain dropped, LB IP -> KUBE-EXT",
        witness=_pkt("203.0.113.99", "203.0.113.20", 80, "external"),
        service=LB,
    ),
    PlantedBug(
        "hairpin-masq-missing", _spec("web-svc"), "node-1", hairpin_masq_missing,
        ("NV008",), "SEP without the hairpin masquerade rule (save form)", form="save", history="20",
        witness=_pkt("10.42.1.7", "10.43.0.15", 80, "pod"),
        service=WEB,
    ),
    PlantedBug(
        "svc-masq-rule-missing", _spec("web-svc"), "node-1", svc_masq_rule_missing,
        ("NV009",), "ClusterIP from off-cluster not masqueraded",
        witness=_pkt("192.168.1.10", "10.43.0.15", 80, "host"),
        service=WEB,
    ),
    PlantedBug(
        "itp-local-uses-cluster-chain", _q("itp-local-nodeport"), "node-1", itp_local_uses_cluster_chain,
        ("NV006",), "iTP=Local ClusterIP -> KUBE-SVC (remote endpoint used)",
        witness=_pkt("10.42.1.5", "10.43.0.65", 80, "pod"),
        service=ITPNP,
    ),
    PlantedBug(
        "itp-local-drop-missing", _spec("itp-local"), "node-2", itp_local_drop_missing,
        ("NV006",), "iTP=Local with no local endpoint: DROP missing",
        witness=_pkt("10.42.2.5", "10.43.0.25", 80, "pod"),
        service="default/itp-local:redis",
    ),
    PlantedBug(
        "terminating-used-with-ready", _q("mixed-terminating"), "node-1", terminating_used_with_ready,
        ("NV013",), "serving-terminating endpoint in the cascade next to a ready one",
        witness=_pkt("10.42.1.5", "10.43.0.70", 80, "pod"),
        service=MIXED,
    ),
    PlantedBug(
        "affinity-recent-set-missing", _spec("session-affinity"), "node-1", affinity_recent_set_missing,
        ("NV011",), "ClientIP affinity: recent --set missing",
        witness=_pkt("10.42.1.5", "10.43.0.30", 443, "pod"),
        service=STICKY,
    ),
    PlantedBug(
        "affinity-timeout-too-short", _spec("session-affinity"), "node-1", affinity_timeout_too_short,
        ("NV011",), "ClientIP affinity checked for 60 s instead of 600 s",
        # a client sent to 10.42.1.13 two minutes ago: still sticky with 600 s, not with 60 s
        witness=_pkt("10.42.1.5", "10.43.0.30", 443, "pod"),
        witness_recent=(((_sep(STICKY, "10.42.1.13:8443"), "10.42.1.5"), 120.0),),
        service=STICKY,
    ),
    PlantedBug(
        "prerouting-base-jump-missing", _spec("web-svc"), "node-1", prerouting_base_jump_missing,
        ("NV001", "NV014|NV015"), "nat PREROUTING -> KUBE-SERVICES missing",
        witness=_pkt("10.42.1.5", "10.43.0.15", 80, "pod"),
        service=WEB,
    ),
    PlantedBug(
        "jump-to-missing-chain", _spec("web-svc"), "node-1", jump_to_missing_chain,
        ("NV014",), "SVC jumps to a deleted SEP chain", parse_error=True,
    ),
    PlantedBug(
        "orphaned-sep-chain", _spec("web-svc"), "node-1", orphaned_sep_chain,
        ("NV014",), "leftover SEP chain nothing jumps to",
    ),
    PlantedBug(
        "stale-endpoint", _spec("web-svc"), "node-1", stale_endpoint_after_pod_restart,
        ("NV015", "NV001"), "DNAT to the old IP of a recreated pod",
        witness=_pkt("10.42.1.5", "10.43.0.15", 80, "pod"),
        service=WEB,
    ),
    PlantedBug(
        "missing-service", _spec("loadbalancer-source-ranges"), "node-1", missing_service,
        ("NV015", "NV001|NV002|NV003"), "all rules of Service ext-ip missing",
        witness=_pkt("10.42.1.5", "10.43.0.36", 8443, "pod"),
        service=EXTIP,
    ),
    PlantedBug(
        "masquerade-without-random-fully", _spec("web-svc"), "node-1", masquerade_without_random_fully,
        ("NV014",), "MASQUERADE without --random-fully", severities=("warning",), history="18",
    ),
    PlantedBug(
        "martian-drop-missing", _spec("web-svc"), "node-1", martian_drop_missing,
        ("NV014",), "KUBE-FIREWALL 127/8 martian drop missing (CVE-2020-8558)",
        severities=("error", "warning"), history="19",
        witness=_pkt(EXTERNAL_CLIENT, "127.0.0.1", 8080, "external"),
    ),
    PlantedBug(
        "nodeport-reject-on-service-port", _spec("no-endpoints"), "node-1", nodeport_reject_on_service_port,
        ("NV003",), "NodePort REJECT on port 80 shadows a host port, 30040 unrejected", history="21",
        witness=_pkt(EXTERNAL_CLIENT, "192.168.1.10", 30040, "external"),
        service="default/broken:http",
    ),
    PlantedBug(
        "nodeport-ignores-source-ranges-by-design", _spec("loadbalancer-source-ranges"), "node-1",
        unchanged, (), "NodePorts bypass KUBE-FW by design (kubernetes#33586): not an NV012 violation",
        not_flagged=("NV012",), history="7",
    ),
    PlantedBug(
        "ipv6-dnat-to-service-port", _spec("dual-stack"), "node-1", ipv6_dnat_to_service_port,
        ("NV001",), "IPv6 DNAT to the service port", family=6,
        witness=_pkt("fd00:42:0:1::5", "fd00:43::32", 80, "pod"),
        service="default/dual:http",
    ),
    PlantedBug(
        "udp-service-matched-as-tcp", _spec("named-targetport"), "node-1", udp_service_matched_as_tcp,
        ("NV001",), "UDP DNS ClusterIP rule written with -p tcp",
        witness=_pkt("10.42.1.5", "10.43.0.10", 53, "pod", proto="udp"),
        service="kube-system/dns:dns",
    ),
)


# ---------------------------------------------------------------------------------------------
# building the dumps


@cache
def cluster_of(path: str) -> Cluster:
    return load_cluster([str(ROOT / path)])


@cache
def correct_dump(path: str, node: str, family: int, form: str) -> str:
    """kube-proxy's rules for ``node``: restore text, or the iptables-save spelling of it."""
    text = compile_node(cluster_of(path), node, family=family)
    if form == "save":
        text = render(to_save_form(parse(text, family=family)))
    return text


def dumps(bug: PlantedBug) -> tuple[str, str]:
    """(correct dump, mutated dump) for a planted bug."""
    good = correct_dump(bug.cluster, bug.node, bug.family, bug.form)
    return good, bug.mutate(good)


def by_name(name: str) -> PlantedBug:
    for b in BUGS:
        if b.name == name:
            return b
    raise KeyError(name)


def alternatives(entry: str) -> frozenset[str]:
    return frozenset(re.split(r"\s*\|\s*", entry))
