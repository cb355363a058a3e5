#!/usr/bin/env bash
# Parallelism grids across two hosts of four ranks each (network and UTS
# namespaces, tests/harness/netns.sh): tp=4 stays on each host (shared
# memory) and dp goes across (NET), and the TP x DP block (C and Lua) matches one
# rank; the 1F1B pipeline's two stages go across the hosts (pp NET, dp on
# each host) and match one rank; a tp of 8 is warned of, naming its
# group and hosts, and still computes right; every order of tp=2,pp=2,dp=2
# gives each rank the groups of a reference enumeration, with an allgather
# and an allreduce on each.
# Needs root, iproute2 and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
netns_start 2
bin=$(dirname "$HERD")
on1() { timeout 120 "$cluster/run" 1 "$@"; }
launch() { on1 "$HERD" launch --hosts 'h[1-2]' -n 8 --per-node 4 --start-timeout 60 "$@" 2>&1; }

out=$(launch -- "$bin/example_grid_tp_dp" --tp 4) || fail "grid_tp_dp --tp 4 exited $?: $out"
has "$out" "[h1:0] grid tp=4 x dp=2 over 8 ranks on 2 nodes (innermost first)"
has "$out" "[h1:0] tp           4       2  SHM        ranks 0-3 on h1"
has "$out" "[h1:0]   tp group 1: ranks 4-7 on h2: SHM"
has "$out" "[h1:0] dp           2       4  NET        ranks 0,4 on h1,h2"
has "$out" "[h1:0] tp=4 x dp=2: after 5 steps every weight is within "
has "$out" "of one rank's (match)"

out=$(launch -- "$bin/example_pipeline_1f1b" --stages 2 --micro 4 --work-ms 5) \
	|| fail "pipeline_1f1b --stages 2 exited $?: $out"
has "$out" "[h1:0] dp           4       2  SHM        ranks 0-3 on h1"
has "$out" "[h1:0] pp           2       4  NET        ranks 0,4 on h1,h2"
has "$out" "[h1:0] pp=2 x dp=4, 4 micro-batches of 4 rows per replica, 1F1B"
has "$out" "of one rank's (match)"

out=$(launch -- "$bin/example_grid_tp_dp" --tp 8) || fail "grid_tp_dp --tp 8 exited $?: $out"
has "$out" "[h1:0] warning: tp group 0 (ranks 0-7) spans h1,h2: its links are NET, not a node's"
has "$out" "grid: tp group 0 (ranks 0-7) spans h1,h2: its links are NET, not a node's"
has "$out" "[h1:0] tp=8 x dp=1: after 5 steps every weight is within "

cat >"$tmp/orders.lua" <<'LUA'
local c = assert(herd.comm())
local names = { "tp", "pp", "dp" }
local orders = { { 1, 2, 3 }, { 1, 3, 2 }, { 2, 1, 3 }, { 2, 3, 1 }, { 3, 1, 2 }, { 3, 2, 1 } }
for _, o in ipairs(orders) do
  local order = names[o[1]] .. "-" .. names[o[2]] .. "-" .. names[o[3]]
  local g = assert(c:grid{ tp = 2, pp = 2, dp = 2, order = order })
  for i = 1, 3 do
    -- ranks node by node are 0..7 here: position = rank; dimension i has stride 2^(i-1)
    local name, stride = names[o[i]], 1 << (i - 1)
    local coord = (herd.rank // stride) % 2
    local got = assert(g:group(name):allgather(herd.buffer.from("int32", { herd.rank }))):totable()
    for k = 0, 1 do
      local want = herd.rank + (k - coord) * stride
      assert(got[k + 1] == want, string.format("%s %s: rank %d's group has %s, expected %d at %d",
             order, name, herd.rank, table.concat(got, ","), want, k))
    end
    assert(g:group(name):allreduce(1) == 2)
    assert(g:coords()[name] == coord)
    g:group(name):close()
  end
end
if herd.rank == 0 then print("every order: ok") end
LUA
out=$(launch -- "$HERD" "$tmp/orders.lua") || fail "every order across the hosts exited $?: $out"
has "$out" "[h1:0] every order: ok"
out=$(launch -- "$HERD" "$PWD/examples/lua/grid_tp_dp.lua" 4) || fail "grid_tp_dp.lua across the hosts exited $?: $out"
has "$out" "[h1:0] tp           4       2  SHM        ranks 0-3 on h1"
has "$out" "[h1:0] tp=4 x dp=2: after 4 steps every weight is within "
