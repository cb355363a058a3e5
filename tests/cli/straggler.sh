#!/usr/bin/env bash
# Stragglers: three ranks that each compute 20 ms (a busy loop) then
# allreduce, with the launcher's rounds every second
# (HERD_STRAGGLER_CHECK=1).  Rank 2 computing 1.3 times as long is named a
# straggler, once, on the launcher's stderr, with how late it arrives
# (the job runs until the test has looked, at most 4000 steps: on a loaded
# machine some rounds find nobody late and the five in a row start again).
# While it runs, herd exporter says how late rank 2 is
# (herd_straggler_seconds) and 0 for the others, and herd top, with the
# NVML stand-in giving GPU 0 to rank 2 and GPU 1 to rank 0, marks rank 2's
# GPU "late N ms" and not rank 0's; once rank 2 is back at its pace, its
# mark is cleared.  The same job undisturbed (400 steps) names nobody.
source "$(dirname "$0")/../harness/common.sh" "$@"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
host=$(hostname -s)
mock=$(cd "$(dirname "$HERD")/../tests/mock" && pwd)
[[ -f $mock/libnvidia-ml.so.1 ]] || fail "no NVML stand-in at $mock"

# steps.lua STEPS SLOW FACTOR [FINISH FAST]: STEPS steps, or with FINISH
# until that file exists (at most STEPS; the ranks agree through the
# allreduce); rank SLOW computes at its normal pace once FAST exists.
cat >"$tmp/steps.lua" <<'LUA'
local steps, slow, factor, finish, fast = tonumber(arg[1]), tonumber(arg[2]), tonumber(arg[3]), arg[4], arg[5]
local c = assert(herd.comm())
local b = herd.buffer("float32", 1024)
local work = 0.020 * (c:rank() == slow and factor or 1)
local t_start = herd.clock()
local f = assert(io.open("/proc/self/stat"))
print("pid " .. f:read("n"))
f:close()
io.stdout:flush()
for i = 1, steps do
  if c:rank() == slow and fast ~= nil and io.open(fast) ~= nil then work, fast = 0.020, nil end
  local t = herd.clock()
  while herd.clock() - t < work do end
  b:fill(finish ~= nil and io.open(finish) ~= nil and 1 or 0)
  assert(c:allreduce(b))
  if b:max() > 0 then break end
end
print(string.format("done in %.2f s", herd.clock() - t_start))
LUA

export HERD_STRAGGLER_CHECK=1
timeout 150 "$HERD" launch -n 3 -- "$HERD" "$tmp/steps.lua" 4000 2 1.3 "$tmp/finish" "$tmp/fast" \
	>"$tmp/out" 2>"$tmp/err" &
job=$!
pids+=("$job")
line=
for ((k = 0; k < 1200; k++)); do
	line=$(grep "is a straggler" "$tmp/err") && break
	kill -0 "$job" 2>/dev/null || break
	sleep 0.1
done
[[ -n $line ]] || fail "no straggler named: $(cat "$tmp/err")"
grep -qE "^herd\[[0-9]+\] warn: job [0-9a-f-]+: rank 2 on $host is a straggler: it arrived last at the collectives \(allreduce last\), [0-9.]+ ms after the others' median, in 5 rounds in a row \([0-9]+ calls in the last, a step of [0-9.]+ ms\)$" <<<"$line" \
	|| fail "the straggler's line: $line"
late=$(sed -E 's/.*, ([0-9.]+) ms after.*/\1/' <<<"$line")
awk -v l="$late" 'BEGIN { exit !(l >= 2 && l <= 12) }' || fail "rank 2 late by $late ms: 20 ms x 0.3 is 6"
id=$(sed -E 's/.* job ([0-9a-f-]+): rank.*/\1/' <<<"$line")
pid0=$(sed -n 's/^\[[^]]*:0\] pid //p' "$tmp/out")
pid2=$(sed -n 's/^\[[^]]*:2\] pid //p' "$tmp/out")
[[ -n $pid0 && -n $pid2 ]] || fail "the ranks' pids: $(cat "$tmp/out")"
echo "slowed: $line"

