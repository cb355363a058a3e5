-- examples/topology.lua: the GPU link matrix of a node, from Lua.
--   build/bin/herd examples/topology.lua [INVENTORY.json]
local c = herd.discover{inventory = arg[1]}
for _, node in ipairs(c.nodes) do
  print(("%s: %d GPUs"):format(node.hostname, #node.gpus))
  if #node.gpus == 0 then print("  " .. tostring(node.gpu_note)) end
  for i, gpu in ipairs(node.gpus) do
    local row = {}
    for j = 1, #node.gpus do row[#row + 1] = node:link(i, j) end
    print(("  GPU%d %-14s %s"):format(i - 1, gpu.pci_bus_id, table.concat(row, " ")))
  end
end
