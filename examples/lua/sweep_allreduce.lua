-- sweep_allreduce.lua: allreduce bus bandwidth over sizes x rank counts x
-- transports, each point a `herd bench` run of its own, repeated; prints
-- the table and a terminal chart, and writes an SVG: the median of the
-- repeats drawn over the band from their min to their max.
--
--   build/bin/herd examples/lua/sweep_allreduce.lua [--svg sweep.svg]
--       [--sizes 4K,64K,1M,16M] [--np 2,4] [--transports auto,tcp]
--       [--repeats 3] [--iters 20] [--json results.json]
local opts = { svg = nil, sizes = "4K,64K,1M,16M", np = "2,4", transports = "auto,tcp",
               repeats = "3", iters = "20", json = nil }
local i = 1
while i <= #arg do
  local key = arg[i]:match("^%-%-(%w+)$")
  if not key or opts[key] == nil and key ~= "svg" and key ~= "json" or arg[i + 1] == nil then
    io.stderr:write("usage: sweep_allreduce.lua [--svg FILE] [--json FILE] [--sizes LIST] ",
                    "[--np LIST] [--transports LIST] [--repeats N] [--iters N]\n")
    os.exit(2)
  end
  opts[key] = arg[i + 1]
  i = i + 2
end

local function list(s, conv)
  local out = {}
  for x in s:gmatch("[^,]+") do out[#out + 1] = conv(x) end
  return out
end
local function bytes(s)
  local n, unit = s:match("^(%d+)([KMG]?)$")
  assert(n, "a size such as 64K: " .. s)
  return math.tointeger(n * ({ [""] = 1, K = 1024, M = 1024 ^ 2, G = 1024 ^ 3 })[unit])
end

local e = herd.experiment{
  name = "allreduce bus bandwidth",
  params = { size = list(opts.sizes, bytes), np = list(opts.np, math.tointeger),
             transport = list(opts.transports, tostring) },
  order = { "transport", "np", "size" },
  repeats = math.tointeger(opts.repeats),
  run = function(p)
    local recs = assert(herd.bench("allreduce", { np = p.np, size = p.size, transport = p.transport,
                                                  iters = math.tointeger(opts.iters),
                                                  warmup_iters = 2 }))
    local r = recs[1].out_of_place
    assert(r.wrong == 0, "wrong results")
    return { busbw = r.busbw, time_us = r.time_us }
  end,
}

print(e:table{ stats = { "median", "min", "max" }, metrics = { "busbw" } })
print()
local chart = { x = "size", y = "busbw", series = { "transport", "np" }, logx = true,
                xunit = "bytes", yunit = "GB/s", title = e.name }
print(e:plot(chart))
if opts.svg then
  chart.path = opts.svg
  e:svg(chart)
  print("wrote " .. opts.svg)
end
if opts.json then assert(e:save(opts.json)); print("wrote " .. opts.json) end
