-- bench/faults.lua - what a failure costs a training job: examples/train_ddp.c
-- on the namespace cluster (4 hosts, one rank each, herd launch --nodes 2-4
-- --ckpt-peers 1: a save to peers' memory every step, to storage every 10th)
-- under a scripted schedule of faults, repeated, and per fault:
--
--   detection  the fault -> the launcher's first word of it (its line on stderr)
--   recovery   the fault -> the first step done after the restart
--   lost       the steps done before the fault that were done again
--
-- and over the run the effective training time ratio: the time the steps
-- kept would take undisturbed (their number times the median step) over the
-- wall time from the first step to the last.  Two runs of the same schedule
-- should agree within 10% on the time they spent recovering; the spread of
-- each fault's recovery is in the table too (a sub-second one moves with the
-- launcher's settle window of up to 0.25 s before it names the failure).  Prints a table and a
-- chart of the steps against time, and writes DIR/faults.md, faults.json,
-- faults.svg and each run's output with its times (run-N.log).  bench/faults.sh starts the cluster and runs this.
--
-- usage: herd bench/faults.lua CLUSTER TRAIN HERD DIR
--   environment: REPEAT (2), PACE (200 ms a step), STEPS (80), STATE_MIB (64)

local cluster, train, herd_bin, out = arg[1], arg[2], arg[3], arg[4]
assert(cluster and train and herd_bin and out, "usage: herd bench/faults.lua CLUSTER TRAIN HERD DIR")
local repeats = tonumber(os.getenv("REPEAT") or "2")
local pace = tonumber(os.getenv("PACE") or "200")
local steps = tonumber(os.getenv("STEPS") or "80")
local state = tonumber(os.getenv("STATE_MIB") or "64")
local id = assert(io.open(cluster .. "/id")):read("l")

-- The schedule: after which step of rank 0, what, on which host.
local schedule = {
  { at = 15, fault = "rank killed", host = 2 },
  { at = 30, fault = "node lost", host = 3 },
  { at = 45, fault = "link cut", host = 4 },
  { at = 60, fault = "rank stopped", host = 1 },
}

local function sh(cmd)
  local ok = os.execute(cmd)
  return ok
end

-- The pids of host i whose command line begins with prefix.
local function pids(i, prefix)
  local p = io.popen(string.format(
    "for p in $(ip netns pids herd-%s-h%d 2>/dev/null); do " ..
    "c=$(tr '\\0' ' ' </proc/$p/cmdline 2>/dev/null); " ..
    "case \"$c\" in %q*) echo $p;; esac; done", id, i, prefix))
  local list = {}
  for line in p:lines() do list[#list + 1] = line end
  p:close()
  return table.concat(list, " ")
end

local inject = {
  ["rank killed"] = function(h) sh("kill -9 " .. pids(h, train .. " ") .. " 2>/dev/null") end,
  ["node lost"] = function(h)
    sh("kill -9 " .. pids(h, herd_bin .. " exec") .. " " .. pids(h, train .. " ") .. " " ..
       pids(h, herd_bin .. " ckpt hold") .. " 2>/dev/null")
  end,
  ["link cut"] = function(h) sh(string.format("bash tests/harness/netns.sh cut %q %d", cluster, h)) end,
  ["rank stopped"] = function(h) sh("kill -STOP " .. pids(h, train .. " ") .. " 2>/dev/null") end,
}

local function median(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  if #s == 0 then return 0 end
  return #s % 2 == 1 and s[(#s + 1) // 2] or (s[#s // 2] + s[#s // 2 + 1]) / 2
end

-- One run of the schedule: the metrics, and the steps against time.
local timelines = {}
local function run_once()
  local dir = os.tmpname()
  os.remove(dir)
  os.remove(assert(os.getenv("HERD_EXCLUDE_FILE"), "HERD_EXCLUDE_FILE is not set"))
  sh(string.format("bash tests/harness/netns.sh mend %q 4 >/dev/null 2>&1", cluster))
  local cmd = string.format(
    "%q/run 1 %q launch --hosts 'h[1-4]' --nodes 2-4 --restarts 8 --ckpt-peers 1 --grace 2 -- " ..
    "%q --dir %q --steps %d --every 1 --storage-every 10 --pace %d --state-mib %d 2>&1",
    cluster, herd_bin, train, dir, steps, pace, state)
  local p = assert(io.popen(cmd))
  sh(string.format("mkdir -p %q", out))
  local log = assert(io.open(string.format("%s/run-%d.log", out, #timelines + 1), "w"))
  local t0 = herd.clock()
  local next_fault, cur, last_step_t = 1, nil, nil
  local faults, points, intervals = {}, {}, {}
  local first_t, end_t, last = nil, nil, 0
  for line in p:lines() do
    local t = herd.clock() - t0
    log:write(string.format("%.3f %s\n", t, line))
    local step = tonumber(line:match("^%[h1:0%] step (%d+):"))
    if step then
      first_t = first_t or t
      if last_step_t and step == last + 1 then intervals[#intervals + 1] = t - last_step_t end
      last_step_t, last, end_t = t, step, t
      points[#points + 1] = { t, step }
      local f = schedule[next_fault]
      if f and step >= f.at and not cur then
        cur = { fault = f.fault, t = herd.clock() - t0, last = step }
        inject[f.fault](f.host)
        next_fault = next_fault + 1
      end
    elseif cur and not cur.detect and line:match("^herd%[%d+%] warn: job ") then
      cur.detect = t - cur.t
    end
    local restored = tonumber(line:match("^%[h1:0%] restart %d+: resumed from step (%d+)"))
    if cur and restored then cur.restored = restored end
    if cur and line:match("^%[h1:0%] restart %d+: first step done at") then
      cur.recover = t - cur.t
      cur.lost = cur.last - (cur.restored or 0)
      faults[#faults + 1] = cur
      cur = nil
      last_step_t = nil
    end
  end
  local ok, _, code = p:close()
  log:close()
  sh(string.format("rm -rf %q", dir))
  assert(ok, "the training job failed (exit " .. tostring(code) .. ")")
  assert(#faults == #schedule, "only " .. #faults .. " of the faults were recovered from")
  local step_s = median(intervals)
  local m = { ettr = last * step_s / (end_t - first_t + step_s), step = step_s, recovery = 0 }
  for i, f in ipairs(faults) do
    local k = f.fault:gsub(" ", "_")
    m[k .. "_detect"] = f.detect or -1
    m[k .. "_recover"] = f.recover
    m.recovery = m.recovery + f.recover
    m[k .. "_lost"] = f.lost
    assert(f.fault == schedule[i].fault)
  end
  timelines[#timelines + 1] = { name = "run " .. (#timelines + 1), points = points }
  return m
end

local e = herd.experiment{ name = "faults", params = { schedule = { "4 faults" } },
                            run = run_once, repeats = repeats }
local rec = e.records[1]
local rows = { "| fault | after step | detection s | recovery s | steps lost | spread of recovery |",
               "|---|---|---|---|---|---|" }
local function spread(st)
  return st.min > 0 and (st.max - st.min) / st.min or 0
end
for _, f in ipairs(schedule) do
  local k = f.fault:gsub(" ", "_")
  local r = rec.stats[k .. "_recover"]
  rows[#rows + 1] = string.format("| %s (h%d) | %d | %.2f | %.2f | %g | %.1f%% |", f.fault, f.host,
    f.at, rec.stats[k .. "_detect"].median, r.median, rec.stats[k .. "_lost"].median,
    100 * spread(r))
end
local total = rec.stats.recovery
local text = table.concat(rows, "\n") .. string.format(
  "\n\neffective training time ratio over the run: %.3f (median of %d runs; a step: %.3f s)\n" ..
  "recovery over the run: %.2f to %.2f s, a spread of %.1f%%: the runs %s within 10%%\n",
  rec.stats.ettr.median, repeats, rec.stats.step.median, total.min, total.max,
  100 * spread(total), spread(total) <= 0.10 and "agree" or "DO NOT agree")
print(text)
print(herd.plot.text(timelines, { title = "steps under faults", xlabel = "time", xunit = "s",
                                  ylabel = "step", height = 16 }))
sh(string.format("mkdir -p %q", out))
assert(herd.write_file(out .. "/faults.md", text))
assert(e:save(out .. "/faults.json"))
assert(herd.plot.svg(timelines, { title = "Training steps under a schedule of faults",
  xlabel = "time", xunit = "s", ylabel = "step of rank 0", legend = "run",
  caption = "faults after steps 15 (rank killed), 30 (node lost), 45 (link cut), 60 (rank stopped)",
  path = out .. "/faults.svg" }))
