"""Typed, located access to the fields of one raw object.

``Fields`` wraps a ``YamlMap`` with the file it came from and the path to it (``spec.ports[0]``),
so every accessor can fail with ``KubeInputError`` naming the exact line, the field, what was
expected and what was found, e.g. ``'spec.ports[0].port' must be an integer in 1..65535 (got
70000)``. Values that are absent (or ``null``) yield the default, as the API server treats them.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from typing import Any, NoReturn

import attrs

from nat_verify.kube.errors import KubeInputError
from nat_verify.kube.located import YamlMap, YamlSeq

# IANA_SVC_NAME as the API validates a named port: 1-15 lower-case letters, digits and '-',
# at least one letter, no leading, trailing or doubled '-'.
_PORT_NAME = re.compile(r"^(?=.*[a-z])[a-z0-9]([a-z0-9]|-(?!-))*(?<!-)$")


def _show(value: Any) -> str:
    return (
        repr(value)
        if not isinstance(value, YamlMap | YamlSeq)
        else ("a mapping" if isinstance(value, YamlMap) else "a list")
    )


@attrs.frozen(eq=False)
class Fields:
    file: str
    data: YamlMap
    what: str  # the object, for messages: "Service default/web"
    path: str = ""  # where ``data`` sits inside the object: "spec.ports[0]"
    # The line that introduced ``data`` (its key, or its list item); a block mapping's own
    # mark is its first key, which is the wrong place to report a key it lacks.
    at: int = 0

    # -- locating and failing -------------------------------------------------------------

    def field(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def line(self, key: str | None = None) -> int:
        if key is not None and key in self.data:
            return self.data.line_of(key)
        return self.at or self.data.line

    def fail(self, key: str | None, message: str, *, line: int | None = None) -> NoReturn:
        where = (
            f"'{self.field(key)}' " if key is not None else (f"'{self.path}' " if self.path else "")
        )
        raise KubeInputError(
            self.file,
            line if line is not None else self.line(key),
            f"{self.what}: {where}{message}",
        )

    def expect(self, key: str, expected: str, got: Any, *, line: int | None = None) -> NoReturn:
        self.fail(key, f"must be {expected} (got {_show(got)})", line=line)

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    # -- scalars ---------------------------------------------------------------------------

    def text(self, key: str, default: str = "", *, required: bool = False) -> str:
        value = self.data.get(key)
        if value is None:
            if required:
                self.fail(key, "is required")
            return default
        if not isinstance(value, str):
            self.expect(key, "a string", value)
        if required and not value:
            self.fail(key, "must not be empty")
        return value

    def choice(self, key: str, allowed: tuple[str, ...], default: str) -> str:
        value = self.text(key, default) or default
        if value not in allowed:
            self.expect(key, "one of " + ", ".join(allowed), value)
        return value

    def integer(
        self,
        key: str,
        default: int = 0,
        *,
        lo: int | None = None,
        hi: int | None = None,
        required: bool = False,
    ) -> int:
        value = self.data.get(key)
        if value is None:
            if required:
                self.fail(key, "is required")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.expect(key, "an integer", value)
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            self.expect(key, f"an integer in {lo}..{hi}", value)
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.expect(key, "true or false", value)
        return value

    # -- containers ------------------------------------------------------------------------

    def mapping(self, key: str) -> Fields | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, YamlMap):
            self.expect(key, "a mapping", value)
        return Fields(self.file, value, self.what, self.field(key), self.line(key))

    def mapping_or_empty(self, key: str) -> Fields:
        found = self.mapping(key)
        if found is not None:
            return found
        empty = YamlMap()
        empty.line = self.line(key)
        return Fields(self.file, empty, self.what, self.field(key), empty.line)

    def items(self, key: str) -> Iterator[Fields]:
        """The mappings of a list of objects (``ports``, ``endpoints``...)."""
        seq = self._seq(key)
        for index, item in enumerate(seq):
            if not isinstance(item, YamlMap):
                self.expect(f"{key}[{index}]", "a mapping", item, line=seq.line_at(index))
            yield Fields(
                self.file, item, self.what, f"{self.field(key)}[{index}]", seq.line_at(index)
            )

    def strings(self, key: str) -> list[tuple[str, int]]:
        """A list of strings, each with its line."""
        seq = self._seq(key)
        out: list[tuple[str, int]] = []
        for index, item in enumerate(seq):
            if not isinstance(item, str):
                self.expect(f"{key}[{index}]", "a string", item, line=seq.line_at(index))
            out.append((item, seq.line_at(index)))
        return out

    def string_map(self, key: str) -> dict[str, str] | None:
        """A map of strings to strings (labels, selector); ``None`` when absent."""
        sub = self.mapping(key)
        if sub is None:
            return None
        out: dict[str, str] = {}
        for k, v in sub.data.items():
            if not isinstance(k, str):
                sub.fail(None, f"keys must be strings (got {k!r})", line=sub.data.line_of(str(k)))
            if not isinstance(v, str):
                # `on`, `yes`, `1` unquoted are not strings in YAML; the API server refuses them too.
                sub.expect(k, "a string (quote it)", v)
            out[k] = v
        return out

    def _seq(self, key: str) -> YamlSeq:
        value = self.data.get(key)
        if value is None:
            empty = YamlSeq()
            empty.line = self.line(key)
            return empty
        if not isinstance(value, YamlSeq):
            self.expect(key, "a list", value)
        return value

    # -- network values --------------------------------------------------------------------

    def port(self, key: str, *, required: bool = False, default: int = 0) -> int:
        return self.integer(key, default, lo=1, hi=65535, required=required)

    def ip(self, key: str, value: str, *, line: int | None = None, sloppy: bool = False) -> str:
        """``sloppy``: leading zeros are decimal (``ParseIPSloppy``), for the Service and
        EndpointSlice addresses kube-proxy reads that way (objects stored by older API servers)."""
        text = unpadded(value.strip()) if sloppy else value
        return parse_ip(text, lambda: self.expect(key, "an IP address", value, line=line))

    def cidr(self, key: str, value: str, *, line: int | None = None, sloppy: bool = False) -> str:
        text = value
        if sloppy:
            addr, sep, length = value.strip().partition("/")
            text = f"{unpadded(addr)}{sep}{length}"
        return parse_cidr(
            text, lambda: self.expect(key, "a CIDR such as 10.0.0.0/8", value, line=line)
        )


def parse_ip(value: str, fail: Any) -> str:
    """The canonical spelling of an IP address (as iptables-save prints it)."""
    parts = value.split(".")
    if len(parts) == 4 and all(
        p.isdigit() and p.isascii() and len(p) <= 3 and (p == "0" or p[0] != "0") and int(p) < 256
        for p in parts
    ):
        return value  # a plain dotted quad is already canonical; the common case, made cheap
    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        fail()
        raise  # unreachable: fail() raises


def unpadded(text: str) -> str:
    """An IPv4 address with leading zeros read as decimal (``172.30.0.041`` is 172.30.0.41),
    as Kubernetes' ParseIPSloppy reads the addresses older API servers accepted."""
    parts = text.split(".")
    if len(parts) == 4 and all(p.isdigit() and p.isascii() and 0 < len(p) <= 3 for p in parts):
        return ".".join(str(int(p)) for p in parts)
    return text


def parse_cidr(value: str, fail: Any) -> str:
    """The network of a CIDR, canonical; host bits are cleared as Go's ParseCIDR does."""
    text = value.strip()
    if "/" not in text:
        fail()
    try:
        return str(ipaddress.ip_network(text, strict=False))
    except ValueError:
        fail()
        raise


def is_port_name(value: str) -> bool:
    return len(value) <= 15 and bool(_PORT_NAME.match(value))


def ip_family(address: str) -> str:
    return "IPv6" if ":" in address else "IPv4"
