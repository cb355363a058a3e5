-- herd.telemetry.watch and the sampler's iteration: one sample of this
-- node as a table with the C struct's fields (this host, its CPUs and
-- memory as /proc says, every rate -1 in a first sample); a sampler's
-- next() gives seq 1, 2, 3 with the rates of the second on, latest(),
-- samples(), a reader that fell behind the ring skips to the oldest kept,
-- close() once; a watch of this node; options checked.

local function read(path)
  local f = assert(io.open(path))
  local s = f:read("a")
  f:close()
  return s
end
local host = read("/proc/sys/kernel/hostname"):gsub("%s+$", "")
local ncpus = 0
for _ in read("/proc/stat"):gmatch("\ncpu%d+ ") do ncpus = ncpus + 1 end
local mem_total = tonumber(read("/proc/meminfo"):match("MemTotal:%s+(%d+) kB")) * 1024

-- what every sample holds
local function check_sample(s, first)
  assert(type(s) == "table")
  assert(s.v == nil, "the format version is the wire's")
  assert(s.host == host, s.host)
  assert(math.type(s.seq) == "integer" and s.seq >= 1)
  assert(math.type(s.time_ms) == "integer" and math.abs(s.time_ms / 1000 - os.time()) < 60)
  assert(#s.cpu_core == ncpus, #s.cpu_core .. " CPUs, want " .. ncpus)
  assert(s.mem_total == mem_total, s.mem_total)
  assert(s.mem_available > 0 and s.mem_available <= s.mem_total)
  assert(s.load1 >= 0)
  assert(type(s.gpus) == "table" and type(s.procs) == "table")
  if #s.gpus == 0 then assert(#s.gpu_note > 0) end
  assert(s.dropped == 0)
  for _, n in ipairs(s.nets) do
    assert(n.name ~= "lo" and n.rx_bytes >= 0 and n.tx_bytes >= 0)
  end
  if first then
    assert(s.period_ms == 0 and s.cpu_busy == -1)
    for i = 1, ncpus do assert(s.cpu_core[i] == -1) end
    for _, n in ipairs(s.nets) do assert(n.rx_bps == -1 and n.tx_bps == -1) end
  else
    assert(s.period_ms > 0)
    assert(s.cpu_busy >= 0 and s.cpu_busy <= 100, s.cpu_busy)
    for i = 1, ncpus do assert(s.cpu_core[i] >= 0 and s.cpu_core[i] <= 100) end
    for _, n in ipairs(s.nets) do assert(n.rx_bps >= 0 and n.tx_bps >= 0) end
  end
end

-- one sample
local s = herd.telemetry.sample()
check_sample(s, true)
assert(s.seq == 1)
local ok, err = pcall(herd.telemetry.sample, { period = 1 })
assert(not ok and err:find("takes no argument", 1, true), err)

-- a sampler: 1, 2, 3 in order, the first without rates
local t <close> = herd.telemetry.sampler{ period = 50, ring = 100 }
assert(tostring(t):find("^herd%.Telemetry %(every 50 ms, 100 kept, at sample 0%)"), tostring(t))
assert(math.type(t:fd()) == "integer" and t:fd() >= 0)
for want = 1, 3 do
  local x = t:next(10)
  assert(x, "no sample " .. want .. " within 10 s")
  assert(x.seq == want, x.seq)
  check_sample(x, want == 1)
end
local newest = t:latest()
assert(newest and newest.seq >= 3, newest and newest.seq)
local x = t:next(10)
assert(x.seq == 4, x.seq)
-- those that wait, oldest first, each once
local last = 4
os.execute("sleep 0.2")
for y in t:samples() do
  assert(y.seq == last + 1, y.seq)
  last = y.seq
end
assert(last > 4, "no sample waited after 0.2 s at 20 Hz")
assert(t:close() == true)
ok, err = pcall(t.next, t)
assert(not ok and err:find("attempt to use a closed herd.Telemetry", 1, true), err)
ok, err = pcall(t.close, t)
assert(not ok and err:find("closed", 1, true), err)
assert(tostring(t) == "herd.Telemetry (closed)")

-- a reader that fell behind a ring of 2 gets the oldest kept, then the next
do
  local r <close> = herd.telemetry.sampler{ period = 20, ring = 2 }
  assert(r:next(10).seq == 1)
  os.execute("sleep 1")
  local a = r:next()
  assert(a.seq > 3, "after 1 s at 50 Hz, the oldest of 2 kept is sample " .. a.seq)
  local b = r:next(10)
  assert(b.seq == a.seq + 1, a.seq .. " then " .. b.seq)
end

-- options: a misspelt key, a period out of range
ok, err = pcall(herd.telemetry.sampler, { perod = 100 })
assert(not ok and err:find("unknown option 'perod' (known: period, ring)", 1, true), err)
ok, err = pcall(herd.telemetry.sampler, { period = 5 })
assert(not ok and err:find("option 'period' must be a whole number from 10", 1, true), err)
ok, err = pcall(herd.telemetry.sampler, { ring = 0 })
assert(not ok and err:find("option 'ring'", 1, true), err)

-- a watch of this node
do
  local w <close> = herd.telemetry.watch{ period = 100 }
  local a, node = w:next(10)
  assert(a and node == 1, "no sample from the watch within 10 s")
  check_sample(a, true)
  local b = w:next(10)
  assert(b.seq == 2)
  check_sample(b, false)
  local nodes = w:nodes()
  assert(#nodes == 1 and nodes[1].host == host and nodes[1].state == "streaming", nodes[1].state)
  assert(nodes[1].samples >= 2 and nodes[1].lost == 0 and nodes[1].why == nil)
  assert(w:live() == 1)
end
ok, err = pcall(herd.telemetry.watch, { host = "a" })
assert(not ok and err:find("unknown option 'host'", 1, true), err)
ok, err = pcall(herd.telemetry.watch, { hosts = "a", slurm = true })
assert(not ok and err:find("exclude each other", 1, true), err)
ok, err = pcall(herd.telemetry.watch, { period = 50 })
assert(not ok and err:find("option 'period' must be a whole number from 100", 1, true), err)
local none, msg, status = herd.telemetry.watch{ hosts = "node[1-" }
assert(none == nil and status == "HERD_EFORMAT", msg)
print("telemetry.lua: ok")
