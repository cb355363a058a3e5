-- herd.buffer: typed host memory, liolib's conventions (misuse raises).
local function raises(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error matching " .. pattern)
  assert(tostring(err):find(pattern, 1, true), ("error %q does not match %q"):format(tostring(err), pattern))
end

-- every dtype: zeroed, indexed from 1, integers as integers, floats as floats
for _, dt in ipairs({ "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
                      "bfloat16", "float32", "float64" }) do
  local b = herd.buffer(dt, 5)
  assert(#b == 5 and b.dtype == dt and b[1] == 0 and b[5] == 0, dt)
  b:iota(1)
  assert(b[1] == 1 and b[5] == 5 and b:sum() == 15 and b:min() == 1 and b:max() == 5, dt)
  assert(math.type(b[2]) == (dt:find("float") and "float" or "integer"), dt)
  assert(b.bytes == 5 * (({ int8 = 1, uint8 = 1, float16 = 2, bfloat16 = 2, int32 = 4,
                             uint32 = 4, float32 = 4 })[dt] or 8), dt)
  raises("index 6 out of range (buffer has 5)", function() return b[6] end)
  raises("index 0 out of range", function() b[0] = 1 end)
end

-- rounding and range: what does not fit raises, floats round to the dtype
local i8 = herd.buffer("int8", 2)
i8[1] = -128; i8[2] = 127.0
assert(i8[1] == -128 and i8[2] == 127)
raises("element 1: 128 does not fit int8", function() i8[1] = 128 end)
raises("element 2: 1.5 does not fit int8", function() i8[2] = 1.5 end)
raises("a number expected, got string", function() i8[1] = "1" end)
local h = herd.buffer("float16", 1); h[1] = 0.1
assert(h[1] == 0.0999755859375)
local u64 = herd.buffer.from("uint64", { -1 })   -- 2^64-1, as Lua carries it
assert(u64[1] == -1)

-- fill, views share memory and outlive their buffer, copy does not share
local b = herd.buffer("float32", 8):fill(2.5)
assert(b:sum() == 20)
local v = b:view(3, 4)
assert(#v == 4 and v.dtype == "float32")
v:fill(1)
assert(b[2] == 2.5 and b[3] == 1 and b[6] == 1 and b[7] == 2.5)
local tail = b:view(5)
assert(#tail == 4 and tail[1] == 1)
assert(#b:view(9, 0) == 0)
raises("the view goes past the end", b.view, b, 6, 4)
raises("first element out of range", b.view, b, 0, 1)
local c = b:copy()
c[1] = 9
assert(b[1] == 2.5)
assert(b:close() == true)
raises("attempt to use a closed herd.Buffer", b.sum, b)
raises("attempt to use a closed herd.Buffer", b.close, b)
assert(tostring(b) == "herd.Buffer (closed)")
assert(v[1] == 1 and v:sum() == 4)   -- the view keeps the memory

-- totable, from, cast (floats truncate toward zero, as numpy's astype)
local f = herd.buffer.from("float64", { 1.75, -2.5, 3 })
local t = f:totable()
assert(#t == 3 and t[1] == 1.75 and t[3] == 3.0)
local i = f:cast("int32")
assert(i.dtype == "int32" and i[1] == 1 and i[2] == -2 and i[3] == 3)
raises("does not fit uint8", function() return herd.buffer.from("int32", { 300 }):cast("uint8") end)
assert(herd.buffer.from("int8", {}):sum() == 0 and herd.buffer("int8", 0):max() == nil)
raises("unknown dtype 'float128'", herd.buffer, "float128", 1)
raises("a count of 0 or more expected", herd.buffer, "int8", -1)
raises("herd.Buffer has no field 'x' to set", function() herd.buffer("int8", 1).x = 1 end)

-- the 8-bit floats: nearest even, saturation at the largest finite value
do
  local e4 = herd.buffer.from("float8_e4m3fn", { 1.3, 500, -1e9, 17, 19, 2 ^ -10 })
  assert(e4.dtype == "float8_e4m3")
  local t = e4:totable()
  assert(t[1] == 1.25 and t[2] == 448 and t[3] == -448 and t[4] == 16 and t[5] == 20 and t[6] == 0)
  local e5 = herd.buffer.from("e5m2", { 1, 9, 1e6, -math.huge })
  t = e5:totable()
  assert(t[1] == 1 and t[2] == 8 and t[3] == 57344 and t[4] == -57344)
  assert(e5:cast("float32")[3] == 57344 and herd.buffer.from("float32", { 0.3 }):cast("e4m3")[1] == 0.3125)
end

-- printing: the dtype, the length and the first 8 values, as a tensor's
-- repr; floats in the fewest digits that read back as the dtype's value
local function shows(want, b)
  assert(tostring(b) == want, ("tostring gives %q, not %q"):format(tostring(b), want))
end
shows("herd.Buffer(float32, 1048576) {1, 2, 3, 4, 5, 6, 7, 8, ...}", herd.buffer("float32", 1048576):iota(1))
shows("herd.Buffer(bfloat16, 3) {0, 0, 0}", herd.buffer("bf16", 3))
shows("herd.Buffer(int8, 0) {}", herd.buffer("int8", 0))
shows("herd.Buffer(int32, 8) {-3, -2, -1, 0, 1, 2, 3, 4}", herd.buffer("int32", 8):iota(-3))
shows("herd.Buffer(int64, 9) {1, 2, 3, 4, 5, 6, 7, 8, ...}", herd.buffer("int64", 9):iota(1))
shows("herd.Buffer(uint64, 2) {18446744073709551615, 9007199254740993}",
      herd.buffer.from("uint64", { -1, (1 << 53) + 1 }))
shows("herd.Buffer(float32, 6) {0.1, 0.33333334, 1000, 1e-05, 16777216, -2.5}",
      herd.buffer.from("float32", { 0.1, 1 / 3, 1000, 1e-5, 2 ^ 24, -2.5 }))
shows("herd.Buffer(float64, 6) {0.1, 0.3333333333333333, 1e-300, 123456789.123, 9007199254740992, 1e+16}",
      herd.buffer.from("float64", { 0.1, 1 / 3, 1e-300, 123456789.123, 2 ^ 53, 1e16 }))
shows("herd.Buffer(float32, 4) {nan, inf, -inf, -0}", herd.buffer.from("float32", { 0 / 0, 1 / 0, -1 / 0, -0.0 }))
shows("herd.Buffer(float16, 3) {0.1, 65500, 2048}", herd.buffer.from("float16", { 0.1, 65504, 2049 }))
-- the largest 8-bit float: 450 reads back as 448, where 500 would only saturate to it
shows("herd.Buffer(float8_e4m3, 3) {450, 1.2, -16}", herd.buffer.from("e4m3", { 448, 1.3, -17 }))
shows("herd.Buffer(int32, 2) {9, 10}", herd.buffer("int32", 10):iota(1):view(9))
-- every value shown reads back as the same element, in every floating dtype
math.randomseed(42)
for _, dt in ipairs({ "float16", "bfloat16", "float32", "float64", "float8_e4m3", "float8_e5m2" }) do
  local one, back = herd.buffer(dt, 1), herd.buffer(dt, 1)
  for _ = 1, 300 do
    one[1] = (math.random() - 0.5) * 2.0 ^ math.random(-12, 12)
    local text = tostring(one):match("{(.*)}")
    back[1] = assert(tonumber(text), text)
    assert(back[1] == one[1], ("%s: %s shown as %s, reads back as %s"):format(dt, one[1], text, back[1]))
    -- and one digit fewer would not
    local digits = #text:gsub("e.*", ""):gsub("[^%d]", ""):gsub("^0+", ""):gsub("0+$", "")
    if digits > 1 then
      back[1] = tonumber(string.format("%." .. (digits - 1) .. "g", one[1]))
      assert(back[1] ~= one[1], ("%s: %s shown as %s, but %d digits would do"):format(dt, one[1], text, digits - 1))
    end
  end
end
-- completion
local m = getmetatable(herd.buffer("int8", 1)).__members
assert(m.iota == "method" and m.close == "method" and m.dtype == "field")
print("buffer.lua: ok")
