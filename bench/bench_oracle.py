"""Kernel oracle speed, measured in one run: probes/s (conntrack events only), the cost of
a topology setup/teardown cycle, and on a compiled spec (specs/web-svc.yaml, node-1, in the
sandbox ``topology_for`` mirrors) the kernel's probes/s next to the model-vs-kernel
comparison rate (model trace + reset + probe + compare per packet). Needs root. Targets:
>= 3,000 probes/s, cycle < 100 ms.

    python bench/bench_oracle.py [--probes N] [--cycles N] [--spec-probes N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from nat_verify.check.nodectx import node_context
from nat_verify.intent import destinations, interesting_sources
from nat_verify.kube import load_clusters
from nat_verify.kubeproxy import compile_node
from nat_verify.model.packet import Packet
from nat_verify.netfilter.parse import parse
from nat_verify.oracle import KernelOracle, TopologySpec, kernel_available
from nat_verify.oracle.differential import OracleSession

NODE, POD_A, POD_B, EXT = "192.168.0.2", "10.244.1.2", "10.244.1.3", "203.0.113.2"
SPEC = TopologySpec(
    node_ips=(NODE,),
    pod_cidr="10.244.1.0/24",
    pods=(POD_A, POD_B, "10.244.1.4", "10.244.1.5"),
    remote=("10.244.2.0/24",),
    external_clients=(EXT,),
)
# A kube-proxy-shaped service with 3 endpoints (statistic cascade, masquerade for
# off-cluster sources) and a no-endpoint service REJECTed in filter.
RULES = """*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-SVC-WEB - [0:0]
-A PREROUTING -j KUBE-SERVICES
-A OUTPUT -j KUBE-SERVICES
-A POSTROUTING -j KUBE-POSTROUTING
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
-A KUBE-POSTROUTING -j MASQUERADE --random-fully
-A KUBE-SERVICES ! -s 10.244.0.0/16 -d 10.96.0.10/32 -p tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp --dport 80 -j KUBE-SVC-WEB
-A KUBE-SVC-WEB -m statistic --mode random --probability 0.33333333349 -p tcp -j DNAT --to-destination 10.244.1.3:8080
-A KUBE-SVC-WEB -m statistic --mode random --probability 0.50000000000 -p tcp -j DNAT --to-destination 10.244.2.5:8080
-A KUBE-SVC-WEB -p tcp -j DNAT --to-destination 10.244.2.6:8080
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
-A FORWARD -m conntrack --ctstate NEW -j KUBE-SERVICES
-A OUTPUT -m conntrack --ctstate NEW -j KUBE-SERVICES
-A KUBE-SERVICES -d 10.96.0.11/32 -p tcp --dport 80 -j REJECT
COMMIT
"""

SCENARIOS = [
    # name, src, dst, origin, expected verdict
    ("ext->ClusterIP", EXT, "10.96.0.10", "external", "forward"),
    ("ext(spoofed raw)->ClusterIP", "198.51.100.9", "10.96.0.10", "external", "forward"),
    ("pod->ClusterIP", POD_A, "10.96.0.10", "pod", "forward"),
    ("host->ClusterIP", NODE, "10.96.0.10", "host", "forward"),
    ("pod->REJECT", POD_A, "10.96.0.11", "pod", "reject"),
]


def bench_probes(n: int) -> dict[str, tuple[float, float]]:
    """Per scenario: (probes per wall-clock second, probes per CPU second of this process).

    The second figure discounts other load on the machine: on veth the kernel's whole
    traversal runs in the probing thread's context, so it is counted too."""
    rates = {}
    with KernelOracle(SPEC) as k:
        k.load(RULES)
        for name, src, dst, origin, verdict in SCENARIOS:
            for _ in range(50):  # warm-up (neighbour entries, caches)
                k.probe(src, dst, 80, origin=origin)
            t, c = time.perf_counter(), time.process_time()
            for _ in range(n):
                r = k.probe(src, dst, 80, origin=origin)
                if r.verdict != verdict:
                    raise SystemExit(f"{name}: expected {verdict}, kernel said {r}")
            rates[name] = (n / (time.perf_counter() - t), n / (time.process_time() - c))
    return rates


