-- restart_demo.lua: a Lua training loop that checkpoints, is killed,
-- restarts under restarts = 1, resumes from its last checkpoint, and ends
-- with the very weights of an undisturbed run; or, with --damage, finds
-- its newest checkpoint damaged, resumes from the one before and trains
-- on past it.
--
--   build/bin/herd examples/lua/restart_demo.lua [DIR]
--   build/bin/herd examples/lua/restart_demo.lua --damage [DIR]
--
-- Run by hand, the script is the controller: it launches itself as two
-- ranks twice, once undisturbed and once with rank 1 killed (SIGKILL) at
-- step 5 of the first attempt, and compares what the ranks hand back.  As
-- a rank (under a job), it trains: replicated weights, a gradient that
-- depends on the rank and the step, averaged with an allreduce, a
-- checkpoint every 2 steps.
--
-- With --damage, a run stops after step 6, its newest checkpoint; one
-- byte of step 6 is flipped in a copy of its directory, and the copy
-- resumes: the restore passes over step 6 (moving it aside, with a
-- warning) to step 4, and the training goes on to step 8, saving step 6
-- anew.  Its weights are compared with those of another copy, from which
-- step 6 was removed, resumed from step 4 alike, and with those of the
-- undisturbed run: the training is deterministic, so all are the same.
local STEPS, EVERY, KILL_AT = 8, 2, 5

if not os.getenv("HERD_JOB_ID") then
  local damage = arg[1] == "--damage"
  local dir = arg[damage and 2 or 1] or os.tmpname()
  os.remove(dir)
  local function run(name, env)
    env.DEMO_DIR = dir .. "/" .. name
    local job <close> = assert(herd.launch{ cmd = { arg[0] }, n = 2, restarts = 1, env = env,
                                            start_timeout = 60 })
    local res = assert(job:wait(300))
    assert(res.ok, "the job failed: " .. tostring(res.failure))
    return res, job:results()
  end
  local function same(a, b, what)
    for r = 1, 2 do
      for i = 1, #a[r].w do
        assert(a[r].w[i] == b[r].w[i], ("%s: rank %d w[%d] differs"):format(what, r - 1, i))
      end
    end
  end
  local calm_res, calm = run("undisturbed", {})
  print(string.format("undisturbed: %d restarts, started from step %d, w[1] = %.17g",
                      calm_res.restarts, calm[1].from, calm[1].w[1]))
  if damage then
    local last = STEPS - EVERY
    local name = string.format("step-%012d", last)
    run("first", { DEMO_STOP = tostring(last) })
    assert(os.execute(("cp -r '%s/first' '%s/damaged'"):format(dir, dir)))
    assert(os.execute(("cp -r '%s/first' '%s/before'"):format(dir, dir)))
    -- one byte of the weights in the newest step, the one a resume reads
    local f = assert(io.open(("%s/damaged/%s/rank-00000.data"):format(dir, name), "r+b"))
    f:seek("set", 8)
    local byte = f:read(1):byte()
    f:seek("set", 8)
    f:write(string.char(byte ~ 0x5a))
    f:close()
    assert(os.execute(("rm -r '%s/before/%s'"):format(dir, name)))
    local _, hit = run("damaged", {})
    local _, ref = run("before", {})
    local moved
    for entry in assert(io.popen(("ls '%s/damaged'"):format(dir))):lines() do
      if entry:sub(1, #name + 9) == name .. ".damaged-" then moved = entry end
    end
    assert(moved, "step " .. last .. " was not moved aside")
    print(string.format("damaged:     step %d moved aside as %s, resumed from step %d, w[1] = %.17g",
                        last, moved, hit[1].from, hit[1].w[1]))
    print(string.format("removed:     step %d removed, resumed from step %d, w[1] = %.17g",
                        last, ref[1].from, ref[1].w[1]))
    assert(hit[1].from == last - EVERY and ref[1].from == last - EVERY)
    same(hit, ref, "the damaged run and the one without the step")
    same(hit, calm, "the damaged run and the undisturbed one")
    print("the same weights, bit for bit, on both ranks, in all three runs")
    os.execute("rm -rf '" .. dir .. "'")
    return
  end
  local hit_res, hit = run("killed", { DEMO_KILL_AT = tostring(KILL_AT) })
  print(string.format("killed:      %d restart, resumed from step %d, w[1] = %.17g",
                      hit_res.restarts, hit[1].from, hit[1].w[1]))
  assert(hit_res.restarts == 1 and hit[1].from == KILL_AT - KILL_AT % EVERY)
  same(hit, calm, "the killed run and the undisturbed one")
  print("the same weights, bit for bit, on both ranks")
  os.execute("rm -rf '" .. dir .. "'")
  return
end

-- a rank
local c = assert(herd.comm())
local ck <close> = assert(herd.checkpoint(os.getenv("DEMO_DIR"), c, { keep_last = 2 }))
local w = herd.buffer("float64", 16):fill(1)
assert(ck:add("w", w))
local from = ck:restore() or 0
local g = herd.buffer("float64", #w)
for step = from + 1, tonumber(os.getenv("DEMO_STOP")) or STEPS do
  for i = 1, #g do g[i] = math.sin(step * i + herd.rank) end
  assert(c:allreduce(g, "avg"))
  for i = 1, #w do w[i] = w[i] - 0.1 * g[i] end
  if step % EVERY == 0 then assert(ck:save(step)) end
  if tonumber(os.getenv("DEMO_KILL_AT")) == step and os.getenv("HERD_RESTART_COUNT") == "0"
     and herd.rank == 1 then
    print(string.format("rank 1: killed at step %d", step))
    io.stdout:flush()
    os.execute("kill -KILL " .. io.open("/proc/self/stat"):read("n"))
  end
end
herd.emit({ from = from, w = w:totable() })
