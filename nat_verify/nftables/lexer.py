"""Tokens of nft's input language (``nft -f`` scripts, ``nft list`` output, kube-proxy batches).

A word is anything between separators, so chain names such as
``endpoint-5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80``, prefixes, ranges, ``ip:port`` and
IPv6 addresses stay one token; the grammar decides what a word means. ``:`` is a separator
only on its own or at the end of a word that is not an IPv6 address (``80:`` in
``{ 80: accept }``); ``,`` always separates. ``#`` starts a comment (``# handle 12`` after a
listed rule is kept as a ``COMMENT`` token so the grammar can read the handle).
"""

from __future__ import annotations

import re

import attrs

WORD, STRING, PUNCT, NEWLINE, COMMENT = "word", "string", "punct", "newline", "comment"

_TOKEN = re.compile(
    r"""
      (?P<nl>\n)
    | (?P<ws>[ \t\r\f\v]+)
    | (?P<comment>\#[^\n]*)
    | (?P<string>"(?:[^"\\\n]|\\.)*")
    | (?P<badstring>")
    | (?P<punct><<|>>|==|!=|<=|>=|[{}();,=<>&|^])
    | (?P<word>[^\s{}();,"=!<>&|^\#]+)
    | (?P<bad>.)
    """,
    re.VERBOSE,
)
_UNESCAPE = re.compile(r"\\(.)")


@attrs.frozen
class Token:
    kind: str
    text: str
    line: int
    col: int  # 1-based column of the first character
    end: int = 0  # 1-based column after the last character


class LexError(ValueError):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(message)
        self.line = line


def unquote(text: str) -> str:
    return _UNESCAPE.sub(r"\1", text[1:-1])


def _split_colon(word: str) -> list[str]:
    """``80:`` -> ``80``, ``:``; an IPv6 address such as ``fd00::`` keeps its colons."""
    if len(word) > 1 and word.endswith(":") and not word.endswith("::"):
        return [word[:-1], ":"]
    return [word]


def tokenize(text: str, first_line: int = 1) -> list[Token]:
    """Every token of ``text``; raises ``LexError`` for an unterminated string or a stray ``!``."""
    out: list[Token] = []
    line = first_line
    start = 0
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        s = m.group()
        if kind == "ws":
            continue
        col = m.start() - start + 1
        end = m.end() - start + 1
        if kind == "nl":
            out.append(Token(NEWLINE, "\n", line, col, end))
            line += 1
            start = m.end()
        elif kind == "word":
            if s == ":":
                out.append(Token(PUNCT, ":", line, col, end))
            else:
                for part in _split_colon(s):
                    out.append(Token(PUNCT if part == ":" else WORD, part, line, col, end))
        elif kind == "punct":
            out.append(Token(PUNCT, s, line, col, end))
        elif kind == "string":
            out.append(Token(STRING, unquote(s), line, col, end))
        elif kind == "comment":
            out.append(Token(COMMENT, s[1:].strip(), line, col, end))
        elif kind == "badstring":
            raise LexError(line, "unterminated double quote")
        else:
            if s == "!":
                raise LexError(line, "'!' must be followed by '=' ('!=')")
            raise LexError(line, f"unexpected character {s!r}")
    return out
