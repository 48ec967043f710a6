"""Benchmark: compile a generated cluster (default 10,000 service ports x 10 endpoints).

    python bench/bench_compile.py [SERVICES] [ENDPOINTS] [--nodes N] [--repeat R] [--out FILE]

Prints the size of the ruleset and the best-of-R wall time of ``compile_node`` (target: <= 5 s
for 10,000 x 10 on 2 cores). Generation time is reported separately and not counted.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_cluster import generate_cluster  # noqa: E402

from nat_verify.kubeproxy import compile_node  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("services", nargs="?", type=int, default=10_000)
    ap.add_argument("endpoints", nargs="?", type=int, default=10)
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, help="also write the compiled ruleset here")
    args = ap.parse_args()

    t0 = time.perf_counter()
    cluster = generate_cluster(args.services, args.endpoints, args.nodes)
    gen = time.perf_counter() - t0

    best = cpu = float("inf")
    text = ""
    for _ in range(args.repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        text = compile_node(cluster, "node-0", 4, base_jumps=True)
        best = min(best, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    if args.out:
        args.out.write_text(text)
    lines = text.count("\n")
    print(
        f"compile_node: {args.services} service ports x {args.endpoints} endpoints, {args.nodes} nodes: "
        f"{lines:,} lines, {len(text) / 1e6:.1f} MB in {best:.2f} s wall, {cpu:.2f} s CPU (best of {args.repeat}; "
        f"generation {gen:.2f} s); target <= 5 s: {'met' if best <= 5 else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
