"""kube-proxy layout eras: the catalogue, per-era goldens, base jumps, and inference from a dump.

The goldens (``tests/golden/eras``) are hand-written from upstream ``proxier.go`` of the era
(see that directory's README for which release was read and what each delta is); they are not
the compiler's output.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nat_verify.kube import load_cluster
from nat_verify.kubeproxy.compiler import compile_node, era_base_jumps
from nat_verify.kubeproxy.eras import (
    ERA_NAMES,
    ERAS,
    NEWEST,
    UnknownVersion,
    era_for_version,
    era_named,
)
from nat_verify.kubeproxy.infer import choose_era, infer_era
from nat_verify.netfilter.parse import parse
from nat_verify.netfilter.render import render
from nat_verify.netfilter.saveform import to_save_form

GOLDEN = Path(__file__).parents[1] / "golden" / "eras"
SPECS = Path(__file__).parents[2] / "specs"


@pytest.mark.parametrize(
    ("version", "era"),
    [("1.16", "1.16"), ("1.17", "1.17"), ("1.18", "1.18"), ("v1.18.2", "1.18"), ("1.19", "1.18"),
     ("1.20", "1.20"), ("1.21", "1.21"), ("1.22", "1.21"), ("1.23", "1.23"), ("1.24", "1.24"),
     ("1.25", "1.25"), ("1.26", "1.26"), ("1.27", "1.27"), ("1.29", "1.27"), ("1.30", "1.30"),
     ("1.31", "1.31"), ("1.35", "1.31")],
)  # fmt: skip
def test_release_to_era(version: str, era: str) -> None:
    assert era_for_version(version).name == era


@pytest.mark.parametrize("version", ["1.15", "1.9", "2.0", "latest", "1", ""])
def test_unknown_release_is_refused(version: str) -> None:
    with pytest.raises(UnknownVersion):
        era_for_version(version)


def test_catalogue_is_ordered_and_ends_at_the_current_layout() -> None:
    minors = [int(e.name.split(".")[1]) for e in ERAS]
    assert minors == sorted(minors) and ERAS[0].name == "1.16" and NEWEST.nfacct_localhost
    assert [e.layout for e in ERAS].index("ext") == ERA_NAMES.index("1.24")


@pytest.mark.parametrize("era", ERA_NAMES)
def test_era_golden(era: str) -> None:
    cluster = load_cluster(GOLDEN / "cluster.yaml")
    expected = (GOLDEN / f"expected-{era}.rules").read_text()
    assert compile_node(cluster, "node-1", 4, base_jumps=False, era=era_named(era)) == expected


def _jumps(era: str) -> list[str]:
    return [f"{table} -A {chain} {text}" for table, chain, text in era_base_jumps(era_named(era))]


PORTALS = '-m comment --comment "kubernetes service portals"'
EXTERNAL = '-m comment --comment "kubernetes externally-visible service portals"'
NAT = [f"nat -A PREROUTING {PORTALS} -j KUBE-SERVICES", f"nat -A OUTPUT {PORTALS} -j KUBE-SERVICES",
       'nat -A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING']  # fmt: skip


@pytest.mark.parametrize("era", ["1.16", "1.17", "1.18"])
def test_base_jumps_up_to_1_19_as_in_a_published_1_18_dump(era: str) -> None:
    # tests/realdumps/dumps/k8sprototypes-kind-calico-2020.rules, lines 23-29 (kubelet's
    # KUBE-FIREWALL jumps there are not kube-proxy's)
    assert _jumps(era) == [
        f"filter -A INPUT -m conntrack --ctstate NEW {PORTALS} -j KUBE-SERVICES",
        f"filter -A INPUT -m conntrack --ctstate NEW {EXTERNAL} -j KUBE-EXTERNAL-SERVICES",
        'filter -A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD',
        f"filter -A FORWARD -m conntrack --ctstate NEW {PORTALS} -j KUBE-SERVICES",
        f"filter -A OUTPUT -m conntrack --ctstate NEW {PORTALS} -j KUBE-SERVICES",
        *NAT,
    ]


def test_base_jumps_1_20_drop_input_to_kube_services_and_add_forward_to_external_services() -> None:
    # kubernetes#95252 (1.20): "Present in kube 1.13 - 1.19. Removed by #95252" (proxier.go)
    assert _jumps("1.20") == [
        f"filter -A INPUT -m conntrack --ctstate NEW {EXTERNAL} -j KUBE-EXTERNAL-SERVICES",
        'filter -A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD',
        f"filter -A FORWARD -m conntrack --ctstate NEW {PORTALS} -j KUBE-SERVICES",
        f"filter -A FORWARD -m conntrack --ctstate NEW {EXTERNAL} -j KUBE-EXTERNAL-SERVICES",
        f"filter -A OUTPUT -m conntrack --ctstate NEW {PORTALS} -j KUBE-SERVICES",
        *NAT,
    ]


@pytest.mark.parametrize("era", ["1.21", "1.23", "1.24"])
def test_base_jumps_1_21_to_1_24_as_in_published_dumps(era: str) -> None:
    # INPUT: k8s-102646 (2021) and k3s-5611 (2022); FORWARD: k3s-5142 (2022); the health-check
    # jump is kubernetes#97824 (1.21), read in 1.23's iptablesJumpChains
    assert _jumps(era) == [
        'filter -A INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS',
        f"filter -A INPUT -m conntrack --ctstate NEW {EXTERNAL} -j KUBE-EXTERNAL-SERVICES",
        'filter -A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD',
        f"filter -A FORWARD -m conntrack --ctstate NEW {PORTALS} -j KUBE-SERVICES",
        f"filter -A FORWARD -m conntrack --ctstate NEW {EXTERNAL} -j KUBE-EXTERNAL-SERVICES",
        f"filter -A OUTPUT -m conntrack --ctstate NEW {PORTALS} -j KUBE-SERVICES",
        *NAT,
    ]


def test_base_jumps_1_25_add_the_load_balancer_firewall_before_the_rest() -> None:
    lb = '-m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL'
    jumps = _jumps("1.25")
    assert [j for j in jumps if "KUBE-PROXY-FIREWALL" in j] == [f"filter -A {c} {lb}" for c in ("INPUT", "FORWARD", "OUTPUT")]
    assert jumps.index(f"filter -A FORWARD {lb}") + 1 == jumps.index(
        'filter -A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD'
    )
    assert not [j for j in jumps if j.endswith("-j KUBE-FIREWALL")]  # kubelet's until 1.27
    assert [j for j in _jumps("1.27") if j.endswith("-j KUBE-FIREWALL")] == [
        "filter -A INPUT -j KUBE-FIREWALL", "filter -A OUTPUT -j KUBE-FIREWALL"]  # fmt: skip


# One line per clue, in iptables-save spelling, and the era range it allows (by era name:
# "1.18" is the 1.18-1.19 era, "1.21" the 1.21-1.22 one).
CLUE_LINES = [
    ("-A KUBE-NODEPORTS -p tcp -m comment --comment \"default/x\" -m tcp --dport 30001 -j KUBE-XLB-ICKQE4PTG2WGVXBF", None, "1.23"),
    ("-A KUBE-NODEPORTS -p tcp -m comment --comment \"default/x\" -m tcp --dport 30001 -j KUBE-EXT-ICKQE4PTG2WGVXBF", "1.24", None),
    ("-A KUBE-SVC-ICKQE4PTG2WGVXBF -m comment --comment \"d/x\" -m statistic --mode random --probability 0.33332999982 -j KUBE-SEP-AAAAAAAAAAAAAAAA", None, "1.16"),
    ("-A KUBE-SVC-ICKQE4PTG2WGVXBF -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-AAAAAAAAAAAAAAAA", "1.17", None),
    ("-A KUBE-POSTROUTING -m comment --comment \"kubernetes service traffic requiring SNAT\" -m mark --mark 0x4000/0x4000 -j MASQUERADE", None, "1.18"),
    ("-A KUBE-SERVICES ! -s 10.244.0.0/16 -d 10.96.0.1/32 -p tcp -m comment --comment \"default/kubernetes:https cluster IP\" -m tcp --dport 443 -j KUBE-MARK-MASQ", None, "1.20"),
    ("-A KUBE-SVC-NPX46M4PTMTKRN6Y ! -s 10.244.0.0/16 -d 10.96.0.1/32 -p tcp -m comment --comment \"default/kubernetes:https cluster IP\" -m tcp --dport 443 -j KUBE-MARK-MASQ", "1.21", None),
    ("-A KUBE-NODEPORTS -p udp -m comment --comment ns3/np -m udp --dport 30053 -j KUBE-MARK-MASQ", None, "1.20"),
    ("-A KUBE-SVC-6FHI64L6SU553I4M -p udp -m comment --comment ns3/np -m udp --dport 30053 -j KUBE-MARK-MASQ", "1.21", "1.23"),
    ("-A KUBE-SERVICES -d 192.0.2.50/32 -p udp -m comment --comment \"ns3/np external IP\" -m udp --dport 53 -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j KUBE-SVC-6FHI64L6SU553I4M", None, "1.20"),
    ("-A INPUT -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES", None, "1.18"),
    ("-A FORWARD -m conntrack --ctstate NEW -m comment --comment \"kubernetes externally-visible service portals\" -j KUBE-EXTERNAL-SERVICES", "1.20", None),
    ("-A KUBE-FORWARD -s 10.42.0.0/16 -m comment --comment \"kubernetes forwarding conntrack pod source rule\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT", None, "1.17"),
    ("-A KUBE-FORWARD -m comment --comment \"kubernetes forwarding conntrack pod source rule\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT", "1.18", "1.21"),
    ("-A KUBE-FORWARD -m comment --comment \"kubernetes forwarding conntrack rule\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT", "1.23", None),
    ("-A KUBE-SVC-NPX46M4PTMTKRN6Y -m comment --comment \"default/kubernetes:https -> 172.18.0.2:6443\" -j KUBE-SEP-AAAAAAAAAAAAAAAA", "1.24", None),
    ("-A KUBE-SVC-NPX46M4PTMTKRN6Y -m comment --comment \"default/kubernetes:https\" -j KUBE-SEP-AAAAAAAAAAAAAAAA", None, "1.23"),
    ("-A INPUT -m comment --comment \"kubernetes health check service ports\" -j KUBE-NODEPORTS", "1.21", None),
    ("-A FORWARD -m conntrack --ctstate NEW -m comment --comment \"kubernetes load balancer firewall\" -j KUBE-PROXY-FIREWALL", "1.25", None),
    ("-A KUBE-FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name  ct_state_invalid_dropped_pkts -j DROP", "1.30", None),
    ("-A KUBE-NODEPORTS -d 127.0.0.0/8 -p tcp -m comment --comment \"d/x\" -m tcp --dport 3001 -m nfacct --nfacct-name  localhost_nps_accepted_pkts -j KUBE-EXT-AAAAAAAAAAAAAAAA", "1.31", None),
    ("-A KUBE-SVL-AAAAAAAAAAAAAAAA -m comment --comment \"d/x has no local endpoints\" -j KUBE-MARK-DROP", "1.24", "1.24"),
    ("-A KUBE-SERVICES -d 10.0.0.1/32 -p tcp -m comment --comment \"default/x: cluster IP\" -m tcp --dport 80 -j KUBE-SVC-AAAAAAAAAAAAAAAA", None, "1.16"),
]  # fmt: skip


@pytest.mark.parametrize(("line", "low", "high"), CLUE_LINES)
def test_each_clue_bounds_the_era(line: str, low: str | None, high: str | None) -> None:
    inf = infer_era(f"> [12:345] {line}\n")  # quoted and counted, as pasted
    assert inf.low is not None and inf.high is not None and inf.evidence
    assert inf.low.name == (low or ERAS[0].name) and inf.high.name == (high or NEWEST.name)
    assert inf.era is not None and inf.era.name == inf.high.name and inf.evidence[0].line == 1


def test_rules_every_era_writes_the_same_bound_nothing() -> None:
    # a Local NodePort's loopback masquerade (1.16-1.23 KUBE-NODEPORTS) and the mark-clearing
    # KUBE-POSTROUTING (1.19, and the 1.16.13 / 1.17.9 / 1.18.6 backports of kubernetes#92035)
    for line in ("-A KUBE-NODEPORTS -s 127.0.0.0/8 -p tcp -m comment --comment ns2/lb:p443 -m tcp --dport 30443 -j KUBE-MARK-MASQ",
                 "-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN"):  # fmt: skip
        assert infer_era(line + "\n").era is None, line


def test_patch_releases_before_the_mark_fix() -> None:
    """kubernetes#92035 (1.19) reached 1.16.13, 1.17.9 and 1.18.6: an era stands for its last
    patch release; an earlier patch, or a dump with the one-rule KUBE-POSTROUTING, gets the
    layout that leaves the mark set."""
    for version, fixed in (("1.16.12", False), ("1.16.13", True), ("1.17.8", False), ("1.17.9", True),
                           ("v1.18.2", False), ("1.18.6", True), ("1.18", True), ("1.19.0", True)):  # fmt: skip
        assert era_for_version(version).postrouting_clears_mark is fixed, version
    assert era_for_version("1.18.5").releases == "1.18.0-1.18.5" and era_for_version("1.18.5").name == "1.18"
    dump = (Path(__file__).parents[1] / "realdumps" / "dumps" / "k8sprototypes-kind-calico-2020.rules").read_text()
    inf = infer_era(dump)  # kind v1.18.2
    assert inf.era is not None and inf.era.name == "1.18" and not inf.era.postrouting_clears_mark
    assert "kube-proxy 1.18.0-1.18.5 assumed" in inf.describe()


def test_no_clue_no_era_and_conflicts_are_reported() -> None:
    assert infer_era("-A KUBE-SEP-X -p tcp -m tcp -j DNAT --to-destination 10.0.0.1:80\n").era is None
    inf = infer_era(
        "-A KUBE-NODEPORTS -j KUBE-XLB-ICKQE4PTG2WGVXBF\n"
        '-A FORWARD -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL\n'
    )
    assert inf.era is not None and inf.conflicts and "conflicting" in inf.describe()


SPECS_FOR_ERAS = ["etp-local.yaml", "web-svc.yaml", "session-affinity.yaml", "no-endpoints.yaml",
                  "loadbalancer-source-ranges.yaml"]  # fmt: skip


@pytest.mark.parametrize("spec", SPECS_FOR_ERAS)
@pytest.mark.parametrize("era", ERA_NAMES)
def test_inference_finds_the_era_that_wrote_the_rules(spec: str, era: str) -> None:
    """What each era writes, once iptables-save has printed it, infers a range holding that era."""
    cluster = load_cluster(SPECS / spec)
    e = era_named(era)
    text = render(to_save_form(parse(compile_node(cluster, cluster.nodes[0].name, era=e), family=4)))
    inf = infer_era(text)
    assert inf.low is not None and inf.high is not None and not inf.conflicts
    assert inf.low.index <= e.index <= inf.high.index


def test_golden_cluster_pins_the_older_eras_exactly() -> None:
    cluster = load_cluster(GOLDEN / "cluster.yaml")
    for era in ("1.16", "1.17", "1.18", "1.20", "1.21", "1.23", "1.24", "1.31"):
        text = render(to_save_form(parse(compile_node(cluster, "node-1", era=era_named(era)), family=4)))
        assert infer_era(text).era == era_named(era), era


def test_choice_order_pinned_then_config_then_dump() -> None:
    rs = parse("*nat\n:KUBE-XLB-ICKQE4PTG2WGVXBF - [0:0]\nCOMMIT\n", family=4)
    assert choose_era("", False, rs).how == "inferred" and choose_era("", False, rs).era.name == "1.23"
    assert choose_era("1.30", False, rs).era.name == "1.30" and choose_era("1.30", False, rs).how == "config"
    assert choose_era("1.30", False, rs, pinned="1.17").era.name == "1.17"
    assert choose_era("", True, rs).era.name == "1.27"
    empty = choose_era("", False, parse("*nat\nCOMMIT\n", family=4))
    assert empty.how == "default" and empty.era == NEWEST and "no rule in the dump" in empty.describe()


def test_annotation_selects_the_era_and_legacy_layout_still_means_1_27(tmp_path: Path) -> None:
    base = (GOLDEN / "cluster.yaml").read_text()
    cfg = "kind: KubeProxyConfiguration\nmode: iptables\n"
    for annots, era in (('{nat-verify.io/kube-proxy-version: "1.17"}', "1.17"),
                             ('{nat-verify.io/legacy-layout: "true"}', "1.27")):  # fmt: skip
        p = tmp_path / f"{era}.yaml"
        p.write_text(base.replace(cfg, f"kind: KubeProxyConfiguration\nmetadata:\n  annotations: {annots}\nmode: iptables\n"))
        got = compile_node(load_cluster(p), "node-1", 4, base_jumps=False)
        assert got == (GOLDEN / f"expected-{era}.rules").read_text()


def test_bad_version_annotation_is_refused_with_file_and_line(tmp_path: Path) -> None:
    from nat_verify.kube.errors import KubeInputError

    p = tmp_path / "bad.yaml"
    p.write_text((GOLDEN / "cluster.yaml").read_text().replace(
        "kind: KubeProxyConfiguration\nmode: iptables\n",
        'kind: KubeProxyConfiguration\nmetadata:\n  annotations: {nat-verify.io/kube-proxy-version: "1.12"}\nmode: iptables\n'))  # fmt: skip
    with pytest.raises(KubeInputError) as e:
        load_cluster(p)
    assert str(p) in str(e.value) and "1.16" in str(e.value)


def test_1_26_adds_localhost_node_ports_off_and_the_terminating_fallback(tmp_path: Path) -> None:
    """1.26 differs from 1.25 only where a cluster asks: ``iptables.localhostNodePorts: false``
    (#108250, 1.26) keeps 127.0.0.0/8 out of the NodePort jump, and ProxyTerminatingEndpoints
    (beta, on by default in 1.26) uses serving terminating endpoints when none is ready."""
    p = tmp_path / "no-localhost.yaml"
    p.write_text((GOLDEN / "cluster.yaml").read_text().replace(
        "kind: KubeProxyConfiguration\nmode: iptables\n",
        "kind: KubeProxyConfiguration\nmode: iptables\niptables: {localhostNodePorts: false}\n"))  # fmt: skip
    cluster = load_cluster(p)
    jump = '-m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS'
    assert jump in compile_node(cluster, "node-1", 4, base_jumps=False, era=era_named("1.26"))
    assert jump not in compile_node(cluster, "node-1", 4, base_jumps=False, era=era_named("1.25"))
    rollout = load_cluster(SPECS / "rollout-terminating.yaml")
    node = rollout.nodes[0].name
    assert '"default/rollout:http has no endpoints"' in compile_node(rollout, node, 4, era=era_named("1.25"))
    assert "KUBE-SVC-56XJFQMOCOAWNP3Q" in compile_node(rollout, node, 4, era=era_named("1.26"))
    inf = infer_era(f'-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" {jump}\n')
    assert inf.low is not None and inf.low.name == "1.26"
