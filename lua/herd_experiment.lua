-- herd.experiment: a grid of parameters, run and repeated, with every
-- sample kept and summarized, printed as a table, CSV, JSON or Markdown,
-- saved and loaded, and plotted.
--
--   local e = herd.experiment{
--     params = { size = { 1024, 1048576 }, np = { 2, 4 } },
--     repeats = 5, warmup = 1,
--     run = function(p)
--       local r = herd.bench("allreduce", { np = p.np, size = p.size })[1]
--       return { time_us = r.out_of_place.time_us, busbw = r.out_of_place.busbw }
--     end,
--   }
--   print(e:table())                    -- aligned; e:csv(), e:json(), e:markdown()
--   print(e:plot{ x = "size", y = "busbw", series = "np", logx = true, xunit = "bytes" })
--   e:svg{ x = "size", y = "busbw", series = "np", path = "sweep.svg" }
--   e:save("sweep.json"); local again = herd.experiment.load("sweep.json")
--
-- params maps each name to its values; the grid is every combination, the
-- names in the order of `order` (default: sorted), the last varying
-- fastest.  run(p) is called warmup times (results dropped), then repeats
-- times (default 3) per combination; it returns a table of metrics
-- (numbers) or one number (metric "value").  A run that raises stops the
-- experiment with the combination named.  Each record holds the
-- combination (`params`), every sample (`samples[metric]`) and their
-- statistics (`stats[metric]`: n, min, p5, median, mean, p95, max, stddev;
-- p5 and p95 are nearest-rank percentiles, stddev the sample one).  CSV
-- numbers are written in the fewest digits that read back as the same
-- double (shortest below).  A chart draws one statistic of y per point
-- (the median) over the band of its samples (min to max, or p5 to p95),
-- and says which in a caption; its legend names the series by their
-- parameters' values ("tcp", "auto, 2") under the parameters' names.

local M = {}

local Experiment = {}
Experiment.__index = Experiment
Experiment.__name = "herd.Experiment"

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  return keys
end

-- Statistics of an array of numbers.
function M.stats(xs)
  local n = #xs
  if n == 0 then return { n = 0 } end
  local s = {}
  local sum = 0
  for i, x in ipairs(xs) do s[i] = x; sum = sum + x end
  table.sort(s)
  local mean = sum / n
  local var = 0
  for _, x in ipairs(s) do var = var + (x - mean) ^ 2 end
  local median = n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
  return {
    n = n, min = s[1], max = s[n], mean = mean, median = median,
    p5 = s[math.max(1, math.ceil(0.05 * n))], p95 = s[math.max(1, math.ceil(0.95 * n))],
    stddev = n > 1 and math.sqrt(var / (n - 1)) or 0,
  }
end

local function summarize(rec)
  rec.stats = {}
  for metric, xs in pairs(rec.samples) do rec.stats[metric] = M.stats(xs) end
end

