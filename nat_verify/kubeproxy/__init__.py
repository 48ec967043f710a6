"""The kube-proxy (iptables mode) compiler: Cluster + node -> the exact ruleset kube-proxy writes.

README
======

Public API
----------
``compile_node(cluster, node, family=4, base_jumps=True, era=None) -> str``
    iptables-restore text (``*filter ... COMMIT`` then ``*nat ... COMMIT``) of a full sync on
    ``node`` for one IP family, in upstream's canonical order (``canonical.py``). With
    ``base_jumps`` the jump rules from the built-in chains are added (declared ``:INPUT - [0:0]``,
    which ``iptables-restore --noflush`` accepts without flushing or changing the policy).
    ``era`` is the kube-proxy release layout (``eras.py``; default: the KubeProxyConfiguration's
    ``kube_proxy_version`` or ``legacy_layout``, else the newest). See ``docs/eras.md``.
``eras.ERAS``, ``eras.era_for_version("1.21")``
    the layouts from 1.16 to the current one, and which one a release writes.
``infer.infer_era(text)``, ``infer.choose_era(...)``
    the era a dump's own rules show (works on excerpts), with the evidence lines.
``canonical_order(text) -> str``
    upstream's ``sortIPTablesRules`` for any restore text (to compare dumps order-insensitively).
``chain_owners(cluster, family) -> dict[str, str]``, ``owners_from_comments(text)``,
``chain_owners_for_dump(cluster, family, text)``
    KUBE-SVC/SVL/EXT/FW/XLB/SEP chain name -> service port name (``ns/name:port``, or
    ``ns/name`` for an unnamed port).
``service_port_chain_name(prefix, spn, proto)``, ``endpoint_chain_name(spn, proto, endpoint)``
    kube-proxy's chain-name hashing.
``apply_annotations(proxy_config, annotations) -> ProxyConfig``
    the output-spelling annotations below, for the YAML loader.
``CompileError``
    bad input (node not in the cluster, invalid addresses...), with ``file``/``line``.

Annotations on the KubeProxyConfiguration (``metadata.annotations``)
--------------------------------------------------------------------
How a given build or test harness *spells* the rules; not kube-proxy settings:

* ``nat-verify.io/mark-spelling: kube-proxy | test`` -> ``ProxyConfig.mark_spelling``
  (``0x00004000`` as real kube-proxy writes it, ``0x4000`` as upstream's unit tests do)
* ``nat-verify.io/random-fully: "true" | "false"`` -> ``random_fully``
  (``MASQUERADE --random-fully``; the Go fake reports it unsupported)
* ``nat-verify.io/nfacct: "true" | "false"`` -> ``nfacct`` (v1.28+ nfacct counter matches)
* ``nat-verify.io/legacy-layout: "true" | "false"`` -> ``legacy_layout`` (v1.27 output: no
  nfacct matches; after canonical ordering that is the only difference the corpus shows)
* ``nat-verify.io/terminating-fallback: "true" | "false"`` -> ``terminating_fallback`` (also the
  real ``featureGates.ProxyTerminatingEndpoints``)
* ``nat-verify.io/large-cluster-threshold: "<int>"`` -> ``large_cluster_threshold``
* ``nat-verify.io/kube-proxy-version: "1.Y"`` -> ``kube_proxy_version``: the rule layout of
  that release (``eras.py``); ``legacy-layout: "true"`` is the same as ``"1.27"``

Semantics notes (all from upstream ``proxier.go`` / ``topology.go``)
--------------------------------------------------------------------
* The node's addresses are ``Node.internal_ips`` of the family; the first one is the "node IP"
  (used for loadBalancerSourceRanges' allow-from-node rule). For ``nodePortAddresses`` the
  loopback address counts as a node address too (after the node IPs).
* "Local" endpoints are those whose ``node_name`` equals the node; endpoints are deduplicated
  by ``ip:port`` (the local copy wins) and sorted by that string.
* ``healthCheckNodePort`` is used only for type LoadBalancer with eTP=Local.
* With ``nfacct`` (the default, as v1.28+ kube-proxy) the rules use the nfacct objects
  ``ct_state_invalid_dropped_pkts`` and ``localhost_nps_accepted_pkts``; kube-proxy creates them
  before restoring, and ``iptables-restore`` fails without them (``nfacct add NAME``).
* ``large_cluster_threshold``: comments are dropped from SVC/SVL->SEP and SEP rules when the
  total number of endpoints of all service ports exceeds it.
"""

from nat_verify.kube.annotations import apply_annotations
from nat_verify.kubeproxy.canonical import canonical_order
from nat_verify.kubeproxy.compiler import compile_node
from nat_verify.kubeproxy.errors import CompileError
from nat_verify.kubeproxy.hashing import endpoint_chain_name, service_port_chain_name
from nat_verify.kubeproxy.owners import chain_owners, chain_owners_for_dump, owners_from_comments

__all__ = [
    "CompileError",
    "apply_annotations",
    "canonical_order",
    "chain_owners",
    "chain_owners_for_dump",
    "compile_node",
    "endpoint_chain_name",
    "owners_from_comments",
    "service_port_chain_name",
]
