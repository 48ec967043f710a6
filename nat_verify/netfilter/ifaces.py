"""Interface names of Kubernetes nodes by role: what a packet can and cannot arrive on.

A rule such as ``-i weave -j WEAVE-NPC-EGRESS`` or ``! -i docker0 -j DNAT`` tests an interface
name. When the user did not say which interface a packet enters on, its name is unknown, but
not every answer is: the CNI plugins and container runtimes name their devices by convention,
and each kind of device carries only some traffic.

========================  ================================  ====================================
device                    names                             carries
========================  ================================  ====================================
pod bridge                cni0 (bridge, flannel), cbr0      this node's pods' packets
                          (kubenet), kube-bridge
                          (kube-router), weave (also remote
                          pods' traffic: Weave's datapath
                          delivers it to the bridge)
pod veth                  cali+ (Calico), lxc+ (Cilium),    one pod's packets
                          eni+ (AWS VPC CNI), veth+
                          (kindnet/ptp), azv+ (Azure),
                          gke+ (GKE)
overlay                   flannel.1, flannel-wg,            other nodes' (pods') packets
                          vxlan.calico, vxlan-v6.calico,
                          tunl0 (Calico IPIP), cilium_vxlan,
                          cilium_geneve, antrea-tun0
container bridge          docker0, cni-podman0              containers outside Kubernetes
address holder (dummy)    kube-ipvs0 (IPVS), nodelocaldns   nothing arrives on them
========================  ================================  ====================================

So a packet from off the node never arrives on a pod veth, a pod bridge other than Weave's, a
container bridge, a dummy or lo; a pod's packet never arrives on an overlay device, a
container bridge, a dummy or lo; a packet routed to another node's pod never leaves by a pod
veth, a pod bridge, a container bridge or a dummy. These are the only answers ``decided``
gives; anything else (``eth0``, ``ens5``, ``bond0``, ``br0``: uplinks whose names vary) stays
unknown. The role table is an assumption a result may rest on, and the report lists it.
"""

from __future__ import annotations

EXTERNAL = "external interface"  # = context.EXTERNAL_IFACE
POD = "pod interface"  # = context.POD_IFACE
REMOTE_POD_ROUTE = "route to other nodes' pods"
ROUTE = "routes"

POD_BRIDGES = ("cni0", "cbr0", "kube-bridge", "weave")
POD_VETH_PREFIXES = ("cali", "lxc", "eni", "veth", "azv", "gke")
OVERLAYS = ("flannel.1", "flannel-wg", "vxlan.calico", "vxlan-v6.calico", "tunl0", "cilium_vxlan", "cilium_geneve", "antrea-tun0")
CONTAINER_BRIDGES = ("docker0", "cni-podman0")
DUMMIES = ("kube-ipvs0", "nodelocaldns", "lo")

# Interfaces pods are attached to, per CNI (``--cni NAME``): the pod interface(s) and the
# overlay device(s) other nodes' pods arrive on.
CNI_POD_INTERFACES: dict[str, tuple[str, ...]] = {
    "bridge": ("cni0",),
    "flannel": ("cni0",),
    "kubenet": ("cbr0",),
    "weave": ("weave",),
    "calico": ("cali+",),
    "cilium": ("lxc+",),
    "aws-vpc-cni": ("eni+",),
    "kindnet": ("veth+",),
    "kube-router": ("kube-bridge",),
    "azure": ("azv+",),
}


def kind(name: str, prefix: bool) -> str:
    """The device kind of every interface ``name`` (``prefix``: ``name+``) can stand for, or
    ``""`` when they are not all of one kind (or the name follows no convention)."""
    if prefix:
        for p in POD_VETH_PREFIXES:
            if name.startswith(p):
                return "veth"
        return ""
    if name in POD_BRIDGES:
        return "bridge"
    if name in OVERLAYS:
        return "overlay"
    if name in CONTAINER_BRIDGES:
        return "container"
    if name in DUMMIES:
        return "dummy"
    if any(name.startswith(p) for p in POD_VETH_PREFIXES):
        return "veth"
    return ""


_CANNOT: dict[str, frozenset[str]] = {
    EXTERNAL: frozenset({"veth", "container", "dummy", "bridge"}),
    POD: frozenset({"overlay", "container", "dummy"}),
    REMOTE_POD_ROUTE: frozenset({"veth", "bridge", "container", "dummy"}),
    ROUTE: frozenset({"dummy"}),
}


def decided(fact: str, name: str, prefix: bool) -> bool | None:
    """``False`` when an interface of the unknown ``fact`` cannot be ``name`` (by the role
    table), else None (unknown)."""
    k = kind(name, prefix)
    if not k:
        return None
    if fact == EXTERNAL and name == "weave":
        return None  # Weave delivers other nodes' pods' packets on its bridge
    return False if k in _CANNOT.get(fact, frozenset()) else None
