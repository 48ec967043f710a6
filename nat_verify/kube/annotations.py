"""Output-spelling flags carried as annotations on the KubeProxyConfiguration object.

These are not KubeProxyConfiguration fields: they say how a particular kube-proxy build or test
harness *spells* the same rules (and which era's layout it uses), so that compiled output can be
compared byte for byte with a given dump. The YAML loader passes the object's
``metadata.annotations`` to ``apply_annotations``.

| annotation | values | ``ProxyConfig`` field |
|---|---|---|
| ``nat-verify.io/mark-spelling`` | ``kube-proxy`` (``0x00004000``) / ``test`` (``0x4000``) | ``mark_spelling`` |
| ``nat-verify.io/random-fully`` | ``"true"`` / ``"false"`` | ``random_fully`` |
| ``nat-verify.io/nfacct`` | ``"true"`` / ``"false"`` | ``nfacct`` |
| ``nat-verify.io/legacy-layout`` | ``"true"`` / ``"false"`` | ``legacy_layout`` |
| ``nat-verify.io/terminating-fallback`` | ``"true"`` / ``"false"`` | ``terminating_fallback`` |
| ``nat-verify.io/large-cluster-threshold`` | integer | ``large_cluster_threshold`` |
| ``nat-verify.io/kube-proxy-version`` | ``"1.Y"`` or ``"1.Y.Z"`` (1.16 or later) | ``kube_proxy_version`` |

``kube-proxy-version`` selects the rule layout of that kube-proxy release (``kubeproxy.eras``,
``docs/eras.md``); ``legacy-layout: "true"`` is the same as ``kube-proxy-version: "1.27"``.

``terminating_fallback`` is also the real feature gate ``featureGates.ProxyTerminatingEndpoints``
of the KubeProxyConfiguration (GA and removed in 1.28+); the corpus YAML sets both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import attrs

from nat_verify.kube.errors import KubeInputError
from nat_verify.model.cluster import ProxyConfig

PREFIX = "nat-verify.io/"
MARK_SPELLING = PREFIX + "mark-spelling"
RANDOM_FULLY = PREFIX + "random-fully"
NFACCT = PREFIX + "nfacct"
LEGACY_LAYOUT = PREFIX + "legacy-layout"
TERMINATING_FALLBACK = PREFIX + "terminating-fallback"
LARGE_CLUSTER_THRESHOLD = PREFIX + "large-cluster-threshold"
KUBE_PROXY_VERSION = PREFIX + "kube-proxy-version"

_BOOLS = {
    RANDOM_FULLY: "random_fully",
    NFACCT: "nfacct",
    LEGACY_LAYOUT: "legacy_layout",
    TERMINATING_FALLBACK: "terminating_fallback",
}


def apply_annotations(cfg: ProxyConfig, annotations: Mapping[str, str]) -> ProxyConfig:
    """``cfg`` with the ``nat-verify.io/*`` annotations applied; others are ignored.

    Raises ``KubeInputError`` (at ``cfg.source``) for an unknown ``nat-verify.io/`` key or a
    bad value, so a typo cannot silently change the output.
    """
    changes: dict[str, Any] = {}
    for key, raw in annotations.items():
        if not key.startswith(PREFIX):
            continue
        value = str(raw).strip()
        if key in _BOOLS:
            if value.lower() not in ("true", "false"):
                raise KubeInputError(
                    cfg.source.file, cfg.source.line, f'annotation {key}: expected "true" or "false", received {raw!r}'
                )
            changes[_BOOLS[key]] = value.lower() == "true"
        elif key == MARK_SPELLING:
            if value not in ("kube-proxy", "test"):
                raise KubeInputError(
                    cfg.source.file, cfg.source.line, f"annotation {key}: expected kube-proxy or test, received {raw!r}"
                )
            changes["mark_spelling"] = value
        elif key == LARGE_CLUSTER_THRESHOLD:
            try:
                changes["large_cluster_threshold"] = int(value)
            except ValueError:
                raise KubeInputError(
                    cfg.source.file, cfg.source.line, f"annotation {key}: expected an integer, received {raw!r}"
                ) from None
        elif key == KUBE_PROXY_VERSION:
            # the compiler maps the release to its layout; here only the form is checked
            m = re.fullmatch(r"v?1\.(\d+)(\.\d+)?", value)
            if m is None or int(m.group(1)) < 16:
                raise KubeInputError(
                    cfg.source.file, cfg.source.line, f"annotation {key}: expected a release 1.16 or later such as \"1.27\", received {raw!r}"
                )
            changes["kube_proxy_version"] = value
        else:
            known = ", ".join(sorted([MARK_SPELLING, LARGE_CLUSTER_THRESHOLD, KUBE_PROXY_VERSION, *_BOOLS]))
            raise KubeInputError(cfg.source.file, cfg.source.line, f"unknown annotation {key} (known: {known})")
    return attrs.evolve(cfg, **changes) if changes else cfg
