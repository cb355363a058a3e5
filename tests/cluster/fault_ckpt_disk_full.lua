-- tests/cluster/fault_ckpt_disk_full.lua DIR: the rank program of
-- fault_ckpt_disk_full.sh.  Saves step 1 of a 256 KiB shard per rank in
-- DIR, then step 2 with other values, which the test's small file system
-- cannot hold; prints how step 2 failed ("SAVE 2 FAILED after S s: STATUS:
-- MESSAGE") and whether a restore then brings back step 1 exactly.
local c = assert(herd.comm())
local n = 65536
local ck = assert(herd.checkpoint(arg[1], c))
local shard = herd.buffer("float32", n)
assert(ck:add("w", shard, { global = { n * c:size() }, offset = { n * c:rank() } }))
shard:fill(c:rank() + 1)
assert(ck:save(1))
shard:fill(1000 + c:rank())
local t0 = herd.clock()
local ok, msg, st = ck:save(2)
if ok then
  print("SAVE 2 SUCCEEDED")
  os.exit(5)
end
print(string.format("SAVE 2 FAILED after %.3f s: %s: %s", herd.clock() - t0, st, msg))
shard:fill(-1)
local step = ck:restore()
if step == 1 and shard:min() == c:rank() + 1 and shard:max() == c:rank() + 1 then
  print("restored step 1 exact")
else
  print(string.format("restored %s: %g..%g", tostring(step), shard:min(), shard:max()))
end
assert(ck:close())
