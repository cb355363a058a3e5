-- bench/soak.lua SECONDS INTERVAL DIR: the rank program of bench/soak.sh.
-- For SECONDS, in rounds: an allreduce of 4 MiB and one of 4 KiB (each
-- result checked), and every INTERVAL seconds a checkpoint of this rank's
-- 4 MiB shard in DIR, restored and compared once saved.  Rank 0 prints a
-- line per INTERVAL: the time, the collectives done and their bandwidth
-- (bytes over the time inside the calls) in that interval, the checkpoints
-- saved, and the errors so far.  Rank 0's clock decides, for every rank,
-- when a checkpoint is due and when the run ends (a broadcast each round):
-- ranks that read their own clocks would part ways.  Any error
-- is printed with its time and counted; the run goes on while the
-- communicator works, and ends at the first one that breaks it.
local seconds, interval, dir = tonumber(arg[1]), tonumber(arg[2]), arg[3]
local c = assert(herd.comm())
local rank, size = c:rank(), c:size()
local big = herd.buffer("float32", 1 << 20)
local small = herd.buffer("float32", 1024)
local shard = herd.buffer("float32", 1 << 20)
local ctl = herd.buffer("int32", 2) -- rank 0's decision: {checkpoint due, stop}
local ck = assert(herd.checkpoint(dir, c, { keep_last = 2 }))
assert(ck:add("shard", shard, { global = { (1 << 20) * size }, offset = { (1 << 20) * rank } }))
local t0 = herd.clock()
local next_report, step = t0 + interval, 0
local calls, bytes, busy, saves, errors = 0, 0, 0, 0, 0
local total_calls, total_saves = 0, 0

local function failed(what, msg, st)
  errors = errors + 1
  print(string.format("ERROR at %.1f s: %s: %s: %s", herd.clock() - t0, what, st, msg))
  io.stdout:flush()
end

while true do
  if rank == 0 then
    local now = herd.clock()
    ctl[1] = now >= next_report and 1 or 0
    ctl[2] = now - t0 >= seconds and 1 or 0
  end
  local ok, msg, st = c:broadcast(ctl, 0)
  if not ok then failed("broadcast", msg, st) break end
  if ctl[2] == 1 then break end
  local round = calls // 2
  big:fill(rank + round % 7)
  small:fill(rank + 1)
  local t1 = herd.clock()
  ok, msg, st = c:allreduce(big)
  busy = busy + herd.clock() - t1
  if not ok then failed("allreduce 4 MiB", msg, st) break end
  local want = size * (size - 1) // 2 + size * (round % 7)
  if big:min() ~= want or big:max() ~= want then failed("allreduce 4 MiB", "wrong result", "-") end
  t1 = herd.clock()
  ok, msg, st = c:allreduce(small)
  busy = busy + herd.clock() - t1
  if not ok then failed("allreduce 4 KiB", msg, st) break end
  if small:min() ~= size * (size + 1) // 2 then failed("allreduce 4 KiB", "wrong result", "-") end
  calls, bytes = calls + 2, bytes + (4 << 20) + 4096
  local now = herd.clock()
  if ctl[1] == 1 then
    step = step + 1
    shard:fill(step * 10 + rank)
    ok, msg, st = ck:save(step)
    if not ok then
      failed("checkpoint save", msg, st)
    else
      shard:fill(-1)
      local got = ck:restore(step)
      if got ~= step or shard:min() ~= step * 10 + rank or shard:max() ~= step * 10 + rank then
        failed("checkpoint restore", "step " .. tostring(got), "-")
      else
        saves = saves + 1
      end
    end
    if rank == 0 then
      -- algorithm bandwidth inside the calls of the interval (nccl-tests' algbw)
      print(string.format("t=%6.0f s  collectives %7d  algbw %7.3f GB/s  checkpoints %4d  errors %d",
                          now - t0, calls, bytes / busy / 1e9, saves, errors))
      io.stdout:flush()
    end
    total_calls, total_saves = total_calls + calls, total_saves + saves
    calls, bytes, busy, saves = 0, 0, 0, 0
    next_report = next_report + interval
  end
end
ck:close()
if rank == 0 then
  print(string.format("soak: %.0f s, %d collectives, %d checkpoints, %d errors",
                      herd.clock() - t0, total_calls + calls, total_saves, errors))
end
os.exit(errors == 0 and 0 or 1)
