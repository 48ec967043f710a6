"""Intent vs rules for one packet, through the catalogue (see ``catalogue`` for who owns what)."""

from __future__ import annotations

from nat_verify.check.catalogue import Case, Violation, check_case, describe, describe_expectation
from nat_verify.intent import Destination, Expectation
from nat_verify.intent.endpoints import EndpointInfo
from nat_verify.model.outcome import Trace
from nat_verify.netfilter.context import NodeContext

__all__ = ["Violation", "compare", "describe", "describe_expectation"]


def compare(
    dest: Destination,
    src: str,
    origin: str,
    exp: Expectation,
    trace: Trace,
    endpoints: tuple[EndpointInfo, ...],
    ctx: NodeContext,
) -> list[Violation]:
    """Every way the trace breaks the expectation (empty when it keeps it)."""
    return check_case(Case(dest, src, origin, exp, trace, endpoints, ctx))
