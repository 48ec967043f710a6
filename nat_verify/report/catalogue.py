"""Titles of the invariants NV001-NV015 as reports show them.

The checker (``nat_verify.check.catalogue``) owns the catalogue; this is the table a renderer
falls back on when a report does not carry titles of its own (see ``build_report``).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs


@attrs.frozen
class InvariantInfo:
    """What a report says about one invariant: a stable ID, a CamelCase name, one line."""

    id: str
    name: str
    title: str
    description: str = ""

    def to_json(self) -> dict[str, str]:
        d = {"name": self.name, "title": self.title}
        if self.description:
            d["description"] = self.description
        return d


def _from_checker() -> dict[str, InvariantInfo]:
    # the checker's catalogue is the one source of the invariants' names and statements
    from nat_verify.check.catalogue import CATALOGUE

    return {i.id: InvariantInfo(i.id, i.name, i.title, i.description) for i in CATALOGUE}


BUILTIN: Mapping[str, InvariantInfo] = _from_checker()


def info(invariant: str, catalogue: Mapping[str, InvariantInfo] | None = None) -> InvariantInfo:
    """The entry for ``invariant``; an unknown ID gets a placeholder rather than an error."""
    for table in (catalogue or {}, BUILTIN):
        if invariant in table:
            return table[invariant]
    return InvariantInfo(invariant, invariant, invariant)


def from_report(report: Mapping[str, object]) -> dict[str, InvariantInfo]:
    """The titles a report document carries (``"catalogue"``), as ``InvariantInfo`` s."""
    raw = report.get("catalogue")
    out: dict[str, InvariantInfo] = {}
    if isinstance(raw, Mapping):
        for k, v in raw.items():
            if isinstance(v, Mapping):
                out[str(k)] = InvariantInfo(
                    str(k),
                    str(v.get("name", k)),
                    str(v.get("title", k)),
                    str(v.get("description", "")),
                )
    return out