def bench_cycles(n: int) -> tuple[float, float, float]:
    setup, teardown, whole = [], [], []
    for _ in range(n):
        t0 = time.perf_counter()
        k = KernelOracle(SPEC)
        k.__enter__()
        t1 = time.perf_counter()
        k.load(RULES)
        for _ in range(20):
            k.probe(POD_A, "10.96.0.10", 80, origin="pod")
        t2 = time.perf_counter()
        k.__exit__(None, None, None)
        t3 = time.perf_counter()
        setup.append(t1 - t0)
        teardown.append(t3 - t2)
        whole.append(t3 - t0)
    ms = 1000.0
    return (
        statistics.median(setup) * ms,
        statistics.median(teardown) * ms,
        statistics.median(whole) * ms,
    )


def bench_spec(n: int, spec_dir: str = "specs") -> dict[str, float]:
    """web-svc on node-1, compiled: every intent packet (each destination from each
    interesting source) in turn, ``n`` times in all, for each measurement."""
    (cluster,) = [c for c in load_clusters(spec_dir) if c.name == "web-svc"]
    ruleset = parse(compile_node(cluster, "node-1", 4), source="web-svc/node-1")
    ctx = node_context(cluster, "node-1", 4)
    packets = [
        Packet(src=src, dst=d.ip, dport=d.port, proto=d.proto, origin=origin)  # type: ignore[arg-type]
        for d in destinations(cluster, "node-1", 4)
        for src, origin in interesting_sources(cluster, "node-1", d)
    ]
    out: dict[str, float] = {"packets": len(packets), "rules": ruleset.rule_count()}
    t = time.perf_counter()
    with OracleSession.open(ruleset, ctx, packets) as s:
        out["setup+load ms"] = (time.perf_counter() - t) * 1000
        for p in packets * 5:  # warm-up
            s.check(p)
        seq = [packets[i % len(packets)] for i in range(n)]
        t, c = time.perf_counter(), time.process_time()
        for p in seq:
            s.kernel(p, reset=False)
        out["probes/s"] = n / (time.perf_counter() - t)
        out["probes/cpu-s"] = n / (time.process_time() - c)
        t = time.perf_counter()
        for p in seq:
            s.kernel(p)
        out["reset+probe/s"] = n / (time.perf_counter() - t)
        t = time.perf_counter()
        for p in seq:
            s.model(p)
        out["model traces/s"] = n / (time.perf_counter() - t)
        t, c = time.perf_counter(), time.process_time()
        disagreements = 0
        for p in seq:
            disagreements += len(s.check(p))
        out["comparisons/s"] = n / (time.perf_counter() - t)
        out["comparisons/cpu-s"] = n / (time.process_time() - c)
        out["disagreements"] = disagreements
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--probes", type=int, default=3000)
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--spec-probes", type=int, default=3000)
    args = ap.parse_args()
    reason = kernel_available()
    if reason is not None:
        sys.exit(f"kernel oracle unavailable: {reason}")
    rates = bench_probes(args.probes)
    setup, teardown, whole = bench_cycles(args.cycles)
    spec = bench_spec(args.spec_probes)
    load = os.getloadavg()[0]
    print(f"kernel oracle, {args.probes} probes per scenario (conntrack events only, nft backend)")
    print(f"  (load average {load:.2f} on {os.cpu_count()} CPUs while measuring)")
    for name, (wall, cpu) in rates.items():
        print(f"  {name:30s} {wall:8.0f} probes/s   ({cpu:6.0f} per CPU second)")
    print(f"topology with {len(SPEC.pods)} pods (7 netns), median of {args.cycles} cycles:")
    print(f"  setup {setup:.1f} ms, teardown {teardown:.1f} ms")
    print(f"  setup + load + 20 probes + teardown {whole:.1f} ms")
    print(
        f"compiled spec web-svc/node-1 ({spec['rules']:.0f} rules, {spec['packets']:.0f} intent"
        f" packets, sandbox setup + load {spec['setup+load ms']:.0f} ms), {args.spec_probes} each:"
    )
    print(
        f"  kernel probes              {spec['probes/s']:8.0f} /s   ({spec['probes/cpu-s']:6.0f} per CPU second)"
    )
    print(f"  reset + probe              {spec['reset+probe/s']:8.0f} /s")
    print(f"  model traces               {spec['model traces/s']:8.0f} /s")
    print(
        f"  model vs kernel compared   {spec['comparisons/s']:8.0f} /s   ({spec['comparisons/cpu-s']:6.0f}"
        f" per CPU second; {spec['disagreements']:.0f} disagreements)"
    )
    ok = min(w for w, _ in rates.values()) >= 3000 and setup + teardown < 100
    print("targets (>= 3,000 probes/s, cycle < 100 ms):", "met" if ok else "NOT met")


if __name__ == "__main__":
    main()
