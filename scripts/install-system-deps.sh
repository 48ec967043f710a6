#!/bin/sh
# System packages the kernel oracle (nat_verify/oracle) needs on Debian/Ubuntu:
# iptables (nft and legacy restore), conntrack, nftables, nfacct (P9: kube-proxy dumps
# reference nfacct objects), iproute2 (ip, and nsenter comes with util-linux); and chromium,
# in which tests/browser renders the HTML report (headless, --no-sandbox as root).
# Idempotent: does nothing, silently, when every tool is already present.
set -eu

missing=""
need() { command -v "$1" >/dev/null 2>&1 || missing="$missing $2"; }
need iptables-restore iptables
need iptables-legacy-restore iptables
need conntrack conntrack
need nft nftables
need nfacct nfacct
need ip iproute2
need ipset ipset
need nsenter util-linux
need chromium chromium

[ -z "$missing" ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-system-deps: missing:$missing (no apt-get here; install them by hand)" >&2
    exit 1
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
pkgs="iptables conntrack nftables nfacct iproute2 ipset"
case "$missing" in *util-linux*) pkgs="$pkgs util-linux" ;; esac
case "$missing" in *chromium*) pkgs="$pkgs chromium" ;; esac
echo "install-system-deps: missing:$missing; installing $pkgs" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq $pkgs >/dev/null
