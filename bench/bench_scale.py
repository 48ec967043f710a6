"""The scale benchmark: every figure of the scale targets from one command, measured in one run.

    python3 bench/bench_scale.py [--services 10000] [--endpoints 10] [--growth 100,1000,3000,10000,30000]
                                 [--fleet-nodes 100 --fleet-services 1000] [--quick] [--no-results]

Workload: ``bench/gen_cluster.py`` (service ports x endpoints, the realistic mix its docstring
lists: NodePorts, eTP=Local, iTP=Local, affinity, LoadBalancers with source ranges, Services
without endpoints, dual-stack), compiled for node-0 and saved as iptables-save prints it (in
``--out-dir``). Printed, next to its target and as ratios measured in this run:

* parse: seconds and peak RSS of a fresh process that parses the dump (target <= 5 s, <= 1 GiB);
* compile: seconds of ``compile_node`` (target <= 5 s);
* check: every invariant for every Service, with each engine available, next to
  ``iptables-legacy-restore`` loading the same dump into a fresh network namespace (root only;
  target: check < restore, aiming at a third). When a full check would take longer than
  ``--check-budget`` seconds (estimated from a stratified sample of Services checked first), the
  figure is the sample's per-Service cost times the number of Services, and says so;
* trace: packets/s on packets never seen before, and the rule-by-rule linear walk on a sample of
  the same packets (target >= 50,000/s and >= 100x the walk);
* growth: time and peak memory of compile, parse, a sampled check and ``diff`` (the dump against
  itself: its destination enumeration) at each size of ``--growth``, each size in a fresh
  process, with the growth factor per step next to the size factor;
* fleet: ``check`` over a directory of ``--fleet-nodes`` node dumps against one node's dump
  (goal: <= 3x the time of one node).

``bench/RESULTS.md`` is rewritten with the figures and the machine (unless ``--no-results``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bench_model import legacy_restore_seconds, packets, rate  # noqa: E402
from gen_cluster import generate_cluster  # noqa: E402

from nat_verify.check import CheckReport, check_ruleset  # noqa: E402
from nat_verify.check.nodectx import node_context  # noqa: E402
from nat_verify.kubeproxy import compile_node  # noqa: E402
from nat_verify.model.cluster import Cluster  # noqa: E402
from nat_verify.netfilter.interpreter import Interpreter  # noqa: E402
from nat_verify.netfilter.parse import parse, parse_file  # noqa: E402
from nat_verify.netfilter.render import render  # noqa: E402
from nat_verify.netfilter.ruleset import Ruleset  # noqa: E402
from nat_verify.netfilter.saveform import to_save_form  # noqa: E402

NODE = "node-0"
MiB = 1024 * 1024


def rss_mib() -> float:
    """Peak RSS of this process so far, MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load() -> float:
    return os.getloadavg()[0]


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def sub_cluster(cluster: Cluster, keep: list[int]) -> Cluster:
    """The cluster with only the Services at ``keep`` (and their slices); nodes and config stay."""
    import attrs

    svcs = [cluster.services[i] for i in keep]
    names = {(s.namespace, s.name) for s in svcs}
    slices = tuple(es for es in cluster.slices if (es.namespace, es.service_name) in names)
    return attrs.evolve(cluster, services=tuple(svcs), slices=slices)


def stratified(n: int, k: int) -> list[int]:
    """``k`` indices spread evenly over ``range(n)``: every kind of the generator's mix (i % 20)."""
    if k >= n:
        return list(range(n))
    step = n / k
    return sorted({int(j * step) + (j % 20) for j in range(k) if int(j * step) + (j % 20) < n})


def save_dump(cluster: Cluster, family: int, path: Path) -> tuple[str, float]:
    """Compile ``cluster`` for node-0, write it as iptables-save prints it; (text, compile seconds)."""
    restore, dt = timed(lambda: compile_node(cluster, NODE, family))
    text = render(to_save_form(parse(restore, family=family)))
    path.write_text(text)
    return text, dt


def engines() -> dict[str, Callable[[Cluster, Ruleset], CheckReport]]:
    """The check engines this tree has, by name (the engine seam adds more)."""
    from nat_verify.check.sharing import check_shared

    return {
        "exhaustive, one check per shape (check.sharing, what `nat-verify check` runs)":
            lambda c, rs: check_shared(c, NODE, rs, drift_check=False),
        "exhaustive, every Service on its own": lambda c, rs: check_ruleset(c, NODE, rs, drift_check=False),
    }  # fmt: skip


