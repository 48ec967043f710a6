"""Seed inputs for mutation: real published dumps, compiled dumps, spec manifests, fixtures."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "specs" / "web-svc.yaml"


@functools.cache
def dumps() -> tuple[bytes, ...]:
    from nat_verify.kube import load_cluster
    from nat_verify.kubeproxy import compile_node
    from nat_verify.netfilter.parse import parse
    from nat_verify.netfilter.render import render
    from nat_verify.netfilter.saveform import to_save_form

    out = [p.read_bytes() for p in sorted((ROOT / "tests" / "realdumps" / "dumps").glob("*.rules"))]
    complete = [d for d in out if not _excerpt(d)]
    cluster = load_cluster(SPEC)
    restore = compile_node(cluster, "node-1", 4)
    complete += [restore.encode(), render(to_save_form(parse(restore, family=4))).encode()]
    # most published dumps are excerpts; complete dumps weigh as much, so that mutants of
    # them reach the strict reader and the interpreter too (the last seed is the compiled save)
    return tuple(out + complete * max(1, len(out) // len(complete)) + complete[-1:])


def _excerpt(data: bytes) -> bool:
    from nat_verify.netfilter.parse import DumpError, parse

    try:
        parse(data)
    except DumpError:
        return True
    return False


@functools.cache
def manifests() -> tuple[tuple[bytes, str], ...]:
    """(content, suffix) pairs: every spec and loader fixture, and each spec as JSON too."""
    out: list[tuple[bytes, str]] = []
    for p in sorted((ROOT / "specs").glob("*.yaml")):
        text = p.read_text()
        out.append((text.encode(), ".yaml"))
        docs = [d for d in yaml.safe_load_all(text) if d]
        out.append((json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}, indent=1, default=str).encode(), ".json"))
    for p in sorted((ROOT / "tests" / "unit" / "data" / "kube").glob("*.yaml")):
        out.append((p.read_bytes(), ".yaml"))
    return tuple(out)


# what mutations insert: the tokens that matter to the readers, and hostile values
TOKENS: tuple[bytes, ...] = (
    b"COMMIT\n", b"*nat\n", b"*filter\n", b"*raw\n", b":KUBE-X - [0:0]\n", b":INPUT DROP [1:2]\n",
    b"-A ", b"-A KUBE-SERVICES ", b"-j ", b"-g ", b"! ", b"-m ", b"-p ", b'"', b"\\", b"\x00", b"\xff\xfe",
    b"\r", b"\t", b"\x1b", b"9" * 5000, b"65536", b"-1", b"0xffffffffff", b"::1", b"fe80::1/64",
    b"10.0.0.0/33", b"300.1.1.1", b"-m recent --seconds 1h --rcheck", b"-j MARK", b"-j MARK --set-xmark junk",
    b"-m statistic --mode random --probability 2", b"--to-destination 10.0.0.1:99999",
    b"-m statistic --mode nth --every 0", b"\n", b"[99999999999999999999999:1] ", b" -c 1 x",
    b"> ", b"$ iptables -t nat -S\n", b"-P INPUT DROP\n", b"-N X\n", b"-m frobnicate --x 1",
    b"-j CLASSIFY --set-class 1:1", b"-j KUBE-SVC-NOPE", b"-j PREROUTING", b"--dport 0:70000",
    b"-m multiport --dports 1,2,3,", b"-m mark --mark 0x1/0x1/0x1", b"-m conntrack --ctstate BOGUS",
    b"-m addrtype --dst-type LOCAL", b"-m set --match-set s src", b"-j DNAT --to-destination [::1]:80",
    # manifests
    b"&a ", b"*a", b"<<: ", b"---\n", b"{", b"}", b"[", b"]", b": ", b"- ", b"name: ", b"namespace: ",
    b"a/b:c", b"port: ", b"targetPort: ", b"nodePort: ", b"kind: Service\n", b"kind: List\n",
    b"items: ", b"!!binary ", b"!!python/object:os.system ", b'"\\ud800"', b"2001-02-30", b"null",
    b"true", b"~", b"0x10", b"1e999", b"ports: []", b"selector: {}", b"clusterIP: None",
    b"ipFamilies: [IPv6]", b"type: LoadBalancer", b"externalTrafficPolicy: Local",
)  # fmt: skip
