#!/usr/bin/env bash
# Regenerates the real `ip -j` / `ipset save` outputs next to this script, in a throwaway
# network namespace (root; needs iproute2 and ipset). Nothing outside the namespace is touched.
OUT="$(cd "$(dirname "$0")" && pwd)"
set -e
NS=rnfacts2
ip netns del $NS 2>/dev/null || true
ip netns add $NS
trap 'ip netns del $NS' EXIT
X="ip netns exec $NS"
$X ip link set lo up
$X ip link add ens5 type veth peer name ens5peer
$X ip link set ens5 up; $X ip link set ens5peer up
$X ip addr add 10.0.12.34/20 dev ens5
$X ip link add vxlan.calico type vxlan id 4096 dstport 4789 local 10.0.12.34 dev ens5
$X ip link set vxlan.calico up
$X ip addr add 10.244.120.64/32 dev vxlan.calico
$X ip link add cali12345abcde type veth peer name podside0
$X ip link set cali12345abcde up
$X ip route add 10.244.120.65 dev cali12345abcde scope link
$X ip route add blackhole 10.244.120.64/26 proto 80
$X ip route add 10.244.33.0/26 via 10.244.33.0 dev vxlan.calico onlink
$X ip route add default via 10.0.0.1 dev ens5
$X ip -j addr > "$OUT"/ip-addr-calico.json
$X ip -j route > "$OUT"/ip-route-calico.json
