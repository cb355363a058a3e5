-- herd.store and herd.msgpack: a server and clients in this process.
local function raises(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error matching " .. pattern)
  assert(tostring(err):find(pattern, 1, true), ("error %q does not match %q"):format(tostring(err), pattern))
end

-- msgpack: every kind of value round-trips; what cannot be encoded raises
local m = herd.msgpack
local v = m.unpack(m.pack({ 1, 2.5, "three", true, { k = { 4 } }, [10] = "sparse", n = -7 }))
assert(v[1] == 1 and math.type(v[1]) == "integer" and v[2] == 2.5 and v[3] == "three")
assert(v[4] == true and v[5].k[1] == 4 and v[10] == "sparse" and v.n == -7)
assert(m.unpack(m.pack("a\0b")) == "a\0b" and m.unpack(m.pack(math.mininteger)) == math.mininteger)
raises("a function value cannot be encoded", m.pack, { print })
local cycle = {}
cycle.self = cycle
raises("nested more than 64 deep", m.pack, cycle)
raises("not one msgpack value", m.unpack, "\1\2")

local srv <close> = assert(herd.store.serve{})
assert(srv:address():match("^127%.0%.0%.1:%d+$") and srv:port() > 0 and #srv.secret == 64)
local s <close> = assert(herd.store.connect(srv:address(), srv.secret, { timeout = 5 }))

-- bytes as they are, other values as msgpack
assert(s:set("name", "run7") == true and s:get("name") == "run7")
assert(s:set("cfg", { lr = 0.1, layers = { 4, 8 } }))
local cfg = s:get_value("cfg")
assert(cfg.lr == 0.1 and cfg.layers[2] == 8)
assert(s:set("n", 42) and s:get_value("n") == 42)
do -- a value that is not msgpack is a runtime failure, not misuse
  local v, msg, st = s:get_value("name")
  assert(v == nil and st == "HERD_EFORMAT" and msg:find("key 'name' does not hold a msgpack value", 1, true), msg)
end

-- counters, delete, wait, and the failures that return nil, msg, status
assert(s:add("c", 2) == 2 and s:add("c") == 3 and s:get("c") == "3")
assert(s:delete("c") == true and s:delete("c") == false)
local ok, msg, st = s:get("missing", 0.1)
assert(ok == nil and st == "HERD_ETIMEDOUT" and msg:find('key "missing" not set', 1, true), msg)
ok, msg, st = s:wait({ "name", "missing" }, 0.1)
assert(ok == nil and st == "HERD_ETIMEDOUT" and msg:find("missing", 1, true), msg)
assert(s:wait({ "name", "cfg" }, 1) == true and s:wait("name") == true)
raises("a key is a non-empty string", s.set, s, "", "x")
raises("1 to 4096 keys expected", s.wait, s, {})

-- prefixes share the connection
local p = s:prefix("job/")
assert(p:set("x", "1") and s:get("job/x") == "1")

-- keys: in byte order, by prefix, as the handle names them
assert(p:set("b", "2") and p:set("a", "3"))
local ks = assert(s:keys("job/"))
assert(#ks == 3 and ks[1] == "job/a" and ks[2] == "job/b" and ks[3] == "job/x", table.concat(ks, ","))
ks = assert(p:keys())
assert(#ks == 3 and ks[1] == "a" and ks[3] == "x")
assert(#assert(s:keys("nothing/")) == 0)

-- a wrong secret is refused; the environment store needs HERD_STORE
ok, msg, st = herd.store.connect(srv:address(), "wrong", { connect_timeout = 2 })
assert(ok == nil and st == "HERD_EAUTH", msg)
if os.getenv("HERD_STORE") == nil then
  ok, msg, st = herd.store.env()
  assert(ok == nil and st == "HERD_EINVAL" and msg:find("HERD_STORE is not set", 1, true))
end

-- a closed server: clients see HERD_ECLOSED at once
assert(srv:close() == true)
ok, msg, st = s:get("name", 5)
assert(ok == nil and st == "HERD_ECLOSED", msg)
raises("attempt to use a closed herd.StoreServer", srv.address, srv)
print("store.lua: ok")
