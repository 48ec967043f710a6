"""Session affinity (NV011): a property over two connections from the same client.

Service docs, "Session stickiness": with ``sessionAffinity: ClientIP`` connections from a
client IP keep going to the same endpoint; ``sessionAffinityConfig.clientIP.timeoutSeconds``
(default 10800) bounds how long the choice is remembered. It is keyed on the client address
only, so it spans ports and protocols of the client.
"""

from __future__ import annotations

from nat_verify.intent.destination import Destination, find_service_port
from nat_verify.model.cluster import Cluster


def affinity(cluster: Cluster, svc_port: Destination | str, proto: str = "tcp") -> int | None:
    """Timeout in seconds when the Service port has ClientIP affinity, else None.

    ``svc_port`` is a Destination or a service port name (``ns/name:port`` / ``ns/name``).
    """
    if isinstance(svc_port, Destination):
        name, proto = svc_port.service, svc_port.proto
    else:
        name = svc_port
    svc, _ = find_service_port(cluster, name, proto)
    if svc.session_affinity != "ClientIP":
        return None
    return svc.affinity_timeout
