#!/usr/bin/env bash
# herd launch --restarts across four hosts of the namespace cluster: a
# small training loop (tests/cluster/fault_train.lua: an allreduce per
# step, a checkpoint every 10) runs undisturbed once; then again with
# --restarts 1 and its rank on h3 killed with SIGKILL in the middle.  The
# launcher restarts the whole job, every rank resumes from the newest
# committed checkpoint (not from step 1), and the final weights are
# bit-identical to the undisturbed run's.  Needs root, iproute2 and
# openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
netns_start 4
prog=$PWD/tests/cluster/fault_train.lua
steps=400

out=$(timeout 120 "$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' -n 4 -- \
	"$HERD" "$prog" "$tmp/ck-a" $steps "$tmp/a.txt" 2>&1) || fail "the undisturbed run failed: $out"
[[ $(wc -l <"$tmp/a.txt") == 4096 ]] || fail "the undisturbed run wrote no weights"

timeout 120 "$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' -n 4 --restarts 1 -- \
	"$HERD" "$prog" "$tmp/ck-b" $steps "$tmp/b.txt" >"$tmp/out" 2>"$tmp/err" &
job=$!
wait_lines 1 "[h3:2] step 50" "$tmp/out" 30
victim=$(host_pids 3 "$prog" | head -1)
[[ -n $victim ]] || fail "no rank process on h3"
kill -9 "$victim"
wait $job || fail "the job did not finish after its restart: $(tail -5 "$tmp/out"; cat "$tmp/err")"
has "$(cat "$tmp/err")" "rank 2 on h3 (pid $victim) was killed by signal 9"
# The last step rank 2 printed before it was killed (it saves a step's
# checkpoint before it prints the step).
killed_at=$(sed -n '/^\[h3:2\] start at step [0-9]*, restart 1$/q; s/^\[h3:2\] step \([0-9]*\)$/\1/p' "$tmp/out" | tail -1)
for r in 0 1 2 3; do
	resumed=$(sed -nE "s/^\[h$((r + 1)):$r\] start at step ([0-9]+), restart 1$/\1/p" "$tmp/out")
	[[ -n $resumed ]] || fail "rank $r did not start again: $(grep start "$tmp/out")"
	(( resumed > 1 && resumed % 10 == 1 && resumed <= killed_at + 2 )) ||
		fail "rank $r resumed at step $resumed (killed at about $killed_at)"
done
echo "rank 2 killed at step $killed_at; every rank resumed at step $resumed (the checkpoint of step $((resumed - 1))) and finished"
cmp "$tmp/a.txt" "$tmp/b.txt" || fail "the weights after the restart differ from the undisturbed run's"
echo "final weights bit-identical to the undisturbed run's (4096 float32)"
exit 0
