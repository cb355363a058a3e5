-- tests/cluster/security_job.lua CKPT GO GO2: the rank program of
-- security_traces.sh.  Joins the job's communicator, allreduces, saves a
-- checkpoint in CKPT, prints "ready", then waits (at most 60 s) for the
-- file GO.  Then every rank joins a second communicator of the job, the
-- last one only once the file GO2 exists (at most 60 s), so that the
-- others wait inside its init with their listening sockets open.
local c = assert(herd.comm())
local b = herd.buffer("float32", 1024):fill(c:rank())
assert(c:allreduce(b))
local ck = assert(herd.checkpoint(arg[1], c))
assert(ck:add("b", b, { global = { 1024 * c:size() }, offset = { 1024 * c:rank() } }))
assert(ck:save(1))
assert(ck:close())
print("ready")
io.stdout:flush()
local function await(path)
  local t0 = herd.clock()
  while herd.clock() - t0 < 60 do
    local f = io.open(path)
    if f then
      f:close()
      return
    end
    os.execute("sleep 0.1")
  end
end
await(arg[2])
print("joining again")
io.stdout:flush()
if c:rank() == c:size() - 1 then await(arg[3]) end
local sub = assert(herd.comm{ timeout = 60 })
assert(sub:barrier())
assert(c:barrier())
