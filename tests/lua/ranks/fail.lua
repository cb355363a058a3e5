-- A rank of tests/lua/job.lua: rank 1 fails while the others wait in a
-- collective with it; they return herd's error naming it.
local c = assert(herd.comm{ timeout = 60 })
if herd.rank == 1 then
  error("rank 1 gives up")
end
local ok, msg, st = c:allreduce(herd.buffer("float32", 4))
io.stderr:write(string.format("allreduce: %s %s %s\n", tostring(ok), msg, st))
os.exit(ok and 0 or 3)
