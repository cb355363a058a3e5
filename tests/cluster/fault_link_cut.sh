#!/usr/bin/env bash
# A host's link cut in the middle of a loop of allreduces (four hosts of
# the namespace cluster, tests/harness/netns.sh; HERD_TIMEOUT=5): every
# rank on the other hosts fails its call within the deadline plus 1 s,
# naming host h3 and its rank (itself or through the rank that failed
# first); the job fails, and the launcher's summary names h3's rank as the
# one that did not answer the others; and once it is over no process of
# it is left on any host, h3's included.
# Needs root, iproute2 and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
netns_start 4
loop=$PWD/tests/cluster/fault_loop.lua

HERD_TIMEOUT=5 timeout 120 "$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' -n 4 -- "$HERD" "$loop" \
	>"$tmp/out" 2>"$tmp/err" &
job=$!
wait_lines 4 running "$tmp/out" 30
t_cut=$(mono)
bash tests/harness/netns.sh cut "$cluster" 3
wait $job; rc=$?
[[ $rc != 0 ]] || fail "the job succeeded with h3 cut off"
# Each names h3's rank: itself, or through the rank that failed first (a
# rank tells its peers why it failed before its caller sees the error).
for r in 0 1 3; do
	rank_failure $r "$t_cut" 6 "$tmp/out"
	grep -q "HERD_E[A-Z]*: .*rank 2 (host h3" <<<"$line" || fail "rank $r does not name h3's rank: $line"
done
# The launcher's summary names h3's rank, which did not answer the others.
s=$(grep -m1 "^herd launch: job .* failed: " "$tmp/err") || fail "no failure summary: $(cat "$tmp/err")"
grep -qE "failed: rank 2 on h3 \(pid [0-9]+\) .*; it did not answer [0-9]+ ranks \(a link to h3, or the host\)" <<<"$s" \
	|| fail "the summary does not name h3's rank: $s"
echo "summary: ${s#*failed: }" | cut -c1-300
# Nothing of the job is left on any host (h3's rank ends at its own deadline).
secs=$(job_gone 15 "$loop" "exec --stdio") || exit 1
echo "job gone after $secs s"
exit 0
