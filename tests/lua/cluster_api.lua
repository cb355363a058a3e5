-- The herd.Cluster and herd.Node objects, liolib's conventions:
--   * misuse (wrong types, indices out of range, a closed cluster) raises;
--   * an expected failure (a missing or malformed inventory file, a file
--     that cannot be written) returns nil, a message, and the status name,
--     as io.open returns nil, message, errno;
--   * one close path: c:close(), <close> variables and the collector.
local dgx = "tests/fixtures/inventory/dgx-h100.json"

local function raises(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error matching " .. pattern)
  assert(tostring(err):find(pattern), ("error %q does not match %q"):format(tostring(err), pattern))
end

local function tmpname(suffix)
  local name = os.tmpname()
  os.remove(name)
  return name .. suffix
end

local function write(path, data)
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
end

local function slurp(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

-- herd.version
assert(herd.version():match("^%d+%.%d+%.%d+$"), herd.version())

-- this machine: one node named as the kernel names it
do
  local c = assert(herd.discover())
  assert(#c.nodes == 1, "one node")
  local n = c.nodes[1]
  local hostname = slurp("/proc/sys/kernel/hostname"):gsub("%s+$", "")
  assert(n.hostname == hostname, ("hostname %s, want %s"):format(n.hostname, hostname))
  assert(n.threads >= 1 and n.cores >= 1 and n.packages >= 1)
  assert(n.memory_bytes > 0 and n.memory_available_bytes <= n.memory_bytes)
  assert(#n.numa >= 1)
  if #n.gpus == 0 then assert(type(n.gpu_note) == "string" and #n.gpu_note > 0, "no GPU and no reason") end
  if #n.rdma == 0 then assert(type(n.rdma_note) == "string" and #n.rdma_note > 0, "no RDMA and no reason") end
  c:close()
end

-- objects: names, identity, fields, members
do
  local c = assert(herd.discover{ inventory = dgx })
  assert(tostring(c):match("^herd%.Cluster %(1 node%) %(0x%x+%)$"), tostring(c))
  assert(c.nodes[1] == c.nodes[1], "nodes are the same objects each time")
  assert(c.nodes ~= c.nodes, "c.nodes is a fresh array each time")
  c.nodes[1] = nil -- changing the array does not change the cluster
  assert(#c.nodes == 1)
  assert(c.bogus == nil and c.nodes[1].bogus == nil, "unknown members are nil")
  local mt = getmetatable(c)
  assert(mt.__name == "herd.Cluster" and mt.__members.save == "method" and mt.__members.nodes == "field")
  assert(getmetatable(c.nodes[1]).__members.hostname == "field")
  assert(getmetatable(c.nodes[1]).__members.link == "method")

  -- json() and save/load round trips, JSON and msgpack
  local json = c:json()
  assert(json:sub(1, 1) == "{" and json:find('"dgx-h100"', 1, true), "json text")
  local pjson, pmp = tmpname(".json"), tmpname(".msgpack")
  assert(c:save(pjson) == true)
  assert(slurp(pjson) == json, "saved JSON is c:json()")
  assert(c:save(pmp) == true)
  assert(slurp(pmp) == c:encode("msgpack"), "saved msgpack is c:encode()")
  assert(c:encode() == c:encode("msgpack") and c:encode("json") == json)
  for _, p in ipairs({ pjson, pmp }) do
    local again = assert(herd.discover{ inventory = p })
    assert(again:json() == json, "round trip through " .. p)
    assert(again.nodes[1]:link(0, 1) == "NV18")
    again:close()
  end
  -- an explicit format overrides the name
  local forced = tmpname(".json")
  assert(c:save(forced, "msgpack"))
  assert(slurp(forced) == c:encode("msgpack"))
  os.remove(pjson); os.remove(pmp); os.remove(forced)

  -- save to a place that cannot be written: nil, message, status
  local ok, msg, status = c:save("/nonexistent-dir/x.json")
  assert(ok == nil and msg:find("/nonexistent-dir/x.json", 1, true), msg)
  assert(status:match("^HERD_E"), status)

  -- misuse raises
  local n = c.nodes[1]
  raises("bad argument #1 to 'link' %(GPU index %-1 out of range %(node has 8: 0%.%.7%)%)", function() return n:link(-1, 1) end)
  raises("bad argument #2 to 'link' %(GPU index 8 out of range", function() return n:link(1, 8) end)
  raises("bad argument #1 to 'link' %(number expected, got string%)", function() return n:link("a", 1) end)
  raises("bad argument #1 to 'link' %(number has no integer representation%)", function() return n:link(1.5, 1) end)
  raises("bad argument #2 to 'nic_link' %(NIC index 8 out of range %(node has 8: 0%.%.7%)%)", function() return n:nic_link(1, 8) end)
  raises("bad argument #1 to 'link' %(herd.Node expected, got herd.Cluster%)", function() return n.link(c, 1, 2) end)
  raises("herd.Cluster expected, got no value", function() return c.json() end)
  raises("bad argument #1 to 'save' %(herd.Cluster expected, got herd.Node%)", function() return c.save(n, "x.json") end)
  raises("bad argument #1 to 'save' %(string expected, got no value%)", function() return c:save() end)
  raises("bad argument #2 to 'save' %(invalid option 'yaml'%)", function() return c:save("x", "yaml") end)
  raises("bad argument #1 to 'encode' %(expected \"msgpack\", \"json\" or \"text\"%)", function() return c:encode("auto") end)
  raises("bad argument #1 to 'discover' %(table expected, got string%)", function() return herd.discover("x.json") end)
  raises("bad argument #1 to 'discover' %(unknown option 'inventroy' %(known: inventory, hosts, hostfile, slurm, timeout%)%)",
    function() return herd.discover{ inventroy = dgx } end)
  raises("option 'inventory' must be a string", function() return herd.discover{ inventory = 42 } end)

  -- close: once; afterwards every use raises, the node's included
  assert(c:close() == true)
  assert(tostring(c) == "herd.Cluster (closed)")
  assert(tostring(n) == "herd.Node (closed)")
  raises("attempt to use a closed herd.Cluster", c.close, c)
  raises("attempt to use a closed herd.Cluster", function() return c.nodes end)
  raises("attempt to use a closed herd.Cluster", c.json, c)
  raises("attempt to use a node of a closed cluster", function() return n.hostname end)
  raises("attempt to use a node of a closed cluster", n.link, n, 1, 2)
end

-- a node keeps its cluster alive after the cluster is dropped
do
  local n = assert(herd.discover{ inventory = dgx }).nodes[2 - 1]
  collectgarbage(); collectgarbage()
  assert(n.hostname == "dgx-h100" and n:link(0, 7) == "NV18")
end

-- <close> closes at the end of the scope
local kept
do
  local c <close> = assert(herd.discover{ inventory = dgx })
  kept = c
end
assert(tostring(kept) == "herd.Cluster (closed)")

-- expected failures return nil, a message naming the file, and the status
do
  local c, msg, status = herd.discover{ inventory = "tests/fixtures/inventory/no-such-file.json" }
  assert(c == nil, "missing file gives nil")
  assert(msg:find("no-such-file.json", 1, true), msg)
  assert(type(status) == "string" and status:match("^HERD_E"), status)

  local bad = {
    empty = "",
    truncated = slurp(dgx):sub(1, 2000),
    not_json = "this is not an inventory\n",
    wrong_type = '{"v": 1, "nodes": "everything"}',
    future_version = '{"v": 999, "nodes": []}',
    binary = "\xdd\xff\xff\xff\xff\x00\x01",
  }
  for what, data in pairs(bad) do
    local p = tmpname(".json")
    write(p, data)
    local ok, err, st = herd.discover{ inventory = p }
    os.remove(p)
    assert(ok == nil, what .. " loaded")
    assert(err:find(p, 1, true), what .. ": message does not name the file: " .. err)
    assert(st:match("^HERD_E"), what .. ": " .. tostring(st))
  end
end

-- the REPL prints an object with its fields, summarized
do
  local c <close> = assert(herd.discover{ inventory = dgx })
  local text = herd.pretty.object(c.nodes[1])
  assert(text:match("^herd%.Node 1 %(dgx%-h100%)\n"), text)
  assert(text:find('\n  gpus%s+= 8 x "NVIDIA H100 80GB HBM3"\n'), text)
  assert(text:find('\n  memory_bytes%s+= 2199023255552 %-%- 2%.0 TiB\n'), text)
  assert(text:find('\n  hostname%s+= "dgx%-h100"\n'), text)
  assert(herd.pretty.object(c):find("\n  nodes  = { herd.Node 1 (dgx-h100) }", 1, true))
  assert(herd.pretty.object(c):find("\n  failed = {}", 1, true))
  c:close()
  assert(herd.pretty.object(c) == "herd.Cluster (closed)")
end
print("cluster_api: ok")
