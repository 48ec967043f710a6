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
import contextlib
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


def _status_mib(field: str) -> float | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def rss_mib() -> float:
    """Peak RSS of this process so far (since the last ``reset_peak``), MiB."""
    return _status_mib("VmHWM:") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_mib() -> float:
    return _status_mib("VmRSS:") or rss_mib()


def reset_peak() -> None:
    """Start a new peak-RSS measurement (Linux: writing 5 to clear_refs resets VmHWM)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


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

    cpus = os.cpu_count() or 1
    return {
        f"exhaustive, one check per shape, {cpus} workers (what `nat-verify check` runs)":
            lambda c, rs: check_shared(c, NODE, rs, drift_check=False, workers=cpus),
        "exhaustive, one check per shape, 1 worker": lambda c, rs: check_shared(c, NODE, rs, drift_check=False),
        "exhaustive, every Service on its own": lambda c, rs: check_ruleset(c, NODE, rs, drift_check=False),
    }  # fmt: skip


# -- child processes: one fresh process per measured stage keeps peak memory honest -------------


def child_parse(path: str) -> None:
    before = rss_mib()
    rs, dt = timed(lambda: parse_file(path))
    print(json.dumps({"seconds": dt, "peak_mib": rss_mib(), "start_mib": before, "rules": rs.rule_count()}))


def peak_during(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, seconds, MiB the peak RSS rose above the RSS before ``fn``)."""
    base = current_mib()
    reset_peak()
    out, dt = timed(fn)
    return out, dt, max(0.0, rss_mib() - base)


def child_growth(services: int, endpoints: int, sample: int, out_dir: str) -> None:
    """Compile, parse and check at one size; one JSON line of figures. The check's cost per
    Service is the marginal cost between samples of ``sample`` and ``2 * sample`` Services
    (each on a fresh interpreter), so one-time setup is not divided by a small sample."""
    from nat_verify.check.sharing import check_shared

    fig: dict[str, Any] = {"services": services}
    cluster = generate_cluster(services, endpoints)
    restore, fig["compile_s"], fig["compile_mib"] = peak_during(lambda: compile_node(cluster, NODE, 4))
    path = Path(out_dir) / f"growth-{services}.save"
    path.write_text(render(to_save_form(parse(restore, family=4))))
    del restore
    fig["lines"] = sum(1 for _ in path.open())
    rs, fig["parse_s"], fig["parse_mib"] = peak_during(lambda: parse_file(str(path)))
    small = stratified(len(cluster.services), sample)
    large = stratified(len(cluster.services), 2 * sample)
    _, t1 = timed(lambda: check_ruleset(sub_cluster(cluster, small), NODE, rs, drift_check=False))
    _, t2 = timed(lambda: check_ruleset(sub_cluster(cluster, large), NODE, rs, drift_check=False))
    per = max(0.0, (t2 - t1) / max(1, len(large) - len(small)))
    fig["check_per_service_ms"] = 1000 * per
    fig["check_estimate_s"] = max(0.0, t1 - per * len(small)) + per * services
    _, fig["shared_s"], fig["shared_mib"] = peak_during(lambda: check_shared(cluster, NODE, rs, drift_check=False))
    fig["peak_mib"] = rss_mib()
    print(json.dumps(fig))


