-- restart_demo.lua: a Lua training loop that checkpoints, is killed,
-- restarts under restarts = 1, resumes from its last checkpoint, and ends
-- with the very weights of an undisturbed run.
--
--   build/bin/herd examples/lua/restart_demo.lua [DIR]
--
-- Run by hand, the script is the controller: it launches itself as two
-- ranks twice, once undisturbed and once with rank 1 killed (SIGKILL) at
-- step 5 of the first attempt, and compares what the ranks hand back.  As
-- a rank (under a job), it trains: replicated weights, a gradient that
-- depends on the rank and the step, averaged with an allreduce, a
-- checkpoint every 2 steps.
local STEPS, EVERY, KILL_AT = 8, 2, 5

if not os.getenv("HERD_JOB_ID") then
  local dir = arg[1] or os.tmpname()
  os.remove(dir)
  local function run(name, env)
    env.DEMO_DIR = dir .. "/" .. name
    local job <close> = assert(herd.launch{ cmd = { arg[0] }, n = 2, restarts = 1, env = env,
                                            start_timeout = 60 })
    local res = assert(job:wait(300))
    assert(res.ok, "the job failed: " .. tostring(res.failure))
    return res, job:results()
  end
  local calm_res, calm = run("undisturbed", {})
  local hit_res, hit = run("killed", { DEMO_KILL_AT = tostring(KILL_AT) })
  print(string.format("undisturbed: %d restarts, started from step %d, w[1] = %.17g",
                      calm_res.restarts, calm[1].from, calm[1].w[1]))
  print(string.format("killed:      %d restart, resumed from step %d, w[1] = %.17g",
                      hit_res.restarts, hit[1].from, hit[1].w[1]))
  assert(hit_res.restarts == 1 and hit[1].from == KILL_AT - KILL_AT % EVERY)
  for r = 1, 2 do
    for i = 1, #calm[r].w do
      assert(hit[r].w[i] == calm[r].w[i], ("rank %d w[%d] differs"):format(r - 1, i))
    end
  end
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
for step = from + 1, STEPS do
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
