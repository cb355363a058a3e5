-- bench/lua_allreduce.lua: an in-place float32 sum allreduce on a
-- herd.Buffer from Lua, timed as `herd bench` times it (warmup calls, a
-- barrier, ITERS timed calls; the time of a call is the elapsed time over
-- ITERS, the slowest rank's), for bench/lua_vs_c.sh.  Rank 0 prints one
-- JSON line: {"bytes":..,"ranks":..,"time_us":..,"busbw":..}.
--
--   herd launch -n N bench/lua_allreduce.lua BYTES ITERS WARMUP
local bytes, iters, warmup = tonumber(arg[1]), tonumber(arg[2]), tonumber(arg[3])
assert(bytes and iters and warmup, "usage: lua_allreduce.lua BYTES ITERS WARMUP")
local c = assert(herd.comm())
local b = herd.buffer("float32", bytes // 4):fill(1)
for _ = 1, warmup do assert(c:allreduce(b)) end
assert(c:barrier())
local allreduce, clock = c.allreduce, herd.clock
local t0 = clock()
for _ = 1, iters do allreduce(c, b) end
local us = (clock() - t0) / iters * 1e6
us = assert(c:allreduce(us, "max"))
local n = c:size()
if c:rank() == 0 then
  local algbw = bytes / (us * 1e-6) / 1e9
  print(herd.json.encode({ bytes = bytes, ranks = n, time_us = us, algbw = algbw,
                           busbw = algbw * 2 * (n - 1) / n }))
end
