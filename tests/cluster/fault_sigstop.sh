#!/usr/bin/env bash
# A rank (on host h3) stopped with SIGSTOP for 5 s in the middle of a loop
# of allreduces across four hosts of the namespace cluster, then continued.
# Under a 30 s deadline the others wait for it: every result is exact and
# the job succeeds (a stopped process is slow, not dead).  Under a 2 s
# deadline every other rank fails within 3 s of the stop with
# HERD_ETIMEDOUT naming rank 2 and host h3; once continued, rank 2 learns
# that the job failed and ends; nothing of the job is left on any host.
# Needs root, iproute2 and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
netns_start 4
loop=$PWD/tests/cluster/fault_loop.lua

# stop_h3_rank: SIGSTOP to rank 2 once the four run, SIGCONT 5 s later;
# sets t_stop and victim.
stop_h3_rank() {
	wait_lines 4 running "$tmp/out" 30
	victim=$(host_pids 3 "$loop" | head -1)
	[[ -n $victim ]] || fail "no rank process on h3"
	t_stop=$(mono)
	kill -STOP "$victim"
	sleep 5
	kill -CONT "$victim"
}

HERD_TIMEOUT=30 timeout 120 "$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' -n 4 -- "$HERD" "$loop" 4000 \
	>"$tmp/out" 2>"$tmp/err" &
job=$!
stop_h3_rank
wait $job || fail "the job failed with rank 2 stopped for 5 s under a 30 s deadline: $(cat "$tmp/out" "$tmp/err")"
[[ $(grep -c "done: 4000 calls of 1024 floats, every result exact" "$tmp/out") == 4 ]] ||
	fail "not every rank finished exact: $(cat "$tmp/out")"
echo "stopped 5 s under a 30 s deadline: every rank exact; $(grep -m1 '^\[h1:0\] done' "$tmp/out" | sed 's/.*; //') on rank 0"
longest=$(sed -nE 's/^\[h1:0\] done.*longest ([0-9.]+) s/\1/p' "$tmp/out")
within 4.5 "$longest" "the longest call of rank 0 is shorter than the stop: it"

: >"$tmp/out"
HERD_TIMEOUT=2 timeout 120 "$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' -n 4 -- "$HERD" "$loop" \
	>"$tmp/out" 2>"$tmp/err" &
job=$!
stop_h3_rank
wait $job && fail "the job succeeded with rank 2 stopped 5 s under a 2 s deadline"
for r in 0 1 3; do
	rank_failure $r "$t_stop" 3 "$tmp/out"
	has "$line" "HERD_ETIMEDOUT"
	has "$line" "rank 2 (host h3"
done
secs=$(job_gone 10 "$loop" "exec --stdio") || exit 1
echo "job gone $secs s after the launcher returned"
exit 0
