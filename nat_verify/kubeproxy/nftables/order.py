"""How upstream's tests compare kube-proxy's nftables transactions.

``sort_transaction`` is how upstream's tests compare two transactions
(``sortNFTablesTransaction`` in ``pkg/proxy/nftables/helpers_test.go``): blank and ``#`` lines
dropped, then a stable sort by object kind (table, chain, rule, set, map, element), then by
object name (the fifth word), rules of one chain keeping their order, anything else by the
whole line. Two transactions are the same for those tests iff their sorted texts are equal.
"""

from __future__ import annotations

from functools import cmp_to_key

_RANK = {"table": 10, "chain": 9, "rule": 8, "set": 7, "map": 6, "element": 5}


def _less(a: list[str], b: list[str], la: str, lb: str) -> bool:
    if len(a) < 5 or len(b) < 5:
        return False
    ra, rb = _RANK.get(a[1], 0), _RANK.get(b[1], 0)
    if ra != rb:
        return ra > rb
    if a[4] != b[4]:
        return a[4] < b[4]
    if a[1] == "rule":
        return False
    return la < lb


def sort_transaction(text: str) -> str:
    lines = [ln for ln in text.split("\n") if ln and not ln.startswith("#")]
    words = {ln: ln.split(" ") for ln in lines}

    def cmp(x: str, y: str) -> int:
        if _less(words[x], words[y], x, y):
            return -1
        if _less(words[y], words[x], y, x):
            return 1
        return 0

    return "\n".join(sorted(lines, key=cmp_to_key(cmp)))
