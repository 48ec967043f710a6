"""Benchmark of the netfilter model on kube-proxy-shaped dumps: parse, memory, trace, check.

    python3 bench/bench_model.py [--services 1000,10000] [--endpoints 10] [--packets 20000]

For each size it generates a cluster (bench/gen_cluster.py), compiles node-0's rules, writes
them as iptables-save prints them, and measures in one run:

* parse: seconds and peak RSS of a fresh process that parses the dump;
* trace: packets/s through the dump with the dispatch index and chain summaries, and with a
  plain rule-by-rule linear walk (no index, no summaries) on a sample of the same packets,
  plus the ratio between the two; packets go to random Service addresses from every origin;
* check: seconds to check every invariant exhaustively for every Service on the node, next to
  the seconds ``iptables-legacy-restore`` takes to load the same dump into a fresh network
  namespace (when run as root with iptables installed), and their ratio.

Figures are ratios measured in one run on this machine; nothing here is a timed test.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import attrs  # noqa: E402
from gen_cluster import generate_cluster  # noqa: E402

from nat_verify.check import check_ruleset  # noqa: E402
from nat_verify.check.nodectx import node_context  # noqa: E402
from nat_verify.kubeproxy import compile_node  # noqa: E402
from nat_verify.model.cluster import Cluster  # noqa: E402
from nat_verify.model.packet import Packet  # noqa: E402
from nat_verify.netfilter.interpreter import Interpreter  # noqa: E402
from nat_verify.netfilter.parse import parse, parse_file  # noqa: E402
from nat_verify.netfilter.render import render  # noqa: E402
from nat_verify.netfilter.ruleset import Ruleset  # noqa: E402
from nat_verify.netfilter.saveform import to_save_form  # noqa: E402


def child_parse(path: str) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    cpu = time.process_time()
    rs = parse_file(path)
    dt = time.perf_counter() - t
    cpu = time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"{dt:.3f} {cpu:.3f} {peak} {before} {rs.rule_count()}")


def measure_parse(path: str) -> tuple[float, float, float, float]:
    out = subprocess.run([sys.executable, __file__, "--child-parse", path], capture_output=True, text=True, check=True)
    dt, cpu, peak, before, _rules = out.stdout.split()
    return float(dt), float(cpu), int(peak) / 1024, int(before) / 1024  # wall s, CPU s, MiB peak, MiB at start


def packets(cluster: Cluster, node: str, n: int, seed: int = 7) -> list[Packet]:
    rnd = random.Random(seed)
    nd = cluster.node(node)
    node_ip = nd.internal_ips[0]
    pods = [e.addresses[0] for s in cluster.slices for e in s.endpoints if e.node_name == node][:200] or ["10.0.0.2"]
    out = []
    for _ in range(n):
        svc = rnd.choice(cluster.services)
        sp = svc.ports[0]
        origin = rnd.choice(("external", "pod", "host"))
        src = {"external": f"203.0.113.{rnd.randint(1, 254)}", "pod": rnd.choice(pods), "host": node_ip}[origin]
        if sp.node_port and rnd.random() < 0.3:
            dst, dport = node_ip, sp.node_port
        else:
            dst, dport = svc.cluster_ips[0], sp.port
        out.append(Packet(src=src, dst=dst, dport=dport, sport=rnd.randint(1024, 65535), proto=sp.protocol.lower(), origin=origin))  # type: ignore[arg-type]
    return out


def rate(it: Interpreter, pkts: list[Packet]) -> float:
    t = time.perf_counter()
    for p in pkts:
        it.trace(p)
    return len(pkts) / (time.perf_counter() - t)


def legacy_restore_seconds(path: str) -> float | None:
    if os.geteuid() != 0 or not shutil.which("iptables-legacy-restore") or not shutil.which("unshare"):
        return None
    t = time.perf_counter()
    r = subprocess.run(["unshare", "--net", "sh", "-c", f"iptables-legacy-restore < {path}"], capture_output=True, text=True)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        print(f"    (iptables-legacy-restore failed: {r.stderr.strip()[:200]})")
        return None
    return dt


def run(services: int, endpoints: int, n_packets: int, check: bool) -> None:
    cluster = generate_cluster(services, endpoints)
    # no nfacct counters: iptables-legacy-restore would need the nfacct objects created first
    cluster = attrs.evolve(cluster, proxy=attrs.evolve(cluster.proxy, nfacct=False))
    node = cluster.nodes[0].name
    t = time.perf_counter()
    restore = compile_node(cluster, node, 4)
    t_compile = time.perf_counter() - t
    save = render(to_save_form(parse(restore, family=4)))
    with tempfile.NamedTemporaryFile("w", suffix=".save", delete=False) as f:
        f.write(save)
        path = f.name
    try:
        lines = save.count("\n")
        print(f"\n{services:,} services x {endpoints} endpoints: {lines:,} lines, {len(save) / 1e6:.1f} MB (compile {t_compile:.2f} s)")
        dt, cpu, peak, base = measure_parse(path)
        print(f"  parse: {dt:.2f} s ({cpu:.2f} s CPU, load average {os.getloadavg()[0]:.1f}), peak RSS of the parsing process {peak:.0f} MiB")
        rs: Ruleset = parse_file(path)
        ctx = node_context(cluster, node, 4)
        t = time.perf_counter()
        fast = Interpreter(rs, ctx)
        t_build = time.perf_counter() - t
        linear = Interpreter(rs, ctx, linear=True)
        for it in (fast, linear):  # compile every chain up front: time the walks, not compilation
            for ch in it.chains.values():
                _ = ch.rules
        pk = packets(cluster, node, n_packets)
        r_cold = rate(fast, pk)
        r_warm = rate(fast, pk)
        sample = pk[: max(50, min(len(pk), int(200_000 / max(1, services))))]
        r_lin = rate(linear, sample)
        print(f"  interpreter build: {t_build:.2f} s (chains are compiled on first use)")
        print(f"  trace, indexed + summaries: {r_cold:,.0f} packets/s on first sight of each packet class, "
              f"{r_warm:,.0f} packets/s on the same {len(pk):,} packets again")  # fmt: skip
        print(f"  trace, linear rule-by-rule walk: {r_lin:,.0f} packets/s ({len(sample)} packets)")
        print(f"  ratio indexed/linear: {r_cold / r_lin:,.1f}x (first sight), {r_warm / r_lin:,.1f}x (again)")
        same = all(fast.trace(p) == linear.trace(p) for p in sample[:50])
        print(f"  indexed and linear agree on {min(50, len(sample))} sampled packets: {same}")
        if check:
            t = time.perf_counter()
            rep = check_ruleset(cluster, node, rs, drift_check=False)
            t_check = time.perf_counter() - t
            errors = sum(1 for f in rep.findings if f.severity == "error")
            print(f"  check every invariant, every Service, exhaustively: {t_check:.1f} s, {rep.packets:,} packet classes, {errors} errors")
            legacy = legacy_restore_seconds(path)
            if legacy is not None:
                print(f"  iptables-legacy-restore of the same dump into a fresh netns: {legacy:.2f} s; check/restore = {t_check / legacy:.1f}x")
    finally:
        os.unlink(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--services", default="1000,10000")
    ap.add_argument("--endpoints", type=int, default=10)
    ap.add_argument("--packets", type=int, default=20000)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--child-parse", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child_parse:
        child_parse(a.child_parse)
        return
    print(f"bench_model: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    for n in (int(x) for x in a.services.split(",")):
        run(n, a.endpoints, a.packets, not a.no_check)


if __name__ == "__main__":
    main()
