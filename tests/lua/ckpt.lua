-- herd.checkpoint and herd.Checkpoint, liolib's conventions:
--   * tensors are Lua arrays, copied into the dtype at save and back at a
--     successful restore (a failed restore leaves them untouched);
--   * misuse (wrong types, unknown options or dtypes, arrays that do not fit
--     their shape or dtype, a closed checkpoint) raises;
--   * failures of the library return nil, a message and a status name;
--   * one close path: ck:close(), <close> variables and the collector.
-- Everything lives in a temporary directory, in one process.

local function raises(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error matching " .. pattern)
  assert(tostring(err):find(pattern, 1, true), ("error %q does not match %q"):format(tostring(err), pattern))
end

local root = os.tmpname()
os.remove(root)
local function dir(name) return root .. "/" .. name end

-- every dtype round-trips, with the dtype's rounding and integer types as integers
do
  local ck <close> = assert(herd.checkpoint(dir("types"), nil, { chunk_bytes = 4096, keep_last = 2 }))
  local f64 = { 0.1, -1e300, 2 ^ 53 + 2 }
  local f32 = { 0.1, 1.5, -3 }
  local f16 = { 0.1, 65504, 70000 }      -- 70000 is beyond float16: infinity
  local bf16 = { 1 / 3, -2.5, 1e38 }
  local i8 = { -128, 127, 3.0 }          -- an integral float is an integer
  local u8 = { 0, 255, 7 }
  local i32 = { -2147483648, 2147483647, 0 }
  local u32 = { 0, 4294967295, 1 }
  local i64 = { math.mininteger, math.maxinteger, -1 }
  local u64 = { 0, -1, math.mininteger } -- 2^64-1 and 2^63, as Lua writes them
  local arrays = { float64 = f64, float32 = f32, float16 = f16, bfloat16 = bf16, int8 = i8,
                   uint8 = u8, int32 = i32, uint32 = u32, int64 = i64, uint64 = u64 }
  for _, t in ipairs({ "float64", "float32", "float16", "bfloat16", "int8", "uint8", "int32",
                       "uint32", "int64", "uint64" }) do
    assert(ck:add(t, arrays[t], { dtype = t }))
  end
  assert(ck:save(1) == true)
  for _, a in pairs(arrays) do for i = 1, 3 do a[i] = 0 end end
  assert(ck:restore() == 1)
  assert(f64[1] == 0.1 and f64[2] == -1e300 and f64[3] == 2 ^ 53 + 2)
  assert(f32[1] == string.unpack("f", string.pack("f", 0.1)) and f32[2] == 1.5 and f32[3] == -3.0)
  assert(math.type(f32[2]) == "float")
  assert(f16[1] == 0.0999755859375 and f16[2] == 65504 and f16[3] == math.huge, tostring(f16[1]))
  assert(bf16[1] == 0.333984375 and bf16[2] == -2.5, tostring(bf16[1]))
  assert(i8[1] == -128 and i8[2] == 127 and i8[3] == 3 and math.type(i8[3]) == "integer")
  assert(u8[2] == 255 and i32[1] == -2147483648 and u32[2] == 4294967295)
  assert(i64[1] == math.mininteger and i64[2] == math.maxinteger)
  assert(u64[2] == -1 and u64[3] == math.mininteger and math.type(u64[2]) == "integer")
end

-- shapes, sharding in a world of one, and restoring a chosen step
do
  local ck = assert(herd.checkpoint(dir("shapes")))
  assert(ck:rank() == 0 and ck:size() == 1 and ck:dir() == dir("shapes"))
  local m = { 1, 2, 3, 4, 5, 6 }
  assert(ck:add("m", m, { dtype = "float32", shape = { 2, 3 } }))
  -- a shard covering the whole global tensor is a legal registration
  local s = { 10, 20 }
  assert(ck:add("s", s, { dtype = "int32", global = { 2 }, offset = { 0 }, shape = { 2 } }))
  assert(ck:save(10))
  m[6] = 60; s[2] = 200
  assert(ck:save(11))
  m[6] = 0; s[2] = 0
  assert(ck:restore(10) == 10 and m[6] == 6 and s[2] == 20)
  assert(ck:restore() == 11 and m[6] == 60 and s[2] == 200)
  assert(tostring(ck):match("^herd%.Checkpoint %(.*shapes, 2 tensors%) %(0x%x+%)$"), tostring(ck))

  -- expected failures: nil, message, status
  local ok, msg, status = ck:save(11)
  assert(ok == nil and status == "HERD_EEXIST", tostring(msg))
  ok, msg, status = ck:restore(12)
  assert(ok == nil and status ~= nil and msg:find("12", 1, true), tostring(msg))
  ok, msg, status = ck:add("m", { 1 })
  assert(ok == nil and status == "HERD_EEXIST" and msg:find('"m"', 1, true), tostring(msg))
  -- messages speak of the method called, not of the C function below it
  assert(not msg:find("herd_ckpt_", 1, true), msg)

  -- a failed restore leaves the arrays as they were
  m[1] = 42
  assert(ck:restore(99) == nil and m[1] == 42)

  -- steps that exist and do not verify are not a fresh start: the third
  -- value tells them apart
  for _, step in ipairs({ 10, 11 }) do
    local path = ("%s/step-%012d/rank-00000.data"):format(dir("shapes"), step)
    local f = assert(io.open(path, "r+b"))
    local b = f:read(1)
    f:seek("set", 0)
    f:write(string.char(b:byte() ~ 1))
    f:close()
  end
  ok, msg, status = ck:restore()
  assert(ok == nil and status == "HERD_ECORRUPT", tostring(msg))
  assert(msg:find("none of the 2 committed checkpoint steps", 1, true) and
         msg:find("(steps 11, 10)", 1, true), msg)
  do
    local fresh <close> = assert(herd.checkpoint(dir("fresh")))
    assert(fresh:add("x", { 1 }))
    ok, msg, status = fresh:restore()
    assert(ok == nil and status == "HERD_ENOTFOUND" and msg:find("there is none", 1, true), tostring(msg))
    -- one step, damaged: said of the one
    assert(fresh:save(1))
    local f = assert(io.open(dir("fresh") .. "/step-000000000001/rank-00000.data", "r+b"))
    local b = f:read(1)
    f:seek("set", 0)
    f:write(string.char(b:byte() ~ 1))
    f:close()
    ok, msg, status = fresh:restore()
    assert(ok == nil and status == "HERD_ECORRUPT" and
           msg:find("the only committed checkpoint step in " .. dir("fresh") ..
                    " does not verify (step 1): restoring checkpoint step 1: ", 1, true), tostring(msg))
  end

  -- misuse raises, before the library is called
  raises("unknown option 'dtpye'", ck.add, ck, "x", { 1 }, { dtpye = "int8" })
  raises("unknown type 'float128'", ck.add, ck, "x", { 1 }, { dtype = "float128" })
  raises("the array has 3 values; its shape holds 4", ck.add, ck, "x", { 1, 2, 3 }, { shape = { 2, 2 } })
  raises("option 'shape' has 9 dimensions", ck.add, ck, "x", { 1 }, { shape = { 1, 1, 1, 1, 1, 1, 1, 1, 1 } })
  raises("'global' and 'offset' come together", ck.add, ck, "x", { 1 }, { global = { 2 } })
  raises("a step is 0..999999999999", ck.save, ck, -1)
  -- an array that no longer fits at save time
  local bytes = { 1, 2 }
  assert(ck:add("bytes", bytes, { dtype = "uint8" }))
  bytes[2] = 256
  raises("tensor 'bytes'[2]: 256 does not fit uint8", ck.save, ck, 12)
  bytes[2] = 2.5
  raises("tensor 'bytes'[2]: 2.5 does not fit uint8", ck.save, ck, 12)
  bytes[2] = "2"
  raises("tensor 'bytes'[2]: a number expected, got string", ck.save, ck, 12)
  bytes[2] = nil
  raises("tensor 'bytes': the array has 1 values; its shape holds 2", ck.save, ck, 12)
  bytes[2] = 2
  assert(ck:save(12))

  assert(ck:close() == true)
  assert(tostring(ck) == "herd.Checkpoint (closed)")
  raises("attempt to use a closed herd.Checkpoint", ck.save, ck, 13)
  raises("attempt to use a closed herd.Checkpoint", ck.close, ck)
end

-- an asynchronous save keeps what was staged, whatever happens to the array after
do
  local ck <close> = assert(herd.checkpoint(dir("async"), nil, { staging_bytes = 4096, chunk_bytes = "4K" }))
  local big = {}
  for i = 1, 10000 do big[i] = i end
  assert(ck:add("big", big, { dtype = "int64" }))
  assert(ck:save_async(1))
  for i = 1, 10000 do big[i] = -i end
  assert(ck:wait() == true)
  assert(ck:wait() == true)   -- nothing in flight: fine
  assert(ck:restore(1) == 1)
  for i = 1, 10000 do assert(big[i] == i) end
end

-- options are checked
raises("unknown option 'keep'", herd.checkpoint, dir("o"), nil, { keep = 1 })
raises("option 'checksum' must be \"xxh3\" or \"none\"", herd.checkpoint, dir("o"), nil, { checksum = "md5" })
raises("option 'keep_last' must be an integer of 0 or more", herd.checkpoint, dir("o"), nil, { keep_last = -1 })
raises("herd.Comm expected, got number", herd.checkpoint, dir("o"), 3)
do
  local ck, msg, status = herd.checkpoint("/proc/version/ckpt")
  assert(ck == nil and status ~= nil and msg:find("/proc/version", 1, true), tostring(msg))
end

-- without checksums, and retention: keep_last = 2 leaves the newest two
do
  local ck <close> = assert(herd.checkpoint(dir("ret"), nil, { checksum = "none", keep_last = 2 }))
  local v = { 0 }
  assert(ck:add("v", v))
  for step = 1, 4 do v[1] = step; assert(ck:save(step)) end
  v[1] = 0
  assert(ck:restore() == 4 and v[1] == 4)
  assert(ck:restore(3) == 3 and v[1] == 3)
  assert(ck:restore(2) == nil)
end

-- the collector closes a checkpoint that was merely dropped
do
  local ck = assert(herd.checkpoint(dir("gc")))
  assert(ck:add("x", { 1 }))
  assert(ck:save_async(1))
  ck = nil
  collectgarbage()
  collectgarbage()
  local again <close> = assert(herd.checkpoint(dir("gc")))
  local x = { 0 }
  assert(again:add("x", x))
  assert(again:restore() == 1 and x[1] == 1)
end

-- a herd.Buffer is saved from and restored into its own memory, even once
-- the script closed it (the checkpoint holds the memory)
do
  local ck <close> = assert(herd.checkpoint(dir("buffers")))
  local w = herd.buffer("bfloat16", 6):iota(1)
  local view = herd.buffer("int32", 10):iota(100):view(4, 3)
  assert(ck:add("w", w, { shape = { 2, 3 } }))
  assert(ck:add("v", view))
  raises("the buffer holds int32", ck.add, ck, "x", view, { dtype = "float32" })
  raises("tensor 'y': the buffer has 3 values; its shape holds 4", ck.add, ck, "y", view,
         { shape = { 4 } })
  assert(ck:save(1))
  w:fill(0); view:fill(0)
  assert(ck:restore() == 1)
  assert(w[1] == 1 and w[6] == 6 and view[1] == 103 and view[3] == 105)
  assert(ck:save(2))
  view:close()
  assert(ck:restore(2) == 2)
end

-- which tier a restore read and why, what saves cost, and the peer options
-- (no holders here: the saves go to storage, and the restore says why)
do
  local ck <close> = assert(herd.checkpoint(dir("tiers"), nil, { peer_copies = 1, storage_every = 5 }))
  local before = ck:last_restore()
  assert(before.tier == "none" and before.step == -1, before.tier)
  assert(ck:add("x", { 1.0, 2.0 }))
  assert(ck:save(1)); assert(ck:save_async(2)); assert(ck:wait())
  local s = ck:stats()
  assert(s.storage.saves == 2 and s.peers.saves == 0, s.storage.saves)
  assert(s.storage.stall > 0 and s.storage.busy > 0 and s.storage.stall_max > 0)
  assert(ck:restore() == 2)
  local r = ck:last_restore()
  assert(r.tier == "storage" and r.step == 2 and r.seconds >= 0 and r.bytes == 0, r.tier)
  assert(r.why:find("no copies in peers' memory", 1, true), r.why)
  raises("option 'peer_copies' must be an integer from -1 to 64", herd.checkpoint, dir("bad"),
         nil, { peer_copies = 65 })
end

os.execute("rm -rf '" .. root .. "'")
print("ckpt.lua: ok")
