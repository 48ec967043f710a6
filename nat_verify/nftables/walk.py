"""Walking statements and expressions: every sub-expression, every chain a rule can go to."""

from __future__ import annotations

from collections.abc import Iterator

from nat_verify.nftables.expr import (
    AnonSet,
    Binop,
    Concat,
    Elem,
    Expr,
    Mangle,
    MapItem,
    MapLookup,
    Match,
    Nat,
    Range,
    SetRef,
    SetUpdate,
    Stmt,
    Verdict,
    VerdictMap,
)


def subexprs(e: Expr | Verdict) -> Iterator[Expr | Verdict]:
    """``e`` and everything inside it, depth first."""
    yield e
    if isinstance(e, (AnonSet, Concat)):
        for i in e.items:
            yield from subexprs(i)
    elif isinstance(e, MapItem):
        yield from subexprs(e.key)
        yield from subexprs(e.value)
    elif isinstance(e, Elem):
        yield from subexprs(e.val)
    elif isinstance(e, (Binop,)):
        yield from subexprs(e.left)
        yield from subexprs(e.right)
    elif isinstance(e, Range):
        yield from subexprs(e.lo)
        yield from subexprs(e.hi)
    elif isinstance(e, MapLookup):
        yield from subexprs(e.key)
        yield from subexprs(e.data)


def stmt_exprs(s: Stmt) -> Iterator[Expr | Verdict]:
    """Every expression a statement holds (its verdicts included)."""
    if isinstance(s, Match):
        yield from subexprs(s.left)
        yield from subexprs(s.right)
    elif isinstance(s, VerdictMap):
        yield from subexprs(s.key)
        yield from subexprs(s.data)
    elif isinstance(s, Mangle):
        yield from subexprs(s.key)
        yield from subexprs(s.value)
    elif isinstance(s, Nat):
        for part in (s.addr, s.port):
            if part is not None:
                yield from subexprs(part)
    elif isinstance(s, SetUpdate):
        yield SetRef(s.set)
        yield from subexprs(s.elem)
    elif isinstance(s, Verdict):
        yield s


def chain_targets(stmts: tuple[Stmt, ...]) -> list[str]:
    """Chains the statements jump or go to, directly or through an inline verdict map."""
    return [e.target for s in stmts for e in stmt_exprs(s) if isinstance(e, Verdict) and e.target]


def set_refs(stmts: tuple[Stmt, ...]) -> list[str]:
    return [e.name for s in stmts for e in stmt_exprs(s) if isinstance(e, SetRef)]
