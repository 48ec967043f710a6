"""Sets of integers as sorted, disjoint inclusive intervals: the values a packet field may take.

Almost every test a rule makes on an address or a port compares one packet field with
constants (``-s 10.0.0.0/8``, ``--dport 80:90``, an ipset's members, the node's addresses).
Such constraints need no solver: the values a field may still take on a path are a union of
intervals, a test cuts it in two (the values inside and outside the CIDRs or ranges), and a
path is feasible exactly when no field's set is empty. The symbolic walk (``walk``) keeps these
sets per packet variable, so forking on such a test costs an interval intersection, not a
solver call; only the formula of a finished path (``to_z3``) goes to Z3.

A ``Span`` is a tuple of ``(lo, hi)`` pairs, inclusive, sorted, non-overlapping and
non-adjacent (so equal sets are equal tuples).
"""

from __future__ import annotations

import bisect
import ipaddress
from collections.abc import Iterable

import z3

from nat_verify.model.cluster import IPNetwork

Span = tuple[tuple[int, int], ...]
EMPTY: Span = ()


def full(bits: int) -> Span:
    return ((0, (1 << bits) - 1),)


def normalise(pairs: Iterable[tuple[int, int]]) -> Span:
    """Merge overlapping and adjacent intervals."""
    out: list[list[int]] = []
    for lo, hi in sorted(p for p in pairs if p[0] <= p[1]):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1][1] = hi
        else:
            out.append([lo, hi])
    return tuple((a, b) for a, b in out)


def of_nets(nets: Iterable[IPNetwork], family: int) -> Span:
    """The addresses of ``nets`` of ``family`` (CIDRs of the other family match nothing)."""
    return normalise(
        (int(n.network_address), int(n.broadcast_address)) for n in nets if n.version == family
    )


def of_ranges(ranges: Iterable[tuple[int, int]]) -> Span:
    return normalise(ranges)


def point(value: int) -> Span:
    return ((value, value),)


def intersect(a: Span, b: Span) -> Span:
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def subtract(a: Span, b: Span) -> Span:
    out: list[tuple[int, int]] = []
    j = 0
    for lo, hi in a:
        cur = lo
        while j < len(b) and b[j][1] < cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] <= hi:
            if b[k][0] > cur:
                out.append((cur, b[k][0] - 1))
            cur = max(cur, b[k][1] + 1)
            if cur > hi:
                break
            k += 1
        if cur <= hi:
            out.append((cur, hi))
    return tuple(out)


def union(a: Span, b: Span) -> Span:
    return normalise((*a, *b))


def subset(a: Span, b: Span) -> bool:
    return not subtract(a, b)


def contains(a: Span, value: int) -> bool:
    i = bisect.bisect_right(a, (value, 1 << 130)) - 1
    return i >= 0 and a[i][0] <= value <= a[i][1]


def single(a: Span) -> int | None:
    """The only value of ``a``, or None."""
    if len(a) == 1 and a[0][0] == a[0][1]:
        return a[0][0]
    return None


def size(a: Span) -> int:
    return sum(hi - lo + 1 for lo, hi in a)


def pick(a: Span, prefer: Iterable[int] = ()) -> int:
    """A member of ``a`` (non-empty): a preferred one if any is inside, else not the first of
    a larger interval (a network address reads badly in a counterexample)."""
    for p in prefer:
        if contains(a, p):
            return p
    lo, hi = a[0]
    return lo + 1 if hi - lo >= 2 else lo


def to_z3(var: z3.BitVecRef, a: Span) -> z3.BoolRef:
    """``var`` lies in ``a`` (built through Z3's C API: these formulas are the solver's bulk
    and the Python API's argument coercion costs more than the solver)."""
    bits = var.size()
    top = (1 << bits) - 1
    if a == ((0, top),):
        return z3.BoolVal(True)
    parts: list[z3.BoolRef] = []
    for lo, hi in a:
        if lo == hi:
            parts.append(_eq(var, lo))
        elif lo == 0:
            parts.append(_ule(var, hi, upper=True))
        elif hi == top:
            parts.append(_ule(var, lo, upper=False))
        else:
            parts.append(_all([_ule(var, lo, upper=False), _ule(var, hi, upper=True)]))
    if not parts:
        return z3.BoolVal(False)
    return parts[0] if len(parts) == 1 else _any(parts)


def _value(var: z3.BitVecRef, n: int) -> z3.BitVecRef:
    return z3.BitVecVal(n, var.size(), var.ctx)


def _eq(var: z3.BitVecRef, n: int) -> z3.BoolRef:
    ctx = var.ctx
    v = _value(var, n)
    return z3.BoolRef(z3.Z3_mk_eq(ctx.ref(), var.as_ast(), v.as_ast()), ctx)


def _ule(var: z3.BitVecRef, n: int, *, upper: bool) -> z3.BoolRef:
    """``var <= n`` (``upper``) or ``n <= var``, unsigned."""
    ctx = var.ctx
    v = _value(var, n)
    a, b = (var, v) if upper else (v, var)
    return z3.BoolRef(z3.Z3_mk_bvule(ctx.ref(), a.as_ast(), b.as_ast()), ctx)


def _array(parts: list[z3.BoolRef]) -> z3.Ast:
    arr = (z3.Ast * len(parts))()
    for i, p in enumerate(parts):
        arr[i] = p.as_ast()
    return arr


def any_of(parts: list[z3.BoolRef]) -> z3.BoolRef:
    """``Or(parts)`` (false when empty), through the C API."""
    if not parts:
        return z3.BoolVal(False)
    return _any(parts)


def _any(parts: list[z3.BoolRef]) -> z3.BoolRef:
    ctx = parts[0].ctx
    return z3.BoolRef(z3.Z3_mk_or(ctx.ref(), len(parts), _array(parts)), ctx)


def _all(parts: list[z3.BoolRef]) -> z3.BoolRef:
    ctx = parts[0].ctx
    return z3.BoolRef(z3.Z3_mk_and(ctx.ref(), len(parts), _array(parts)), ctx)


def cover(a: Span, care: Span, bits: int) -> list[tuple[int, int]]:
    """Few CIDRs, as (network, prefix length), that hold exactly the members of ``a`` among the
    values of ``care`` (values outside ``care`` may fall either way: the shortest answer)."""
    out: list[tuple[int, int]] = []
    todo = [(0, 0)]
    while todo:
        net, plen = todo.pop()
        block = ((net, net + (1 << (bits - plen)) - 1),)
        c = intersect(care, block)
        if not c or not intersect(a, c):
            continue
        if subset(c, a):
            out.append((net, plen))
            continue
        half = 1 << (bits - plen - 1)
        todo += [(net + half, plen + 1), (net, plen + 1)]
    return sorted(out)


def describe_cover(a: Span, care: Span, family: int) -> list[str]:
    to_ip = ipaddress.IPv4Address if family == 4 else ipaddress.IPv6Address
    bits = 32 if family == 4 else 128
    return [f"{to_ip(n)}/{p}" for n, p in cover(a, care, bits)]


def describe(a: Span, family: int) -> str:
    """The set as CIDRs (addresses), for messages."""
    to_ip = ipaddress.IPv4Address if family == 4 else ipaddress.IPv6Address
    nets: list[str] = []
    for lo, hi in a:
        nets += [str(n) for n in ipaddress.summarize_address_range(to_ip(lo), to_ip(hi))]
    return ", ".join(nets)
