"""Read an nftables ruleset from text or a file, in whichever of the three forms it is.

The form is detected from the content (``dumpformat.detect``): JSON (``nft -j list
ruleset``), the listing (``nft list ruleset``) and kube-proxy's batch lines share nothing at
their start. An ``iptables-save`` dump given here is refused with a message saying what it is.
"""

from __future__ import annotations

from nat_verify import dumpformat
from nat_verify.netfilter.parse import DumpError
from nat_verify.nftables.jsonform import parse_json_ruleset
from nat_verify.nftables.model import Ruleset
from nat_verify.nftables.script import ScriptParser

MAX_BYTES = 1 << 30


def _text(data: str | bytes, source: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise DumpError(source, line, f"not text: invalid UTF-8 byte 0x{data[e.start]:02x}") from None


def parse_ruleset(data: str | bytes, *, source: str = "<memory>") -> Ruleset:
    text = _text(data, source)
    kind = dumpformat.detect(text)
    if kind == dumpformat.IPTABLES:
        raise DumpError(source, 1, "this is an iptables-save dump, not an nftables ruleset; give it where an iptables dump is expected")
    if kind == dumpformat.NFT_JSON:
        return parse_json_ruleset(text, source)
    if not text.strip():
        raise DumpError(source, 1, "empty ruleset: expected 'nft list ruleset' output, its JSON form or 'add ...' lines")
    return ScriptParser(source).run(text)


def parse_file(path: str) -> Ruleset:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise DumpError(path, 0, f"cannot read: {e.strerror}") from None
    if len(data) > MAX_BYTES:
        raise DumpError(path, 0, "larger than 1 GiB")
    return parse_ruleset(data, source=path)
