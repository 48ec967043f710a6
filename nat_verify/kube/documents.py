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

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import attrs
import yaml

from nat_verify.kube.errors import KubeInputError
from nat_verify.kube.jsontext import parse_json_documents
from nat_verify.kube.located import YamlMap, YamlSeq

SPEC_SUFFIXES = (".yaml", ".yml", ".json")


# libyaml parses in C; the composer below builds values straight from its events, without
# recursion (any nesting depth is a loop, refused past MAX_DEPTH with its line) and counting
# what aliases expand to (refused past ALIAS_BUDGET: a few KB of anchors can name billions of
# nodes, and every later walk of the objects would pay for them).
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"
_VALUE = "tag:yaml.org,2002:value"

MAX_DEPTH = 200
"""Deepest nesting of mappings and sequences read; Kubernetes objects stay far below it."""

ALIAS_BUDGET = 1_000_000
"""Most nodes that aliases and merge keys of one document may stand for, counted at each use."""

# YAML 1.1 allows tab, LF, CR, NEL and printable characters; the reader's own error has no line
_NOT_PRINTABLE = re.compile("[^\\x09\\x0a\\x0d\\x20-\\x7e\\x85\\xa0-\\ud7ff\\ue000-\\ufffd\\U00010000-\\U0010ffff]")


def check_characters(text: str, file: str) -> None:
    """Refuse characters YAML does not allow (NUL, control characters), naming the line."""
    m = _NOT_PRINTABLE.search(text)
    if m is not None:
        line = text.count("\n", 0, m.start()) + 1
        raise KubeInputError(file, line, f"not text: control character U+{ord(m.group()):04X} (YAML does not allow it)")


class _Open:
    """A mapping or sequence being built: its value, anchor, line and what it has so far."""

    __slots__ = ("value", "anchor", "key", "key_line", "merges", "size", "is_map")

    def __init__(self, value: YamlMap | YamlSeq, anchor: str | None, is_map: bool) -> None:
        self.value: Any = value
        self.anchor = anchor
        self.is_map = is_map
        self.key: Any = _NO_KEY
        self.key_line = 0
        self.merges: list[tuple[Any, int]] = []  # (value of a '<<' key, its line)
        self.size = 1  # nodes this value stands for, aliases expanded


_NO_KEY: Any = object()


def _fail(mark: Any, problem: str) -> yaml.MarkedYAMLError:
    return yaml.constructor.ConstructorError(None, None, problem, mark)


_RESOLVED: dict[str, str] = {}  # plain scalar -> tag: manifests repeat their values


def _resolve(loader: Any, event: Any) -> str:
    tag = event.tag
    if tag is not None and tag != "!":
        return str(tag)
    value = event.value
    if not event.implicit[0]:
        return _STR  # quoted: a string
    tag = _RESOLVED.get(value)
    if tag is None:
        tag = str(loader.resolve(yaml.ScalarNode, value, event.implicit))
        if len(value) <= 64 and len(_RESOLVED) < 1 << 16:
            _RESOLVED[value] = tag
    return tag


def _scalar(loader: Any, event: Any, tag: str) -> Any:
    """The value of a scalar whose tag is not ``str``."""
    if tag == _MERGE:
        return _MERGE_KEY
    if tag == _VALUE:
        return event.value
    construct = loader.yaml_constructors.get(tag)
    if construct is None or tag in (_MAP, _SEQ):
        raise _fail(event.start_mark, f"could not determine a constructor for the tag {tag!r}")
    node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
    try:
        return construct(loader, node)
    except ValueError as exc:
        # int() past 4,300 digits, a timestamp of February 30th...
        text = event.value if len(event.value) <= 40 else f"{event.value[:20]}... ({len(event.value):,} characters)"
        why = f"more than {sys.get_int_max_str_digits():,} digits" if "digits" in str(exc) else str(exc)
        raise _fail(event.start_mark, f"cannot read {text!r} as {tag.rsplit(':', 1)[-1]}: {why}") from None


class _MergeKey:
    """The ``<<`` key (YAML merge): its value's keys are merged into the mapping."""


_MERGE_KEY: Any = _MergeKey()


def _close_mapping(frame: _Open, mark: Any) -> int:
    """Apply the frame's ``<<`` merges (explicit keys win, then earlier sources); return nodes added."""
    data = frame.value
    assert isinstance(data, YamlMap)
    added = 0
    # later '<<' keys win over earlier ones; in a '<<' list, earlier mappings win over later ones
    for merged, line in reversed(frame.merges):
        sources = merged if isinstance(merged, YamlSeq) else [merged]
        for src in sources:
            if not isinstance(src, YamlMap):
                raise _fail(mark, f"a merge key '<<' (line {line}) needs a mapping or a list of mappings")
            for k, v in src.items():
                if k not in data:
                    data[k] = v
                    data.key_lines[k] = src.key_lines.get(k, line)
                    added += 1
    return added


