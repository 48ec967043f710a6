"""The kernel oracle killed with SIGKILL at any point leaves nothing behind (issue 13 item 6).

A *worker* runs the oracle in a loop (create the topology, load rules with either backend,
probe, reset, tear down) and is killed with SIGKILL after a random delay, which lands in every
phase: import, namespace creation, ``iptables-restore``, probing, teardown. A *supervisor*
process runs each experiment and makes itself a child subreaper first, so that every process
the worker started (``nsenter``, ``iptables-restore``, ``ip``) is reparented to it when the
worker dies.

Why the checks prove "no namespace left": the oracle's namespaces are anonymous, so only a
process (a member, or an open fd) or a bind mount can keep one alive. Every process of the
worker's tree is the supervisor's child after the kill, and the test requires that they all
exit on their own within a grace period; the nsfs mounts (``/run/netns`` and any other) must
be the same before and after. With neither left, the kernel has freed every namespace the
worker made. The host's rules (iptables-save, iptables-legacy-save, nft, nfacct of the root
namespace, read only) must be identical before and after.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.kernel.test_isolation import RULES, SPEC

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("kernel_ok")]

PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
KILLS = {"dev": 3, "ci": 6, "thorough": 100}.get(PROFILE, 3)

WORKER = r"""
import itertools, json, sys
from nat_verify.oracle.oracle import KernelOracle, TopologySpec
rules, topology = sys.argv[1], json.loads(sys.argv[2])
spec = TopologySpec(node_ips=tuple(topology["node_ips"]), pods=tuple(topology["pods"]))
for backend in itertools.cycle(("nft", "legacy")):
    with KernelOracle(spec, backend=backend) as k:
        k.load(rules)
        for _ in range(20):
            k.probe("203.0.113.2", "10.96.0.10", 80)
            k.probe("10.244.1.3", "192.168.0.2", 9001, origin="pod")
        k.reset()
        sys.stdout.write("cycle\n")
        sys.stdout.flush()
"""
# the rules and topology of the isolation tests: DNAT, REJECT and an nfacct object
WORKER_ARGS = [RULES, json.dumps({"node_ips": list(SPEC.node_ips), "pods": list(SPEC.pods)})]

SUPERVISOR = r"""
import ctypes, json, os, shutil, signal, subprocess, sys, time
PR_SET_CHILD_SUBREAPER = 36
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
delay = float(sys.argv[1])
worker_code = sys.argv[2]
worker_args = sys.argv[3:]

def host_rules():
    out = {}
    for argv in (["iptables-save"], ["iptables-legacy-save"], ["nft", "list", "ruleset"], ["nfacct", "list"]):
        if shutil.which(argv[0]) is None:
            continue
        r = subprocess.run(argv, capture_output=True, text=True)
        out[" ".join(argv)] = "\n".join(l for l in r.stdout.splitlines() if not l.startswith("#")) + f"\nrc={r.returncode}"
    return out

def nsfs_mounts():
    with open("/proc/self/mountinfo") as f:
        return sorted(l.split(" - ")[0].split()[4] for l in f if " - nsfs " in l)

def children():
    out = []
    for t in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{t}/children") as f:
                out += f.read().split()
        except OSError:
            pass
    return out

def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"

rules_before, mounts_before = host_rules(), nsfs_mounts()
# the worker writes to a file, not a pipe: an orphan holding a pipe would block the read
import tempfile
log = tempfile.TemporaryFile()
w = subprocess.Popen([sys.executable, "-c", worker_code, *worker_args], stdout=log, stderr=subprocess.DEVNULL)
time.sleep(delay)
os.kill(w.pid, signal.SIGKILL)
w.wait()
log.seek(0)
cycles = log.read().count(b"cycle")
# the worker's orphans are ours now: they must exit by themselves
deadline = time.monotonic() + 15
left = children()
while left and time.monotonic() < deadline:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
    time.sleep(0.05)
    left = children()
leftover = [cmdline(p) for p in left]
for p in left:  # do not leave them behind even when the test fails
    try:
        os.kill(int(p), signal.SIGKILL)
    except OSError:
        pass
print(json.dumps({"cycles": cycles, "leftover": leftover, "mounts_same": nsfs_mounts() == mounts_before,
                  "rules_same": host_rules() == rules_before}))
"""


@settings(max_examples=KILLS, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(delay=st.floats(0.0, 4.0))
def test_sigkill_at_any_point_leaves_no_namespace_process_mount_or_rule(delay: float) -> None:
    r = subprocess.run(
        [sys.executable, "-c", SUPERVISOR, repr(delay), WORKER, *WORKER_ARGS], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert res["leftover"] == [], f"processes left after SIGKILL at {delay:.2f} s: {res['leftover']}"
    assert res["mounts_same"], "nsfs mounts changed"
    assert res["rules_same"], "the host's rules changed"


def test_the_supervisor_sees_a_process_left_behind() -> None:
    # the check can fail: a worker that leaves a child running is caught
    leak = "import subprocess, time\nsubprocess.Popen(['sleep', '20'])\ntime.sleep(60)\n"
    r = subprocess.run([sys.executable, "-c", SUPERVISOR.replace("+ 15", "+ 1"), "0.5", leak],
                       capture_output=True, text=True, timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["leftover"] == ["sleep 20"]
