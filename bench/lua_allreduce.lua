-- bench/lua_allreduce.lua: a float32 sum allreduce on herd.Buffers from
-- Lua, timed as `herd bench` times it: out of place, then in place; for
-- each, warmup calls, a barrier, ITERS timed calls, and the time of a call
-- is the elapsed time over ITERS, the slowest rank's.  For
-- bench/lua_vs_c.sh.  Rank 0 prints one JSON line like herd bench --json:
-- {"bytes":..,"ranks":..,"out_of_place":{"time_us":..,"busbw":..},"in_place":{..}}.
--
--   herd launch -n N bench/lua_allreduce.lua BYTES ITERS WARMUP
local bytes, iters, warmup = tonumber(arg[1]), tonumber(arg[2]), tonumber(arg[3])
assert(bytes and iters and warmup, "usage: lua_allreduce.lua BYTES ITERS WARMUP")
local c = assert(herd.comm())
local n = c:size()
local send = herd.buffer("float32", bytes // 4)
local recv = herd.buffer("float32", bytes // 4)
local allreduce, clock = c.allreduce, herd.clock

-- The loops are written out, not passed a function: a Lua call more per
-- allreduce would be measured with it.
local function result(t0)
  local us = (clock() - t0) / iters * 1e6
  us = assert(c:allreduce(us, "max"))
  local algbw = bytes / (us * 1e-6) / 1e9
  return { time_us = us, algbw = algbw, busbw = algbw * 2 * (n - 1) / n }
end

send:fill(1)
for _ = 1, warmup do assert(allreduce(c, send, recv)) end
assert(c:barrier())
local t0 = clock()
for _ = 1, iters do allreduce(c, send, recv) end
local oop = result(t0)

recv:fill(1)
for _ = 1, warmup do assert(allreduce(c, recv)) end
assert(c:barrier())
t0 = clock()
for _ = 1, iters do allreduce(c, recv) end
local ip = result(t0)

if c:rank() == 0 then
  print(herd.json.encode({ bytes = bytes, ranks = n, out_of_place = oop, in_place = ip }))
end
