-- tests/cluster/fault_loop.lua [CALLS [FLOATS]]: the rank program of the
-- fault tests.  Allreduces of FLOATS float32 (default 1024), CALLS times
-- (default: until something fails), each result checked against the exact
-- sum.  Prints "running" after 100 calls; on a failed call "FAILED after S
-- s (at T): STATUS: MESSAGE" (S: the call's time, T: herd.clock() then,
-- CLOCK_MONOTONIC as the test sees it) and exits 3; on a wrong result
-- "WRONG ..." and exits 4; at the end "done: ..." with the longest call.
local calls = math.tointeger(tonumber(arg[1] or "")) or math.maxinteger
local n = math.tointeger(tonumber(arg[2] or "")) or 1024
local c = assert(herd.comm())
local size = c:size()
local b = herd.buffer("float32", n)
local t_start = herd.clock()
local longest = 0
for i = 1, calls do
  b:fill(c:rank() + 1 + i % 5)
  local t0 = herd.clock()
  local ok, msg, st = c:allreduce(b)
  if not ok then
    local t = herd.clock()
    print(string.format("FAILED after %.3f s (at %.3f): %s: %s", t - t0, t, st, msg))
    os.exit(3)
  end
  longest = math.max(longest, herd.clock() - t0)
  local want = size * (size + 1) // 2 + size * (i % 5)
  if b:min() ~= want or b:max() ~= want then
    print(string.format("WRONG in call %d: %g..%g, not %d", i, b:min(), b:max(), want))
    os.exit(4)
  end
  if i == 100 then
    print("running")
    io.stdout:flush()
  end
end
print(string.format("done: %d calls of %d floats, every result exact, in %.2f s; longest %.3f s",
                    calls, n, herd.clock() - t_start, longest))
