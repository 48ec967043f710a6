"""Every published dump of the corpus loads, or is refused the way DESIGN.md says.

A dump that is a whole ``iptables-save`` loads strictly and its packets trace to the answers
written in the manifest (each with the reasoning read off the rules). An excerpt (no table
header, a grep, ``iptables -S``, prompt lines, a cut last line) is refused without
``--partial``: exit 2, one ``file:line`` message on stderr, nothing on stdout. With
``--partial`` (issue 8 item 6) the excerpts' packets are traced too: a packet whose path needs
a chain the excerpt does not show (``unseen``) must come out inconclusive, the others exactly
as written.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from nat_verify.cli import main
from tests.realdumps import corpus


def run(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    if r.exception and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.stdout, r.stderr


def partial_available() -> bool:
    code, out, _ = run("trace", "--help")
    return code == 0 and "--partial" in out


def is_complete(e: dict[str, object]) -> bool:
    return "complete" in e["form"]  # type: ignore[operator]


def test_manifest_is_sound() -> None:
    doc = corpus.manifest()
    assert doc["format"] == "nat_verify.realdumps/v1"
    seen = set()
    for e in corpus.entries():
        assert e["id"] not in seen
        seen.add(e["id"])
        assert e["file"] == f"dumps/{e['id']}.rules"
        assert corpus.path(e).is_file(), e["id"]
        assert corpus.text(e).strip(), e["id"]
        src = e["source"]
        assert src["url"].startswith("https://github.com/") and src["author"], e["id"]
        assert e["licence"] and e["what"] and e["form"] and e["obtained"], e["id"]
        assert "expected" in e["era"] and e["era"]["evidence"], e["id"]
    # every dump file is listed
    files = {p.name for p in (corpus.ROOT / "dumps").iterdir()}
    assert files == {corpus.path(e).name for e in corpus.entries()}


def test_corpus_size_and_spread() -> None:
    """Issue 8 item 9: at least 20 dumps, complete ones (8, each with its cluster) and excerpts,
    several CNIs and eras."""
    es = corpus.entries()
    assert len(es) >= 30
    assert sum(is_complete(e) for e in es) >= 8 and sum(not is_complete(e) for e in es) >= 20
    eras = {e["era"]["expected"] for e in es if e["era"]["expected"]}
    assert len(eras) >= 6
    complete = [e for e in es if is_complete(e)]
    assert all("cluster" in e and "check" in e for e in complete)
    assert len({e["era"]["expected"] for e in complete}) >= 5
    cnis = " ".join(e["cni_and_agents"] for e in es).lower()
    for agent in ("calico", "flannel", "weave", "cilium", "docker", "k3s", "kind", "firewalld", "aws vpc cni", "libvirt", "kindnet"):
        assert agent in cnis, agent


@pytest.mark.parametrize("dump_id", [e["id"] for e in corpus.entries() if is_complete(e)])
def test_complete_dumps_load_strictly(dump_id: str) -> None:
    e = corpus.entry(dump_id)
    code, out, err = run("trace", str(corpus.path(e)), "--node-ip", "192.0.2.10",
                         "--src", "192.0.2.99", "--dst", "192.0.2.98:1", "--format", "json")  # fmt: skip
    assert code in (0, 3), err
    assert json.loads(out)["format"] == "nat_verify.trace/v1"


@pytest.mark.parametrize("dump_id", [e["id"] for e in corpus.entries() if not is_complete(e)])
def test_excerpts_are_refused_strictly_with_file_and_line(dump_id: str) -> None:
    e = corpus.entry(dump_id)
    p = str(corpus.path(e))
    code, out, err = run("trace", p, "--node-ip", "192.0.2.10", "--src", "192.0.2.99", "--dst", "192.0.2.98:1")
    assert code == 2 and out == ""
    assert re.search(re.escape(p) + r":\d+: ", err), err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2


def _trace(e: dict[str, object], case: dict[str, object], partial: bool, facts: tuple[str, ...] = ()) -> dict[str, object]:
    node = e["node"]
    assert isinstance(node, dict)
    pkt = case["packet"]
    assert isinstance(pkt, dict)
    args = ["trace", str(corpus.path(e)), "--src", pkt["src"], "--dst", pkt["dst"],
            "--proto", pkt.get("proto", "tcp"), "--format", "json", *facts]  # fmt: skip
    if "from" in pkt:
        args += ["--from", pkt["from"]]
    if case.get("with_cluster"):  # the node as the reconstructed cluster has it (its own pod subnet)
        args += ["--cluster", str(corpus.ROOT / str(e["cluster"])), "--node", e["check"]["node"]]  # type: ignore[index]
    else:
        for ip in node["node_ips"]:
            args += ["--node-ip", ip]
        for cidr in node.get("pod_cidrs", ()):
            args += ["--pod-cidr", cidr]
    if partial:
        args.append("--partial")
    code, out, err = run(*args)
    assert code in (0, 3), err
    doc: dict[str, object] = json.loads(out)
    return doc


def _observed(doc: dict[str, object], keys: tuple[str, ...] = ("probability", "verdict", "destination", "masquerade")) -> list[dict[str, object]]:
    outs = doc["outcomes"]
    assert isinstance(outs, list)
    return sorted(({k: o[k] for k in keys} for o in outs), key=str)


def _fact_args(case: dict[str, object], tmp_path: Path, keep: tuple[str, ...] | None = None) -> list[str]:
    """The node facts a packet case gives (``facts``: ``cni``, ``interfaces``, ``ip_route``), as
    command-line options; ``keep`` names the only ones to give."""
    facts = case.get("facts") or {}
    assert isinstance(facts, dict)
    args: list[str] = []
    if "cni" in facts and (keep is None or "cni" in keep):
        args += ["--cni", facts["cni"]]
    if keep is None or "interfaces" in keep:
        for i in facts.get("interfaces", ()):
            args += ["--interface", i]
    if "ip_route" in facts and (keep is None or "ip_route" in keep):
        route = tmp_path / "ip-route.json"
        route.write_text(json.dumps(facts["ip_route"]))
        args += ["--ip-route", str(route)]
    return args


@pytest.mark.parametrize(("dump_id", "index"), corpus.packet_cases())
def test_packets_trace_to_the_answers_read_off_the_rules(dump_id: str, index: int, tmp_path: Path) -> None:
    e = corpus.entry(dump_id)
    case = e["packets"][index]
    partial = not is_complete(e)
    if partial and not partial_available():
        pytest.xfail("excerpts need trace --partial (issue 8 item 6)")
    doc = _trace(e, case, partial, tuple(_fact_args(case, tmp_path)))
    if case.get("unseen"):
        reasons = [o.get("reason", "") for o in doc["outcomes"] if o["verdict"] == "inconclusive"]  # type: ignore[attr-defined]
        assert reasons, (case["why"], doc)
        for part in case["unseen"]:  # the answer says what it could not see
            table = part.removesuffix(" table")
            assert any(f"table {table} is not in the excerpt" in r or part in r for r in reasons), (part, reasons)
    else:
        assert _observed(doc) == sorted(case["outcomes"], key=str), case["why"]
        if "source" in case:  # an SNAT by another agent shows in the source, not as a masquerade
            assert [o["source"] for o in doc["outcomes"]] == [case["source"]], case["why"]  # type: ignore[index]


@pytest.mark.parametrize(("dump_id", "index"), [(d, i) for d, i in corpus.packet_cases() if "without_facts" in corpus.entry(d)["packets"][i]])
def test_packets_that_need_a_node_fact_are_inconclusive_without_it(dump_id: str, index: int, tmp_path: Path) -> None:
    """Issue 8 item 4: a rule reading a fact nobody gave makes what depends on it inconclusive.

    The case's ``facts`` decide the answer (the test above); with only those ``keep`` names the
    answer must be inconclusive and name what is missing.
    """
    e = corpus.entry(dump_id)
    case = e["packets"][index]
    want = case["without_facts"]
    doc = _trace(e, case, not is_complete(e), tuple(_fact_args(case, tmp_path, tuple(want.get("keep", ())))))
    reasons = [o.get("reason", "") for o in doc["outcomes"] if o["verdict"] == "inconclusive"]  # type: ignore[attr-defined]
    if want.get("open") and not reasons:
        pytest.xfail(f"open, for {want['open']}: {want['why']}")
    assert reasons, (want["why"], doc)
    assert any(want["inconclusive_because"] in r for r in reasons), reasons
    assert not want.get("open"), f"fixed: remove 'open' from {dump_id} packet {index} in MANIFEST.json"


@pytest.mark.parametrize("dump_id", corpus.ids())
def test_layout_era_inferred_from_each_dump(dump_id: str) -> None:
    """Issue 8 item 2: the era the dump's own rules show, with its evidence lines."""
    from nat_verify.kubeproxy.infer import infer_era

    e = corpus.entry(dump_id)
    inf = infer_era(corpus.text(e))
    assert (inf.era.name if inf.era else None) == e["era"]["expected"], inf.describe()
    lines = corpus.text(e).splitlines()
    for ev in inf.evidence:
        if ev.line and ev.text:  # the evidence points at the dump line it read
            assert ev.text in lines[ev.line - 1], (ev, lines[ev.line - 1])


