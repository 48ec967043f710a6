"""The engines side by side: time per Service and in total, for each check engine and for diff.

    python3 bench/bench_engines.py [--sizes 1000,10000] [--endpoints 10] [--sample 40]
                                   [--budget 600] [--no-diff]

For each size, ``bench/gen_cluster.py`` generates the cluster (its realistic mix of Service
kinds), node-0's rules are compiled and parsed once, and every engine checks every invariant:

* setup: an engine run on the whole dump with no Service to check (what every run pays once:
  building the interpreter, the structure checks of NV014);
* per Service: the same run on a stratified sample of ``--sample`` Services (every kind of the
  mix), minus the setup, divided by the sample size;
* total: the whole cluster checked when setup + per Service x Services fits in ``--budget``
  seconds, else that estimate (marked ``est.``).

Then ``diff`` of the dump against itself (a proof of equivalence over every packet) with the
class enumeration (``check.equivalence``) and with Z3 (``symbolic.equivalence``), each within
``--budget`` (a run cut by the budget prints ``>budget``). Times are CPU seconds of this
process (steadier than wall time on a loaded machine); the load average is printed with them,
and the ratios are measured in this one run.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from bench_scale import stratified, sub_cluster  # noqa: E402
from gen_cluster import generate_cluster  # noqa: E402

from nat_verify.check.runner import CheckReport, check_ruleset  # noqa: E402
from nat_verify.kubeproxy import compile_node  # noqa: E402
from nat_verify.model.cluster import Cluster  # noqa: E402
from nat_verify.netfilter.parse import parse  # noqa: E402
from nat_verify.netfilter.ruleset import Ruleset  # noqa: E402

NODE = "node-0"


def engines() -> dict[str, Callable[[Cluster, Ruleset], CheckReport]]:
    from nat_verify.symbolic.engine import check_ruleset_z3

    return {
        "exhaustive": lambda c, rs: check_ruleset(c, NODE, rs, drift_check=False),
        "z3": lambda c, rs: check_ruleset_z3(c, NODE, rs, drift_check=False),
    }


def cpu(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    t = time.process_time()
    out = fn(*args)
    return out, time.process_time() - t


def _diff_child(kind: str, services: int, endpoints: int, out: Any) -> None:
    cluster = generate_cluster(services, endpoints)
    rs = parse(compile_node(cluster, NODE, 4), family=4)
    from nat_verify.check.nodectx import node_context

    ctx = node_context(cluster, NODE, 4)
    if kind == "z3":
        from nat_verify.symbolic.equivalence import equivalent as z3_equivalent

        res, dt = cpu(z3_equivalent, rs, rs, ctx)
    else:
        from nat_verify.check.equivalence import equivalent

        res, dt = cpu(equivalent, rs, rs, ctx)
    out.put((dt, res.classes, res.difference is None))


def diff_seconds(kind: str, services: int, endpoints: int, budget: float) -> str:
    """CPU seconds of ``diff`` of the dump against itself, in a child process cut at ``budget``."""
    q: Any = multiprocessing.Queue()
    p = multiprocessing.Process(target=_diff_child, args=(kind, services, endpoints, q))
    p.start()
    p.join(budget)
    if p.is_alive():
        p.kill()
        p.join()
        return f">{budget:.0f}s"
    dt, classes, same = q.get()
    return f"{dt:.1f}s ({classes} classes{'' if same else ', DIFFERENT?'})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--endpoints", type=int, default=10)
    ap.add_argument("--sample", type=int, default=40)
    ap.add_argument("--budget", type=float, default=600.0)
    ap.add_argument("--no-diff", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"load average at start: {os.getloadavg()[0]:.2f} (2 cores: figures above ~2 are noisy; ratios are what counts)")
    for n in sizes:
        cluster = generate_cluster(n, args.endpoints)
        rs = parse(compile_node(cluster, NODE, 4), family=4)
        keep = stratified(len(cluster.services), args.sample)
        rules = sum(len(c.rules) for t in rs.tables for c in t.chains)
        print(f"\n{n} service ports x {args.endpoints} endpoints ({rules} rules)")
        per: dict[str, float] = {}
        for name, run in engines().items():
            _, setup = cpu(run, sub_cluster(cluster, []), rs)
            report, sample = cpu(run, sub_cluster(cluster, keep), rs)
            each = max(0.0, sample - setup) / len(keep)
            per[name] = each
            estimate = setup + each * len(cluster.services)
            if estimate <= args.budget:
                _, total = cpu(run, cluster, rs)
                shown = f"{total:.1f}s"
            else:
                shown = f"{estimate:.0f}s est."
            statuses: dict[str, int] = {}
            for r in report.results:
                statuses[r.status] = statuses.get(r.status, 0) + 1
            print(f"  check {name:<11} setup {setup:6.1f}s  per Service {each * 1000:7.1f} ms  total {shown:>12}"
                  f"  (sample: {', '.join(f'{v} {k}' for k, v in sorted(statuses.items()))}; load {os.getloadavg()[0]:.1f})")
        if per.get("exhaustive"):
            print(f"  per-Service ratio z3 / exhaustive: {per['z3'] / per['exhaustive']:.2f}")
        if not args.no_diff:
            for kind in ("exhaustive", "z3"):
                print(f"  diff  {kind:<11} {diff_seconds(kind, n, args.endpoints, args.budget)} (load {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
