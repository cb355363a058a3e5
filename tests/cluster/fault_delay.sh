#!/usr/bin/env bash
# 200 ms added to every byte in and out of host h3 (each way: its TCP
# connections, ssh excepted, pass through the harness's delaying relay)
# while four ranks on four hosts of the namespace cluster run allreduces of
# 4 KiB and of 4 MiB under a 10 s deadline: every result is exact, the job
# succeeds, and nothing of it is left behind.  Needs root, iproute2,
# nftables, python3 and openssh-server; exits 77 without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
command -v nft >/dev/null || { echo "skipped: nft not found"; exit 77; }
netns_start 4
loop=$PWD/tests/cluster/fault_loop.lua

bash tests/harness/netns.sh delay "$cluster" 3 200 || fail "cannot delay h3's traffic"
for spec in "10 1024" "5 1048576"; do
	set -- $spec
	loop_exact "$1" "$2" 10
	echo "200 ms on h3: $1 allreduces of $2 float32 exact on every rank; $(grep -m1 '^\[h1:0\] done' <<<"$out" | sed 's/.* in /rank 0 took /')"
done
# The relay did carry the job's connections (a nat rule sees the first
# packet of each).
conns=$(ip netns exec "herd-$id-h3" nft list table ip herd_delay |
	sed -nE 's/.*counter packets ([0-9]+) .*redirect.*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
echo "connections of h3 through the delaying relay: $conns"
(( conns >= 6 )) || fail "the relay carried $conns connections of h3"
secs=$(job_gone 10 "$loop" "exec --stdio") || exit 1
exit 0
