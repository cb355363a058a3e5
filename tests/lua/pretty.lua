-- herd.pretty writes tables as readable Lua constructors: array part first,
-- keys sorted, strings quoted, nesting indented, cycles and depth marked,
-- long tables elided.
local pretty = require "herd.pretty"
assert(herd.pretty == pretty, "herd.pretty is the module")

local function check(got, want)
  if got ~= want then
    error(("pretty output differs\n--- got:\n%s\n--- want:\n%s"):format(got, want), 2)
  end
end

-- scalars
check(pretty.format(1), "1")
check(pretty.format(1.0), "1.0")
check(pretty.format(0.1), "0.1")
check(pretty.format(-2.5e-300), "-2.5e-300")
check(pretty.format(math.huge), "math.huge")
check(pretty.format(nil), "nil")
check(pretty.format(true), "true")
check(pretty.format('say "hi"\n\tback\\slash'), [["say \"hi\"\n\tback\\slash"]])
check(pretty.format("\0\1\127"), [["\000\001\127"]])
check(pretty.format("héllo"), '"héllo"')  -- UTF-8 stays readable

-- quoted strings read back to the same bytes
for _, s in ipairs({ "a\nb", "\0\255x", '"\\', "\r\v\f\a\b", "1\0002" }) do
  assert(load("return " .. pretty.quote(s))() == s, "quote round trip: " .. pretty.quote(s))
end

-- tables: empty, arrays, sorted keys, identifiers bare, others bracketed
check(pretty.format({}), "{}")
check(pretty.format({ 1, 2, 3 }), "{ 1, 2, 3 }")
check(pretty.format({ b = 2, a = 1 }), "{ a = 1, b = 2 }")
check(pretty.format({ 10, 20, x = "s" }), '{ 10, 20, x = "s" }')
check(pretty.format({ [true] = 1, [1.5] = 2, b = 3, a = 4, [-1] = 5 }),
  "{ [-1] = 5, [1.5] = 2, a = 4, b = 3, [true] = 1 }")
check(pretty.format({ ["end"] = 1, _ok = 2, ["two words"] = 3 }),
  '{ _ok = 2, ["end"] = 1, ["two words"] = 3 }')
-- a hole ends the array part; later integer keys are keyed
check(pretty.format({ 1, 2, nil, 4 }), "{ 1, 2, [4] = 4 }")
check(pretty.format({ a = { b = { c = {} } } }), "{ a = { b = { c = {} } } }")

-- too wide for one line: one entry per line, indented, trailing commas
check(pretty.format({
  longname_aaaaaaaaaaaa = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
  other_key_bbbbbbbbbb = "yyyyyyyyyyyyyyyyyyyyyyy",
  list = { 1, 2, 3 },
}), [[
{
  list = { 1, 2, 3 },
  longname_aaaaaaaaaaaa = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
  other_key_bbbbbbbbbb = "yyyyyyyyyyyyyyyyyyyyyyy",
}]])
check(pretty.format({ outer = { inner_key_one = ("a"):rep(40), inner_key_two = ("b"):rep(40) } }), [[
{
  outer = {
    inner_key_one = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    inner_key_two = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
  },
}]])

-- long arrays: as many items to a line as fit, elided past max_items
local big = {}
for i = 1, 60 do big[i] = i end
check(pretty.format(big), [[
{
  1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
  23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41,
  42, 43, 44, 45, 46, 47, 48, 49, 50, ... (10 more),
}]])
check(pretty.format(big, { max_items = 3 }), "{ 1, 2, 3, ... (57 more) }")
check(pretty.format({ a = 1, b = 2, c = 3 }, { max_items = 2 }), "{ a = 1, b = 2, ... (1 more) }")

-- cycles are marked, shared (acyclic) tables are written in full
local cyc = { name = "c" }
cyc.self = cyc
check(pretty.format(cyc), '{ name = "c", self = <cycle> }')
local a = { 1 }
local b = { a }
a[2] = b
check(pretty.format(a), "{ 1, { <cycle> } }")
local shared = { 1 }
check(pretty.format({ x = shared, y = shared }), "{ x = { 1 }, y = { 1 } }")

-- depth limit
check(pretty.format({ a = { b = { c = { d = 1 } } } }, { max_depth = 2 }), "{ a = { b = {...} } }")

-- options: indent and width
check(pretty.format({ k = { 1, 2 } }, { width = 14, indent = "    " }), [[
{
    k = { 1, 2 },
}]])

-- objects with __tostring and userdata are written through tostring
check(pretty.format(setmetatable({}, { __tostring = function() return "OBJ" end })), "OBJ")
assert(pretty.format({ io.stdout }):match("^{ file %(0x%x+%) }$"), pretty.format({ io.stdout }))
assert(pretty.format(print):match("^function: "), pretty.format(print))

-- misuse raises with a clear message
local ok, err = pcall(pretty.format, {}, { bogus = 1 })
assert(not ok and err:find("unknown option 'bogus'"), err)
ok, err = pcall(pretty.format, {}, 5)
assert(not ok and err:find("table expected"), err)

-- print: tab-separated like print, tables formatted, strings not quoted
local out = {}
local real = io.stdout
local fake = { write = function(_, ...) for i = 1, select("#", ...) do out[#out + 1] = select(i, ...) end end }
io.stdout = fake
local okp, errp = pcall(pretty.print, "s", 1, { 2 }, nil)
io.stdout = real
assert(okp, errp)
check(table.concat(out), "s\t1\t{ 2 }\tnil\n")

print("pretty: ok")
