-- A rank of tests/lua/job.lua: rank 1 fails while the others wait in a
-- collective with it; they return at once with herd's error naming it.
-- (The others run with SIGTERM ignored, so that the launcher's stop does
-- not end them before they say so.)
local c = assert(herd.comm{ timeout = 60 })
if herd.rank == 1 then
  error("rank 1 gives up")
end
local t0 = os.clock()
local ok, msg, st = c:allreduce(herd.buffer("float32", 4))
io.stderr:write(string.format("allreduce: %s %s %s\n", tostring(ok), msg, st))
os.execute("sleep 0.5")
os.exit(ok and 0 or 3)
