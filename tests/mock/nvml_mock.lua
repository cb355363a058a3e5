-- Discovery through NVML, with tests/mock/nvml_mock.c standing in for
-- libnvidia-ml.so.1 (LD_LIBRARY_PATH set by ctest).
local node = herd.discover().nodes[1]
assert(#node.gpus == 3, "expected 3 GPUs from the mock NVML, got " .. #node.gpus ..
       " (" .. tostring(node.gpu_note) .. ")")
-- PCI bus order, normalized to a 4-digit lower-case domain.
local want = { "0000:1b:00.0", "0000:5d:00.0", "0000:9a:00.0" }
for i, bus in ipairs(want) do
  local g = node.gpus[i]
  assert(g.pci_bus_id == bus, ("GPU %d: bus id %s, expected %s"):format(i, g.pci_bus_id, bus))
  assert(g.name == "NVIDIA H100 80GB HBM3", g.name)
  assert(g.memory_bytes == 85520809984, g.memory_bytes)
  assert(g.cc == "9.0", g.cc)
end
assert(node.gpus[1].uuid == "GPU-00000001-1111-2222-3333-444444444444", node.gpus[1].uuid)
assert(node.gpus[3].uuid == "GPU-00000000-1111-2222-3333-444444444444", node.gpus[3].uuid)
-- 6 direct links plus min(12, 12) through the switches.
assert(node:link(1, 3) == "NV18", node:link(1, 3))
assert(node:link(3, 1) == "NV18", node:link(3, 1))
assert(node:link(2, 2) == "X")
assert(not node:link(1, 2):match("^NV"), node:link(1, 2))
assert(node.gpus[1].nvswitch_links == 12 and node.gpus[2].nvswitch_links == 0)
print("mock NVML: 3 GPUs in PCI order, NV18 between the linked pair")
