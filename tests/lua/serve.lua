-- herd.serve and herd.Service: replicas of examples/replica.c behind a
-- real HAProxy, scaled, restarted one by one and stopped from Lua; bad
-- options raise; a request through the front door reaches a replica.
local function raises(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error matching " .. pattern)
  assert(tostring(err):find(pattern, 1, true), ("error %q does not match %q"):format(tostring(err), pattern))
end
local replica = "build/bin/example_replica"
local function sleep(s) os.execute("sleep " .. s) end

raises("option 'port' (the front door's) is required", herd.serve, { cmd = replica })
raises("option 'replicas' is a count", herd.serve, { cmd = replica, port = 9, replicas = 2, max_replicas = 3 })
raises("unknown option 'replica'", herd.serve, { cmd = replica, port = 9, replica = 2 })

-- a free port: the front door's start says HERD_EBUSY when another took it
-- a front door and 3 replicas' ports in a row, free now
local function free_ports(n)
  local f = io.popen("python3 -c \"import random, socket\n" ..
    "for _ in range(200):\n" ..
    "    b = random.randrange(20000, 60000); ss = []\n" ..
    "    try:\n" ..
    "        for p in range(b, b + " .. n .. "):\n" ..
    "            s = socket.socket(); s.bind(('127.0.0.1', p)); ss.append(s)\n" ..
    "        print(b); break\n" ..
    "    except OSError: pass\n" ..
    "    finally:\n" ..
    "        [s.close() for s in ss]\n\"")
  local b = tonumber(f:read("l")); f:close()
  return assert(b, "no free ports")
end
local svc, msg, st
for _ = 1, 5 do
  local port = free_ports(4)
  svc, msg, st = herd.serve{ cmd = { replica, "--work-ms", "1" }, port = port,
                             min_replicas = 1, max_replicas = 3, health = "/health",
                             output = "none", events = "none", grace = 2 }
  if svc then break end
  assert(st == "HERD_EBUSY", msg)
end
assert(svc, msg)
do
  local s <close> = svc
  assert(s:status().kind == "service")   -- there from the start
  assert(s:wait_ready(1, 30))
  local status = s:status()
  assert(status.kind == "service" and status.state == "serving" and status.wanted == 1)
  local front = status.front
  -- through the front door
  local f = io.popen("python3 -c \"import urllib.request; print(urllib.request.urlopen('http://" ..
                     front .. "/infer', timeout=5).read().decode())\"")
  local body = f:read("a"); f:close()
  assert(body:find('"replica":0', 1, true), body)
  -- herd.jobs lists it, as herd jobs does
  local listed = false
  for _, j in ipairs(assert(herd.jobs.list())) do listed = listed or j.id == s:id() end
  assert(listed)
  assert(s:scale(3))
  assert(s:wait_ready(3, 30))
  local pids = {}
  for _, r in ipairs(s:status().replicas) do pids[r.index] = r.pid end
  local ok, err, code = s:scale(4)
  assert(not ok and code == "HERD_EINVAL" and err:find("runs 1 to 3 replicas", 1, true), err)
  assert(s:restart{ rolling = true })
  ok, err, code = s:restart{ rolling = true }
  assert(not ok and code == "HERD_EBUSY" and err:find("a restart is under way", 1, true), err)
  -- every replica a new process, one at a time (10 s at most)
  local t0 = herd.clock()
  repeat
    local done = 0
    local status = s:status()
    for _, r in ipairs(status.replicas) do
      if r.state == "ready" and r.pid ~= pids[r.index] then done = done + 1 end
    end
    if done == 3 then break end
    sleep(0.1)
  until herd.clock() - t0 > 30
  local events = table.concat(s:status().events, "\n")
  assert(events:find("rolling restart done: 3 replicas ready", 1, true), events)
  assert(s:stop())
  local over, failed = s:wait(1)
  assert(over and not failed)
  assert(s:status().state == "stopped")
end
raises("attempt to use a closed herd.Service", svc.status, svc)
print("ok")
