#!/usr/bin/env bash
# Regenerates the real `ip -j` / `ipset save` outputs next to this script, in a throwaway
# network namespace (root; needs iproute2 and ipset). Nothing outside the namespace is touched.
OUT="$(cd "$(dirname "$0")" && pwd)"
set -e
NS=rnfacts
ip netns del $NS 2>/dev/null || true
ip netns add $NS
trap 'ip netns del $NS' EXIT
X="ip netns exec $NS"
$X ip link set lo up
$X ip link add eth0 type veth peer name eth0peer
$X ip link set eth0 up
$X ip addr add 192.168.1.10/24 dev eth0
$X ip addr add 2001:db8:1::10/64 dev eth0 nodad
$X ip link add cni0 type bridge
$X ip link set cni0 up
$X ip addr add 10.244.1.1/24 dev cni0
$X ip link add veth1a2b3c4d type veth peer name peer0
$X ip link set veth1a2b3c4d master cni0 up
$X ip link add flannel.1 type vxlan id 1 dstport 8472 local 192.168.1.10 dev eth0 nolearning
$X ip link set flannel.1 up
$X ip addr add 10.244.1.0/32 dev flannel.1
$X ip link add docker0 type bridge
$X ip addr add 172.17.0.1/16 dev docker0
$X ip route add default via 192.168.1.1 dev eth0
$X ip route add 10.244.2.0/24 via 10.244.2.0 dev flannel.1 onlink
$X ip -j addr > "$OUT"/ip-addr-flannel.json
$X ip -j route > "$OUT"/ip-route-flannel.json
$X ip -j -6 route > "$OUT"/ip-route6-flannel.json
$X ip -j -p addr > "$OUT"/ip-addr-flannel-pretty.json
# weave-style node
$X ip link add weave type bridge
$X ip link set weave up
$X ip addr add 10.32.0.1/12 dev weave
$X ip link add vethwe-bridge type veth peer name vethwe-datapath
$X ip link set vethwe-bridge master weave up
$X ip -j addr show dev weave > "$OUT"/ip-addr-weave-only.json
# ipsets (weave-npc and calico style)
$X ipset create weave-local-pods hash:ip
$X ipset add weave-local-pods 10.32.0.5
$X ipset add weave-local-pods 10.32.0.9
$X ipset create cali40all-ipam-pools hash:net
$X ipset add cali40all-ipam-pools 10.244.0.0/16
$X ipset add cali40all-ipam-pools 10.244.7.0/24 nomatch
$X ipset create KUBE-CLUSTER-IP hash:ip,port
$X ipset add KUBE-CLUSTER-IP 10.96.0.1,tcp:443
$X ipset create with-timeout hash:ip timeout 300 comment
$X ipset add with-timeout 10.0.0.7 timeout 200 comment "a pod"
$X ipset create v6set hash:net family inet6
$X ipset add v6set 2001:db8::/32
$X ipset create ranges bitmap:ip range 10.50.0.0/24
$X ipset add ranges 10.50.0.10-10.50.0.12
$X ipset create all-sets list:set
$X ipset add all-sets weave-local-pods
$X ipset save > "$OUT"/ipset-save.txt
$X ipset flush all-sets; $X ipset destroy
