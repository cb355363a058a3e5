-- herd.report: the plots and the page of a job that `herd launch --monitor-out DIR` sampled.
--
--   herd.report.write("run1")   -- reads run1/summary.json and run1/series.json
--
-- writes, beside them, one SVG per metric (gpu_util.svg, gpu_memory.svg,
-- cpu.svg, power.svg; herd.plot.svg draws them, with units on the axes and
-- a legend of "rank R, GPU G") and report.html: one self-contained page
-- (inline CSS and SVG, no script, nothing fetched) with the summary table,
-- the warnings and the four plots.  A metric with nothing sampled (no GPU)
-- is still drawn, its caption saying why.  Returns the paths written, or
-- nil, msg, status when a file cannot be read or written.

local M = {}

-- At most this many points per line: a long run is drawn from the means of
-- consecutive samples.
local POINTS_MAX = 1000

local function num(v)
  return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge
end

local function read_json(path)
  local f, msg = io.open(path, "rb")
  if not f then return nil, msg end
  local text = f:read("a")
  f:close()
  local doc, why = herd.json.decode(text)
  if type(doc) ~= "table" then return nil, path .. ": " .. (why or "not a JSON object") end
  return doc
end

-- The points { t, y } of two columns, thinned to POINTS_MAX by means of
-- consecutive points.
local function points(ts, ys)
  local pts = {}
  for i = 1, math.min(#ts, #ys) do
    if num(ts[i]) and num(ys[i]) then pts[#pts + 1] = { ts[i], ys[i] } end
  end
  if #pts <= POINTS_MAX then return pts end
  local out, per = {}, math.ceil(#pts / POINTS_MAX)
  for i = 1, #pts, per do
    local sx, sy, n = 0, 0, 0
    for k = i, math.min(i + per - 1, #pts) do sx, sy, n = sx + pts[k][1], sy + pts[k][2], n + 1 end
    out[#out + 1] = { sx / n, sy / n }
  end
  return out
end

local function esc(s)
  return (tostring(s):gsub("[&<>\"]", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;" }))
end

local function pct(v)
  return num(v) and string.format("%.0f%%", v) or "-"
end

local function bytes(v)
  if not num(v) then return "-" end
  local units, u = { "B", "KiB", "MiB", "GiB", "TiB" }, 1
  while v >= 1024 and u < #units do v, u = v / 1024, u + 1 end
  return u == 1 and string.format("%.0f %s", v, units[u]) or string.format("%.1f %s", v, units[u])
end

-- The four plots' series from series.json.
local function plot_series(series)
  local util, mem, power, cpu = {}, {}, {}, {}
  for _, r in ipairs(series.ranks or {}) do
    cpu[#cpu + 1] = { name = "rank " .. r.rank, points = points(r.time_s or {}, r.cpu_pct or {}) }
    for _, g in ipairs(r.gpus or {}) do
      local name = string.format("rank %d, GPU %d", r.rank, g.index)
      util[#util + 1] = { name = name, points = points(g.time_s, g.util_pct) }
      local gib = {}
      for i, b in ipairs(g.mem_used_bytes) do gib[i] = num(b) and b / 2 ^ 30 or b end
      mem[#mem + 1] = { name = name, points = points(g.time_s, gib) }
      power[#power + 1] = { name = name, points = points(g.time_s, g.power_w) }
    end
  end
  return util, mem, power, cpu
end

local function summary_table(summary)
  local out = { '<table class="summary" id="summary">',
    "<thead><tr><th>rank</th><th>host</th><th>GPUs</th><th>GPU util mean</th><th>p5</th>" ..
    "<th>p50</th><th>p95</th><th>GPU memory peak</th><th>idle</th><th>CPU mean</th>" ..
    "<th>CPU peak</th></tr></thead>", "<tbody>" }
  for _, r in ipairs(summary.ranks or {}) do
    if not r.sampled then
      out[#out + 1] = string.format('<tr data-rank="%d"><td>%d</td><td class="text">%s</td>' ..
        '<td class="text" colspan="9">not sampled</td></tr>', r.rank, r.rank, esc(r.host or "?"))
    else
      local gpus = {}
      for i, g in ipairs(r.gpus or {}) do gpus[i] = tostring(g.index) end
      local list = #gpus > 0 and table.concat(gpus, ",") or "-"
      out[#out + 1] = string.format('<tr data-rank="%d"><td>%d</td><td class="text">%s</td>' ..
        "<td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>" ..
        '<td title="of the %s">%s</td><td>%s</td><td>%s</td></tr>',
        r.rank, r.rank, esc(r.host or "?"), list, pct(r.gpu_util_mean_pct), pct(r.gpu_util_p5_pct),
        pct(r.gpu_util_p50_pct), pct(r.gpu_util_p95_pct), bytes(r.gpu_mem_peak_bytes),
        r.idle_of == "gpu" and "GPUs" or "CPU", pct(r.idle_pct), pct(r.cpu_mean_pct),
        pct(r.cpu_peak_pct))
    end
  end
  out[#out + 1] = "</tbody></table>"
  return table.concat(out, "\n")
end

local style = [[
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.5em; }
h2 { font-size: 1.2em; margin-top: 1.5em; }
table.summary { border-collapse: collapse; }
table.summary th, table.summary td { border: 1px solid #bbb; padding: 3px 10px; text-align: right; }
table.summary th { background: #f0f0f0; }
table.summary td.text { text-align: left; }
p.legend, p.meta { color: #555; font-size: 0.9em; }
ul.warnings li { color: #a33; }
p.note { color: #555; }
figure { margin: 1em 0; }
]]

-- The page: summary, GPU-hours, notes, warnings and the plots (inline SVG).
local function page(summary, svgs)
  local out = {}
  local function add(s) out[#out + 1] = s end
  add("<!DOCTYPE html>")
  add('<html lang="en"><head><meta charset="utf-8">')
  add("<title>herd job " .. esc(summary.job_id) .. "</title>")
  add("<style>" .. style .. "</style></head><body>")
  add("<h1>Job " .. esc(summary.job_id) .. "</h1>")
  add(string.format('<p class="meta">on %s: %s after %.1f s; %d samples every %d ms</p>',
    esc(summary.host), esc(summary.state or "?"), summary.elapsed_s or 0,
    summary.samples or 0, summary.period_ms or 0))
  add("<h2>Summary</h2>")
  add(summary_table(summary))
  add(string.format('<p class="legend">GPU util: percent of the time a kernel ran; idle: the ' ..
    "share of the samples with the rank's GPUs under %g%% busy (its CPU under %g%% of a core " ..
    "when it has no GPU); CPU: percent of one core, the rank's processes together.</p>",
    summary.idle_below_pct or 5, summary.idle_below_pct or 5))
  local held, used = summary.gpu_hours_held or 0, summary.gpu_hours_used
  add(string.format('<p id="gpu-hours">GPU-hours: %.4f held (%d GPUs), %s</p>', held,
    summary.gpus_held or 0, num(used) and string.format("%.4f used (%s of held)", used,
      held > 0 and pct(100 * used / held) or "-") or "used not measured"))
  for _, note in ipairs({ summary.gpu_note, summary.remote_note }) do
    if type(note) == "string" then add('<p class="note">' .. esc(note) .. "</p>") end
  end
  add("<h2>Warnings</h2>")
  if #(summary.warnings or {}) == 0 then
    add('<p id="warnings">none</p>')
  else
    add('<ul class="warnings" id="warnings">')
    for _, w in ipairs(summary.warnings) do add("<li>" .. esc(w) .. "</li>") end
    add("</ul>")
  end
  add("<h2>Plots</h2>")
  for _, s in ipairs(svgs) do
    add('<figure id="' .. s.id .. '">' .. s.text .. "</figure>")
  end
  add("</body></html>")
  return table.concat(out, "\n") .. "\n"
end

function M.write(dir)
  assert(type(dir) == "string", "herd.report.write: dir must be a string")
  local summary, msg = read_json(dir .. "/summary.json")
  if not summary then return nil, msg, "HERD_EFORMAT" end
  local series
  series, msg = read_json(dir .. "/series.json")
  if not series then return nil, msg, "HERD_EFORMAT" end
  local util, mem, power, cpu = plot_series(series)
  local none = summary.gpu_note
  local plots = {
    { id = "gpu_util", series = util, title = "GPU utilization", ylabel = "GPU utilization",
      yunit = "%", ymax = 100 },
    { id = "gpu_memory", series = mem, title = "GPU memory used", ylabel = "GPU memory used",
      yunit = "GiB" },
    { id = "cpu", series = cpu, title = "CPU use per rank", ylabel = "CPU",
      yunit = "% of one core", legend = "rank" },
    { id = "power", series = power, title = "GPU power", ylabel = "power", yunit = "W" },
  }
  local paths, svgs = {}, {}
  for _, p in ipairs(plots) do
    local caption, legend = nil, p.legend or "rank, GPU"
    if #p.series == 0 then
      caption = type(none) == "string" and none or "nothing was sampled"
      legend = nil
    end
    -- every plot spans the whole run, from the launch
    local text = require("herd.plot").svg(p.series, {
      title = p.title, xlabel = "time", xunit = "s", ylabel = p.ylabel, yunit = p.yunit,
      xmin = 0, xmax = math.max(summary.elapsed_s or 0, 0.001), ymin = 0, ymax = p.ymax,
      legend = legend, caption = caption, width = 800, height = 400 })
    local path = dir .. "/" .. p.id .. ".svg"
    local ok, err, status = herd.write_file(path, text)
    if not ok then return nil, err, status end
    paths[#paths + 1] = path
    svgs[#svgs + 1] = { id = p.id, text = text }
  end
  local path = dir .. "/report.html"
  local ok, err, status = herd.write_file(path, page(summary, svgs))
  if not ok then return nil, err, status end
  paths[#paths + 1] = path
  return paths
end

return M
