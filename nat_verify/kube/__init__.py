"""Kubernetes YAML/JSON (manifests, directories, ``kubectl get -o yaml|json`` Lists) -> model.

``load_cluster(paths)`` reads everything under ``paths`` into one ``Cluster``;
``load_clusters(paths)`` treats each spec file (or subdirectory) as its own cluster. Bad input
raises ``KubeInputError`` with the file and line.
"""

from nat_verify.kube.errors import KubeInputError
from nat_verify.kube.loader import build_cluster, load_cluster, load_clusters

__all__ = ["KubeInputError", "build_cluster", "load_cluster", "load_clusters"]
