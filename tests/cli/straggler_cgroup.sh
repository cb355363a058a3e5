#!/usr/bin/env bash
# A straggler slowed by the kernel, not by itself: two ranks that each
# compute some 20 ms (a fixed count of loops, rank 0's in 20 ms at the start)
# then allreduce; once both run, rank 1 is
# moved into a cgroup whose CPU quota is 65% of a CPU (cgroup v2 cpu.max
# "13000 20000", or v1 cpu.cfs_quota_us 13000 of cpu.cfs_period_us 20000),
# so that it computes some 1.5 times as long.  With the launcher's rounds
# every 2 s (HERD_STRAGGLER_CHECK=2), rank 1 is named a straggler within
# 60 s of the move.  Reported skipped (exit 77) where no CPU cgroup can be
# made (not root, no cpu controller).
source "$(dirname "$0")/../harness/common.sh" "$@"
cg=
job=
cleanup() {
	[[ -n $job ]] && kill "$job" 2>/dev/null && wait "$job" 2>/dev/null
	if [[ -n $cg && -d $cg ]]; then
		# what is left in it goes back to the parent, then it goes
		while read -r p; do echo "$p" >"$(dirname "$cg")/cgroup.procs"; done <"$cg/cgroup.procs" 2>/dev/null
		rmdir "$cg" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

# The cgroup: v2 where the unified hierarchy has the cpu controller, else v1's.
if [[ -f /sys/fs/cgroup/cgroup.controllers ]] && grep -qw cpu /sys/fs/cgroup/cgroup.controllers; then
	cg=/sys/fs/cgroup/herd-straggler-$$
	grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null ||
		echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null
	mkdir "$cg" 2>/dev/null && echo "13000 20000" >"$cg/cpu.max" 2>/dev/null || cg=
elif [[ -d /sys/fs/cgroup/cpu ]]; then
	cg=/sys/fs/cgroup/cpu/herd-straggler-$$
	mkdir "$cg" 2>/dev/null && echo 20000 >"$cg/cpu.cfs_period_us" 2>/dev/null &&
		echo 13000 >"$cg/cpu.cfs_quota_us" 2>/dev/null || cg=
fi
if [[ -z $cg ]]; then
	echo "straggler_cgroup: SKIPPED (no CPU cgroup can be made here)"
	exit 77
fi

cat >"$tmp/steps.lua" <<'LUA'
local finish = arg[1]
local c = assert(herd.comm())
local b = herd.buffer("float32", 1024)
local f = assert(io.open("/proc/self/stat"))
print("pid " .. f:read("n"))
f:close()
io.stdout:flush()
-- a step's work: a fixed count of loops (what a CPU limit slows), as
-- many as rank 0 runs in 20 ms at the start, the same on every rank
local n, t0 = 0, herd.clock()
if c:rank() == 0 then
  while herd.clock() - t0 < 0.2 do n = n + 1 end
end
local cal = herd.buffer("float64", 1)
cal:fill(n)
assert(c:allreduce(cal))
local loops = math.floor(cal:max() / 10)
for i = 1, 6000 do
  for _ = 1, loops do herd.clock() end
  b:fill(io.open(finish) ~= nil and 1 or 0)
  assert(c:allreduce(b))
  if b:max() > 0 then break end
end
print("done")
LUA

HERD_STRAGGLER_CHECK=2 timeout 200 "$HERD" launch -n 2 -- "$HERD" "$tmp/steps.lua" "$tmp/finish" \
	>"$tmp/out" 2>"$tmp/err" &
job=$!
wait_lines 2 "pid " "$tmp/out" 30
pid1=$(sed -n 's/^\[[^]]*:1\] pid //p' "$tmp/out")
[[ -n $pid1 ]] || fail "rank 1's pid: $(cat "$tmp/out")"
echo "$pid1" >"$cg/cgroup.procs" || fail "cannot move rank 1 ($pid1) into $cg"
t0=$(mono)
line=
for ((k = 0; k < 650; k++)); do
	line=$(grep "is a straggler" "$tmp/err") && break
	kill -0 "$job" 2>/dev/null || break
	sleep 0.1
done
secs=$(awk -v a="$t0" -v b="$(mono)" 'BEGIN { printf "%.1f", b - a }')
: >"$tmp/finish"
[[ -n $line ]] || fail "no straggler named within 65 s of the move: $(grep -v "info:" "$tmp/err" | tail -40)"
grep -qE "warn: job [0-9a-f-]+: rank 1 on [^ ]+ is a straggler: it arrived last at the collectives \(allreduce last\), [0-9.]+ ms after the others' median" <<<"$line" \
	|| fail "the straggler's line: $line"
within "$secs" 60 "rank 1 named"
wait "$job" || fail "the job failed: $(cat "$tmp/err")"
job=
echo "cgroup-limited rank named $secs s after the move: $line"
