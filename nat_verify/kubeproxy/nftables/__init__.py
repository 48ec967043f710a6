"""The kube-proxy nftables-mode compiler: Cluster + node -> the exact transaction it writes.

``compile_node_nft(cluster, node, family=4, stale_chains=())`` returns the ``add ...`` batch in
knftables ``Fake.Dump()`` order; ``sort_transaction(text)`` is upstream's test sort, under which
it equals the corpus literals; ``names`` holds the hashed object names.
"""

from nat_verify.kubeproxy.nftables.compiler import TABLE, compile_node_nft
from nat_verify.kubeproxy.nftables.order import sort_transaction

__all__ = ["TABLE", "compile_node_nft", "sort_transaction"]
