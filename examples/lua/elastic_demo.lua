-- elastic_demo.lua: training that goes on when a node is lost.
--
--   build/bin/herd examples/lua/elastic_demo.lua HOSTS [DIR]
--
-- HOSTS is a hostlist of 2 or more nodes reached over ssh (their herd as
-- HERD_PROGRAM names it), DIR a directory they all see (a parallel file
-- system; default /tmp, which only nodes that share it see), in which the
-- demo makes a directory of its own and removes it at the end.  Run by hand, the script is the controller.  It launches itself
-- as an elastic job, one rank per node, on all the nodes at most and one
-- fewer at least (min_nodes = N - 1), and at step LOSE_AT of the first run
-- the rank on the last node kills its node's supervisor (`herd exec`) and
-- itself with SIGKILL: the node is lost.  The launcher excludes it and
-- restarts the job on the others, whose ranks resume from the newest
-- checkpoint, the sharded state resharded onto N - 1 ranks.  The
-- controller then checks the result against the same training done
-- without a loss: N ranks to that checkpoint, then N - 1 ranks on the
-- surviving nodes from it.  The two must agree bit for bit: the
-- gradients are summed in fixed point, exactly, whatever the order.
--
-- The lost node is left on the excluded nodes' list, as a real loss
-- would leave it: `herd exclude rm HOST` takes it back.
local STEPS, EVERY, LOSE_AT = 40, 5, 12
local N, STATE = 1024, 1 << 16     -- weights (replicated), state (sharded)
local FIXED = 2 ^ 40               -- the gradients' fixed-point unit

if not os.getenv("HERD_JOB_ID") then
  local hosts = arg[1]
  assert(hosts, "usage: herd elastic_demo.lua HOSTS [DIR] (a hostlist of 2 or more nodes)")
  local names = assert(herd.hostlist.expand(hosts))
  assert(#names >= 2, "elastic_demo.lua: HOSTS must name 2 or more nodes")
  local mktemp = io.popen(("mktemp -d -p '%s'"):format(arg[2] or "/tmp"))
  local dir = mktemp:read("l")
  assert(mktemp:close() and dir, "elastic_demo.lua: cannot make a directory in " .. (arg[2] or "/tmp"))
  local resumed_at = LOSE_AT - LOSE_AT % EVERY
  local function run(name, opts)
    opts.cmd = { arg[0] }
    opts.env = { DEMO_DIR = dir .. "/" .. (opts.dir or name), DEMO_OUT = dir .. "/" .. name .. ".w",
                 DEMO_STOP = tostring(opts.stop or STEPS), DEMO_LOSE = opts.lose }
    opts.dir, opts.stop, opts.lose = nil, nil, nil
    opts.start_timeout = 60
    local job <close> = assert(herd.launch(opts))
    local res = assert(job:wait(600))
    assert(res.ok, name .. ": the job failed: " .. tostring(res.failure))
    return res, job:results()
  end
  -- The reference's first part, before a loss puts a node on the list.
  run("calm", { hosts = hosts, n = #names, per_node = 1, stop = resumed_at, dir = "reference" })
  local res, out = run("elastic", { hosts = hosts, min_nodes = #names - 1, max_nodes = #names,
                                    restarts = 2, lose = tostring(LOSE_AT) })
  local kept, lost = {}, {}
  for _, node in ipairs(res.nodes) do
    if node.role == "in" then kept[#kept + 1] = node.host end
    if node.role == "out" then lost[#lost + 1] = node.host .. " (" .. node.why .. ")" end
  end
  print(string.format("elastic: %d restart, lost %s; resumed from step %d on %d ranks: %s",
                      res.restarts, table.concat(lost, ", "), out[1].from, #res.ranks,
                      table.concat(kept, ",")))
  assert(#lost == 1 and #kept == #names - 1 and out[1].from == resumed_at)
  run("reference", { hosts = table.concat(kept, ","), n = #kept, per_node = 1 })
  local a = assert(io.open(dir .. "/elastic.w")):read("a")
  local b = assert(io.open(dir .. "/reference.w")):read("a")
  assert(a == b, "the elastic run and the reference differ")
  print(string.format("reference: %d ranks to step %d, then %d from it: the same weights and "
                      .. "state, bit for bit (%s)", #names, resumed_at, #kept,
                      a:match("state [^\n]*")))
  os.execute("rm -rf '" .. dir .. "'")
  return
end

-- a rank
local c = assert(herd.comm())
local rank, size = c:rank(), c:size()
local ck <close> = assert(herd.checkpoint(os.getenv("DEMO_DIR"), c, { keep_last = 3 }))
local w = herd.buffer("float64", N):fill(0)
assert(ck:add("w", w))
-- This rank's part of the state: the rank-th of size near-equal ranges.
local first = STATE * rank // size
local part = STATE * (rank + 1) // size - first
local m = herd.buffer("float64", part):fill(0)
assert(ck:add("m", m, { global = { STATE }, offset = { first }, shape = { part } }))
local from = ck:restore() or 0
local g = herd.buffer("int64", N)
local lose = tonumber(os.getenv("DEMO_LOSE"))
for step = from + 1, tonumber(os.getenv("DEMO_STOP")) do
  for i = 1, N do
    local v = math.sin(step * 0.37 + i * 0.011 + rank * 1.3) + w[i] * 0.01
    g[i] = math.tointeger(math.floor(v * FIXED))
  end
  assert(c:allreduce(g))
  for i = 1, N do w[i] = w[i] * 0.99 + g[i] / FIXED / 3 end
  for j = 1, part do m[j] = 0.9 * m[j] + 0.1 * w[(first + j - 1) % N + 1] end
  if step % EVERY == 0 then assert(ck:save(step)) end
  if lose == step and os.getenv("HERD_RESTART_COUNT") == "0" and rank == size - 1 then
    print(string.format("rank %d: losing this node at step %d", rank, step))
    io.stdout:flush()
    local stat = io.open("/proc/self/stat"):read("a")
    local pid, ppid = stat:match("^(%d+) %b() %S+ (%d+)")
    os.execute("kill -KILL " .. ppid .. " " .. pid)
  end
end
-- The state's checksum: its elements in fixed point, summed exactly.
local sum = herd.buffer("int64", 1)
for j = 1, part do sum[1] = sum[1] + math.tointeger(math.floor(m[j] * 2 ^ 30)) end
assert(c:allreduce(sum))
if rank == 0 then
  local f = assert(io.open(os.getenv("DEMO_OUT"), "w"))
  for i = 1, N do f:write(string.format("%a\n", w[i])) end
  f:write(string.format("state %d\n", sum[1]))
  assert(f:close())
end
herd.emit({ from = from })
