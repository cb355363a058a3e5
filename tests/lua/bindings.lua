-- Every herd type's methods and metamethods refuse a value of another type
-- and name what it is: a table given a herd type's metatable is "got
-- table" (not the type's own name, which its metatable's __name would
-- give), a plain table too, another herd object by its type.  And a
-- herd.Comm after finalize refuses what talks to its peers, as it does
-- once closed.
local function raises(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error matching " .. pattern)
  assert(tostring(err):find(pattern, 1, true), ("error %q does not match %q"):format(tostring(err), pattern))
end

local srv <close> = assert(herd.store.serve{})
local store <close> = assert(herd.store.connect(srv:address(), srv.secret, { timeout = 5 }))
local comm = assert(herd.comm{ store = store, rank = 0, size = 1, timeout = 10 })
local request = comm:iallreduce(herd.buffer("float32", 2):fill(1))
local cluster = assert(herd.discover{ inventory = "tests/fixtures/inventory/dgx-h100.json" })
local dir = os.tmpname()
os.remove(dir)
local ckpt = assert(herd.checkpoint(dir))

local objects = {
  ["herd.Buffer"] = herd.buffer("float32", 4),
  ["herd.StoreServer"] = srv,
  ["herd.Store"] = store,
  ["herd.Comm"] = comm,
  ["herd.Request"] = request,
  ["herd.Cluster"] = cluster,
  ["herd.Node"] = cluster.nodes[1],
  ["herd.Checkpoint"] = ckpt,
}
local checked = 0
for name, obj in pairs(objects) do
  local mt = getmetatable(obj)
  assert(mt.__name == name, name)
  -- a foreign table with the type's own metatable, a plain table, and a
  -- herd object of another type
  local other = name == "herd.Buffer" and srv or objects["herd.Buffer"]
  local foreign = setmetatable({}, mt)
  local fns = {}
  for _, meta in ipairs({ "__gc", "__close", "__tostring", "__len", "__newindex" }) do
    if mt[meta] then fns[meta] = mt[meta] end
  end
  for key, kind in pairs(mt.__members) do
    if kind == "method" then fns[key] = obj[key] end
  end
  for fname, f in pairs(fns) do
    raises(name .. " expected, got table", f, foreign, 1)
    raises(name .. " expected, got table", f, {}, 1)
    raises(name .. " expected, got " .. getmetatable(other).__name, f, other, 1)
    raises(name .. " expected, got number", f, 42, 1)
    checked = checked + 1
  end
  -- dropped with no metatable: its collection calls no __gc
  setmetatable(foreign, nil)
end
assert(checked > 40, "only " .. checked .. " functions checked")

-- finalize: what talks to the peers raises, as after close; local calls remain
assert(request:wait())
assert(comm:allreduce(3) == 3)
assert(comm:finalize() == true)
raises("attempt to use a finalized herd.Comm", comm.allreduce, comm, 3)
raises("attempt to use a finalized herd.Comm", comm.barrier, comm)
raises("attempt to use a finalized herd.Comm", comm.iallreduce, comm, herd.buffer("int32", 1))
raises("attempt to use a finalized herd.Comm", comm.split, comm, 0)
raises("attempt to use a finalized herd.Comm", comm.finalize, comm)
assert(comm:rank() == 0 and comm:size() == 1 and comm:host() and comm:error() == nil)
assert(comm:close() == true)
raises("attempt to use a closed herd.Comm", comm.allreduce, comm, 3)
raises("attempt to use a closed herd.Comm", comm.rank, comm)

ckpt:close()
os.execute("rm -rf '" .. dir .. "'")
print("bindings: ok")
