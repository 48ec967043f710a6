"""Read manifest files into raw objects that remember where they came from.

PyYAML reads both YAML and JSON (JSON is, for everything ``kubectl`` prints, a subset of YAML),
so one reader covers ``*.yaml``, ``*.yml`` and ``*.json``. Mappings and sequences are built as
``YamlMap``/``YamlSeq``, which carry the line of the mapping itself and of each key or item, so a
later check can point at the exact field. ``kind: List`` (what ``kubectl get -o yaml`` prints)
and typed lists such as ``ServiceList`` are flattened into their items; the items of a typed
list, which the API server sends without ``kind`` and ``apiVersion``, get the list's.

``kubectl cluster-info dump`` prints one typed List per resource and namespace, one after another,
with each Pod's logs between ``==== START logs for container ...`` and ``==== END logs ...``
lines; the logs are blanked (keeping every other line where it was) and the Lists are read as a
sequence of JSON documents.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import attrs
import yaml

from nat_verify.kube.errors import KubeInputError
from nat_verify.kube.jsontext import parse_json_documents
from nat_verify.kube.located import YamlMap, YamlSeq

SPEC_SUFFIXES = (".yaml", ".yml", ".json")


# libyaml's parser composes the node tree in C; the walk below turns nodes into values
# directly, which is about twice as fast as PyYAML's generic constructor machinery.
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"


def _value(loader: Any, node: yaml.Node, memo: dict[int, Any]) -> Any:
    """The value of one node: ``YamlMap``/``YamlSeq`` with lines, scalars as SafeLoader reads them."""
    if isinstance(node, yaml.ScalarNode):
        if node.tag == _STR:
            return node.value
        # ints, bools, nulls, floats, timestamps; unknown tags raise ConstructorError
        return loader.construct_object(node, deep=True)
    done = memo.get(id(node))  # an alias: the same node again
    if done is not None:
        return done
    if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ:
        seq = YamlSeq()
        seq.line = node.start_mark.line + 1
        seq.item_lines = [child.start_mark.line + 1 for child in node.value]
        memo[id(node)] = seq
        seq.extend(_value(loader, child, memo) for child in node.value)
        return seq
    if isinstance(node, yaml.MappingNode) and node.tag == _MAP:
        return _mapping(loader, node, memo)
    raise yaml.constructor.ConstructorError(
        None, None, f"could not determine a constructor for the tag {node.tag!r}", node.start_mark
    )


def _mapping(loader: Any, node: yaml.MappingNode, memo: dict[int, Any]) -> YamlMap:
    data = YamlMap()
    data.line = node.start_mark.line + 1
    data.key_lines = {}
    memo[id(node)] = data
    loader.flatten_mapping(node)  # resolves `<<` merge keys
    for key_node, value_node in node.value:
        key = _value(loader, key_node, memo)
        if isinstance(key, list | dict):
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                "found an unhashable key",
                key_node.start_mark,
            )
        if key in data:
            # The API server's decoder rejects duplicate fields; silently keeping one would
            # verify something other than what the file says.
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key!r}",
                key_node.start_mark,
            )
        data[key] = _value(loader, value_node, memo)
        data.key_lines[str(key)] = key_node.start_mark.line + 1
    return data


@attrs.frozen(eq=False)
class RawObject:
    """One Kubernetes object as read: its mapping, file and 1-based line."""

    file: str
    line: int
    data: YamlMap


def parse_text(
    text: str, file: str, *, syntax: Literal["auto", "yaml", "json"] = "auto"
) -> list[RawObject]:
    """All objects in one file's text (documents in order, Lists flattened).

    ``*.json`` files, and other files whose text starts with ``{`` and reads as JSON, go through
    the (much faster) JSON reader; everything else through YAML.
    """
    if syntax == "auto":
        dump = LOG_START in text  # kubectl cluster-info dump: JSON unless -o yaml was given
        text = blank_logs(text)
        json_like = text.lstrip()[:1] == "{"
        if file.endswith(".json") or (dump and json_like):
            syntax = "json"
        elif json_like:
            try:
                return _parse_json_text(text, file)
            except KubeInputError:
                syntax = "yaml"  # a YAML flow mapping, or broken: YAML says which
    if syntax == "json":
        return _parse_json_text(text, file)
    loader = _Loader(text)
    out: list[RawObject] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            line = node.start_mark.line + 1
            data = _value(loader, node, {})
            loader.constructed_objects = {}
            out.extend(_document(file, line, data))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 0
        problem = "; ".join(p for p in (exc.context, exc.problem) if p)
        raise KubeInputError(file, line, f"malformed YAML/JSON: {problem}") from None
    except yaml.YAMLError as exc:  # e.g. a reader error without a mark
        raise KubeInputError(file, 0, f"malformed YAML/JSON: {exc}") from None
    finally:
        loader.dispose()
    return out


def _parse_json_text(text: str, file: str) -> list[RawObject]:
    out: list[RawObject] = []
    for data, line in parse_json_documents(text, file):
        out.extend(_document(file, line, data))
    return out


LOG_START = "==== START logs for container "
LOG_END = "==== END logs for container "


def blank_logs(text: str) -> str:
    """``text`` with the Pod log sections of a ``kubectl cluster-info dump`` turned into empty lines."""
    if LOG_START not in text:
        return text
    lines = text.split("\n")
    inside = False
    for i, line in enumerate(lines):
        if line.startswith(LOG_START):
            inside = True
        if inside:
            lines[i] = ""
        if line.startswith(LOG_END):
            inside = False
    return "\n".join(lines)


def _document(file: str, line: int, data: Any) -> Iterator[RawObject]:
    if data is None:  # an empty document, e.g. a trailing `---`
        return
    if not isinstance(data, YamlMap):
        raise KubeInputError(
            file, line, f"a document must be a mapping (a Kubernetes object), got {_kind_of(data)}"
        )
    yield from _flatten(file, data)


def _flatten(file: str, data: YamlMap) -> Iterator[RawObject]:
    kind = data.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and "items" in data:
        items = data["items"]
        if items is None:
            return
        if not isinstance(items, YamlSeq):
            raise KubeInputError(
                file,
                data.line_of("items"),
                f"{kind}: 'items' must be a list of objects (got {_kind_of(items)})",
            )
        for index, item in enumerate(items):
            if not isinstance(item, YamlMap):
                raise KubeInputError(
                    file,
                    items.line_at(index),
                    f"{kind}: items[{index}] must be a mapping (a Kubernetes object), "
                    f"got {_kind_of(item)}",
                )
            if kind != "List":  # a typed list: its items come without kind and apiVersion
                item.setdefault("kind", kind[: -len("List")])
                if isinstance(data.get("apiVersion"), str):
                    item.setdefault("apiVersion", data["apiVersion"])
            yield from _flatten(file, item)
        return
    yield RawObject(file=file, line=data.line, data=data)


def _kind_of(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the string {value!r}"
    return f"{type(value).__name__} {value!r}"


def read_file(path: Path) -> list[RawObject]:
    """Objects of one file; unreadable files and bad encodings become ``KubeInputError``."""
    file = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise KubeInputError(file, 0, f"cannot read file: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise KubeInputError(file, line, "expected UTF-8 text, got undecodable bytes") from None
    return parse_text(text, file)


def spec_files(path: Path) -> list[Path]:
    """``path`` itself if it is a file, else every spec file under it, recursively, sorted.

    Hidden files and directories (``.git``, editor backups) are skipped.
    """
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise KubeInputError(str(path), 0, "no such file or directory")
    found = [
        p
        for p in path.rglob("*")
        if p.is_file()
        and p.suffix in SPEC_SUFFIXES
        and not any(part.startswith(".") for part in p.relative_to(path).parts)
    ]
    return sorted(found)