# -- child processes: one fresh process per measured stage keeps peak memory honest -------------


def child_parse(path: str) -> None:
    before = rss_mib()
    rs, dt = timed(lambda: parse_file(path))
    print(json.dumps({"seconds": dt, "peak_mib": rss_mib(), "start_mib": before, "rules": rs.rule_count()}))


def child_growth(services: int, endpoints: int, sample: int, out_dir: str) -> None:
    """Compile, parse, sampled check and diff at one size; one JSON line of figures."""
    from nat_verify.check.equivalence import equivalent

    fig: dict[str, Any] = {"services": services}
    base = rss_mib()
    cluster = generate_cluster(services, endpoints)
    restore, fig["compile_s"] = timed(lambda: compile_node(cluster, NODE, 4))
    fig["compile_mib"] = rss_mib() - base
    path = Path(out_dir) / f"growth-{services}.save"
    path.write_text(render(to_save_form(parse(restore, family=4))))
    del restore
    fig["lines"] = sum(1 for _ in path.open())
    before = rss_mib()
    rs, fig["parse_s"] = timed(lambda: parse_file(str(path)))
    fig["parse_mib"] = rss_mib() - before
    keep = stratified(len(cluster.services), sample)
    part = sub_cluster(cluster, keep)
    rep, dt = timed(lambda: check_ruleset(part, NODE, rs, drift_check=False))
    fig["check_per_service_ms"] = 1000 * dt / len(keep)
    fig["check_estimate_s"] = dt / len(keep) * services
    ctx = node_context(cluster, NODE, 4)
    before = rss_mib()
    eq, fig["diff_s"] = timed(lambda: equivalent(rs, rs, ctx))
    fig["diff_classes"] = eq.classes
    fig["diff_mib"] = rss_mib() - before
    fig["peak_mib"] = rss_mib()
    path.unlink()
    print(json.dumps(fig))


def run_child(*args: str, timeout: float | None = None) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"child {args[0]} failed: {out.stderr.strip()[-800:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


# -- the main measurements ------------------------------------------------------------------------


