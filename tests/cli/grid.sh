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

# herd launch --grid: the grid the job would get, and nothing runs.
out=$("$HERD" launch -n 8 --hosts 'h[1-2]' --per-node 4 --grid tp=4,pp=2 -- touch "$tmp/ran" 2>&1) \
	|| fail "launch --grid: $out"
[[ -e $tmp/ran ]] && fail "launch --grid ran the command"
grep -qE '^tp +4 +2 +SHM +ranks 0-3 on h1$' <<<"$out" || fail "launch --grid, tp: $out"
grep -qE '^pp +2 +4 +NET +ranks 0,4 on h1,h2$' <<<"$out" || fail "launch --grid, pp: $out"
grep -qE '^7 +h2 +3 +1$' <<<"$out" || fail "launch --grid, rank 7: $out"
# GPUs planned on the recorded DGX H100 for each node: tp on NV18, pp across
dgx=tests/fixtures/inventory/dgx-h100.json
out=$(HERD_INVENTORY=$dgx "$HERD" launch -n 32 --hosts 'dgx[1-4]' --per-node 8 --gpus-per-rank 1 \
	--grid tp=8,pp=2 -- true 2>&1) || fail "launch --grid on DGX H100s: $out"
has "$out" "grid tp=8 x dp=2 x pp=2 over 32 ranks on 4 nodes (innermost first)"
grep -qE '^tp +8 +4 +NV18 +ranks 0-7 on dgx1$' <<<"$out" || fail "DGX tp: $out"
grep -qE '^pp +2 +16 +NET +ranks 0,16 on dgx1,dgx3$' <<<"$out" || fail "DGX pp: $out"
out=$(HERD_INVENTORY=$dgx "$HERD" launch -n 16 --hosts 'dgx[1-2]' --per-node 8 --gpus-per-rank 2 \
	--grid tp=4 -- true 2>&1); rc=$?
[[ $rc == 125 ]] || fail "16 ranks of 2 GPUs on 8-GPU nodes: exit $rc: $out"
[[ $out == "herd launch: --grid: 16 GPUs for 8 ranks on dgx1: "* ]] || fail "too many GPUs: $out"
# an elastic job: its first MAX nodes, --per-node each
out=$("$HERD" launch --nodes 2-3 --per-node 2 --hosts 'e[1-4]' --grid tp=2 -- true 2>&1) \
	|| fail "elastic --grid: $out"
has "$out" "grid tp=2 x dp=3 over 6 ranks on 3 nodes (innermost first)"
out=$("$HERD" launch -n 8 --hosts 'h[1-2]' --per-node 4 --grid tp=8 -- true 2>&1) || fail "tp=8: $out"
has "$out" "herd launch: warning: tp group 0 (ranks 0-7) spans h1,h2: its links are NET, not a node's"
out=$("$HERD" launch -n 8 --grid tp=3 -- true 2>&1); rc=$?
[[ $rc == 125 ]] || fail "launch --grid tp=3: exit $rc: $out"
has "$out" "herd launch: --grid: grid tp=3 multiplies to 3 ranks; the job has 8 (and dp cannot make up the rest: 8 is not a multiple of 3)"
out=$("$HERD" launch -n 8 --grid tp=2,xx=2 -- true 2>&1) && fail "xx: $out"
has "$out" "grid: xx is not a dimension of the order tp-cp-ep-dp-pp"
