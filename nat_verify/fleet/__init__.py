"""Many nodes at once: a directory of node dumps checked against one cluster.

``inventory`` maps the files of a directory to nodes (by file name or a manifest);
``fleet`` groups identical dumps, checks each group once per node on an executor and collects
the per-node reports; ``executors`` runs the per-group work in this process, in a pool of
processes, or on Dask.
"""

from nat_verify.executors import DaskExecutor, Executor, LocalExecutor, make_executor
from nat_verify.fleet.fleet import FleetReport, NodeReport, check_fleet
from nat_verify.fleet.inventory import Fleet, FleetInputError, NodeDump, load_fleet

__all__ = [
    "DaskExecutor",
    "Executor",
    "Fleet",
    "FleetInputError",
    "FleetReport",
    "LocalExecutor",
    "NodeDump",
    "NodeReport",
    "check_fleet",
    "load_fleet",
    "make_executor",
]
