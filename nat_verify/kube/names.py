"""Kubernetes object names, validated as the API server validates them.

Names end up in chain comments, report titles and file names, so a name the API server would
refuse is refused here too, at its line, rather than travelling on (a ``/`` or ``:`` in a
Service name used to break ``ns/name:port`` keys; control characters reached the rules).
The rules, from apimachinery's validation helpers:

* **DNS-1123 label** (namespaces, Service port names): at most 63 characters, lower-case
  letters, digits and ``-``, starting and ending with a letter or digit;
* **DNS-1035 label** (Service names): the same, but starting with a letter;
* **DNS-1123 subdomain** (Nodes, Pods, EndpointSlices, ConfigMaps and most other kinds): at
  most 253 characters, DNS-1123 labels joined by dots (each label part may be any length the
  total allows).
"""

from __future__ import annotations

import re
from collections.abc import Callable

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL = re.compile(_LABEL)
_DNS1035_LABEL = re.compile("[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")

LABEL_MAX = 63
SUBDOMAIN_MAX = 253


def _shown(value: str) -> str:
    # the value goes into a message: long ones cut, control characters escaped by repr
    return repr(value if len(value) <= 80 else value[:60] + "...")


def dns1123_label(value: str) -> str | None:
    """Why ``value`` is not a DNS-1123 label, or None."""
    if len(value) > LABEL_MAX:
        return f"must be at most {LABEL_MAX} characters (got {len(value):,})"
    if not _DNS1123_LABEL.fullmatch(value):
        return (
            "must be a DNS label: lower-case letters, digits and '-', starting and ending "
            f"with a letter or digit (got {_shown(value)})"
        )
    return None


def dns1035_label(value: str) -> str | None:
    """Why ``value`` is not a DNS-1035 label (a DNS-1123 label starting with a letter), or None."""
    if len(value) > LABEL_MAX:
        return f"must be at most {LABEL_MAX} characters (got {len(value):,})"
    if not _DNS1035_LABEL.fullmatch(value):
        return (
            "must be a DNS-1035 label: lower-case letters, digits and '-', starting with a "
            f"letter and ending with a letter or digit (got {_shown(value)})"
        )
    return None


def dns1123_subdomain(value: str) -> str | None:
    """Why ``value`` is not a DNS-1123 subdomain, or None."""
    if len(value) > SUBDOMAIN_MAX:
        return f"must be at most {SUBDOMAIN_MAX} characters (got {len(value):,})"
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        return (
            "must be a DNS subdomain: lower-case letters, digits, '-' and '.', each "
            f"dot-separated part starting and ending with a letter or digit (got {_shown(value)})"
        )
    return None


# how each kind's metadata.name is validated (the API server's ValidateXName functions)
OBJECT_NAME_RULES: dict[str, Callable[[str], str | None]] = {
    "Service": dns1035_label,
    "Namespace": dns1123_label,
}


def object_name_problem(kind: str, name: str) -> str | None:
    """Why ``name`` is not a valid ``metadata.name`` for ``kind``, or None."""
    return OBJECT_NAME_RULES.get(kind, dns1123_subdomain)(name)


def namespace_problem(namespace: str) -> str | None:
    """Why ``namespace`` is not a valid ``metadata.namespace``, or None."""
    return dns1123_label(namespace)
