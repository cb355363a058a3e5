-- Discovery through NVML, with tests/mock/nvml_mock.c standing in for
-- libnvidia-ml.so.1 (LD_LIBRARY_PATH set by ctest).
local node = herd.discover().nodes[1]
assert(#node.gpus == 3, "expected 3 GPUs from the mock NVML, got " .. #node.gpus ..
       " (" .. tostring(node.gpu_note) .. ")")
-- PCI bus order, normalized to a 4-digit lower-case domain.
local want = { "0000:1b:00.0", "0000:5d:00.0", "0000:9a:00.0" }
for i, bus in ipairs(want) do
  local g = node.gpus[i]
  assert(g.pci.bus_id == bus, ("GPU %d: bus id %s, expected %s"):format(i, g.pci.bus_id, bus))
  assert(g.index == i - 1, g.index)
  assert(g.name == "NVIDIA H100 80GB HBM3", g.name)
  assert(g.memory_bytes == 85520809984, g.memory_bytes)
  assert(g.cc_major == 9 and g.cc_minor == 0, g.cc_major)
end
assert(node.gpus[1].uuid == "GPU-00000001-1111-2222-3333-444444444444", node.gpus[1].uuid)
assert(node.gpus[3].uuid == "GPU-00000000-1111-2222-3333-444444444444", node.gpus[3].uuid)
-- 6 direct links plus min(12, 12) through the switches (GPU indices from 0).
assert(node:link(0, 2) == "NV18", node:link(0, 2))
assert(node:link(2, 0) == "NV18", node:link(2, 0))
assert(node:link(1, 1) == "X")
assert(not node:link(0, 1):match("^NV"), node:link(0, 1))
assert(node.gpus[1].nvswitch_links == 12 and node.gpus[2].nvswitch_links == 0)
print("mock NVML: 3 GPUs in PCI order, NV18 between the linked pair")

-- herd.health: the driver's checks of the same three GPUs, as tables.
local r = assert(herd.health())
assert(r.level == 1 and r.note == nil and #r.gpus == 3, "health: " .. tostring(r.note))
for _, g in ipairs(r.gpus) do
  assert(g.result == "pass", ("health: GPU%d %s"):format(g.index, g.result))
  local by = {}
  for _, c in ipairs(g.checks) do by[c.name] = c end
  assert(by.temperature.result == "pass" and by.temperature.value == 41 and
         by.temperature.unit == "C", by.temperature.detail)
  assert(by.pcie.detail == "gen 5 x16 of gen 5 x16", by.pcie.detail)
end
assert(r.gpus[2].bus_id == "0000:1b:00.0" and r.gpus[2].uuid:match("^GPU%-"), r.gpus[2].bus_id)
local nothing, msg, status = herd.health{ level = 3 }
assert(nothing == nil and msg == "level 3: expected 1 or 2" and status == "HERD_EINVAL", msg)
assert(not pcall(herd.health, { levle = 1 }), "a misspelt option must raise")
print("mock NVML: herd.health passes three idle GPUs")
