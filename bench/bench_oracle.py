"""Kernel oracle speed, measured in one run: probes/s (conntrack events only) and the cost of
a topology setup/teardown cycle. Needs root. Targets: >= 3,000 probes/s, cycle < 100 ms.

    python bench/bench_oracle.py [--probes N] [--cycles N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from nat_verify.oracle import KernelOracle, TopologySpec, kernel_available

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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--probes", type=int, default=3000)
    ap.add_argument("--cycles", type=int, default=20)
    args = ap.parse_args()
    reason = kernel_available()
    if reason is not None:
        sys.exit(f"kernel oracle unavailable: {reason}")
    rates = bench_probes(args.probes)
    setup, teardown, whole = bench_cycles(args.cycles)
    load = os.getloadavg()[0]
    print(f"kernel oracle, {args.probes} probes per scenario (conntrack events only, nft backend)")
    print(f"  (load average {load:.2f} on {os.cpu_count()} CPUs while measuring)")
    for name, (wall, cpu) in rates.items():
        print(f"  {name:30s} {wall:8.0f} probes/s   ({cpu:6.0f} per CPU second)")
    print(f"topology with {len(SPEC.pods)} pods (7 netns), median of {args.cycles} cycles:")
    print(f"  setup {setup:.1f} ms, teardown {teardown:.1f} ms")
    print(f"  setup + load + 20 probes + teardown {whole:.1f} ms")
    ok = min(w for w, _ in rates.values()) >= 3000 and setup + teardown < 100
    print("targets (>= 3,000 probes/s, cycle < 100 ms):", "met" if ok else "NOT met")


if __name__ == "__main__":
    main()
