-- tests/cluster/fault_train.lua DIR STEPS OUT: the rank program of
-- fault_restart.sh, a small data-parallel training loop.  Each step every
-- rank makes a gradient of 4096 float32 from the step, its rank and the
-- weights, the allreduce sums them, and the weights decay and take a third
-- of the sum (values with rounding in every step, so that a result
-- restored or computed differently would show).  Every 10 steps a
-- checkpoint of the weights and the step; a rank (re)started restores the
-- newest that verifies.  Prints "step S" as it goes; at the end rank 0
-- writes the weights to OUT, one "%a" per line.
local dir, steps, out = arg[1], math.tointeger(tonumber(arg[2])), arg[3]
local c = assert(herd.comm())
local rank = c:rank()
local n = 4096
local w = herd.buffer("float32", n):fill(0)
local g = herd.buffer("float32", n)
local meta = { 0 }
local ck = assert(herd.checkpoint(dir, c))
assert(ck:add("w", w))
assert(ck:add("step", meta))
local first = 1
if ck:restore() then
  first = math.tointeger(meta[1]) + 1
end
print(string.format("start at step %d, restart %s", first, os.getenv("HERD_RESTART_COUNT")))
for s = first, steps do
  for i = 1, n do
    g[i] = math.sin(s * 0.37 + i * 0.011 + rank * 1.3) + w[i] * 0.01
  end
  assert(c:allreduce(g))
  for i = 1, n do
    w[i] = w[i] * 0.99 + g[i] / 3
  end
  if s % 10 == 0 then
    meta[1] = s
    assert(ck:save(s))
  end
  print("step " .. s)
  io.stdout:flush()
end
if rank == 0 then
  local f = assert(io.open(out, "w"))
  for i = 1, n do
    f:write(string.format("%a\n", w[i]))
  end
  assert(f:close())
end
assert(ck:close())
