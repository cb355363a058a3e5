#!/usr/bin/env bash
# Load on one host: 64 ranks on this machine (oversubscribed: it has a few
# cores) run 10,000 allreduces of 8 float32 and 10,000 barriers, every
# result checked, without an error; and two jobs started at the same
# moment, twenty times over, never collide on a port (each job's store,
# communicator and MASTER_PORT are its own): all forty succeed.
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/load.lua" <<'LUA'
local calls = math.tointeger(tonumber(arg[1]))
local c = assert(herd.comm())
local b = herd.buffer("float32", 8)
local size = c:size()
local t0 = herd.clock()
for i = 1, calls do
  b:fill(c:rank() + i % 3)
  local ok, msg, st = c:allreduce(b)
  if not ok then error(string.format("allreduce %d: %s: %s", i, st, msg)) end
  local want = size * (size - 1) // 2 + size * (i % 3)
  if b:min() ~= want or b:max() ~= want then
    error(string.format("allreduce %d: %g..%g, not %d", i, b:min(), b:max(), want))
  end
  ok, msg, st = c:barrier()
  if not ok then error(string.format("barrier %d: %s: %s", i, st, msg)) end
end
if c:rank() == 0 then
  print(string.format("%d ranks: %d allreduces and barriers, every result exact, in %.2f s",
                      size, calls, herd.clock() - t0))
end
LUA

out=$(timeout 300 "$HERD" launch -n 64 -- "$HERD" "$tmp/load.lua" 10000 2>&1) ||
	fail "64 ranks exited $?: $(tail -20 <<<"$out")"
has "$out" "64 ranks: 10000 allreduces and barriers, every result exact"
grep '^\[[^]]*:0\]' <<<"$out"

for round in $(seq 20); do
	timeout 60 "$HERD" launch -n 4 -- "$HERD" "$tmp/load.lua" 50 >"$tmp/a" 2>&1 &
	a=$!
	timeout 60 "$HERD" launch -n 4 -- "$HERD" "$tmp/load.lua" 50 >"$tmp/b" 2>&1 &
	b=$!
	wait $a || fail "round $round: the first job failed: $(cat "$tmp/a")"
	wait $b || fail "round $round: the second job failed: $(cat "$tmp/b")"
done
echo "20 rounds of two jobs started at once: all 40 succeeded"
exit 0
