#!/usr/bin/env bash
# Parallelism grids on local ranks: the TP x DP block (C on 4, 8 and 12
# ranks, Lua on 4 and 8) and the 1F1B pipeline (4 stages; 4 stages x 2
# replicas) match their one-rank computations; a grid that does not fit,
# and grids that differ between ranks, fail on every rank at once, naming
# the fault; an order puts dp inside tp.
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT
bin=$(dirname "$HERD")

run() { timeout 120 "$HERD" launch --start-timeout 60 "$@" 2>&1; }

for spec in "4 2" "8 4" "12 4"; do
	set -- $spec
	out=$(run -n "$1" -- "$bin/example_grid_tp_dp" --tp "$2") || fail "grid_tp_dp -n $1 --tp $2: $out"
	has "$out" "tp=$2 x dp=$(($1 / $2)): after 5 steps every weight is within "
	has "$out" "of one rank's (match)"
	has "$out" ":0] step 5: loss "
done
out=$(run -n 4 -- "$bin/example_grid_tp_dp") || fail "grid_tp_dp: $out"
has "$out" "tp           2       2  SHM        ranks 0,1 on "
has "$out" "dp           2       2  SHM        ranks 0,2 on "

for spec in "4 8 4" "8 4 4"; do
	set -- $spec
	out=$(run -n "$1" -- "$bin/example_pipeline_1f1b" --micro "$2" --stages "$3" --work-ms 5) \
		|| fail "pipeline_1f1b -n $1: $out"
	has "$out" "pp=$3 x dp=$(($1 / $3)), $2 micro-batches of 4 rows per replica, 1F1B"
	has "$out" "of one rank's (match)"
	grep -qE "bubble: 0\.[0-9]+ of the time on average over the stages \(at most 0\.[0-9]+\); \(P - 1\) / \(M \+ P - 1\) = 0\.[0-9]+" <<<"$out" \
		|| fail "no bubble line: $out"
done

out=$(run -n 4 -- "$HERD" examples/lua/grid_tp_dp.lua) || fail "grid_tp_dp.lua: $out"
has "$out" "tp=2 x dp=2: after 4 steps every weight is within "
has "$out" "(match)"
out=$(run -n 8 -- "$HERD" examples/lua/grid_tp_dp.lua 4) || fail "grid_tp_dp.lua 4: $out"
has "$out" "tp=4 x dp=2: after 4 steps every weight is within "

# A grid that does not fit, and grids that differ: every rank says so.
cat >"$tmp/bad.lua" <<'LUA'
local c = assert(herd.comm())
local g, msg, st = c:grid{ tp = 3 }
print(string.format("rank %d: %s %s %s", herd.rank, tostring(g), msg, st))
g, msg, st = c:grid{ tp = herd.rank == 3 and 4 or 2 }
print(string.format("rank %d: %s %s %s", herd.rank, tostring(g), msg, st))
g = assert(c:grid{ tp = 2, order = "dp-tp" })
print(string.format("rank %d: ranks %s", herd.rank, table.concat(g:ranks("tp"), ",")))
LUA
out=$(run -n 4 -- "$HERD" "$tmp/bad.lua") || fail "bad grids: $out"
for r in 0 1 2 3; do
	has "$out" ":$r] rank $r: nil grid: rank 0: grid tp=3 multiplies to 3 ranks; the job has 4"
	has "$out" ":$r] rank $r: nil grid: the ranks' grids differ: rank 0 has tp=2,dp=2, rank 3 tp=4 HERD_EMISMATCH"
done
# dp inside tp: a tp group is every other rank.
has "$out" ":0] rank 0: ranks 0,2"
has "$out" ":1] rank 1: ranks 1,3"
