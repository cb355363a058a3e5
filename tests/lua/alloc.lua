-- herd.alloc and herd.Plan, liolib's conventions:
--   * misuse (an unknown option, a value of the wrong type, a released
--     plan) raises;
--   * a request that cannot be met returns nil, a message, a status name;
--   * one close path: p:close(), <close> variables and the collector
--     all let go of the leases.
-- Leases live in a temporary directory; the fixtures stand for this node.
local dgx = "tests/fixtures/inventory/dgx-h100.json"
local pcie = "tests/fixtures/inventory/pcie-4gpu.json"

local function raises(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error matching " .. pattern)
  assert(tostring(err):find(pattern, 1, true), ("error %q does not match %q"):format(tostring(err), pattern))
end

-- A Slurm job around the test must not narrow the fixtures' GPUs.
local real_alloc = herd.alloc
herd.alloc = function(opts)
  if type(opts) == "table" and opts.slurm == nil then opts.slurm = false end
  return real_alloc(opts)
end

local leases = os.tmpname()
os.remove(leases) -- herd creates the directory on the first lease

local function states(inventory)
  local g = assert(herd.gpus{ inventory = inventory, lease_dir = leases })
  local t = {}
  for i, s in ipairs(g) do t[i] = s.state end
  return table.concat(t, ",")
end

-- the must-show: two GPUs on one socket, and the explanation says so
do
  local p <close> = assert(herd.alloc{ gpus = 2, link = "same-numa", inventory = pcie,
                                       lease_dir = leases })
  assert(tostring(p):match("^herd%.Plan %(2 GPUs on 1 node, held%) %(0x%x+%)$"), tostring(p))
  assert(p.held == true and p.nodes == 1)
  assert(p.ranks[1].gpu == 0 and p.ranks[2].gpu == 1)
  assert(p.ranks[1].uuid == "GPU-b039ee16-9646-4718-8f3d-9a4de6cf02bb")
  assert(p.ranks[1].pci_bus_id == "0000:1a:00.0" and p.ranks[1].numa == 0)
  assert(p.ranks[1].cpus == "0-31,64-95" and p.ranks[1].nic == "eno1")
  assert(p.ranks[1].socket_ifname == "=eno1" and p.ranks[1].ib_hca == nil)
  assert(p.links[1][2] == "PIX" and p.links[2][2] == "X" and p:link(2, 1) == "PIX")
  assert(p.score == 60.0)
  local why = p:explain()
  assert(why:find("all on NUMA node 0, that is one socket", 1, true), why)
  assert(why:find("chosen because its worst link is PIX", 1, true), why)
  local env = p:env(2)
  assert(env.CUDA_VISIBLE_DEVICES == "GPU-e085b021-e0d4-4f2b-935a-b03d8de49eb1")
  assert(env.CUDA_DEVICE_ORDER == "PCI_BUS_ID" and env.NCCL_SOCKET_IFNAME == "=eno1")
  raises("rank index 3 out of range", p.env, p, 3)
  assert(states(pcie) == "exclusive,exclusive,free,free", states(pcie))
  local g = herd.gpus{ inventory = pcie, lease_dir = leases }
  assert(g[1].pid > 0 and g[1].user and g[1].since > 0 and g[1].index == 0)
  -- a second job gets the others, then nothing
  local q <close> = assert(herd.alloc{ gpus = 2, inventory = pcie, lease_dir = leases, job = "two" })
  assert(q.ranks[1].gpu == 2 and q.ranks[2].gpu == 3)
  assert(herd.gpus{ inventory = pcie, lease_dir = leases }[3].job == "two")
  local r, msg, status = herd.alloc{ gpus = 1, inventory = pcie, lease_dir = leases }
  assert(r == nil and status == "HERD_ENORESOURCE", tostring(msg))
  assert(msg:find("node pcie-4gpu has 0 free of 4", 1, true), msg)
end
-- <close> released both
assert(states(pcie) == "free,free,free,free", states(pcie))

-- release is the close: once, then the plan is gone
do
  local p = assert(herd.alloc{ gpus = 8, per_node = 8, inventory = dgx, lease_dir = leases })
  for i = 1, 8 do
    for j = 1, 8 do assert(p.links[i][j] == (i == j and "X" or "NV18")) end
  end
  assert(#p.ranks == 8 and p.ranks[8].nic == "mlx5_7" and p.ranks[8].ib_hca == "=mlx5_7:1")
  assert(p.ranks[8].nic_link == "PIX" and p.ranks[8].local_rank == 7)
  assert(#p.warnings == 0)
  assert(p:close() == true)
  assert(tostring(p) == "herd.Plan (closed)")
  raises("attempt to use a closed herd.Plan", function() return p.ranks end)
  raises("attempt to use a closed herd.Plan", p.close, p)
  assert(states(dgx) == "free,free,free,free,free,free,free,free")
end

-- the collector lets go too
do
  herd.alloc{ gpus = 3, inventory = dgx, lease_dir = leases }
  collectgarbage(); collectgarbage()
  assert(states(dgx) == "free,free,free,free,free,free,free,free", states(dgx))
end

-- planning only: nothing held
do
  local p = assert(herd.alloc{ gpus = 4, link = "nvlink", inventory = dgx, hold = false,
                               lease_dir = leases })
  assert(p.held == false and #p.gpus == 4 and p.gpus[4].index == 3)
  assert(states(dgx) == "free,free,free,free,free,free,free,free")
  p:close()
end

-- requests that cannot be met: nil, message, status
do
  local p, msg, status = herd.alloc{ gpus = 9, per_node = 9, inventory = dgx, lease_dir = leases }
  assert(p == nil and status == "HERD_ENORESOURCE")
  assert(msg == "need 9 GPUs on one node; node dgx-h100 has 8 free of 8", msg)
  p, msg, status = herd.alloc{ gpus = -2, inventory = dgx, lease_dir = leases }
  assert(p == nil and status == "HERD_EINVAL" and msg:find("gpus is -2", 1, true), msg)
  p, msg, status = herd.alloc{ gpus = 1e12 // 1, inventory = dgx, lease_dir = leases }
  assert(p == nil and status == "HERD_EINVAL" and msg:find("expected 0 to 65536", 1, true), msg)
  p, msg, status = herd.alloc{ gpus = 2, exclude = { "no-such-gpu" }, inventory = dgx,
                               lease_dir = leases }
  assert(p == nil and status == "HERD_EINVAL" and msg:find("'no-such-gpu' names no GPU", 1, true))
  p, msg, status = herd.alloc{ gpus = 1, inventory = "tests/fixtures/inventory/cpu-only.json",
                               lease_dir = leases }
  assert(p == nil and status == "HERD_ENORESOURCE" and msg:find("no GPU", 1, true), msg)
  p, msg, status = herd.alloc{ gpus = 1, inventory = "/no/such/inventory.json" }
  assert(p == nil and status == "HERD_ENOTFOUND", msg)
end

-- misuse raises
raises("unknown option 'gpu'", herd.alloc, { gpu = 2 })
raises("option 'gpus' must be a number", herd.alloc, { gpus = "2" })
raises("option 'gpus' must be an integer", herd.alloc, { gpus = 1.5 })
raises("unknown link demand 'nvlnk'", herd.alloc, { gpus = 2, link = "nvlnk" })
raises("option 'exclude'[1] must be a string", herd.alloc, { gpus = 2, exclude = { 7 } })
raises("option 'min_memory'", herd.alloc, { gpus = 2, min_memory = "lots" })
raises("invalid option 'sideways'", herd.alloc, { gpus = 2, policy = "sideways" })
raises("table expected", herd.alloc, 4)
raises("unknown option 'lease'", herd.gpus, { lease = "x" })

-- options that shape the plan
do
  local p = assert(herd.alloc{ gpus = 2, policy = "spread", inventory = dgx, hold = false })
  assert(p.ranks[1].gpu == 0 and p.ranks[2].gpu == 4)
  p = assert(herd.alloc{ gpus = 4, gpus_per_rank = 2, inventory = dgx, hold = false })
  assert(#p.ranks == 2 and #p.ranks[2].gpus == 2 and p.ranks[2].gpus[2].index == 3)
  p = assert(herd.alloc{ gpus = 1, min_memory = "70G", exclude = { "0000:1b:00.0" },
                         inventory = dgx, hold = false })
  assert(p.ranks[1].gpu == 1)
  local q, msg = herd.alloc{ gpus = 1, min_memory = 200 * 2^30 // 1, inventory = dgx, hold = false }
  assert(q == nil and msg:find("too little free memory", 1, true), msg)
end

-- the REPL completes a plan's members
do
  local mt = getmetatable(assert(herd.alloc{ gpus = 1, inventory = dgx, hold = false }))
  assert(mt.__members.explain == "method" and mt.__members.close == "method")
  assert(mt.__members.ranks == "field" and mt.__members.links == "field")
end

-- clean up the lease directory
for _, inv in ipairs{ dgx, pcie } do
  for _, s in ipairs(herd.gpus{ inventory = inv, lease_dir = leases }) do
    os.remove(leases .. "/" .. s.uuid .. ".lock")
  end
end
os.remove(leases)
print("alloc.lua: ok")
