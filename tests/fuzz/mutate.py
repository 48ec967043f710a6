"""Byte-level mutation of real inputs, drawn by Hypothesis (so failures shrink)."""

from __future__ import annotations

from hypothesis import strategies as st

from tests.fuzz.seeds import TOKENS


@st.composite
def mutated(draw: st.DrawFn, seed: bytes) -> bytes:
    """``seed`` after 1-8 edits: delete, insert a token or byte, overwrite, cut, repeat or swap lines."""
    data = bytearray(seed)
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 2, 3, 5, 8]))):
        n = len(data)
        op = draw(st.sampled_from(["delete", "token", "byte", "overwrite", "truncate", "dup_line", "swap_lines", "drop_line"]))
        at = draw(st.integers(0, n)) if n else 0
        if op == "delete" and n:
            data[at : at + draw(st.integers(1, 64))] = b""
        elif op == "token":
            data[at:at] = draw(st.sampled_from(TOKENS))
        elif op == "byte":
            data[at:at] = bytes([draw(st.integers(0, 255))])
        elif op == "overwrite" and n:
            data[min(at, n - 1)] = draw(st.integers(0, 255))
        elif op == "truncate":
            del data[at:]
        elif op in ("dup_line", "swap_lines", "drop_line"):
            lines = bytes(data).split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            if op == "dup_line":
                lines.insert(i, lines[i])
            elif op == "drop_line":
                del lines[i]
            else:
                j = draw(st.integers(0, len(lines) - 1))
                lines[i], lines[j] = lines[j], lines[i]
            data = bytearray(b"\n".join(lines))
    return bytes(data)
