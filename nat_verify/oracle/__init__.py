"""The real-kernel differential oracle: kube-proxy rules in throwaway network namespaces.

Public API (see ``oracle.py``): ``KernelOracle``, ``KernelResult``, ``TopologySpec``,
``kernel_available``, ``to_outcome_key``, ``outcome_key``; errors ``RestoreError`` (bad
restore text, with line) and ``ProbeError`` (a probe that cannot be sent as asked).
"""

from nat_verify.oracle.loader import RestoreError
from nat_verify.oracle.netns import TopologySpec
from nat_verify.oracle.oracle import (
    KernelOracle,
    KernelResult,
    kernel_available,
    outcome_key,
    to_outcome_key,
)
from nat_verify.oracle.probe import ProbeError

__all__ = [
    "KernelOracle",
    "KernelResult",
    "ProbeError",
    "RestoreError",
    "TopologySpec",
    "kernel_available",
    "outcome_key",
    "to_outcome_key",
]
