-- herd.launch and herd.Job: Lua ranks and plain commands on this node.
local function raises(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error matching " .. pattern)
  assert(tostring(err):find(pattern, 1, true), ("error %q does not match %q"):format(tostring(err), pattern))
end
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local function now() local f = io.popen("date +%s.%N"); local t = tonumber(f:read("l")); f:close(); return t end
local function alive(pid) return os.execute("kill -0 " .. pid .. " 2>/dev/null") == true end

-- Lua ranks: every collective between 2 and 3 ranks; results by rank
for _, n in ipairs({ 2, 3 }) do
  local job <close> = assert(herd.launch{ cmd = here .. "/ranks/collectives.lua", n = n,
                                          output = "lines" })
  local said = {}
  for l in job:lines(60) do
    if l.stream == "stdout" then said[l.rank] = l.text else io.stderr:write(l.text, "\n") end
  end
  local res = assert(job:wait(60))
  assert(res.ok and res.status == 0 and res.state == "succeeded" and #res.ranks == n, res.failure)
  local results = job:results()
  for r = 0, n - 1 do
    assert(said[r] == ("rank %d of %d ok on %s"):format(r, n, herd.host), said[r])
    assert(res.ranks[r + 1].rank == r and res.ranks[r + 1].exit_code == 0)
    assert(results[r + 1].rank == r and results[r + 1].sum == n * (n + 1) // 2)
  end
end

-- a failing Lua rank: the job fails with its error, printed once; the
-- others return from the collective at once with herd's error naming it
do
  local t0 = now()
  local job <close> = assert(herd.launch{
    cmd = { "sh", "-c", "trap '' TERM; exec \"$0\" \"$1\"", arg[-1], here .. "/ranks/fail.lua" },
    n = 3, output = "lines", grace = 20 })
  local lines, peers = {}, 0
  for l in job:lines(60) do
    lines[#lines + 1] = ("%d %s %s"):format(l.rank, l.stream, l.text)
    if l.text:match("^allreduce: nil .*rank 1 %(host [^)]+%).* HERD_EPEER$") then peers = peers + 1 end
  end
  local res = assert(job:wait(60))
  assert(not res.ok and res.status == 1 and res.state == "failed", res.status)
  assert(res.failure:find("rank 1 on", 1, true) and res.failure:find("rank 1 gives up", 1, true), res.failure)
  assert(now() - t0 < 15, "the failed job took " .. (now() - t0) .. " s")
  assert(peers == 2, table.concat(lines, "\n"))
  local tracebacks = 0
  for _, l in ipairs(lines) do
    if l:find("rank 1 gives up", 1, true) then tracebacks = tracebacks + 1 end
  end
  assert(tracebacks == 1, table.concat(lines, "\n"))
end

-- commands: exit status, failure summary, output mode none
do
  local job <close> = assert(herd.launch{ cmd = { "sh", "-c", "echo out; echo err >&2; [ $HERD_RANK = 0 ] || sleep 5; exit 3" },
                                          n = 2, output = "none" })
  local res = assert(job:wait(30))
  assert(res.status == 3 and not res.ok and res.ranks[1].exit_code == 3, res.status)
  assert(res.failure:find("rank 0 on", 1, true) and res.failure:find("err", 1, true), res.failure)
  raises('job:lines() needs output = "lines"', job.lines, job)
  assert(job:id():match("^%x+%-%x+$") and job:size() == 2)
  assert(tostring(job):find("herd.Job (" .. job:id() .. ", 2 ranks)", 1, true))
end

-- env, signals, stop, status, and a wait that times out
do
  local job <close> = assert(herd.launch{ cmd = { "sh", "-c", 'echo "$GREETING $HERD_RANK"; exec sleep 60' },
                                          n = 2, output = "lines", env = { GREETING = "hi" }, grace = 1 })
  local first = job:lines(30)()
  assert(first and first.text:match("^hi %d$"), first and first.text)
  local ok, msg, st = job:wait(0.2)
  assert(ok == nil and st == "HERD_ETIMEDOUT" and msg:find("still running", 1, true), msg)
  local s = job:status()
  assert(s.state == "running" and s.status == nil and #s.ranks == 2)
  assert(job:signal("USR1") == true)
  local res = assert(job:wait(30))
  assert(res.status == 128 + 10 and (res.ranks[1].signal == 10 or res.ranks[2].signal == 10), res.status)
  raises("unknown signal 'NOPE'", job.signal, job, "NOPE")
end
do
  local job = assert(herd.launch{ cmd = { "sleep", "60" }, n = 2, grace = 1 })
  local t0 = now()
  local res = job:stop()
  assert(res.state == "failed" and now() - t0 < 10)
  job:close()
  raises("attempt to use a closed herd.Job", job.wait, job)
end

-- a Job that is closed or collected stops its ranks: no process is left
do
  local pids = {}
  do
    local job <close> = assert(herd.launch{ cmd = { "sleep", "60" }, n = 2, grace = 1 })
    for _, r in ipairs(job:status().ranks) do pids[#pids + 1] = r.pid end
  end
  local job = assert(herd.launch{ cmd = { "sleep", "60" }, n = 1, grace = 1 })
  pids[#pids + 1] = job:status().ranks[1].pid
  job = nil
  collectgarbage(); collectgarbage()
  assert(#pids == 3)
  for _, pid in ipairs(pids) do assert(not alive(pid), "rank pid " .. pid .. " is still alive") end
end

-- misuse raises; a launch that cannot start returns nil, msg, status
raises("options 'n' and 'np' are one option", herd.launch, { cmd = "x.lua", n = 2, np = 2 })
raises("options 'time' and 'timeout' are one limit", herd.launch,
       { cmd = { "true" }, n = 1, time = "1:00", timeout = 60 })
raises("option 'time' is \"1:60\"; expected srun's minutes", herd.launch,
       { cmd = { "true" }, n = 1, time = "1:60" })
raises("option 'time' is srun's: a whole number of minutes", herd.launch,
       { cmd = { "true" }, n = 1, time = 0.5 })
-- np as mpirun writes it; the job's time limit as time (srun's form) or
-- timeout (seconds): the ranks are stopped, state "time_limit", status 124;
-- start_timeout is the start deadline
for _, limit in ipairs({ { time = "0:01" }, { timeout = 1 } }) do
  local job <close> = assert(herd.launch{ cmd = { "sleep", "30" }, np = 2, output = "none",
                                          time = limit.time, timeout = limit.timeout,
                                          start_timeout = 30 })
  local t0 = now()
  local res = assert(job:wait(60))
  assert(res.status == 124 and res.state == "time_limit" and not res.ok, res.status)
  assert(res.failure == "time limit of 0:01 reached; ranks 0-1 stopped", res.failure)
  assert(#res.ranks == 2 and now() - t0 < 30)
end
do -- a job that ends before its limit is left as it is
  local job <close> = assert(herd.launch{ cmd = { "true" }, n = 2, time = 10, output = "none" })
  local res = assert(job:wait(60))
  assert(res.ok and res.state == "succeeded" and res.failure == nil, res.failure)
end
raises("option 'n' (the number of ranks) is required", herd.launch, { cmd = { "true" } })
raises("option 'cmd' must be a command", herd.launch, { cmd = {}, n = 1 })
raises("options 'hosts', 'hostfile' and 'slurm' exclude each other", herd.launch,
       { cmd = { "true" }, n = 1, hosts = "a", slurm = true })
raises('option \'output\' must be "print", "lines" or "none"', herd.launch, { cmd = { "true" }, n = 1, output = "x" })
local ok, msg, st = herd.launch{ cmd = { "true" }, n = 2, hosts = "node[1-" }
assert(ok == nil and st == "HERD_EFORMAT", msg)
assert(herd.launch{ cmd = { "/nonexistent/program" }, n = 1 }:wait(30).status == 127)
-- output "print" (the default) writes each line with the prefix format asked for
do
  local code = 'local j <close> = assert(herd.launch{ cmd = { "sh", "-c", "echo hi" }, n = 2, '
            .. 'prefix = "<%r@%h> " }); assert(j:wait(60))'
  local f = assert(io.popen(("%q -e %q"):format(arg[-1], code)))
  local out = f:read("a")
  assert(f:close(), out)
  for r = 0, 1 do
    assert(out:find(("<%d@%s> hi\n"):format(r, herd.host), 1, true), out)
  end
  assert(not out:find("[" .. herd.host, 1, true), out)
end

-- herd.jobs: the job this script launched is listed, its status read, and
-- stopped as Ctrl-C would
do
  local job <close> = assert(herd.launch{ cmd = { "sleep", "30" }, n = 2, output = "none" })
  local id, mine = job:id(), nil
  for _ = 1, 100 do
    for _, j in ipairs(assert(herd.jobs.list())) do
      if j.id == id and j.state == "running" then mine = j end
    end
    if mine then break end
    os.execute("sleep 0.1")
  end
  assert(mine, "herd.jobs.list() does not list " .. id)
  assert(mine.ranks == 2 and mine.nodes == 1 and mine.command == "sleep 30", mine.command)
  local st = assert(herd.jobs.status(id))
  assert(#st.rank_states == 2 and st.rank_states[2].rank == 1 and st.rank_states[2].pid > 0)
  assert(herd.jobs.stop(id) == true)
  local res = assert(job:wait(30))
  assert(res.status == 130 and res.state == "interrupted", res.status)
  local ok, msg, code = herd.jobs.status(id)
  assert(ok == nil and code == "HERD_ENOTFOUND" and msg:find("no running job " .. id, 1, true), msg)
end

print("job.lua: ok")
