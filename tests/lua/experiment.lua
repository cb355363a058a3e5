-- herd.experiment, herd.plot and herd.bench: statistics, the grid's order,
-- the outputs (CSV numbers in their shortest exact form), save and load,
-- the charts' shape, units, bands, legends and captions, and the
-- benchmark's records.
local function raises(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error matching " .. pattern)
  assert(tostring(err):find(pattern, 1, true), ("error %q does not match %q"):format(tostring(err), pattern))
end

-- statistics: nearest-rank p95, sample stddev, the median of an even count
local s = herd.experiment.stats({ 4, 1, 3, 2 })
assert(s.n == 4 and s.min == 1 and s.max == 4 and s.mean == 2.5 and s.median == 2.5, s.median)
assert(s.p95 == 4 and s.p5 == 1 and math.abs(s.stddev - math.sqrt(5 / 3)) < 1e-12)
s = herd.experiment.stats({ 7 })
assert(s.median == 7 and s.stddev == 0 and s.p95 == 7)
assert(herd.experiment.stats({}).n == 0)

-- the grid: every combination, the last name fastest, warmups dropped
local calls = {}
local e = herd.experiment{
  name = "toy",
  params = { size = { 10, 20 }, np = { 1, 2, 3 } },
  order = { "np", "size" },
  repeats = 3, warmup = 1,
  run = function(p)
    calls[#calls + 1] = p.np .. "/" .. p.size
    return { time = p.np * p.size + #calls % 2, value = p.np }
  end,
}
assert(#calls == 6 * 4, #calls)
assert(calls[1] == "1/10" and calls[5] == "1/20" and calls[9] == "2/10", calls[5])
assert(#e.records == 6 and e.records[2].params.np == 1 and e.records[2].params.size == 20)
assert(#e.records[1].samples.time == 3 and e.records[1].stats.value.median == 1)
assert(e.metrics[1] == "time" and e.metrics[2] == "value")
assert(tostring(e) == "herd.Experiment (6 records, metrics: time, value)")

-- a run may return one number; errors name the combination
local one = herd.experiment{ params = { x = { 1, 2 } }, repeats = 2, run = function(p) return p.x * 10 end }
assert(one.records[2].stats.value.mean == 20)
raises("run(x=2) failed", herd.experiment, { params = { x = { 1, 2 } }, run = function(p)
  if p.x == 2 then error("boom") end
  return 1
end })
raises("returned a string", herd.experiment, { params = { x = { 1 } }, run = function() return "no" end })
raises("unknown option 'repeat'", herd.experiment, { run = print, ["repeat"] = 2 })
raises("params.x must be a non-empty array", herd.experiment, { params = { x = {} }, run = print })

-- outputs: aligned table, CSV, Markdown, JSON; save and load by extension
local t = e:table{ stats = { "median" } }
local lines = {}
for l in t:gmatch("[^\n]+") do lines[#lines + 1] = l end
assert(#lines == 8 and lines[1]:match("^np +size +time +value$"), lines[1])
assert(lines[3]:match("^ 1 +10 +1[01] +1$"), lines[3])
local csv = e:csv()
assert(csv:match("^np,size,time median,time mean,time min,time p5,time p95,time max,time stddev,value median"), csv)
assert(select(2, csv:gsub("\n", "")) == 7)
assert(e:markdown():match("^| np | size | time median | time min | time max |"))
local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p '" .. dir .. "'")
assert(e:save(dir .. "/e.json") and e:save(dir .. "/e.csv") and e:save(dir .. "/e.md"))
local back = assert(herd.experiment.load(dir .. "/e.json"))
assert(back:table() == e:table() and back.name == "toy" and back.records[6].params.np == 3)
local f = io.open(dir .. "/e.csv"); assert(f:read("a") == csv); f:close()
local none, msg, status = herd.experiment.load(dir .. "/e.csv")
assert(none == nil and msg:find("e.csv", 1, true) and status == "HERD_EFORMAT", msg)
none, msg, status = herd.experiment.load(dir .. "/absent.json")
assert(none == nil and msg:find("absent.json", 1, true) and status == "HERD_ENOTFOUND", msg)
-- a file that cannot be written: save, svg and herd.write_file fail alike, without raising
local bad = dir .. "/no/such/dir/e"
for _, try in ipairs{
  function() return e:save(bad .. ".json") end,
  function() return e:svg{ x = "size", y = "time", path = bad .. ".svg" } end,
  function() return herd.write_file(bad .. ".txt", "x") end,
} do
  local ok, m, st = try()
  assert(ok == nil and m:find(bad, 1, true) and m:find("No such file", 1, true) and
         st == "HERD_ENOTFOUND", m)
end
assert(herd.write_file(dir .. "/w.txt", "a\0b") == true)
f = io.open(dir .. "/w.txt", "rb"); assert(f:read("a") == "a\0b"); f:close()
os.execute("rm -rf '" .. dir .. "'")

-- CSV: each float in the fewest digits that read back as the same double
local values = { 0.1, 1 / 3, 1e-300, 123456789.123, (1 << 53) + 1, 2.0 ^ 53, 1e16, 2.5e-5,
                 -0.000123, 1e22, 5e-324, 1.7976931348623157e308, 100.0, 0 / 0, 1 / 0 }
local want = { "0.1", "0.3333333333333333", "1e-300", "123456789.123", "9007199254740993",
               "9007199254740992", "1e+16", "2.5e-05", "-0.000123", "1e+22", "5e-324",
               "1.7976931348623157e+308", "100", "nan", "inf" }
math.randomseed(7)
for _ = 1, 400 do    -- and doubles of every magnitude
  values[#values + 1] = (math.random() - 0.5) * 10.0 ^ math.random(-30, 30)
end
local x = {}
for i = 1, #values do x[i] = i end
local ce = herd.experiment{ params = { i = x }, repeats = 1, run = function(p) return values[p.i] end }
local rows = {}
for line in ce:csv{ stats = { "median" } }:gmatch("[^\n]+") do rows[#rows + 1] = line end
assert(rows[1] == "i,value" and #rows == #values + 1, rows[1])
for i, v in ipairs(values) do
  local text = rows[i + 1]:match("^%d+,(.*)$")
  if want[i] then assert(text == want[i], ("value %d written %s, not %s"):format(i, text, want[i])) end
  if v == v and v ~= 1 / 0 then
    assert(tonumber(text) == v and math.type(tonumber(text)) ~= nil, ("%s reads back as %s"):format(text, tonumber(text)))
    local digits = #text:gsub("e.*", ""):gsub("[^%d]", ""):gsub("^0+", ""):gsub("0+$", "")
    if math.type(v) == "float" and digits > 1 then
      assert(tonumber(string.format("%." .. (digits - 1) .. "g", v)) ~= v,
             ("%s: %d digits would do"):format(text, digits - 1))
    end
  end
end

-- series and charts: one series per np, x ascending, named by its value
local series = e:series{ x = "size", y = "time", series = "np" }
assert(#series == 3 and series[1].name == "1" and #series[1].points == 2, series[1].name)
assert(series[1].points[1][1] == 10 and series[1].points[2][1] == 20)
-- each point spans its samples: min to max by default, p5 to p95, or none
local r1 = e.records[1].stats.time
local p1 = series[1].points[1]
assert(p1[2] == r1.median and p1[3] == r1.min and p1[4] == r1.max and r1.min < r1.max)
assert(e:series{ x = "size", y = "time", series = "np", band = "p5-p95" }[1].points[1][4] == r1.p95)
assert(e:series{ x = "size", y = "time", series = "np", band = false }[1].points[1][3] == nil)
raises('band must be "min-max", "p5-p95" or false', e.series, e, { x = "size", y = "time", band = "iqr" })
local chart = e:plot{ x = "size", y = "time", series = "np", color = false, title = "toy", xunit = "bytes",
                      yunit = "s" }
local n = 0
for l in chart:gmatch("[^\n]+") do
  n = n + 1
  assert(#l <= 80, "a chart line of " .. #l .. " columns")
  assert(not l:find("\27", 1, true), "colour codes with color = false")
end
assert(n >= 20 and chart:find("np:   * 1   + 2   o 3", 1, true), chart)
assert(chart:find("\n +size %(bytes%)\n") and chart:find("\ntime %(s%)\n"), chart)
assert(chart:find("lines: median of 3 runs per point; bars (|): min to max", 1, true), chart)
assert(chart:find("|", 1, true), chart)
-- one run per point: no band, no caption; runs that agree: no band
local once = herd.experiment{ params = { x = { 1, 2 } }, repeats = 1, run = function(p) return p.x end }
once = once:plot{ x = "x", y = "value", color = false }
assert(not once:find("lines:", 1, true) and not once:find("|[^\n]*|"), once)
local same = one:plot{ x = "x", y = "value", color = false }
assert(same:find("lines: median of 2 runs per point$") and not same:find("bars", 1, true), same)
-- words in the legend: strings as they are, tables as Lua constructors
local words = herd.experiment{ params = { size = { 1, 2 }, transport = { "auto", "tcp" }, algo = { { "ring" } } },
                               repeats = 2, run = function(p) return p.size end }
local ws = words:series{ x = "size", y = "value" }
assert(ws[1].name == '{ "ring" }, auto' and ws[2].name == '{ "ring" }, tcp', ws[1].name)
assert(words:series{ x = "size", y = "value", series = "transport" }[2].name == "tcp")
assert(herd.plot.word(0.25) == "0.25" and herd.plot.word(1 / 3) == "0.3333" and herd.plot.word(3) == "3")
local narrow = herd.plot.text(series, { width = 40, height = 8, logx = true, xunit = "bytes", color = false })
for l in narrow:gmatch("[^\n]+") do assert(#l <= 40, #l) end
assert(herd.plot.label(1536, "bytes") == "1.5K" and herd.plot.label(4 * 2 ^ 30, "bytes") == "4G")
local ticks = herd.plot.ticks(1024, 1048576, true, "bytes", 6)
assert(ticks[1] == 1024 and ticks[#ticks] <= 1048576 and #ticks >= 2, #ticks)
local svg = e:svg{ x = "size", y = "time", series = "np", title = "a <toy> & more", xunit = "bytes" }
assert(svg:match("^<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"800\" height=\"500\""))
assert(svg:find("a &lt;toy&gt; &amp; more", 1, true))
assert(select(2, svg:gsub("<polyline ", "")) == 3 and select(2, svg:gsub("<circle ", "")) == 3 * 2 + 3)
assert(select(2, svg:gsub('<polygon class="band" ', "")) == 3, "a band per series")
assert(svg:find('class="xlabel"[^>]*>size %(bytes%)</text>') and svg:find('class="ylabel"[^>]*>time</text>'))
assert(svg:find('class="legend%-title"[^>]*>np</text>') and svg:find('class="legend"[^>]*>3</text>'), svg)
assert(svg:find('class="caption"[^>]*>lines: median of 3 runs per point; bands: min to max</text>'))
-- a lone point's spread is an error bar
local bar = herd.plot.svg({ { name = "a", points = { { 1, 5, 4, 6 } } } }, { ylabel = "t", yunit = "ms" })
assert(bar:find('class="errorbar"', 1, true) and bar:find(">t %(ms%)</text>"), bar)
-- a label that names its unit already keeps it once
assert(herd.plot.svg({ { name = "a", points = { { 1, 1 } } } }, { xlabel = "size in bytes", xunit = "bytes" })
       :find(">size in bytes</text>", 1, true))
raises("x and y are required", e.series, e, { x = "size" })

-- herd.bench: herd bench's records, its failures, and misuse
local recs = assert(herd.bench("allreduce", { np = 2, minbytes = "1K", maxbytes = 2048, iters = 3,
                                              warmup_iters = 1 }))
assert(#recs == 2 and recs[1].op == "allreduce" and recs[1].ranks == 2 and recs[2].size == 2048)
assert(recs[1].type == "float32" and recs[1].out_of_place.wrong == 0 and recs[1].in_place.busbw > 0)
local ok, err, st = herd.bench("allreduce", { np = 2, datatype = "float128" })
assert(ok == nil and st == "HERD_EIO" and err:find("exited with status 2", 1, true), err)
raises("unknown option 'npp'", herd.bench, "allreduce", { npp = 2 })
-- n is the number of ranks, as herd bench's -n (np too, not both)
recs = assert(herd.bench("allreduce", { n = 3, size = 64, iters = 1, warmup_iters = 0 }))
assert(#recs == 1 and recs[1].ranks == 3, recs[1] and recs[1].ranks)
raises("options 'n' and 'np' are one option", herd.bench, "allreduce", { n = 2, np = 2 })
raises("option 'np' must be a number or a string", herd.bench, "allreduce", { np = {} })
print("experiment.lua: ok")