local function describe(p, order)
  local parts = {}
  for _, k in ipairs(order) do parts[#parts + 1] = k .. "=" .. tostring(p[k]) end
  return table.concat(parts, " ")
end

local function new(t)
  return setmetatable(t, Experiment)
end

-- Runs the grid; see the top of this file.
function M.run(spec)
  assert(type(spec) == "table", "herd.experiment: a table of options expected")
  for k in pairs(spec) do
    assert(({ params = 1, repeats = 1, warmup = 1, run = 1, order = 1, name = 1 })[k],
           "herd.experiment: unknown option '" .. tostring(k) .. "'")
  end
  assert(type(spec.run) == "function", "herd.experiment: option 'run' must be a function")
  local params = spec.params or {}
  assert(type(params) == "table", "herd.experiment: option 'params' must be a table")
  local order = spec.order or sorted_keys(params)
  for _, k in ipairs(order) do
    assert(type(params[k]) == "table" and #params[k] > 0,
           "herd.experiment: params." .. tostring(k) .. " must be a non-empty array")
  end
  local repeats, warmup = spec.repeats or 3, spec.warmup or 0
  assert(math.type(repeats) == "integer" and repeats >= 1, "herd.experiment: repeats must be 1 or more")
  assert(math.type(warmup) == "integer" and warmup >= 0, "herd.experiment: warmup must be 0 or more")
  local e = new({ name = spec.name, order = order, params = params, repeats = repeats,
                  warmup = warmup, records = {}, metrics = {} })
  local seen = {}
  local idx = {}
  for i = 1, #order do idx[i] = 1 end
  while true do
    local p = {}
    for i, k in ipairs(order) do p[k] = params[k][idx[i]] end
    local rec = { params = p, samples = {} }
    for r = 1, warmup + repeats do
      local ok, out = pcall(spec.run, p)
      if not ok then
        error(string.format("herd.experiment: run(%s) failed: %s", describe(p, order), tostring(out)), 0)
      end
      if type(out) == "number" then out = { value = out } end
      if type(out) ~= "table" then
        error(string.format("herd.experiment: run(%s) returned a %s, not a table of numbers",
                            describe(p, order), type(out)), 0)
      end
      if r > warmup then
        for metric, v in pairs(out) do
          if type(v) == "number" then
            rec.samples[metric] = rec.samples[metric] or {}
            table.insert(rec.samples[metric], v)
            if not seen[metric] then seen[metric] = true; e.metrics[#e.metrics + 1] = metric end
          end
        end
      end
    end
    summarize(rec)
    e.records[#e.records + 1] = rec
    -- next combination, the last name fastest
    local i = #order
    while i >= 1 do
      idx[i] = idx[i] + 1
      if idx[i] <= #params[order[i]] then break end
      idx[i] = 1
      i = i - 1
    end
    if i < 1 then break end
  end
  table.sort(e.metrics)
  return e
end

-- The columns of a flat view: the parameters, then stat(metric) per metric.
local function columns(e, opts)
  local stats = opts and opts.stats or { "median", "min", "max" }
  local metrics = opts and opts.metrics or e.metrics
  local cols = {}
  for _, k in ipairs(e.order) do cols[#cols + 1] = { title = k, get = function(r) return r.params[k] end } end
  for _, m in ipairs(metrics) do
    for _, s in ipairs(stats) do
      cols[#cols + 1] = {
        title = #stats == 1 and m or (m .. " " .. s),
        get = function(r) return r.stats[m] and r.stats[m][s] end,
      }
    end
  end
  return cols
end

local function cell(v)
  if v == nil then return "" end
  if math.type(v) == "float" then return string.format("%.4g", v) end
  return tostring(v)
end

-- An aligned text table (numbers to the right).
function Experiment:table(opts)
  local cols = columns(self, opts)
  local rows, widths = {}, {}
  for c, col in ipairs(cols) do widths[c] = #col.title end
  for r, rec in ipairs(self.records) do
    rows[r] = {}
    for c, col in ipairs(cols) do
      local v = col.get(rec)
      rows[r][c] = { text = cell(v), num = type(v) == "number" }
      widths[c] = math.max(widths[c], #rows[r][c].text)
    end
  end
  local out, head, rule = {}, {}, {}
  for c, col in ipairs(cols) do
    head[c] = string.format("%" .. widths[c] .. "s", col.title)
    rule[c] = string.rep("-", widths[c])
  end
  out[1] = table.concat(head, "  ")
  out[2] = table.concat(rule, "  ")
  for _, row in ipairs(rows) do
    local line = {}
    for c, x in ipairs(row) do
      line[c] = string.format("%" .. (x.num and "" or "-") .. widths[c] .. "s", x.text)
    end
    out[#out + 1] = (table.concat(line, "  "):gsub("%s+$", ""))
  end
  return table.concat(out, "\n")
end

-- A float in the fewest significant digits (1 to 17) that read back as
-- the same double; positional from 1e-4 up to 1e16 (0.1, 123456789.123,
-- 9007199254740992), in exponent form outside (1e-300), as repr does.
local function shortest(v)
  if v ~= v then return "nan" end
  if v == math.huge or v == -math.huge then return v > 0 and "inf" or "-inf" end
  local sci
  for p = 1, 17 do
    sci = string.format("%." .. (p - 1) .. "e", v)
    if tonumber(sci) == v then break end
  end
  local sign, lead, rest, exp = sci:match("^(%-?)(%d)%.?(%d*)e([-+]%d+)$")
  local digits, e = lead .. rest, tonumber(exp)
  if e < -4 or e >= 16 then return string.format("%." .. #digits .. "g", v) end
  if e >= #digits - 1 then return sign .. digits .. string.rep("0", e - #digits + 1) end
  if e >= 0 then return sign .. digits:sub(1, e + 1) .. "." .. digits:sub(e + 2) end
  return sign .. "0." .. string.rep("0", -e - 1) .. digits
end

local function csv_field(s)
  if s:find('[,"\n]') then return '"' .. s:gsub('"', '""') .. '"' end
  return s
end

-- CSV with a header row: one row per combination.
function Experiment:csv(opts)
  local cols = columns(self, opts or { stats = { "median", "mean", "min", "p5", "p95", "max", "stddev" } })
  local out, head = {}, {}
  for c, col in ipairs(cols) do head[c] = csv_field(col.title) end
  out[1] = table.concat(head, ",")
  for _, rec in ipairs(self.records) do
    local line = {}
    for c, col in ipairs(cols) do
      local v = col.get(rec)
      line[c] = csv_field(v == nil and "" or (math.type(v) == "float" and shortest(v) or tostring(v)))
    end
    out[#out + 1] = table.concat(line, ",")
  end
  return table.concat(out, "\n") .. "\n"
end

-- A Markdown table (GitHub's pipes).
function Experiment:markdown(opts)
  local cols = columns(self, opts)
  local out, head, rule = {}, {}, {}
  for c, col in ipairs(cols) do head[c] = col.title; rule[c] = "---:" end
  out[1] = "| " .. table.concat(head, " | ") .. " |"
  out[2] = "|" .. table.concat(rule, "|") .. "|"
  for _, rec in ipairs(self.records) do
    local line = {}
    for c, col in ipairs(cols) do line[c] = cell(col.get(rec)):gsub("|", "\\|") end
    out[#out + 1] = "| " .. table.concat(line, " | ") .. " |"
  end
  return table.concat(out, "\n")
end

-- The whole experiment as JSON: every sample, every statistic.
function Experiment:json()
  return herd.json.encode({
    name = self.name, order = self.order, params = self.params, repeats = self.repeats,
    warmup = self.warmup, metrics = self.metrics, records = self.records,
  }, { indent = 1, sort = true })
end

-- Writes the experiment: JSON, or CSV / Markdown by the path's extension.
function Experiment:save(path)
  local text = path:match("%.csv$") and self:csv() or path:match("%.md$") and self:markdown()
               or self:json()
  return herd.write_file(path, text)
end

-- Reads an experiment saved as JSON.
function M.load(path)
  local f, err, code = io.open(path, "r")
  if not f then return nil, err, code == 2 and "HERD_ENOTFOUND" or "HERD_EIO" end
  local text = f:read("a")
  f:close()
  local t, msg = herd.json.decode(text)
  if not t then return nil, path .. ": " .. msg, "HERD_EFORMAT" end
  if type(t.records) ~= "table" or type(t.order) ~= "table" then
    return nil, path .. ": not an experiment (no records or order)", "HERD_EFORMAT"
  end
  for _, rec in ipairs(t.records) do
    rec.params = rec.params or {}
    rec.samples = rec.samples or {}
    summarize(rec)
  end
  t.metrics = t.metrics or {}
  return new(t)
end

-- The parameters a plot's series differ by: `series` (a name or an
-- array of names), else every parameter but x.
local function grouping(self, opts)
  local group = opts.series
  if type(group) == "string" then group = { group } end
  if group == nil then
    group = {}
    for _, k in ipairs(self.order) do if k ~= opts.x then group[#group + 1] = k end end
  end
  return group
end

-- The statistics a band spans.
local bands = { ["min-max"] = { "min", "max" }, ["p5-p95"] = { "p5", "p95" } }

-- The series of a plot: y's statistic (default the median) against x, one
-- series per combination of the values of the `series` parameter(s), the
-- records filtered by `where`; each named by its values ("tcp", "auto, 2")
-- and each point carrying the band of its samples (band: "min-max", the
-- default, "p5-p95", or false for none).
function Experiment:series(opts)
  assert(opts and opts.x and opts.y, "herd.Experiment: x and y are required")
  local stat = opts.stat or "median"
  local band = opts.band == nil and "min-max" or opts.band
  assert(band == false or bands[band], "herd.Experiment: band must be \"min-max\", \"p5-p95\" or false")
  local group = grouping(self, opts)
  local by, list = {}, {}
  for _, rec in ipairs(self.records) do
    local keep = true
    for k, v in pairs(opts.where or {}) do if rec.params[k] ~= v then keep = false end end
    local st = rec.stats[opts.y]
    if keep and st and st[stat] then
      local names = {}
      for _, k in ipairs(group) do names[#names + 1] = herd.plot.word(rec.params[k]) end
      local name = #names > 0 and table.concat(names, ", ") or opts.y
      if not by[name] then
        by[name] = { name = name, points = {} }
        list[#list + 1] = by[name]
      end
      local p = { rec.params[opts.x], st[stat] }
      if band and (st.n or 0) > 1 then p[3], p[4] = st[bands[band][1]], st[bands[band][2]] end
      table.insert(by[name].points, p)
    end
  end
  return list
end

-- What the lines and the bands of a chart show, for its caption: "lines:
-- median of 3 runs per point; bands: min to max" (bars in the terminal).
local function caption(self, opts, series, bars)
  local stat = opts.stat or "median"
  local band = opts.band == nil and "min-max" or opts.band
  local most, least, spread = 0, math.huge, false
  for _, rec in ipairs(self.records) do
    local st = rec.stats[opts.y]
    if st and st[stat] then most, least = math.max(most, st.n or 0), math.min(least, st.n or 0) end
  end
  for _, s in ipairs(series) do
    for _, p in ipairs(s.points) do spread = spread or (p[3] ~= nil and p[3] < p[4]) end
  end
  if most <= 1 then return nil end
  local runs = (least == most and "" or "up to ") .. most .. " runs per point"
  local text = "lines: " .. stat .. " of " .. runs
  if spread then
    text = text .. "; " .. (bars and "bars (|)" or "bands") .. ": "
           .. bands[band][1] .. " to " .. bands[band][2]
  end
  return text
end

local function plot_opts(self, opts, series, bars)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.xlabel = o.xlabel or opts.x
  o.ylabel = o.ylabel or opts.y
  o.title = o.title or self.name
  local group = grouping(self, opts)
  if o.legend == nil and #group > 0 then o.legend = table.concat(group, ", ") end
  if o.caption == nil then o.caption = caption(self, opts, series, bars) end
  for _, k in ipairs({ "x", "y", "series", "where", "stat", "band" }) do o[k] = nil end
  return o
end

-- A terminal line chart of y against x (herd.plot.text's options too).
function Experiment:plot(opts)
  local series = self:series(opts)
  return herd.plot.text(series, plot_opts(self, opts, series, true))
end

-- An SVG line chart (herd.plot.svg's options too, path among them).
function Experiment:svg(opts)
  local series = self:series(opts)
  return herd.plot.svg(series, plot_opts(self, opts, series, false))
end

function Experiment:__tostring()
  return string.format("herd.Experiment (%d records, metrics: %s)", #self.records,
                       table.concat(self.metrics, ", "))
end

setmetatable(M, { __call = function(_, spec) return M.run(spec) end })
return M