def _check_cases() -> list[tuple[str, str]]:
    out = []
    for e in corpus.entries():
        if "check" in e:
            out.append((e["id"], "plain"))
            if "with_facts" in e["check"]:
                out.append((e["id"], "with_facts"))
    return out


def _matches(f: dict[str, str], k: dict[str, str]) -> bool:
    return f["invariant"] == k["invariant"] and k["message"] in f["message"]


@pytest.mark.parametrize(("dump_id", "variant"), _check_cases())
def test_check_on_reconstructed_cluster_has_only_the_known_errors(dump_id: str, variant: str) -> None:
    """Issue 8 item 9: objects read off the rules, ``check`` on the node: no false alarm.

    The errors a dump does get are listed in the manifest with why each is true of that node
    (a behaviour of its kube-proxy release, a missing security fix, another agent's rule); any
    other error fails. ``with_facts`` runs the same check with the node facts the dump's rules
    and its document show (interfaces, the CNI). A false alarm nat-verify still raises is listed
    under ``false_alarms`` with its owner and why it is false: the test is then an expected
    failure, and it fails outright once the false alarm is gone (so the listing is removed).
    """
    e = corpus.entry(dump_id)
    chk = e["check"]
    spec = chk if variant == "plain" else chk["with_facts"]
    args = ["check", str(corpus.path(e)), "--cluster", str(corpus.ROOT / e["cluster"]), "--node", chk["node"], "--format", "json"]
    if variant == "with_facts":
        args += spec["args"]
    if not is_complete(e):
        args.append("--partial")
    code, out, err = run(*args)
    doc = json.loads(out)
    errors = [f for f in doc["findings"] if f["severity"] == "error"]
    known = spec.get("expected_errors", [])
    false = spec.get("false_alarms", [])
    for f in errors:
        assert any(_matches(f, k) for k in known + false), f
    for k in known:
        assert any(_matches(f, k) for f in errors), k
    raised = [k for k in false if any(_matches(f, k) for f in errors)]
    gone = [k for k in false if k not in raised]
    assert not gone, f"no longer raised, remove from {dump_id} false_alarms in MANIFEST.json: {gone}"
    if raised:
        pytest.xfail("; ".join(f"{k['invariant']} {k['message']!r}: {k['owner']}" for k in raised))
    assert code == (1 if known else 0) or (code == 3 and not known)


def test_check_partial_says_why_each_result_is_inconclusive() -> None:
    """Issue 8 item 6: on an excerpt, what depends on a chain it does not show is inconclusive,
    and the result says which: the grep of weave-3568 shows no nat PREROUTING (and no raw
    table), so no packet can be followed to the Service's rules."""
    e = corpus.entry("weave-3568-grep-xlb-local")
    code, out, err = run("check", str(corpus.path(e)), "--cluster", str(corpus.ROOT / e["cluster"]),
                         "--node", e["check"]["node"], "--partial", "--format", "json")  # fmt: skip
    doc = json.loads(out)
    assert code == 3 and doc["meta"]["partial"] is True
    statuses = {r["status"] for r in doc["results"]}
    assert statuses <= {"inconclusive", "holds"} and "proved" not in statuses
    for r in doc["results"]:
        if r["status"] == "inconclusive":
            assert "is not in the excerpt" in r["reason"], r