# herd exporter: herd_straggler_seconds of each rank
HERD_STATS_DIR=$tmp/stats "$HERD" exporter --listen 127.0.0.1:0 >"$tmp/exp.out" 2>"$tmp/exp.err" &
pids+=("$!")
port=
for ((k = 0; k < 150; k++)); do
	sleep 0.1
	port=$(sed -n 's|^herd exporter: serving http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' "$tmp/exp.out")
	[[ -n $port ]] && break
done
[[ -n $port ]] || fail "herd exporter said: $(cat "$tmp/exp.out" "$tmp/exp.err")"
scrape() {
	timeout 10 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1
		printf "GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n" >&3; cat <&3' "$port" | tr -d '\r' >"$tmp/metrics"
}
scrape
grep -q '^# TYPE herd_straggler_seconds gauge' "$tmp/metrics" || fail "no herd_straggler_seconds: $(cat "$tmp/metrics")"
for r in 0 1; do
	grep -qxF "herd_straggler_seconds{herd_job=\"$id\",rank=\"$r\"} 0" "$tmp/metrics" \
		|| fail "rank $r not 0: $(grep straggler "$tmp/metrics")"
done
v=$(sed -n "s/^herd_straggler_seconds{herd_job=\"$id\",rank=\"2\"} //p" "$tmp/metrics")
awk -v v="$v" 'BEGIN { exit !(v >= 0.002 && v <= 0.012) }' || fail "rank 2's herd_straggler_seconds: '$v': $(grep straggler "$tmp/metrics")"
echo "exporter: herd_straggler_seconds of rank 2: $v"

# herd top: GPU 0 held by rank 2, GPU 1 by rank 0
cat >"$tmp/state" <<EOF
proc 0 $pid2 1073741824
proc 1 $pid0 1073741824
EOF
top=$(LD_LIBRARY_PATH=$mock HERD_NVML_MOCK_STATE=$tmp/state COLUMNS=160 timeout 30 "$HERD" top --once --period 100 2>&1) \
	|| fail "herd top --once: $top"
grep -qE "^    0 .* $id:2 late [0-9.]+ ms$" <<<"$top" || fail "GPU 0 not marked late: $top"
grep -qE "^    1 .* $id:0$" <<<"$top" || fail "GPU 1: $top"
echo "top: $(grep -o "$id:2 late .*" <<<"$top")"

# rank 2 back at its pace: five rounds that find nobody late clear its mark
: >"$tmp/fast"
t0=$(date +%s)
for ((k = 0; k < 60; k++)); do
	sleep 0.5
	scrape
	grep -qxF "herd_straggler_seconds{herd_job=\"$id\",rank=\"2\"} 0" "$tmp/metrics" && break
done
grep -qxF "herd_straggler_seconds{herd_job=\"$id\",rank=\"2\"} 0" "$tmp/metrics" \
	|| fail "rank 2 still marked 30 s after it caught up: $(grep straggler "$tmp/metrics")"
echo "caught up: rank 2's mark cleared after $(( $(date +%s) - t0 )) s"

: >"$tmp/finish"
wait "$job" || fail "the slowed job failed: $(cat "$tmp/err")"
[[ $(grep -c "is a straggler" "$tmp/err") == 1 ]] || fail "the straggler named more than once: $(grep straggler "$tmp/err")"

: >"$tmp/err"
timeout 120 "$HERD" launch -n 3 -- "$HERD" "$tmp/steps.lua" 400 -1 1 >"$tmp/out" 2>"$tmp/err" \
	|| fail "the undisturbed job failed: $(cat "$tmp/err")"
grep "straggler" "$tmp/err" && fail "a straggler named in an undisturbed job: $(cat "$tmp/err")"
echo "undisturbed: $(grep -m1 done "$tmp/out"); nobody named"
