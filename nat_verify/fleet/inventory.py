"""Which dump belongs to which node: file names, or a manifest.

A fleet directory holds one iptables-save dump per node and family. Without a manifest, a
file's node is its name less a known suffix: ``node-a.save``, ``node-a.ipv6.rules``,
``ip-10-0-0-1.ec2.internal.txt`` (node names may contain dots, so only the suffixes below are
stripped). A manifest (``manifest.json`` or ``manifest.yaml`` in the directory, or any file
given explicitly) maps node names to a file or a list of files, relative to the directory::

    {"nodes": {"node-a": "a.rules", "node-b": ["b-v4.rules", "b-v6.rules"]}}

(the ``nodes`` level may be left out). Every node named must exist in the cluster; a file that
is missing, a node the cluster does not have, or a manifest that is not such a mapping is bad
input (``FleetInputError``: one message with the file, exit code 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from nat_verify.model.cluster import Cluster

FAMILY_SUFFIXES = {".ipv4": 4, ".ipv6": 6, ".v4": 4, ".v6": 6}
DUMP_SUFFIXES = (".save", ".rules", ".txt", ".iptables", ".dump")
MANIFEST_NAMES = ("manifest.json", "manifest.yaml", "manifest.yml")


class FleetInputError(Exception):
    """A fleet directory or manifest that cannot be used. ``str()`` is ``file: message``."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")


@attrs.frozen
class NodeDump:
    node: str
    path: str
    family: int | None = None  # from the file name (.ipv6); None: read from the dump


@attrs.frozen
class Fleet:
    directory: str
    dumps: tuple[NodeDump, ...]  # sorted by (node, path)

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d.node for d in self.dumps))


def node_of_file(name: str) -> tuple[str, int | None]:
    """``node-a.ipv6.save`` -> ("node-a", 6); ``node-a`` -> ("node-a", None)."""
    stem = name
    for suffix in DUMP_SUFFIXES:
        if stem.endswith(suffix) and len(stem) > len(suffix):
            stem = stem[: -len(suffix)]
            break
    family = None
    for suffix, fam in FAMILY_SUFFIXES.items():
        if stem.endswith(suffix) and len(stem) > len(suffix):
            stem, family = stem[: -len(suffix)], fam
            break
    return stem, family


def _read_manifest(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise FleetInputError(str(path), f"cannot read the manifest: {e}") from None
    if path.suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise FleetInputError(f"{path}:{e.lineno}", f"not JSON: {e.msg}") from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise FleetInputError(where, "not YAML") from None


def _from_manifest(directory: Path, manifest: Path) -> list[NodeDump]:
    doc = _read_manifest(manifest)
    if isinstance(doc, dict) and set(doc) == {"nodes"}:
        doc = doc["nodes"]
    if not isinstance(doc, dict) or not doc:
        raise FleetInputError(str(manifest), 'expected a mapping of node names to dump files, like {"nodes": {"node-a": "a.rules"}}')
    out = []
    for node, files in doc.items():
        names = [files] if isinstance(files, str) else files
        if not isinstance(node, str) or not isinstance(names, list) or not names or not all(isinstance(f, str) for f in names):
            raise FleetInputError(str(manifest), f"node {node!r}: expected a file name or a list of file names")
        for f in names:
            p = Path(f) if Path(f).is_absolute() else directory / f
            if not p.is_file():
                raise FleetInputError(str(manifest), f"node {node!r}: no file {str(p)!r}")
            out.append(NodeDump(node, str(p), node_of_file(p.name)[1]))
    return out


def _from_names(directory: Path) -> list[NodeDump]:
    out = []
    for p in sorted(directory.iterdir()):
        if p.name.startswith(".") or not p.is_file():
            continue
        node, family = node_of_file(p.name)
        out.append(NodeDump(node, str(p), family))
    return out


def load_fleet(directory: str, cluster: Cluster, manifest: str | None = None) -> Fleet:
    """The dumps of ``directory``, each with its node (checked against ``cluster``)."""
    d = Path(directory)
    if not d.is_dir():
        raise FleetInputError(directory, "not a directory")
    found = [d / n for n in MANIFEST_NAMES if (d / n).is_file()]
    m = Path(manifest) if manifest else (found[0] if found else None)
    if m is not None and not m.is_file():
        raise FleetInputError(str(m), "no such manifest")
    dumps = _from_manifest(d, m) if m is not None else _from_names(d)
    if not dumps:
        raise FleetInputError(directory, "no dump files (one iptables-save dump per node, named after the node)")
    known = {n.name for n in cluster.nodes}
    for nd in dumps:
        if nd.node not in known:
            names = ", ".join(sorted(known)[:20]) or "none"
            where = str(m) if m is not None else nd.path
            raise FleetInputError(where, f"no node {nd.node!r} in the cluster (nodes: {names}); name the file after its node or map it in a manifest")
    return Fleet(directory, tuple(sorted(dumps, key=lambda x: (x.node, x.path))))
