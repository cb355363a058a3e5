#!/usr/bin/env bash
# Stragglers: three ranks that each compute 20 ms (a busy loop) then
# allreduce, with the launcher's rounds every second
# (HERD_STRAGGLER_CHECK=1).  Rank 2 computing 1.3 times as long (800
# steps, some 20 rounds: on a loaded machine some rounds find nobody late
# and the five in a row start again) is named a straggler, once, on the
# launcher's stderr, with how late it arrives; the same job undisturbed
# (400 steps) names nobody.
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT
host=$(hostname -s)

cat >"$tmp/steps.lua" <<'LUA'
local steps, slow, factor = tonumber(arg[1]), tonumber(arg[2]), tonumber(arg[3])
local c = assert(herd.comm())
local b = herd.buffer("float32", 1024)
local work = 0.020 * (c:rank() == slow and factor or 1)
local t_start = herd.clock()
for i = 1, steps do
  local t = herd.clock()
  while herd.clock() - t < work do end
  assert(c:allreduce(b))
end
print(string.format("done in %.2f s", herd.clock() - t_start))
LUA

export HERD_STRAGGLER_CHECK=1
timeout 120 "$HERD" launch -n 3 -- "$HERD" "$tmp/steps.lua" 800 2 1.3 >"$tmp/out" 2>"$tmp/err" \
	|| fail "the slowed job failed: $(cat "$tmp/err")"
line=$(grep "is a straggler" "$tmp/err") || fail "no straggler named: $(cat "$tmp/err")"
[[ $(wc -l <<<"$line") == 1 ]] || fail "the straggler named more than once: $line"
grep -qE "^herd\[[0-9]+\] warn: job [0-9a-f-]+: rank 2 on $host is a straggler: it arrived last at the collectives \(allreduce last\), [0-9.]+ ms after the others' median, in 5 rounds in a row \([0-9]+ calls in the last, a step of [0-9.]+ ms\)$" <<<"$line" \
	|| fail "the straggler's line: $line"
late=$(sed -E 's/.*, ([0-9.]+) ms after.*/\1/' <<<"$line")
awk -v l="$late" 'BEGIN { exit !(l >= 2 && l <= 12) }' || fail "rank 2 late by $late ms: 20 ms x 0.3 is 6"
echo "slowed: $line"

: >"$tmp/err"
timeout 120 "$HERD" launch -n 3 -- "$HERD" "$tmp/steps.lua" 400 -1 1 >"$tmp/out" 2>"$tmp/err" \
	|| fail "the undisturbed job failed: $(cat "$tmp/err")"
grep "straggler" "$tmp/err" && fail "a straggler named in an undisturbed job: $(cat "$tmp/err")"
echo "undisturbed: $(grep -m1 done "$tmp/out"); nobody named"
