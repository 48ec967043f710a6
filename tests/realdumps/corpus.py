"""The corpus of published dumps: MANIFEST.json and the files it lists (see README.md)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent


@cache
def manifest() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((ROOT / "MANIFEST.json").read_text())
    return doc


def entries() -> list[dict[str, Any]]:
    return list(manifest()["dumps"])


def ids() -> list[str]:
    return [e["id"] for e in entries()]


def entry(dump_id: str) -> dict[str, Any]:
    for e in entries():
        if e["id"] == dump_id:
            return e
    raise KeyError(dump_id)


def path(e: dict[str, Any]) -> Path:
    return ROOT / e["file"]


def text(e: dict[str, Any]) -> str:
    return path(e).read_text()


def packet_cases() -> list[tuple[str, int]]:
    """(dump id, packet index) of every packet expectation in the manifest."""
    return [(e["id"], i) for e in entries() for i, _ in enumerate(e.get("packets", ()))]
