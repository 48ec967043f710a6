"""The KubeProxyConfiguration inside a ConfigMap, where cluster installers keep it.

kubeadm (and kubespray, which uses kubeadm's layout) stores kube-proxy's configuration file in the
ConfigMap ``kube-system/kube-proxy`` under the key ``config.conf``; EKS uses
``kube-system/kube-proxy-config``, key ``config``. ``kubectl -n kube-system get configmap
kube-proxy -o yaml`` (or a whole ``kubectl get configmaps -A -o yaml`` List) can therefore be
given as it is. Every other ConfigMap is skipped.

The value is YAML (or JSON) text inside a string. ``kubectl -o yaml`` prints it as a literal
block (``config.conf: |``), so a line ``n`` of the embedded text is line ``key + n`` of the file
and messages point there; in ``-o json`` output the text is one JSON string, so messages point
at the key.
"""

from __future__ import annotations

from nat_verify.kube.documents import RawObject, parse_text
from nat_verify.kube.errors import KubeInputError
from nat_verify.kube.meta import read_meta
from nat_verify.kube.proxyconfig import read_proxy_config
from nat_verify.model.cluster import ProxyConfig

PROXY_API_VERSION = "kubeproxy.config.k8s.io/v1alpha1"
# (namespace, name) -> the data key holding the KubeProxyConfiguration
PROXY_CONFIGMAPS = {("kube-system", "kube-proxy"): "config.conf", ("kube-system", "kube-proxy-config"): "config"}


def proxy_config_key(obj: RawObject) -> str:
    """The data key of the kube-proxy configuration if this ConfigMap holds one, else ``""``."""
    meta = read_meta(obj, "ConfigMap")
    key = PROXY_CONFIGMAPS.get((meta.namespace, meta.name), "")
    data = obj.data.get("data")
    return key if key and isinstance(data, dict) and isinstance(data.get(key), str) else ""


def read_proxy_configmap(obj: RawObject, key: str) -> ProxyConfig:
    meta = read_meta(obj, "ConfigMap")
    data = meta.fields.mapping_or_empty("data")
    text = data.text(key)
    where = f"ConfigMap {meta.namespace}/{meta.name} data[{key}]"
    key_line = data.line(key)
    literal = not obj.file.endswith(".json")
    try:
        # padding keeps the embedded lines at their place in the file
        inner = parse_text("\n" * key_line + text if literal else text, obj.file, syntax="yaml")
    except KubeInputError as e:
        raise KubeInputError(e.file, e.line if literal else key_line, f"{where}: {e.message}") from None
    configs = [o for o in inner if o.data.get("kind") == "KubeProxyConfiguration"]
    if len(configs) != 1:
        kinds = [str(o.data.get("kind")) for o in inner]
        raise KubeInputError(
            obj.file, key_line, f"{where}: expected one KubeProxyConfiguration, found {kinds or 'nothing'}"
        )
    config = configs[0]
    version = config.data.get("apiVersion")
    if version != PROXY_API_VERSION:
        raise KubeInputError(
            obj.file, config.line if literal else key_line,
            f"{where}: apiVersion must be {PROXY_API_VERSION!r} (got {version!r})",
        )  # fmt: skip
    if not literal:
        config = RawObject(obj.file, key_line, config.data)
    try:
        return read_proxy_config(config)
    except KubeInputError as e:
        raise KubeInputError(e.file, e.line if literal else key_line, f"{where}: {e.message}") from None
