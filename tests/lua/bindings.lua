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
local grid = assert(comm:grid{ tp = 1 })
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
  ["herd.Grid"] = grid,
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

-- a grid on one rank: its layout, its group, its refusals
assert(grid:coords().tp == 0 and grid:ranks("tp")[1] == 0 and #grid:ranks("tp") == 1)
assert(grid:dims()[1].name == "tp" and grid:dims()[1].size == 1)
assert(grid:explain():find("grid tp=1 over 1 ranks on 1 node", 1, true), grid:explain())
assert(grid:group("tp"):size() == 1 and grid:group("tp"):allreduce(5) == 5)
do
  local none, msg, st = grid:group("zz")
  assert(none == nil and st == "HERD_ENOTFOUND" and msg:find("no dimension zz (it has tp)", 1, true), msg)
end
raises("a rank of the grid", grid.ranks, grid, "tp", 5)
raises("tp = string: a dimension is a short name and a whole number", comm.grid, comm, { tp = "x" })
raises("a grid's keys are dimension names", comm.grid, comm, { 2 })
do
  local g, msg, st = comm:grid{ tp = 2 }
  assert(g == nil and st == "HERD_EINVAL", msg)
  assert(msg:find("grid: rank 0: grid tp=2 multiplies to 2 ranks; the job has 1", 1, true), msg)
  g, msg = comm:grid{ sp = 1 }
  assert(g == nil and msg:find("sp is not a dimension of the order tp-cp-ep-dp-pp", 1, true), msg)
  g = assert(comm:grid{ sp = 1, order = "sp-dp" })
  assert(g:group("sp"):size() == 1)
  g:group("sp"):close()
end
raises("1 communicator split from this one is open: close it first", comm.close, comm)
grid:group("tp"):close()
assert(grid:close() == true)
raises("attempt to use a closed herd.Grid", grid.explain, grid)

-- finalize: what talks to the peers raises, as after close; local calls remain
assert(request:wait())
assert(comm:allreduce(3) == 3)
assert(comm:finalize() == true)
raises("attempt to use a finalized herd.Comm", comm.allreduce, comm, 3)
raises("attempt to use a finalized herd.Comm", comm.barrier, comm)
raises("attempt to use a finalized herd.Comm", comm.iallreduce, comm, herd.buffer("int32", 1))
raises("attempt to use a finalized herd.Comm", comm.split, comm, 0)
raises("attempt to use a finalized herd.Comm", comm.grid, comm, { tp = 1 })
raises("attempt to use a finalized herd.Comm", comm.finalize, comm)
assert(comm:rank() == 0 and comm:size() == 1 and comm:host() and comm:error() == nil)
assert(comm:close() == true)
raises("attempt to use a closed herd.Comm", comm.allreduce, comm, 3)
raises("attempt to use a closed herd.Comm", comm.rank, comm)

ckpt:close()
os.execute("rm -rf '" .. dir .. "'")
print("bindings: ok")
