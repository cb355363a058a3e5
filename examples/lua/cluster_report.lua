-- cluster_report.lua: the inventory of a cluster as a report: every node
-- with its CPUs and memory, its GPUs, the GPU link matrix with the NICs,
-- and its network devices.
--
--   build/bin/herd examples/lua/cluster_report.lua [INVENTORY]
--   build/bin/herd examples/lua/cluster_report.lua tests/fixtures/inventory/dgx-h100.json
local c = assert(herd.discover{ inventory = arg[1] })

local function gib(n) return string.format("%.1f GiB", n / 2 ^ 30) end

print(string.format("%d node%s", #c.nodes, #c.nodes == 1 and "" or "s"))
for _, n in ipairs(c.nodes) do
  print()
  print(string.format("== %s", n.hostname))
  print(string.format("CPUs    %d x %s: %d cores, %d threads", n.packages, n.cpu_model, n.cores,
                      n.threads))
  print(string.format("memory  %s (%s available), %d NUMA node%s", gib(n.memory_bytes),
                      gib(n.memory_available_bytes), #n.numa, #n.numa == 1 and "" or "s"))
  for _, m in ipairs(n.numa) do
    print(string.format("  NUMA %d  CPUs %s, %s", m.os_index, m.cpus, gib(m.memory_bytes)))
  end

  if #n.gpus == 0 then
    print("GPUs    none: " .. tostring(n.gpu_note))
  else
    print(string.format("GPUs    %d", #n.gpus))
    for _, g in ipairs(n.gpus) do
      print(string.format("  GPU%d  %s  %s  %s  cc %d.%d  NUMA %d", g.index, g.name, g.pci.bus_id,
                          gib(g.memory_bytes), g.cc_major, g.cc_minor, g.pci.numa_node))
    end
    -- the matrix, as nvidia-smi topo -m draws it: GPUs, then NICs
    local nics = n.matrix_nics
    local head = { "      " }
    for j = 0, #n.gpus - 1 do head[#head + 1] = string.format("%-6s", "GPU" .. j) end
    for j = 0, #nics - 1 do head[#head + 1] = string.format("%-6s", "NIC" .. j) end
    print((table.concat(head):gsub("%s+$", "")))
    for _, g in ipairs(n.gpus) do
      local row = { string.format("%-6s", "GPU" .. g.index) }
      for j = 0, #n.gpus - 1 do row[#row + 1] = string.format("%-6s", n:link(g.index, j)) end
      for j = 0, #nics - 1 do row[#row + 1] = string.format("%-6s", n:nic_link(g.index, j)) end
      print((table.concat(row):gsub("%s+$", "")))
    end
    for j, name in ipairs(nics) do print(string.format("  NIC%d: %s", j - 1, name)) end
  end

  print(string.format("netdevs %d", #n.netdevs))
  for _, d in ipairs(n.netdevs) do
    print(string.format("  %-10s %-8s mtu %-6d %s%s", d.name, d.state, d.mtu,
                        d.speed_mbps >= 0 and (d.speed_mbps .. " Mb/s") or "speed unknown",
                        #d.addrs > 0 and ("  " .. table.concat(d.addrs, " ")) or ""))
  end
  if #n.rdma > 0 then
    print(string.format("RDMA    %d", #n.rdma))
    for _, r in ipairs(n.rdma) do
      local p = r.ports[1] or {}
      print(string.format("  %-8s %-10s %s %s %s Gb/s", r.name, r.netdev or "", p.link_layer or "?",
                          p.state or "?", tostring(p.rate_gbps or "?")))
    end
  else
    print("RDMA    none: " .. tostring(n.rdma_note))
  end
end
