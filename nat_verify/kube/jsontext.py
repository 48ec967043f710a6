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
import re
import sys
from typing import Any

from nat_verify.kube.errors import KubeInputError
from nat_verify.kube.located import YamlMap, YamlSeq

MAX_DEPTH = 200
"""Deepest nesting of objects and arrays read (the reader recurses once per level)."""

_SURROGATE = re.compile("[\\ud800-\\udfff]")

# Undeclared in typeshed but stable parts of the json package since Python 2.6.
_WS: Any = getattr(json.decoder, "WHITESPACE").match  # noqa: B009
_scanstring: Any = getattr(json.decoder, "scanstring")  # noqa: B009
_py_make_scanner: Any = getattr(json.scanner, "py_make_scanner")  # noqa: B009


def _number_message(exc: ValueError) -> str:
    if "digits" in str(exc):
        return f"a number of more than {sys.get_int_max_str_digits():,} digits cannot be read"
    return f"number cannot be read: {exc}"


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
        self.parse_string = self._string
        self._depth = 0
        # the pure-Python scanner calls the two hooks above; the C one would bypass them
        self.scan_once = _py_make_scanner(self)

    def _line(self, pos: int) -> int:
        return bisect.bisect_right(self._starts, pos)

    @staticmethod
    def _string(s: str, end: int, strict: bool) -> tuple[str, int]:
        value, after = _scanstring(s, end, strict)
        if not value.isascii() and _SURROGATE.search(value):
            # "\ud800" alone decodes to a string no UTF-8 output can carry
            raise json.JSONDecodeError("a \\u escape names half a surrogate pair", s, end - 1)
        return value, after

    def _value(self, s: str, end: int, scan_once: Any) -> tuple[Any, int]:
        try:
            return scan_once(s, end)
        except StopIteration as err:
            raise json.JSONDecodeError("Expecting value", s, err.value) from None
        except json.JSONDecodeError:
            raise
        except ValueError as exc:  # int() past 4,300 digits
            raise json.JSONDecodeError(_number_message(exc), s, end) from None

    def _enter(self, s: str, end: int) -> None:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise json.JSONDecodeError(f"nested more than {MAX_DEPTH} levels deep", s, end - 1)

    def _object(
        self, s_and_end: tuple[str, int], strict: bool, scan_once: Any, *_: Any
    ) -> tuple[YamlMap, int]:
        s, end = s_and_end
        self._enter(s, end)
        data = YamlMap()
        data.line = self._line(end - 1)
        data.key_lines = {}
        end = _WS(s, end).end()
        if s[end : end + 1] == "}":
            self._depth -= 1
            return data, end + 1
        while True:
            if s[end : end + 1] != '"':
                raise json.JSONDecodeError(
                    "Expecting property name enclosed in double quotes", s, end
                )
            key_line = self._line(end)
            key, end = self._string(s, end + 1, strict)
            end = _WS(s, end).end()
            if s[end : end + 1] != ":":
                raise json.JSONDecodeError("Expecting ':' delimiter", s, end)
            end = _WS(s, end + 1).end()
            value, end = self._value(s, end, scan_once)
            if key in data:
                raise KubeInputError("", key_line, f"found duplicate key {key!r}")
            data[key] = value
            data.key_lines[key] = key_line
            end = _WS(s, end).end()
            sep = s[end : end + 1]
            end += 1
            if sep == "}":
                self._depth -= 1
                return data, end
            if sep != ",":
                raise json.JSONDecodeError("Expecting ',' delimiter", s, end - 1)
            end = _WS(s, end).end()

    def _array(self, s_and_end: tuple[str, int], scan_once: Any, *_: Any) -> tuple[YamlSeq, int]:
        s, end = s_and_end
        self._enter(s, end)
        seq = YamlSeq()
        seq.line = self._line(end - 1)
        seq.item_lines = []
        end = _WS(s, end).end()
        if s[end : end + 1] == "]":
            self._depth -= 1
            return seq, end + 1
        while True:
            seq.item_lines.append(self._line(end))
            value, end = self._value(s, end, scan_once)
            seq.append(value)
            end = _WS(s, end).end()
            sep = s[end : end + 1]
            end += 1
            if sep == "]":
                self._depth -= 1
                return seq, end
            if sep != ",":
                raise json.JSONDecodeError("Expecting ',' delimiter", s, end - 1)
            end = _WS(s, end).end()


def parse_json(text: str, file: str) -> tuple[Any, int]:
    """The document and the line it starts on; errors name the file and line."""
    start = _WS(text, 0).end()
    try:
        value = _Decoder(text).decode(text)
    except json.JSONDecodeError as exc:
        raise KubeInputError(file, exc.lineno, f"malformed JSON: {exc.msg}") from None
    except KubeInputError as exc:
        raise KubeInputError(file, exc.line, f"malformed JSON: {exc.message}") from None
    except ValueError as exc:  # a number at the top level past 4,300 digits
        line = text.count("\n", 0, start) + 1
        raise KubeInputError(file, line, f"malformed JSON: {_number_message(exc)}") from None
    except RecursionError:  # MAX_DEPTH levels from a caller already deep in its own stack
        raise KubeInputError(file, text.count("\n", 0, start) + 1, "malformed JSON: nested too deeply") from None
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
    except ValueError as exc:  # a number at the top level past 4,300 digits
        raise KubeInputError(file, decoder._line(pos), f"malformed JSON: {_number_message(exc)}") from None
    except RecursionError:  # MAX_DEPTH levels from a caller already deep in its own stack
        raise KubeInputError(file, decoder._line(pos), "malformed JSON: nested too deeply") from None
    return out
