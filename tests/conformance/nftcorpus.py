"""Reading kube-proxy's nftables conformance corpus (tests/conformance/data/kube-proxy-nftables,
Apache-2.0, The Kubernetes Authors; see its README and NOTICE)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "kube-proxy-nftables"
KERNEL = DATA / "kernel"
HELPER = "helpers__Test_sortNFTablesTransaction"


def case_names() -> list[str]:
    return sorted(p.stem for p in DATA.glob("*.json"))


def kube_proxy_cases() -> list[str]:
    """The 14 rulesets kube-proxy writes (13 expectations and the ParseDump input)."""
    return [n for n in case_names() if n != HELPER]


def expectations() -> list[str]:
    """The 13 expected rulesets (the ParseDump input is a test's starting state)."""
    return [n for n in kube_proxy_cases() if not n.endswith("__parsedump_input")]


def case(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text())
    return data


def listing_text(name: str) -> str:
    return (KERNEL / f"{name}.list.txt").read_text()


def listing_json(name: str) -> str:
    return (KERNEL / f"{name}.list.json").read_text()


def kernel_script(name: str) -> str:
    return (KERNEL / f"{name}.nft").read_text()
