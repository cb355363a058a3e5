-- examples/topology.lua: the GPU link matrix of a node, from Lua.
--   build/bin/herd examples/topology.lua [INVENTORY.json]
-- GPU indices count from 0 (GPU0, as nvidia-smi): node.gpus[1] is GPU 0.
local c = herd.discover{inventory = arg[1]}
for _, node in ipairs(c.nodes) do
  print(("%s: %d GPUs"):format(node.hostname, #node.gpus))
  if #node.gpus == 0 then print("  " .. tostring(node.gpu_note)) end
  for _, gpu in ipairs(node.gpus) do
    local row = {}
    for j = 0, #node.gpus - 1 do row[#row + 1] = node:link(gpu.index, j) end
    print(("  GPU%d %-14s %s"):format(gpu.index, gpu.pci.bus_id, table.concat(row, " ")))
  end
end