def child_diff(services: int, endpoints: int, out_dir: str) -> None:
    """``diff`` of a dump against itself (every packet class of its destination enumeration)."""
    from nat_verify.check.equivalence import equivalent

    cluster = generate_cluster(services, endpoints)
    path = Path(out_dir) / f"diff-{services}.save"
    path.write_text(render(to_save_form(parse(compile_node(cluster, NODE, 4), family=4))))
    rs = parse_file(str(path))
    path.unlink()
    ctx = node_context(cluster, NODE, 4)
    eq, dt, mib = peak_during(lambda: equivalent(rs, rs, ctx))
    print(json.dumps({"diff_s": dt, "diff_mib": mib, "diff_classes": eq.classes}))


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
        self.path: Path | None = None  # RESULTS.md, rewritten after every line

    def say(self, text: str = "") -> None:
        print(text, flush=True)
        self.lines.append(text)
        if self.path is not None:
            self.path.write_text("\n".join(self.lines) + "\n(run still in progress)\n")


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
    full = "shape" in name  # sharing needs every Service at once: never sampled
    if not full:
        keep = stratified(n, min(n, a.check_sample))
        rep, dt = timed(lambda: engine(sub_cluster(cluster, keep), rs))
        per = dt / len(keep)
        full = len(keep) == n or per * n <= a.check_budget
    if full:
        rep, total, mib = peak_during(lambda: engine(cluster, rs))
        how = f"{total:.1f} s for all {n:,} Services, peak RSS +{mib:.0f} MiB"
    else:
        total = per * n
        how = (f"~{total:.0f} s estimated for all {n:,} Services from a stratified sample of {len(keep)} "
               f"({1000 * per:.1f} ms per Service; a full run would pass --check-budget {a.check_budget:.0f} s)")  # fmt: skip
    statuses: dict[str, int] = {}
    for r in rep.results:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    errors = sum(1 for f in rep.findings if f.severity == "error")
    fig.say(f"- check, engine {name}, every invariant: {how}; {rep.packets:,} packets traced, "
            f"results {statuses}, {errors} errors")  # fmt: skip
    if legacy:
        r = total / legacy
        fig.say(f"  - check / iptables-legacy-restore = {r:.2f}x (target < 1: {verdict(r < 1)}; aim <= 0.33: {verdict(r <= 0.34)}; "
                f"within 2 GiB: {verdict(not full or mib <= 2048)})")  # fmt: skip


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
    fig.say(f"## Growth ({a.endpoints} endpoints per Service port; each size and each diff in a fresh process)")
    fig.say()
    fig.say("Columns: dump lines; compile s and MiB; parse s and MiB (peak RSS above the RSS before); check "
            f"of every Service on its own, ms per Service (marginal cost between {a.growth_sample} and "
            f"{2 * a.growth_sample} sampled Services) and s estimated for all; the shared check (one per shape) "
            f"of all Services, s and MiB; `diff` of the dump against itself, s, MiB and packet classes (stopped "
            f"after {a.diff_timeout:.0f} s); the peak RSS of the process; then each figure's growth factor "
            "against the size's.")  # fmt: skip
    fig.say()
    fig.say("| Services | lines | compile s | MiB | parse s | MiB | check ms/Svc | check s (est.) | shared s | MiB | diff s | MiB | diff classes | peak MiB | x size | x compile | x parse | x check | x shared | x diff |")
    fig.say("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    prev: dict[str, Any] | None = None
    for n in sizes:
        try:
            g = run_child("--child-growth", str(n), str(a.endpoints), str(a.growth_sample), str(out), timeout=a.growth_timeout)
        except subprocess.TimeoutExpired:
            fig.say(f"| {n:,} | timed out after {a.growth_timeout:.0f} s |" + " |" * 18)
            break
        try:
            g.update(run_child("--child-diff", str(n), str(a.endpoints), str(out), timeout=a.diff_timeout))
            diff = f"{g['diff_s']:.2f} | {g['diff_mib']:.0f} | {g['diff_classes']:,}"
        except subprocess.TimeoutExpired:
            g["diff_s"] = None
            diff = f"> {a.diff_timeout:.0f} | | "
        ratios = [""] * 6
        if prev:
            ratios = [f"{n / prev['services']:.1f}"] + [
                f"{g[k] / prev[k]:.1f}" if prev.get(k) and g.get(k) else ""
                for k in ("compile_s", "parse_s", "check_estimate_s", "shared_s", "diff_s")
            ]
        fig.say(f"| {n:,} | {g['lines']:,} | {g['compile_s']:.2f} | {g['compile_mib']:.0f} | {g['parse_s']:.2f} | "
                f"{g['parse_mib']:.0f} | {g['check_per_service_ms']:.1f} | {g['check_estimate_s']:.1f} | "
                f"{g['shared_s']:.2f} | {g['shared_mib']:.0f} | {diff} | {g['peak_mib']:.0f} | {' | '.join(ratios)} |")  # fmt: skip
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
    from nat_verify.fleet import LocalExecutor
    from nat_verify.fleet.fleet import forget_shapes

    def run(directory: Path, workers: int) -> Any:
        forget_shapes()
        return check_fleet(cluster, load_fleet(str(directory), cluster), LocalExecutor(workers))

    one, t_one = timed(lambda: run(one_dir, 1))
    many, t_many = timed(lambda: run(d, 1))
    _, t_two = timed(lambda: run(d, 2))
    shared = sum(1 for n in many.nodes for r in n.report.results)
    fig.say(f"- one node: {t_one:.1f} s; all {a.fleet_nodes} nodes in one process: {t_many:.1f} s, with 2 worker "
            f"processes: {t_two:.1f} s ({len(many.groups)} groups of identical dumps, {shared:,} results); "
            f"fleet / one node = {t_many / t_one:.1f}x in one process, {t_two / t_one:.1f}x on 2 workers "
            f"(goal <= 3x: {verdict(min(t_many, t_two) / t_one <= 3)})")  # fmt: skip
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
    ap.add_argument("--growth-sample", type=int, default=20, help="Services sampled per size for the unshared check")
    ap.add_argument("--diff-timeout", type=float, default=120.0, help="stop diff at each size after this (s)")
    ap.add_argument("--growth-timeout", type=float, default=900.0)
    ap.add_argument("--fleet-nodes", type=int, default=100)
    ap.add_argument("--fleet-services", type=int, default=1000)
    ap.add_argument("--parts", default="node,growth,fleet", help="which parts to run (comma-separated)")
    ap.add_argument("--quick", action="store_true", help="small sizes: 1,000 Services, growth to 3,000, 10 fleet nodes")
    ap.add_argument("--out-dir", default=str(Path(tempfile.gettempdir()) / "nat-verify-bench"))
    ap.add_argument("--no-results", action="store_true", help="do not rewrite bench/RESULTS.md")
    ap.add_argument("--child-parse", help=argparse.SUPPRESS)
    ap.add_argument("--child-growth", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--child-diff", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child_parse:
        child_parse(a.child_parse)
        return
    if a.child_growth:
        n, e, s, d = a.child_growth
        child_growth(int(n), int(e), int(s), d)
        return
    if a.child_diff:
        n, e, d = a.child_diff
        child_diff(int(n), int(e), d)
        return
    if a.quick:
        a.services, a.growth, a.fleet_nodes, a.packets = 1000, "100,1000,3000", 10, 5000
    out = Path(a.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fig = Figures()
    if not a.no_results:
        fig.path = HERE / "RESULTS.md"
    start = time.perf_counter()
    load0 = os.getloadavg()
    fig.say("# nat-verify scale benchmark")
    fig.say()
    fig.say(f"Machine: {machine()}. Load average at start {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}.")
    fig.say(f"Command: `python3 bench/bench_scale.py {' '.join(sys.argv[1:])}`".replace(" `", "`", 0))
    fig.say()
    parts = set(a.parts.split(","))
    if "node" in parts:
        bench_node(a, out, fig)
    if "growth" in parts:
        bench_growth(a, out, fig)
    if "fleet" in parts:
        bench_fleet(a, out, fig)
    load1 = os.getloadavg()
    fig.say(f"Finished in {time.perf_counter() - start:.0f} s; load average at the end {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}. "
            "Figures taken on a loaded machine are noisy: compare the ratios, rerun on a quiet one.")  # fmt: skip
    if fig.path is not None:
        fig.path.write_text("\n".join(fig.lines) + "\n")


if __name__ == "__main__":
    main()