def _compose_document(loader: Any, sizes: dict[int, int]) -> Any:
    """The next document's value (the DocumentStart event is consumed by the caller)."""
    anchors: dict[str, Any] = {}
    open_anchors: set[str] = set()
    stack: list[_Open] = []
    expanded = 0
    root: Any = None

    def add(value: Any, size: int, mark: Any) -> None:
        top = stack[-1]
        top.size += size
        if not top.is_map:
            seq = top.value
            seq.append(value)
            seq.item_lines.append(mark.line + 1)
            return
        if top.key is _NO_KEY:
            if isinstance(value, list | dict):
                raise _fail(mark, "while constructing a mapping: found an unhashable key")
            top.key, top.key_line = value, mark.line + 1
            return
        key, top.key = top.key, _NO_KEY
        if key is _MERGE_KEY:
            top.merges.append((value, top.key_line))
            return
        data = top.value
        if key in data:
            # The API server's decoder rejects duplicate fields; silently keeping one would
            # verify something other than what the file says.
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", None, f"found duplicate key {key!r}", mark
            )
        data[key] = value
        data.key_lines[str(key)] = top.key_line

    get_event = loader.get_event
    while True:
        event: Any = get_event()
        cls = type(event)
        if cls is _ScalarEvent:
            tag = _resolve(loader, event)
            value = event.value if tag == _STR else _scalar(loader, event, tag)
            if event.anchor is not None:
                anchors[event.anchor] = value
                sizes[id(value)] = 1
            if stack:
                add(value, 1, event.start_mark)
            else:
                root = value
        elif cls is _AliasEvent:
            name = event.anchor
            if name in open_anchors:
                raise _fail(event.start_mark, f"alias *{name} refers to a value that contains it")
            if name not in anchors:
                raise _fail(event.start_mark, f"found undefined alias {name!r}")
            value = anchors[name]
            size = sizes.get(id(value), 1)
            expanded += size
            if expanded > ALIAS_BUDGET:
                raise _fail(
                    event.start_mark,
                    f"aliases expand to more than {ALIAS_BUDGET:,} values (an alias bomb?)",
                )
            if stack:
                add(value, size, event.start_mark)
            else:
                root = value
        elif cls is _MappingStartEvent or cls is _SequenceStartEvent:
            is_map = cls is _MappingStartEvent
            tag = event.tag
            if tag is not None and tag != "!" and tag != (_MAP if is_map else _SEQ):
                raise _fail(event.start_mark, f"could not determine a constructor for the tag {tag!r}")
            if len(stack) >= MAX_DEPTH:
                raise _fail(event.start_mark, f"nested more than {MAX_DEPTH} levels deep")
            container: YamlMap | YamlSeq
            if is_map:
                container = YamlMap()
                container.key_lines = {}
            else:
                container = YamlSeq()
                container.item_lines = []
            start: Any = event.start_mark  # set on every event libyaml parses
            container.line = start.line + 1
            # the value is added to its parent when it is complete (its size is known then)
            stack.append(_Open(container, event.anchor, is_map))
            if event.anchor is not None:
                anchors[event.anchor] = container
                open_anchors.add(event.anchor)
        elif cls is _MappingEndEvent or cls is _SequenceEndEvent:
            frame = stack.pop()
            if frame.is_map and frame.merges:
                added = _close_mapping(frame, event.start_mark)
                expanded += added
                frame.size += added
                if expanded > ALIAS_BUDGET:
                    raise _fail(event.start_mark, f"merge keys expand to more than {ALIAS_BUDGET:,} values")
            if frame.anchor is not None:
                open_anchors.discard(frame.anchor)
                sizes[id(frame.value)] = frame.size
            if stack:
                add(frame.value, frame.size, _Line(frame.value.line - 1))
            else:
                root = frame.value
        elif cls is _DocumentEndEvent:
            return root
        else:  # pragma: no cover - libyaml emits nothing else inside a document
            raise _fail(event.start_mark, f"unexpected {cls.__name__}")


_ScalarEvent = yaml.ScalarEvent
_AliasEvent = yaml.AliasEvent
_MappingStartEvent = yaml.MappingStartEvent
_SequenceStartEvent = yaml.SequenceStartEvent
_MappingEndEvent = yaml.MappingEndEvent
_SequenceEndEvent = yaml.SequenceEndEvent
_DocumentEndEvent = yaml.DocumentEndEvent


class _Line:
    """A mark that knows only its (0-based) line, for values added when they close."""

    __slots__ = ("line",)

    def __init__(self, line: int) -> None:
        self.line = line


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
    check_characters(text, file)
    loader = _Loader(text)
    out: list[RawObject] = []
    try:
        loader.get_event()  # StreamStart
        while not loader.check_event(yaml.StreamEndEvent):
            start = loader.get_event()  # DocumentStart
            line = start.start_mark.line + 1
            data = _compose_document(loader, {})
            if isinstance(data, YamlMap | YamlSeq):
                line = data.line
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
