"""Walks over every packet of a dump, slice by slice (``slices``), for one or two rulesets.

``sliced_walks`` yields, per slice and origin, the paths of each ruleset's walker
over the same packets; its callers (``query``, ``equivalence``) ask their question of each
and stop at the first answer. A slice whose walk forks past ``budget`` branches is cut by
destination port and walked again, piece by piece.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import attrs

from nat_verify.netfilter.predicate import PROTO_NUMBERS
from nat_verify.symbolic import domain
from nat_verify.symbolic.domain import Span
from nat_verify.symbolic.slices import ORIGINS, PORTS, Slice, by_port, port_cuts, slices, sources
from nat_verify.symbolic.state import Var, initial
from nat_verify.symbolic.walk import Path, TooManyPaths, Walker

PROTOS = ("tcp", "udp", "sctp")
BUDGET = 5_000


@attrs.frozen
class Walked:
    """The paths of each ruleset for the packets of one slice and origin (every protocol
    asked for: the protocol is a packet variable too)."""

    slice: Slice
    origin: str
    region: dict[str, Span]  # the packets: per variable, its values
    paths: tuple[list[Path], ...]  # per walker
    undecided: str = ""  # why these packets could not be walked (then no paths)


def walk_slice(w: Walker, s: Slice, protos: Span, origin: str, src: Span) -> list[Path]:
    region = region_of(s, src, protos)
    fields = {}
    for var in ("dst", "dport", "proto"):
        value = domain.single(region[var])
        fields[var] = Var(var) if value is None else w.space.concrete(var, value)
    st = initial(w.space, w.ctx, origin, src=Var("src"), sport=Var("sport"), **fields)  # type: ignore[arg-type]
    st.doms = {v: span for v, span in region.items() if isinstance(fields.get(v, Var(v)), Var)}
    return w.run(origin, st)


def region_of(s: Slice, src: Span, protos: Span) -> dict[str, Span]:
    return {"src": src, "sport": PORTS, "dst": s.dst, "dport": s.dport, "proto": protos}


def protocols(names: Sequence[str]) -> Span:
    return domain.normalise((PROTO_NUMBERS[n], PROTO_NUMBERS[n]) for n in names)


def sliced_walks(
    walkers: Sequence[Walker], *, protos: Sequence[str] = PROTOS, origins: Sequence[str] = ORIGINS,
    sources_within: Span | None = None, only: Sequence[Slice] | None = None, budget: int = BUDGET,
) -> Iterator[Walked]:  # fmt: skip
    """Every slice x origin (``sources_within``: only sources in that set; ``only``: these
    slices instead of every destination). A slice that cannot be walked is yielded with the
    reason (``Walked.undecided``)."""
    ctx = walkers[0].ctx
    cuts: list[int] | None = None
    todo = list(only) if only is not None else list(slices([w.program for w in walkers], ctx))
    ps = protocols(protos)
    for s in todo:
        for origin in origins:
            src = sources(ctx, origin, s.loopback)
            if sources_within is not None:
                src = domain.intersect(src, sources_within)
            if not src:
                continue
            try:
                got = tuple(_bounded(w, budget, s, ps, origin, src) for w in walkers)
                yield Walked(s, origin, region_of(s, src, ps), got)
            except TooManyPaths:
                if cuts is None:
                    cuts = port_cuts([w.program for w in walkers])
                for piece in by_port(s, cuts):
                    region = region_of(piece, src, ps)
                    try:
                        got = tuple(walk_slice(w, piece, ps, origin, src) for w in walkers)
                    except TooManyPaths:
                        where = domain.describe(piece.dst, ctx.family) if len(piece.dst) <= 4 else "other destinations"
                        why = f"{origin} packets to {where}: the walk forks into too many paths"
                        yield Walked(piece, origin, region, (), why)
                        continue
                    yield Walked(piece, origin, region, got)


def _bounded(w: Walker, budget: int, s: Slice, protos: Span, origin: str, src: Span) -> list[Path]:
    keep = w.max_paths
    w.max_paths = min(keep, budget)
    try:
        return walk_slice(w, s, protos, origin, src)
    finally:
        w.max_paths = keep
