"""The oracle leaves no trace: the host's rules are untouched, and nothing leaks over cycles."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from nat_verify.oracle.oracle import KernelOracle, TopologySpec

pytestmark = [pytest.mark.kernel, pytest.mark.usefixtures("kernel_ok")]

RULES = """*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A PREROUTING -d 10.96.0.10/32 -p tcp --dport 80 -j DNAT --to-destination 10.244.1.2:8080
-A OUTPUT -d 10.96.0.10/32 -p tcp --dport 80 -j DNAT --to-destination 10.244.1.2:8080
COMMIT
*filter
:INPUT ACCEPT [0:0]
-A INPUT -p tcp --dport 9001 -j REJECT
-A INPUT -m nfacct --nfacct-name nat_verify_test_acct -j ACCEPT
COMMIT
"""
SPEC = TopologySpec(node_ips=("192.168.0.2",), pods=("10.244.1.2", "10.244.1.3"))


def _root_rules() -> dict[str, str]:
    """The root namespace's rulesets, read only (this proof is the one place that looks)."""
    out = {}
    for argv in (
        ["iptables-save"],
        ["iptables-legacy-save"],
        ["nft", "list", "ruleset"],
        ["nfacct", "list"],
    ):
        if shutil.which(argv[0]) is None:
            continue
        res = subprocess.run(argv, capture_output=True, text=True, check=False)
        # iptables-save stamps the time in comments; everything else must be identical.
        out[" ".join(argv)] = (
            "\n".join(ln for ln in res.stdout.splitlines() if not ln.startswith("#"))
            + f"\nrc={res.returncode}"
        )
    return out


def _netns_list() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def _ns_holders(inodes: set[int], pids: list[str]) -> list[str]:
    """Every /proc/<pid>/{fd,ns} link of ``pids`` that points at one of the namespaces."""
    found = []
    for pid in pids:
        for sub in ("fd", "ns", *(f"task/{t}/ns" for t in os.listdir(f"/proc/{pid}/task"))):
            d = f"/proc/{pid}/{sub}"
            try:
                names = os.listdir(d)
            except OSError:
                continue
            for n in names:
                try:
                    target = os.readlink(f"{d}/{n}")
                except OSError:
                    continue
                if target.startswith("net:[") and int(target[5:-1]) in inodes:
                    found.append(f"{d}/{n}")
    return found


def test_host_ruleset_unchanged_by_a_full_oracle_run() -> None:
    before = _root_rules()
    netns_before = _netns_list()
    for backend in ("nft", "legacy"):
        with KernelOracle(SPEC, backend=backend) as k:
            k.load(RULES)
            assert k.probe("203.0.113.2", "10.96.0.10", 80).dnat == ("10.244.1.2", 8080)
            assert k.probe("10.244.1.3", "192.168.0.2", 9001, origin="pod").verdict == "reject"
            assert k.probe("192.168.0.2", "10.96.0.10", 80, origin="host").verdict == "forward"
            assert k.probe("198.51.100.1", "10.96.0.10", 80, proto="sctp").verdict == "forward"
            k.reset()
    assert _root_rules() == before
    assert _netns_list() == netns_before


def test_no_leak_over_20_setup_teardown_cycles() -> None:
    fds_before = sorted(os.listdir("/proc/self/fd"))
    threads_before = len(os.listdir("/proc/self/task"))
    inodes: set[int] = set()
    for _ in range(20):
        with KernelOracle(SPEC) as k:
            topo = k.topology
            cycle = {
                os.fstat(fd).st_ino for fd in (topo.node, topo.ext, topo.node2, *topo.pods.values())
            }
            assert len(cycle) == 5  # node, ext, node2 and two pods: distinct namespaces
            inodes |= cycle
            k.load(RULES)
            assert k.probe("10.244.1.3", "10.96.0.10", 80, origin="pod").verdict == "forward"
    # After teardown nothing in this process (the only one that ever held them: the nsenter
    # children have exited) refers to any of them, so the kernel has freed them. (Inode
    # numbers of freed namespaces get reused, which is why only this process is searched.)
    assert _ns_holders(inodes, pids=[str(os.getpid())]) == []
    assert sorted(os.listdir("/proc/self/fd")) == fds_before
    assert len(os.listdir("/proc/self/task")) == threads_before
    children = Path(f"/proc/self/task/{os.getpid()}/children").read_text().split()
    assert children == []
    assert _netns_list() == ""
