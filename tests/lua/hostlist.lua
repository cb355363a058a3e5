-- herd.hostlist: Slurm's hostlist expressions both ways, through the public
-- herd_hostlist_expand and herd_hostlist_compress.
local hl = herd.hostlist

local function same(got, want, what)
  assert(#got == #want, ("%s: %d names, want %d"):format(what, #got, #want))
  for i = 1, #want do
    assert(got[i] == want[i], ("%s: name %d is %s, want %s"):format(what, i, tostring(got[i]), want[i]))
  end
end

same(hl.expand("node[01-04,07]"), { "node01", "node02", "node03", "node04", "node07" }, "ranges")
same(hl.expand("a[1-2]b[3-4]"), { "a1b3", "a1b4", "a2b3", "a2b4" }, "two groups")
same(hl.expand("login,gpu[1-2]"), { "login", "gpu1", "gpu2" }, "a list")
same(hl.expand("n[08-10]"), { "n08", "n09", "n10" }, "the width of the low end")

assert(hl.compress({ "n1", "n2", "n4" }) == "n[1-2,4]", hl.compress({ "n1", "n2", "n4" }))
assert(hl.compress({}) == "", "nothing compresses to nothing")
-- round trip, order kept
local names = { "gpu003", "gpu001", "gpu002", "login", "gpu010" }
same(hl.expand(hl.compress(names)), names, "round trip")

-- expected failures: nil, the message, the status name
local r, msg, st = hl.expand("node[01-")
assert(r == nil and st == "HERD_EFORMAT" and msg:find("column 9", 1, true), tostring(msg))
r, msg, st = hl.expand("")
assert(r == nil and st == "HERD_EFORMAT" and msg:find("no host names", 1, true), tostring(msg))
r, msg, st = hl.expand("n[0-999999999]")
assert(r == nil and st == "HERD_EFORMAT", tostring(msg))
r, msg, st = hl.compress({ "good", "-bad" })
assert(r == nil and st == "HERD_EINVAL" and msg:find("-bad", 1, true), tostring(msg))

-- misuse raises
assert(not pcall(hl.expand, {}), "a table is not an expression")
local ok, err = pcall(hl.compress, { "a", 7 })
assert(not ok and err:find("item 2 is a number", 1, true), tostring(err))
print("hostlist: ok")
