-- tests/cluster/security_job.lua CKPT GO: the rank program of
-- security_traces.sh.  Joins the job's communicator, allreduces, saves a
-- checkpoint in CKPT, prints "ready", then waits (at most 60 s) for the
-- file GO before it leaves.
local c = assert(herd.comm())
local b = herd.buffer("float32", 1024):fill(c:rank())
assert(c:allreduce(b))
local ck = assert(herd.checkpoint(arg[1], c))
assert(ck:add("b", b, { global = { 1024 * c:size() }, offset = { 1024 * c:rank() } }))
assert(ck:save(1))
assert(ck:close())
print("ready")
io.stdout:flush()
local t0 = herd.clock()
while herd.clock() - t0 < 60 do
  local f = io.open(arg[2])
  if f then
    f:close()
    break
  end
  os.execute("sleep 0.1")
end
assert(c:barrier())
