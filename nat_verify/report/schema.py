"""A small JSON Schema checker for nat-verify's own documents, and where in a file a value is.

The schemas (``schemas/*.v1.json``) are hand-written and use only the keywords handled here:
``type``, ``required``, ``properties``, ``additionalProperties``, ``items``, ``enum``,
``const``, ``pattern``, ``minimum``, ``maximum``, ``minItems`` and local ``$ref``
(``#/$defs/...``). Keeping the checker in the package means loading a report needs no
third-party dependency; the tests cross-check the schemas with ``jsonschema`` when present.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

JSONPath = tuple[str | int, ...]

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


@cache
def load_schema(name: str) -> Mapping[str, Any]:
    """``name`` is ``"report"`` or ``"trace"``: the v1 schema shipped as package data."""
    text = (
        resources.files("nat_verify.report")
        .joinpath("schemas", f"{name}.v1.json")
        .read_text(encoding="utf-8")
    )
    schema: Mapping[str, Any] = json.loads(text)
    return schema


def _is_type(value: object, name: str) -> bool:
    # bool is an int subclass in Python, but not an integer in JSON
    if isinstance(value, bool) and name in ("integer", "number"):
        return False
    return isinstance(value, _TYPES[name])


def errors(value: object, schema: Mapping[str, Any]) -> list[tuple[JSONPath, str]]:
    """Every violation of ``schema`` by ``value``, as (path to the value, message)."""
    return list(_check(value, schema, schema, ()))


def _resolve(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"only local $ref is supported, got {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def _check(
    value: object, schema: Mapping[str, Any], root: Mapping[str, Any], path: JSONPath
) -> Iterator[tuple[JSONPath, str]]:
    if "$ref" in schema:
        yield from _check(value, _resolve(schema["$ref"], root), root, path)
        return
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(value, n) for n in names):
            yield path, f"expected {' or '.join(names)}, found {_json_type(value)}"
            return
    if "const" in schema and value != schema["const"]:
        yield path, f"expected {json.dumps(schema['const'])}, found {json.dumps(value)}"
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(json.dumps(e) for e in schema["enum"])
        yield path, f"expected one of {allowed}, found {json.dumps(value)}"
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        yield path, f"{value!r} does not match the pattern {schema['pattern']!r}"
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            yield path, f"{value} is less than the minimum {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            yield path, f"{value} is more than the maximum {schema['maximum']}"
    if isinstance(value, dict):
        for key in schema.get("required", ()):
            if key not in value:
                yield path, f"missing required field {key!r}"
        props: Mapping[str, Any] = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in props:
                yield from _check(item, props[key], root, (*path, key))
            elif extra is False:
                yield (*path, key), f"unexpected field {key!r}"
            elif isinstance(extra, Mapping):
                yield from _check(item, extra, root, (*path, key))
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            yield path, f"expected at least {schema['minItems']} items, found {len(value)}"
        if "items" in schema:
            for i, item in enumerate(value):
                yield from _check(item, schema["items"], root, (*path, i))


def _json_type(value: object) -> str:
    for name in ("boolean", "null", "object", "array", "string", "integer", "number"):
        if _is_type(value, name):
            return name
    return type(value).__name__


def format_path(path: Sequence[str | int]) -> str:
    """``results[3].status`` style, ``$`` for the document itself."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out or "$"


# --- locating a value in the JSON text, to name a line in error messages ----------------------

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def locate(text: str, path: Sequence[str | int]) -> int:
    """The 1-based line where the value at ``path`` starts in ``text`` (well-formed JSON).

    Walks down the text along ``path`` only, skipping siblings with the stdlib decoder, so it
    costs one pass over the document at most. A path that does not exist gives the line of
    the deepest value found on the way.
    """
    pos = _skip(text, 0)
    for part in path:
        found = _child(text, pos, part)
        if found is None:
            break
        pos = found
    return text.count("\n", 0, pos) + 1


def _skip(text: str, pos: int) -> int:
    m = _WS.match(text, pos)
    return m.end() if m else pos


def _child(text: str, pos: int, part: str | int) -> int | None:
    """Offset of the member ``part`` of the object/array starting at ``pos``."""
    opener = text[pos : pos + 1]
    if opener not in ("{", "["):
        return None
    pos = _skip(text, pos + 1)
    index = 0
    while pos < len(text) and text[pos] not in "}]":
        if opener == "{":
            key, pos = json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined]
            pos = _skip(text, pos)
            pos = _skip(text, pos + 1)  # the colon
            if key == part:
                return pos
        elif index == part:
            return pos
        _, pos = _DECODER.raw_decode(text, pos)
        pos = _skip(text, pos)
        if text[pos : pos + 1] == ",":
            pos = _skip(text, pos + 1)
        index += 1
    return None
