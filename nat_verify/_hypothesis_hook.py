"""Hypothesis entry point: ``st.from_type(Cluster)`` and friends work without importing us first.

Hypothesis calls every function in its ``hypothesis`` entry-point group at import; this one
registers nat-verify's strategies for its model types. It must stay cheap and import nothing
heavy until Hypothesis asks for a strategy.
"""

from __future__ import annotations


def _hypothesis_setup_hook() -> None:
    from nat_verify import strategies

    strategies.register_type_strategies()
