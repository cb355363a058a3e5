#!/usr/bin/env bash
# 1% of the packets in and out of host h3 dropped (an nftables rule in its
# namespace) while four ranks on four hosts of the namespace cluster run
# allreduces of 4 KiB and of 4 MiB: TCP recovers what is lost, every
# result is exact, the job succeeds, and nothing of it is left behind.
# Needs root, iproute2, nftables and openssh-server; exits 77 without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
command -v nft >/dev/null || { echo "skipped: nft not found"; exit 77; }
netns_start 4
loop=$PWD/tests/cluster/fault_loop.lua

bash tests/harness/netns.sh loss "$cluster" 3 1 || fail "cannot drop packets on h3"
for spec in "300 1024" "30 1048576"; do
	set -- $spec
	t0=$(mono)
	loop_exact "$1" "$2" 60
	echo "1% loss on h3: $1 allreduces of $2 float32 exact on every rank; job took $(awk -v a="$t0" -v b="$(mono)" 'BEGIN { printf "%.2f", b - a }') s"
done
dropped=$(ip netns exec "herd-$id-h3" nft list table inet herd_loss |
	sed -nE 's/.*numgen random mod 100 < 1 counter packets ([0-9]+) .*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
echo "packets dropped on h3: $dropped"
(( dropped > 0 )) || fail "no packet was dropped on h3"
secs=$(job_gone 10 "$loop" "exec --stdio") || exit 1
exit 0
