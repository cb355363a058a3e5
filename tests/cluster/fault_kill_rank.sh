#!/usr/bin/env bash
# kill -9 of one rank (on host h3) in the middle of a loop of allreduces
# across four hosts of the namespace cluster: every other rank's call fails
# within 2 s of the kill with HERD_EPEER naming rank 2, host h3 and its
# pid, and what the rank was doing (the allreduce it was in, or the last
# one it completed, by number); the launcher fails the job naming rank 2's
# signal; no process of the job is left on any host.  Needs root, iproute2 and openssh-server; exits 77
# (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
netns_start 4
loop=$PWD/tests/cluster/fault_loop.lua

timeout 120 "$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' -n 4 -- "$HERD" "$loop" \
	>"$tmp/out" 2>"$tmp/err" &
job=$!
wait_lines 4 running "$tmp/out" 30
victim=$(host_pids 3 "$loop" | head -1)
[[ -n $victim ]] || fail "no rank process on h3"
t_kill=$(mono)
kill -9 "$victim"
wait $job; rc=$?
[[ $rc != 0 ]] || fail "the job succeeded with rank 2 killed"
for r in 0 1 3; do
	rank_failure $r "$t_kill" 2 "$tmp/out"
	has "$line" "HERD_EPEER"
	has "$line" "rank 2 (host h3, pid $victim) died"
	# In a call when the news came, or between two (a rank descheduled
	# after its last call, on a loaded machine): either way it says which.
	grep -qE "allreduce #[0-9]+ failed on rank $r \(host h$((r + 1))\)|rank $r \(host h$((r + 1))\), after #[0-9]+ allreduce" <<<"$line" ||
		fail "rank $r does not say what it was doing: $line"
done
has "$(cat "$tmp/err")" "failed: rank 2 on h3 (pid $victim) was killed by signal 9"
echo "launcher: $(grep -m1 "signal 9" "$tmp/err")"
secs=$(job_gone 10 "$loop" "exec --stdio") || exit 1
echo "job gone after $secs s"
exit 0
