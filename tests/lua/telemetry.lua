-- herd.telemetry: a sample of this node as a table whose fields are the C
-- struct's (the host, /proc's CPU count and memory total, rates from the
-- second call on); with the NVML stand-in (LD_LIBRARY_PATH and
-- HERD_NVML_MOCK_STATE, set by tests/CMakeLists.txt) the GPUs' figures the
-- state file gives and the job and rank of a process on a GPU; a started
-- sampler's samples in sequence, one overwritten in its ring skipped,
-- a second close refused (as a file's), and options it does not know refused.
local function raises(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error matching " .. pattern)
  assert(tostring(err):find(pattern, 1, true), ("error %q does not match %q"):format(tostring(err), pattern))
end
local function read(path)
  local f = assert(io.open(path))
  local text = f:read("a")
  f:close()
  return text
end

local state = os.getenv("HERD_NVML_MOCK_STATE")
local pid
if state then
  -- a rank 2 of job9 on the GPU of NVML index 1
  local p = assert(io.popen("HERD_JOB_ID=job9 HERD_RANK=2 sleep 60 >/dev/null 2>&1 & echo $!"))
  pid = tonumber(p:read("l"))
  p:close()
  -- sampled once the process is sleep itself, not the shell that starts
  -- it (without the job's environment yet): 5 s at most
  for _ = 1, 500 do
    local c = io.open("/proc/" .. pid .. "/comm")
    local comm = c and c:read("l")
    if c then c:close() end
    if comm == "sleep" then break end
    os.execute("sleep 0.01")
  end
  local f = assert(io.open(state, "w"))
  f:write("gpu 1 util 87 mem_util 40 mem_used 1073741824 power_mw 312000 power_limit_mw 650000\n",
          "gpu 1 temp 55 sm_clock 1980 mem_clock 2619 throttle 0x4 ecc_sbe 3 ecc_dbe 1\n",
          "gpu 2 power_mw na temp na\n",
          ("proc 1 %d 2097152\n"):format(pid))
  f:close()
end

-- one sample: the struct's fields
local s = assert(herd.telemetry.sample())
assert(s.host == read("/proc/sys/kernel/hostname"):match("^(%S+)"), s.host)
assert(s.seq == 1 and s.period_ms == 0 and s.cpu_busy == -1, s.seq)
assert(math.type(s.time_ms) == "integer" and math.abs(s.time_ms / 1000 - os.time()) < 5, s.time_ms)
local ncpus = 0
for l in read("/proc/stat"):gmatch("[^\n]+") do
  if l:match("^cpu%d+ ") then ncpus = ncpus + 1 end
end
assert(#s.cpu_core == ncpus, ("%d cores, /proc/stat %d"):format(#s.cpu_core, ncpus))
assert(s.cpu_core[1] == -1)
local kb = tonumber(read("/proc/meminfo"):match("MemTotal:%s*(%d+) kB"))
assert(s.mem_total == kb * 1024 and math.type(s.mem_total) == "integer", s.mem_total)
assert(s.mem_available > 0 and s.mem_available <= s.mem_total)
assert(type(s.load1) == "number" and s.load1 >= 0)
assert(s.ncpus == nil and s.ngpus == nil, "the counts are the arrays' lengths")
for _, n in ipairs(s.nets) do
  assert(n.name ~= "lo" and n.rx_bps == -1 and math.type(n.rx_bytes) == "integer", n.name)
end
assert(s.dropped == 0)

if state then
  assert(#s.gpus == 3 and s.gpu_note == "", s.gpu_note)
  -- in bus order: NVML index 1 (0000:1b), 2 (0000:5d), 0 (0000:9a)
  assert(s.gpus[1].index == 1 and s.gpus[2].index == 2 and s.gpus[3].index == 0)
  local g = s.gpus[1]
  assert(g.name == "NVIDIA H100 80GB HBM3" and g.bus_id:lower() == "0000:1b:00.0", g.bus_id)
  assert(g.util_gpu == 87 and g.util_mem == 40 and g.mem_used == 1073741824, g.util_gpu)
  assert(g.mem_total == 85520809984 and g.power_w == 312 and g.power_limit_w == 650)
  assert(g.temp_c == 55 and g.sm_clock_mhz == 1980 and g.mem_clock_mhz == 2619)
  assert(g.throttle == 4 and g.ecc_sbe == 3 and g.ecc_dbe == 1)
  assert(s.gpus[2].power_w == -1 and s.gpus[2].temp_c == -1 and s.gpus[2].power_limit_w == 700)
  assert(#s.procs == 1, #s.procs)
  local p = s.procs[1]
  assert(p.gpu == 0 and p.pid == pid and p.mem_used == 2097152, p.pid)
  assert(p.job == "job9" and p.rank == 2 and p.comm == "sleep", p.job)
  os.execute("kill " .. pid)
else
  assert(#s.gpus == 0 and s.gpu_note ~= "", s.gpu_note)
end

-- the next call: rates since this one
os.execute("sleep 0.3")
local s2 = assert(herd.telemetry.sample())
assert(s2.seq == 2 and s2.period_ms >= 250, s2.period_ms)
assert(s2.cpu_busy >= 0 and s2.cpu_busy <= 100, s2.cpu_busy)
for _, n in ipairs(s2.nets) do assert(n.rx_bps >= 0 and n.tx_bps >= 0, n.name) end

-- a started sampler: samples 1, 2, 3 in turn
local t = assert(herd.telemetry.sampler{ period = 50, ring = 4 })
assert(tostring(t):match("^herd%.Telemetry %(every 50 ms, 4 kept"), tostring(t))
assert(math.type(t:fd()) == "integer" and t:fd() >= 0)
for i = 1, 3 do
  local x = assert(t:next(10), "no sample within 10 s")
  assert(x.seq == i, x.seq)
  assert(x.host == s.host)
end
assert(t:latest().seq >= 3)
assert(t:close() == true)
raises("attempt to use a closed herd.Telemetry", t.close, t)
assert(tostring(t) == "herd.Telemetry (closed)")
raises("attempt to use a closed herd.Telemetry", t.next, t)
raises("attempt to use a closed herd.Telemetry", t.latest, t)

-- a ring of 2 overtaken: next() gives the oldest kept, past those lost
do
  local r <close> = assert(herd.telemetry.sampler{ period = 10, ring = 2 })
  local deadline = os.time() + 30
  while (r:latest() or { seq = 0 }).seq < 10 and os.time() < deadline do os.execute("sleep 0.05") end
  local x = assert(r:next(10))
  assert(x.seq >= 9, x.seq)
  assert(r:next(10).seq == x.seq + 1)
end

-- options
raises("unknown option 'perod'", herd.telemetry.sampler, { perod = 100 })
raises("option 'period' must be a whole number from 10", herd.telemetry.sampler, { period = 5 })
raises("option 'ring' must be a whole number from 1", herd.telemetry.sampler, { ring = 0 })
raises("table expected", herd.telemetry.sampler, "fast")
raises("seconds, 0 or more", function()
  local u <close> = herd.telemetry.sampler{}
  return u:next(-1)
end)
print("telemetry.lua: ok")
