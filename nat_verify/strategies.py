"""Public Hypothesis strategies for nat-verify's values (filled in by the invariant work)."""

from __future__ import annotations


def register_type_strategies() -> None:
    """Register strategies for the model types with ``st.register_type_strategy``."""
