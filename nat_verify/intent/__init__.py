"""Reference semantics of Services: what Kubernetes allows for a packet on a node.

Written from the documented behaviour (Service docs, "Service Traffic Policy", "Virtual IPs
and Service Proxies", KEP-1669, KEP-2086, PR 77523) and never from the rules kube-proxy
writes, so that intent and rules can disagree.
"""

from nat_verify.intent.affinity import affinity
from nat_verify.intent.destination import (
    ADDRESS_CLASSES,
    Destination,
    UnknownServicePort,
    destinations,
    find_service_port,
    service_port_key,
)
from nat_verify.intent.detector import Detector, classify_origin, detector_for, is_local_traffic
from nat_verify.intent.endpoints import EndpointSets, usable_endpoints
from nat_verify.intent.expectation import Expectation, expect
from nat_verify.intent.sources import interesting_sources

__all__ = [
    "ADDRESS_CLASSES",
    "Destination",
    "Detector",
    "EndpointSets",
    "Expectation",
    "UnknownServicePort",
    "affinity",
    "classify_origin",
    "destinations",
    "detector_for",
    "expect",
    "find_service_port",
    "interesting_sources",
    "is_local_traffic",
    "service_port_key",
    "usable_endpoints",
]