class Figures:
    """Lines printed as they are measured, kept for RESULTS.md."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def say(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def bench_node(a: argparse.Namespace, out: Path, fig: Figures) -> None:
    cluster = generate_cluster(a.services, a.endpoints)
    path = out / f"scale-{a.services}x{a.endpoints}.ipv4.save"
    text, t_compile = save_dump(cluster, 4, path)
    _, t_compile6 = save_dump(cluster, 6, out / f"scale-{a.services}x{a.endpoints}.ipv6.save")
    lines = text.count("\n")
    del text
    fig.say(f"## {a.services:,} service ports x {a.endpoints} endpoints, node {NODE}")
    fig.say()
    fig.say(f"- dump: {path.name}, {lines:,} lines, {path.stat().st_size / 1e6:.1f} MB (IPv6 dump beside it)")
    fig.say(f"- compile (IPv4): {t_compile:.2f} s (target <= 5 s: {verdict(t_compile <= 5)}); IPv6: {t_compile6:.2f} s")
    p = run_child("--child-parse", str(path))
    fig.say(f"- parse: {p['seconds']:.2f} s, peak RSS {p['peak_mib']:.0f} MiB of a fresh process "
            f"(target <= 5 s and <= 1 GiB: {verdict(p['seconds'] <= 5 and p['peak_mib'] <= 1024)})")  # fmt: skip
    rs = parse_file(str(path))
    legacy = legacy_restore_seconds(str(path))
    if legacy is None:
        fig.say("- iptables-legacy-restore into a fresh netns: not measured (needs root and iptables-legacy-restore)")
    else:
        fig.say(f"- iptables-legacy-restore of the same dump into a fresh netns: {legacy:.2f} s")
    for name, engine in engines().items():
        bench_check(name, engine, cluster, rs, legacy, a, fig)
    bench_trace(cluster, rs, a, fig)
    fig.say()


def bench_check(
    name: str, engine: Callable[[Cluster, Ruleset], CheckReport], cluster: Cluster, rs: Ruleset,
    legacy: float | None, a: argparse.Namespace, fig: Figures,
) -> None:  # fmt: skip
    n = len(cluster.services)
    keep = stratified(n, min(n, a.check_sample))
    rep, dt = timed(lambda: engine(sub_cluster(cluster, keep), rs))
    per = dt / len(keep)
    estimate = per * n
    if len(keep) == n or estimate <= a.check_budget:
        base = rss_mib()
        rep, total = timed(lambda: engine(cluster, rs))
        how = f"{total:.1f} s for all {n:,} Services"
        mem = f", peak RSS of the benchmark {rss_mib():.0f} MiB (+{rss_mib() - base:.0f})"
    else:
        total = estimate
        how = (f"~{total:.0f} s estimated for all {n:,} Services from a stratified sample of {len(keep)} "
               f"({1000 * per:.1f} ms per Service; a full run would pass --check-budget {a.check_budget:.0f} s)")  # fmt: skip
        mem = ""
    statuses: dict[str, int] = {}
    for r in rep.results:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    errors = sum(1 for f in rep.findings if f.severity == "error")
    fig.say(f"- check, engine {name}, every invariant: {how}{mem}; {rep.packets:,} packets traced, "
            f"results {statuses}, {errors} errors")  # fmt: skip
    if legacy:
        r = total / legacy
        fig.say(f"  - check / iptables-legacy-restore = {r:.2f}x (target < 1: {verdict(r < 1)}; aim <= 0.33: {verdict(r <= 0.34)})")


def bench_trace(cluster: Cluster, rs: Ruleset, a: argparse.Namespace, fig: Figures) -> None:
    ctx = node_context(cluster, NODE, 4)
    fast = Interpreter(rs, ctx)
    linear = Interpreter(rs, ctx, linear=True)
    pk = packets(cluster, NODE, a.packets)
    first = rate(fast, pk)
    again = rate(fast, pk)
    sample = pk[: max(20, min(len(pk), int(100_000 / max(1, len(cluster.services)))))]
    lin = rate(linear, sample)
    same = all(fast.trace(p) == linear.trace(p) for p in sample[:20])
    fig.say(f"- trace: {first:,.0f} packets/s on {len(pk):,} packets never seen before (target >= 50,000: "
            f"{verdict(first >= 50_000)}), {again:,.0f}/s on the same packets again; linear rule-by-rule walk "
            f"{lin:,.0f}/s ({len(sample)} packets); first-sight/linear = {first / lin:,.1f}x (target >= 100x: "
            f"{verdict(first / lin >= 100)}); the two agree on {min(20, len(sample))} sampled packets: {same}")  # fmt: skip


def bench_growth(a: argparse.Namespace, out: Path, fig: Figures) -> None:
    sizes = [int(x) for x in a.growth.split(",") if x]
    if not sizes:
        return
    fig.say(f"## Growth ({a.endpoints} endpoints per Service port; check sampled on {a.growth_sample} Services "
            "per size; each size in a fresh process)")  # fmt: skip
    fig.say()
    fig.say("| Services | lines | compile s | parse s | parse MiB | check ms/Service | check s (est.) | diff s | diff classes | peak MiB | x size | x compile | x parse | x check | x diff |")
    fig.say("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    prev: dict[str, Any] | None = None
    for n in sizes:
        try:
            g = run_child("--child-growth", str(n), str(a.endpoints), str(a.growth_sample), str(out), timeout=a.growth_timeout)
        except subprocess.TimeoutExpired:
            fig.say(f"| {n:,} | timed out after {a.growth_timeout:.0f} s | | | | | | | | | | | | | |")
            break
        ratios = ["", "", "", "", ""]
        if prev:
            ratios = [f"{n / prev['services']:.1f}"] + [
                f"{g[k] / prev[k]:.1f}" if prev[k] > 0 else "" for k in ("compile_s", "parse_s", "check_estimate_s", "diff_s")
            ]
        fig.say(f"| {n:,} | {g['lines']:,} | {g['compile_s']:.2f} | {g['parse_s']:.2f} | {g['parse_mib']:.0f} | "
                f"{g['check_per_service_ms']:.1f} | {g['check_estimate_s']:.1f} | {g['diff_s']:.2f} | {g['diff_classes']:,} | "
                f"{g['peak_mib']:.0f} | {' | '.join(ratios)} |")  # fmt: skip
        prev = g
    fig.say()


def bench_fleet(a: argparse.Namespace, out: Path, fig: Figures) -> None:
    if a.fleet_nodes <= 0:
        return
    try:
        from nat_verify.fleet import check_fleet, load_fleet
    except ImportError:
        fig.say("## Fleet: not measured (nat_verify.fleet is not in this tree)")
        return
    cluster = generate_cluster(a.fleet_services, a.endpoints, nodes=a.fleet_nodes)
    d = out / f"fleet-{a.fleet_nodes}x{a.fleet_services}"
    d.mkdir(exist_ok=True)
    for old in d.iterdir():
        old.unlink()
    t = time.perf_counter()
    for nd in cluster.nodes:
        (d / f"{nd.name}.save").write_text(render(to_save_form(parse(compile_node(cluster, nd.name, 4), family=4))))
    t_write = time.perf_counter() - t
    fig.say(f"## Fleet: {a.fleet_nodes} nodes x {a.fleet_services:,} service ports ({a.endpoints} endpoints each)")
    fig.say()
    fig.say(f"- {a.fleet_nodes} dumps compiled and written in {t_write:.1f} s (not counted)")
    one_dir = out / "fleet-one"
    one_dir.mkdir(exist_ok=True)
    for old in one_dir.iterdir():
        old.unlink()
    (one_dir / f"{NODE}.save").write_text((d / f"{NODE}.save").read_text())
    one, t_one = timed(lambda: check_fleet(cluster, load_fleet(str(one_dir), cluster)))
    many, t_many = timed(lambda: check_fleet(cluster, load_fleet(str(d), cluster)))
    groups = len({g for g in many.groups.values()})
    fig.say(f"- one node: {t_one:.1f} s; all {a.fleet_nodes} nodes: {t_many:.1f} s ({groups} groups of identical "
            f"nodes); fleet / one node = {t_many / t_one:.1f}x (goal <= 3x: {verdict(t_many / t_one <= 3)})")  # fmt: skip
    fig.say()


def machine() -> str:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{os.cpu_count()} CPUs ({cpu or platform.processor()}), {mem:.0f} GiB, Linux {platform.release()}, "
            f"Python {platform.python_version()}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--services", type=int, default=10_000)
    ap.add_argument("--endpoints", type=int, default=10)
    ap.add_argument("--packets", type=int, default=20_000, help="packets traced at first sight")
    ap.add_argument("--check-sample", type=int, default=100, help="Services checked first, to estimate a full check")
    ap.add_argument("--check-budget", type=float, default=240.0, help="run the full check only if estimated below this (s)")
    ap.add_argument("--growth", default="100,1000,3000,10000,30000", help="sizes of the growth table ('' to skip)")
    ap.add_argument("--growth-sample", type=int, default=40, help="Services checked per size of the growth table")
    ap.add_argument("--growth-timeout", type=float, default=900.0)
    ap.add_argument("--fleet-nodes", type=int, default=100)
    ap.add_argument("--fleet-services", type=int, default=1000)
    ap.add_argument("--quick", action="store_true", help="small sizes: 1,000 Services, growth to 3,000, 10 fleet nodes")
    ap.add_argument("--out-dir", default=str(Path(tempfile.gettempdir()) / "nat-verify-bench"))
    ap.add_argument("--no-results", action="store_true", help="do not rewrite bench/RESULTS.md")
    ap.add_argument("--child-parse", help=argparse.SUPPRESS)
    ap.add_argument("--child-growth", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child_parse:
        child_parse(a.child_parse)
        return
    if a.child_growth:
        n, e, s, d = a.child_growth
        child_growth(int(n), int(e), int(s), d)
        return
    if a.quick:
        a.services, a.growth, a.fleet_nodes, a.packets = 1000, "100,1000,3000", 10, 5000
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fig = Figures()
    start = time.perf_counter()
    load0 = os.getloadavg()
    fig.say("# nat-verify scale benchmark")
    fig.say()
    fig.say(f"Machine: {machine()}. Load average at start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}.")
    fig.say(f"Command: `python3 bench/bench_scale.py {' '.join(sys.argv[1:])}`".replace(" `", "`", 0))
    fig.say()
    bench_node(a, out, fig)
    bench_growth(a, out, fig)
    bench_fleet(a, out, fig)
    load1 = os.getloadavg()
    fig.say(f"Finished in {time.perf_counter() - start:.0f} s; load average at the end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}. "
            "Figures taken on a loaded machine are noisy: compare the ratios, rerun on a quiet one.")  # fmt: skip
    if not a.no_results:
        (HERE / "RESULTS.md").write_text("\n".join(fig.lines) + "\n")


if __name__ == "__main__":
    main()
