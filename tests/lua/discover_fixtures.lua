-- herd.discover{inventory=...} on the fixture machines: node fields, GPUs,
-- NICs, RDMA devices and the topology matrix codes of `nvidia-smi topo -m`.
local dir = "tests/fixtures/inventory/"

local function load(name)
  local c, msg = herd.discover{ inventory = dir .. name }
  assert(c, msg)
  return c
end

local function eq(got, want, what)
  if got ~= want then
    error(("%s: got %s, want %s"):format(what, tostring(got), tostring(want)), 2)
  end
end

-- dgx-h100: 2 sockets, 8 H100 on an NVSwitch fabric, 8 InfiniBand HCAs
do
  local c = load("dgx-h100.json")
  eq(#c.nodes, 1, "dgx node count")
  local n = c.nodes[1]
  eq(tostring(n), "herd.Node 1 (dgx-h100)", "dgx tostring")
  eq(n.index, 1, "index")
  eq(n.hostname, "dgx-h100", "hostname")
  eq(n.cpu_model, "Intel(R) Xeon(R) Platinum 8480C", "cpu_model")
  eq(n.packages, 2, "packages")
  eq(n.cores, 112, "cores")
  eq(n.threads, 224, "threads")
  eq(n.packages, 2, "packages")
  eq(n.cpu_model, "Intel(R) Xeon(R) Platinum 8480C", "cpu_model")
  eq(n.memory_bytes, 2199023255552, "memory_bytes")
  assert(math.type(n.memory_available_bytes) == "integer")
  eq(#n.numa, 2, "numa count")
  eq(n.numa[1].os_index, 0, "numa[1].os_index")
  eq(n.numa[1].memory_bytes, 1099511627776, "numa[1].memory_bytes")
  eq(n.numa[1].cpus, "0-55,112-167", "numa[1].cpus")
  eq(n.numa[2].cpus, "56-111,168-223", "numa[2].cpus")

  eq(#n.gpus, 8, "gpu count")
  local g = n.gpus[1]
  eq(g.uuid, "GPU-79c8c292-6b94-45b5-b498-82321e35049e", "gpu uuid")
  eq(g.pci.bus_id, "0000:1b:00.0", "gpu pci.bus_id")
  eq(g.pci.host_bridge, "0000:15", "gpu pci.host_bridge")
  eq(g.index, 0, "gpu index")
  eq(g.name, "NVIDIA H100 80GB HBM3", "gpu name")
  eq(g.memory_bytes, 85520809984, "gpu memory_bytes")
  eq(g.cc_major, 9, "gpu cc_major")
  eq(g.cc_minor, 0, "gpu cc_minor")
  eq(g.pci.numa_node, 0, "gpu pci.numa_node")
  eq(g.nvswitch_links, 18, "gpu nvswitch_links")
  eq(n.gpus[8].pci.bus_id, "0000:df:00.0", "last gpu")
  eq(n.gpus[8].pci.numa_node, 1, "last gpu numa")
  eq(n.gpus[8].index, 7, "last gpu index")
  eq(n.gpu_note, nil, "gpu_note")
  -- GPUs come in PCI bus id order, and each has a distinct uuid
  local seen = {}
  for i, gpu in ipairs(n.gpus) do
    assert(not seen[gpu.uuid], "duplicate uuid")
    seen[gpu.uuid] = true
    if i > 1 then assert(n.gpus[i - 1].pci.bus_id < gpu.pci.bus_id, "bus id order") end
  end

  -- every pair of GPUs meets over the NVSwitch fabric with 18 links
  for i = 0, 7 do
    for j = 0, 7 do
      eq(n:link(i, j), i == j and "X" or "NV18", ("link(%d, %d)"):format(i, j))
    end
  end

  eq(#n.netdevs, 11, "netdev count")
  eq(n.netdevs[1].name, "lo", "netdevs[1].name")
  eq(n.netdevs[1].pci.bus_id, "", "lo has no PCI function")
  eq(n.netdevs[1].speed_mbps, -1, "unknown speed is -1, as in the inventory")
  eq(n.netdevs[1].addrs[1], "127.0.0.1/8", "lo addr")
  eq(n.netdevs[2].name, "eno3", "netdevs[2].name")
  eq(n.netdevs[2].state, "up", "eno3 state")
  eq(n.netdevs[2].mtu, 1500, "eno3 mtu")
  eq(n.netdevs[2].speed_mbps, 10000, "eno3 speed")
  eq(n.netdevs[2].pci.bus_id, "0000:03:00.0", "eno3 bus id")
  eq(#n.netdevs[3].addrs, 0, "eno4 has no addresses")

  eq(#n.rdma, 8, "rdma count")
  eq(n.rdma[1].name, "mlx5_0", "rdma name")
  eq(n.rdma[1].netdev, "ibp24s0", "rdma netdev")
  eq(n.rdma[1].pci.bus_id, "0000:18:00.0", "rdma bus id")
  eq(#n.rdma[1].ports, 1, "rdma ports")
  eq(n.rdma[1].ports[1].state, "active", "port state")
  eq(n.rdma[1].ports[1].link_layer, "infiniband", "port link layer")
  eq(n.rdma[1].ports[1].rate_gbps, 400, "port rate")
  eq(n.rdma[1].ports[1].gids[1], "fe80:0000:0000:0000:a088:c203:00c8:f429", "port gid")
  eq(n.rdma_note, nil, "rdma_note")

  -- the matrix NICs are the RDMA devices; each HCA shares a switch with one GPU
  local nics = n.matrix_nics
  eq(#nics, 8, "matrix nics")
  eq(nics[1], "mlx5_0", "matrix nic 1")
  eq(n:nic_link(0, 0), "PIX", "GPU0-NIC0 share a PCIe switch")
  eq(n:nic_link(0, 1), "NODE", "GPU0-NIC1 same NUMA node, other host bridge")
  eq(n:nic_link(0, 4), "SYS", "GPU0-NIC4 across NUMA nodes")
  eq(n:nic_link(7, 7), "PIX", "GPU7-NIC7")
  c:close()
end

-- pcie-4gpu: no NVLink; two GPUs behind one switch, two on the other socket
do
  local c = load("pcie-4gpu.json")
  local n = c.nodes[1]
  eq(n.hostname, "pcie-4gpu", "hostname")
  eq(#n.gpus, 4, "gpu count")
  eq(n.gpus[1].cc_major * 10 + n.gpus[1].cc_minor, 89, "cc 8.9")
  eq(n.gpus[1].nvswitch_links, 0, "no nvswitch")
  eq(n:link(0, 0), "X", "self")
  eq(n:link(0, 1), "PIX", "same PCIe switch")
  eq(n:link(1, 0), "PIX", "symmetric")
  eq(n:link(0, 2), "SYS", "across sockets")
  eq(n:link(2, 3), "NODE", "host bridges of one NUMA node")
  eq(#n.rdma, 0, "no rdma")
  eq(n.rdma_note, "no RDMA devices: libibverbs found none", "rdma_note")
  -- without RDMA devices the matrix NICs are the netdevs on a PCI function
  local nics = n.matrix_nics
  eq(#nics, 1, "matrix nics")
  eq(nics[1], "eno1", "matrix nic")
  eq(n:nic_link(0, 0), "NODE", "GPU0-eno1")
  eq(n:nic_link(2, 0), "SYS", "GPU2-eno1")
  c:close()
end

-- cpu-only: no GPUs and the reason why
do
  local c = load("cpu-only.json")
  local n = c.nodes[1]
  eq(n.hostname, "cpu-only", "hostname")
  eq(n.threads, 64, "threads")
  eq(#n.numa, 1, "numa")
  eq(#n.gpus, 0, "no gpus")
  eq(n.gpu_note, "no GPU: NVIDIA driver not found", "gpu_note")
  eq(n.rdma_note, "no RDMA devices: libibverbs found none", "rdma_note")
  eq(#n.netdevs, 3, "netdevs")
  local ok, err = pcall(n.link, n, 0, 0)
  assert(not ok and err:find("GPU index 0 out of range %(node has 0: 0%.%.%-1%)"), err)
  c:close()
end

-- Four DGX nodes: alike, no warning; one with another driver is named.
do
  local c = load("dgx-h100-x4.json")
  eq(#c.nodes, 4, "x4 nodes")
  eq(#c:warnings(), 0, "x4 warnings")
  eq(#c.failed, 0, "x4 failed")
  eq(c.nodes[2].gpu_driver, "570.124.06", "gpu_driver")
  eq(c.nodes[2].gpus[1].ecc, 1, "ecc")
  eq(c.nodes[2].gpus[1].pcie_width, 16, "pcie_width")
  local f = assert(io.open(dir .. "dgx-h100-x4.json"))
  local text = f:read("a")
  f:close()
  local i = select(2, text:find('"hostname": "dgx02"', 1, true))
  text = text:sub(1, i) .. text:sub(i + 1):gsub('"gpu_driver": "570.124.06"', '"gpu_driver": "565.1"', 1)
  local path = os.tmpname()
  f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  local odd = assert(herd.discover{inventory = path})
  os.remove(path)
  local w = odd:warnings()
  eq(#w, 1, "one warning")
  eq(w[1].nodes, "dgx02", "warning nodes")
  assert(w[1].message:find("GPU driver differs: driver 565.1 on 1 node", 1, true), w[1].message)
  -- The text form herd probe --text prints.
  local t = odd:encode("text")
  assert(t:sub(1, 19) == "herd-probe 1 dgx01\n", t:sub(1, 20))
  odd:close()
  c:close()
end

-- Options of many nodes: their types are checked; a malformed hostlist fails.
do
  local ok, err = pcall(herd.discover, {hosts = 5})
  assert(not ok and err:find("hosts"), err)
  ok, err = pcall(herd.discover, {slurm = "yes"})
  assert(not ok and err:find("slurm"), err)
  ok, err = pcall(herd.discover, {hosts = "a", timeout = -1})
  assert(not ok and err:find("timeout"), err)
  local c, msg, status = herd.discover{hosts = "node["}
  assert(c == nil and status == "HERD_EFORMAT", msg)
end

print("discover_fixtures: ok")
