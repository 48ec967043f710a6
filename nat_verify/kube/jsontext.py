"""A JSON reader that records lines, for ``*.json`` files (``kubectl get -o json``).

PyYAML reads JSON too, but a large cluster dump then takes seconds per megabyte; this reader
is the standard library's decoder with its object and array steps replaced by ones that build
``YamlMap``/``YamlSeq`` with the line of each object, key and item, so errors point at the
exact line just as for YAML.
"""

from __future__ import annotations

import bisect
import json
import json.decoder
import json.scanner
from typing import Any

from nat_verify.kube.errors import KubeInputError
from nat_verify.kube.located import YamlMap, YamlSeq

# Undeclared in typeshed but stable parts of the json package since Python 2.6.
_WS: Any = getattr(json.decoder, "WHITESPACE").match  # noqa: B009
_scanstring: Any = getattr(json.decoder, "scanstring")  # noqa: B009
_py_make_scanner: Any = getattr(json.scanner, "py_make_scanner")  # noqa: B009


class _Decoder(json.JSONDecoder):
    def __init__(self, text: str) -> None:
        super().__init__()
        starts = [0]
        find = text.find
        pos = find("\n")
        while pos >= 0:
            starts.append(pos + 1)
            pos = find("\n", pos + 1)
        self._starts = starts
        self.parse_object = self._object
        self.parse_array = self._array
        # the pure-Python scanner calls the two hooks above; the C one would bypass them
        self.scan_once = _py_make_scanner(self)

    def _line(self, pos: int) -> int:
        return bisect.bisect_right(self._starts, pos)

    def _object(
        self, s_and_end: tuple[str, int], strict: bool, scan_once: Any, *_: Any
    ) -> tuple[YamlMap, int]:
        s, end = s_and_end
        data = YamlMap()
        data.line = self._line(end - 1)
        data.key_lines = {}
        end = _WS(s, end).end()
        if s[end : end + 1] == "}":
            return data, end + 1
        while True:
            if s[end : end + 1] != '"':
                raise json.JSONDecodeError(
                    "Expecting property name enclosed in double quotes", s, end
                )
            key_line = self._line(end)
            key, end = _scanstring(s, end + 1, strict)
            end = _WS(s, end).end()
            if s[end : end + 1] != ":":
                raise json.JSONDecodeError("Expecting ':' delimiter", s, end)
            end = _WS(s, end + 1).end()
            try:
                value, end = scan_once(s, end)
            except StopIteration as err:
                raise json.JSONDecodeError("Expecting value", s, err.value) from None
            if key in data:
                raise KubeInputError("", key_line, f"found duplicate key {key!r}")
            data[key] = value
            data.key_lines[key] = key_line
            end = _WS(s, end).end()
            sep = s[end : end + 1]
            end += 1
            if sep == "}":
                return data, end
            if sep != ",":
                raise json.JSONDecodeError("Expecting ',' delimiter", s, end - 1)
            end = _WS(s, end).end()

    def _array(self, s_and_end: tuple[str, int], scan_once: Any, *_: Any) -> tuple[YamlSeq, int]:
        s, end = s_and_end
        seq = YamlSeq()
        seq.line = self._line(end - 1)
        seq.item_lines = []
        end = _WS(s, end).end()
        if s[end : end + 1] == "]":
            return seq, end + 1
        while True:
            seq.item_lines.append(self._line(end))
            try:
                value, end = scan_once(s, end)
            except StopIteration as err:
                raise json.JSONDecodeError("Expecting value", s, err.value) from None
            seq.append(value)
            end = _WS(s, end).end()
            sep = s[end : end + 1]
            end += 1
            if sep == "]":
                return seq, end
            if sep != ",":
                raise json.JSONDecodeError("Expecting ',' delimiter", s, end - 1)
            end = _WS(s, end).end()


def parse_json(text: str, file: str) -> tuple[Any, int]:
    """The document and the line it starts on; errors name the file and line."""
    try:
        start = _WS(text, 0).end()
        value = _Decoder(text).decode(text)
    except json.JSONDecodeError as exc:
        raise KubeInputError(file, exc.lineno, f"malformed JSON: {exc.msg}") from None
    except KubeInputError as exc:
        raise KubeInputError(file, exc.line, f"malformed JSON: {exc.message}") from None
    except RecursionError:
        raise KubeInputError(file, 0, "malformed JSON: nested too deeply") from None
    return value, text.count("\n", 0, start) + 1


def parse_json_documents(text: str, file: str) -> list[tuple[Any, int]]:
    """Every JSON value of a text holding several one after another (``kubectl cluster-info
    dump`` prints one List per resource this way), each with the line it starts on."""
    decoder = _Decoder(text)
    out: list[tuple[Any, int]] = []
    pos = _WS(text, 0).end()
    try:
        while pos < len(text):
            value, end = decoder.raw_decode(text, pos)
            out.append((value, decoder._line(pos)))
            pos = _WS(text, end).end()
    except json.JSONDecodeError as exc:
        raise KubeInputError(file, exc.lineno, f"malformed JSON: {exc.msg}") from None
    except KubeInputError as exc:
        raise KubeInputError(file, exc.line, f"malformed JSON: {exc.message}") from None
    except RecursionError:
        raise KubeInputError(file, 0, "malformed JSON: nested too deeply") from None
    return out
