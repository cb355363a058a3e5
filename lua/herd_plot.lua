-- herd.plot: line charts of a few series, in the terminal and as SVG.
--
--   local series = {
--     { name = "np=2", points = { { 1024, 0.8 }, { 4096, 2.1 }, { 16384, 3.9 } } },
--     { name = "np=4", points = { { 1024, 0.5 }, { 4096, 1.7 }, { 16384, 4.4 } } },
--   }
--   print(herd.plot.text(series, { logx = true, xunit = "bytes", ylabel = "busbw GB/s" }))
--   herd.plot.svg(series, { logx = true, title = "allreduce", path = "sweep.svg" })
--
-- Options of both: title, xlabel, ylabel; logx, logy (log-scaled axes:
-- powers of 2 for xunit/yunit "bytes", else of 10); xunit, yunit ("bytes"
-- writes 1K, 4M, 2G on that axis); xmin, xmax, ymin, ymax (default: the
-- data's range; a linear y axis starts at 0 when the data are positive).
-- text: width (default 80 columns, the whole chart), height (default 20
-- rows of plot), color (ANSI colours per series; default: stdout is a
-- terminal).  Each series is drawn with its own mark (* + o x # @ % &),
-- points joined by dots, and named in a legend under the chart; with
-- color = false every character is plain ASCII.  svg: width, height
-- (pixels, default 800 x 500), path (also write the file); returns the
-- SVG text.  Points with a missing or non-finite coordinate, or one not
-- above 0 on a log axis, are left out.

local M = {}

local marks = { "*", "+", "o", "x", "#", "@", "%", "&" }
local ansi = { 31, 34, 32, 35, 33, 36, 91, 94 }
local palette = { "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
                  "#8c564b", "#e377c2" }

-- 1536 -> "1.5K" with xunit "bytes"; otherwise %g with 3 significant digits.
local function label(v, unit)
  if unit == "bytes" then
    local units = { "", "K", "M", "G", "T", "P" }
    local i = 1
    while math.abs(v) >= 1024 and i < #units do v = v / 1024; i = i + 1 end
    local s = string.format("%.3g", v)
    return s .. units[i]
  end
  if v ~= 0 and (math.abs(v) >= 1e6 or math.abs(v) < 1e-3) then
    return string.format("%.2e", v)
  end
  return string.format("%.4g", v)
end
M.label = label

local function finite(v)
  return type(v) == "number" and v == v and v ~= math.huge and v ~= -math.huge
end

-- The points that can be drawn, and the range of each axis.
local function prepare(series, opts)
  assert(type(series) == "table", "herd.plot: series must be an array of {name =, points =}")
  local xmin, xmax, ymin, ymax = math.huge, -math.huge, math.huge, -math.huge
  local clean = {}
  for i, s in ipairs(series) do
    assert(type(s.points) == "table", "herd.plot: series " .. i .. " has no points")
    local pts = {}
    for _, p in ipairs(s.points) do
      local x, y = p[1] or p.x, p[2] or p.y
      if finite(x) and finite(y) and (not opts.logx or x > 0) and (not opts.logy or y > 0) then
        pts[#pts + 1] = { x, y }
        xmin, xmax = math.min(xmin, x), math.max(xmax, x)
        ymin, ymax = math.min(ymin, y), math.max(ymax, y)
      end
    end
    table.sort(pts, function(a, b) return a[1] < b[1] end)
    clean[#clean + 1] = { name = tostring(s.name or ("series " .. i)), points = pts }
  end
  if xmin > xmax then xmin, xmax, ymin, ymax = 1, 10, 1, 10 end
  if not opts.logy and ymin > 0 then ymin = 0 end
  if not opts.logy and ymax > ymin then ymax = ymax + 0.05 * (ymax - ymin) end -- headroom
  xmin, xmax = opts.xmin or xmin, opts.xmax or xmax
  ymin, ymax = opts.ymin or ymin, opts.ymax or ymax
  if xmin == xmax then
    if opts.logx then xmin, xmax = xmin / 2, xmax * 2 else xmin, xmax = xmin - 1, xmax + 1 end
  end
  if ymin == ymax then
    if opts.logy then ymin, ymax = ymin / 2, ymax * 2 else ymin, ymax = ymin - 1, ymax + 1 end
  end
  return clean, xmin, xmax, ymin, ymax
end

-- A scale from data to [0, 1] along one axis.
local function scale(lo, hi, log)
  if log then
    local a, b = math.log(lo), math.log(hi)
    return function(v) return (math.log(v) - a) / (b - a) end
  end
  return function(v) return (v - lo) / (hi - lo) end
end

-- Tick values: powers of the base on a log axis, round steps on a linear one.
local function ticks(lo, hi, log, unit, want)
  local out = {}
  if log then
    local base = unit == "bytes" and 2 or 10
    local e0 = math.floor(math.log(lo, base) + 1e-9)
    local e1 = math.ceil(math.log(hi, base) - 1e-9)
    local step = math.max(1, math.ceil((e1 - e0 + 1) / want))
    if base == 2 and step < 10 and (e1 - e0) > want then
      step = math.ceil(step / 2) * 2
    end
    for e = e0, e1, step do
      local v = base ^ e
      if v >= lo * (1 - 1e-9) and v <= hi * (1 + 1e-9) then out[#out + 1] = v end
    end
    if #out >= 2 then return out end
  end
  local raw = (hi - lo) / math.max(1, want)
  local mag = 10 ^ math.floor(math.log(raw, 10))
  local step = mag
  for _, m in ipairs({ 1, 2, 2.5, 5, 10 }) do
    if m * mag >= raw then step = m * mag; break end
  end
  local v = math.ceil(lo / step - 1e-9) * step
  while v <= hi + step * 1e-9 and #out < 50 do
    out[#out + 1] = math.abs(v) < step * 1e-9 and 0 or v
    v = v + step
  end
  return out
end
M.ticks = ticks

local function is_tty()
  return herd ~= nil and herd.tty ~= nil and herd.tty()
end

-- The chart as text: a y axis with labels, the plot, an x axis, a legend.
function M.text(series, opts)
  opts = opts or {}
  local width, height = opts.width or 80, opts.height or 20
  assert(width >= 30 and height >= 5, "herd.plot.text: at least 30 columns and 5 rows")
  local color = opts.color
  if color == nil then color = is_tty() end
  local clean, xmin, xmax, ymin, ymax = prepare(series, opts)
  local yt = ticks(ymin, ymax, opts.logy, opts.yunit, math.max(2, height // 4))
  local ylabels, lw = {}, 0
  for i, v in ipairs(yt) do ylabels[i] = label(v, opts.yunit); lw = math.max(lw, #ylabels[i]) end
  local pw = width - lw - 2           -- plot columns, after "label |"
  local sx, sy = scale(xmin, xmax, opts.logx), scale(ymin, ymax, opts.logy)
  local grid, owner = {}, {}
  for r = 1, height do grid[r], owner[r] = {}, {} end
  local function col(x) return math.floor(sx(x) * (pw - 1) + 0.5) + 1 end
  local function row(y) return height - math.floor(sy(y) * (height - 1) + 0.5) end
  local function put(r, c, ch, s)
    if r >= 1 and r <= height and c >= 1 and c <= pw then
      if ch ~= "." or grid[r][c] == nil then grid[r][c], owner[r][c] = ch, s end
    end
  end
  for si, s in ipairs(clean) do
    local mark = marks[(si - 1) % #marks + 1]
    for i = 2, #s.points do               -- dots between points
      local c0, r0 = col(s.points[i - 1][1]), row(s.points[i - 1][2])
      local c1, r1 = col(s.points[i][1]), row(s.points[i][2])
      local n = math.max(math.abs(c1 - c0), math.abs(r1 - r0))
      for k = 1, n - 1 do
        put(math.floor(r0 + (r1 - r0) * k / n + 0.5), math.floor(c0 + (c1 - c0) * k / n + 0.5), ".", si)
      end
    end
    for _, p in ipairs(s.points) do put(row(p[2]), col(p[1]), mark, si) end
  end
  local lines = {}
  if opts.title then lines[#lines + 1] = string.rep(" ", math.max(0, (width - #opts.title) // 2)) .. opts.title end
  if opts.ylabel then lines[#lines + 1] = opts.ylabel end
  local at = {}
  for i, v in ipairs(yt) do at[row(v)] = ylabels[i] end
  for r = 1, height do
    local cells = {}
    for c = 1, pw do
      local ch = grid[r][c] or " "
      if color and grid[r][c] then
        ch = string.format("\27[%dm%s\27[0m", ansi[(owner[r][c] - 1) % #ansi + 1], ch)
      end
      cells[c] = ch
    end
    lines[#lines + 1] = string.format("%" .. lw .. "s |", at[r] or "") .. table.concat(cells)
  end
  -- the x axis: a rule with tick marks, and labels that do not overlap
  local rule = {}
  for c = 1, pw do rule[c] = "-" end
  local xt = ticks(xmin, xmax, opts.logx, opts.xunit, math.max(2, pw // 10))
  local free = 1
  local lab = {}
  for c = 1, pw + 8 do lab[c] = " " end
  for _, v in ipairs(xt) do
    local c = col(v)
    rule[c] = "+"
    local text = label(v, opts.xunit)
    local start = math.max(1, math.min(c - #text // 2, pw - #text + 1))
    if start >= free then
      for k = 1, #text do lab[start + k - 1] = text:sub(k, k) end
      free = start + #text + 1
    end
  end
  lines[#lines + 1] = string.rep(" ", lw) .. " +" .. table.concat(rule)
  lines[#lines + 1] = (string.rep(" ", lw + 2) .. table.concat(lab)):gsub("%s+$", "")
  if opts.xlabel then
    lines[#lines + 1] = string.rep(" ", lw + 2 + math.max(0, (pw - #opts.xlabel) // 2)) .. opts.xlabel
  end
  -- the legend, as many entries to a line as fit the width
  local line, used = string.rep(" ", lw + 2), lw + 2
  for si, s in ipairs(clean) do
    local mark = marks[(si - 1) % #marks + 1]
    local entry = mark .. " " .. s.name
    local gap = used > lw + 2 and 3 or 0
    if used + gap + #entry > width and used > lw + 2 then
      lines[#lines + 1] = line
      line, used, gap = string.rep(" ", lw + 2), lw + 2, 0
    end
    if color then mark = string.format("\27[%dm%s\27[0m", ansi[(si - 1) % #ansi + 1], mark) end
    line = line .. string.rep(" ", gap) .. mark .. " " .. s.name
    used = used + gap + #entry
  end
  lines[#lines + 1] = line
  return table.concat(lines, "\n")
end

local function esc(s)
  return (tostring(s):gsub("[&<>\"]", { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;" }))
end

-- The chart as an SVG document (and in opts.path when given).
function M.svg(series, opts)
  opts = opts or {}
  local W, H = opts.width or 800, opts.height or 500
  local clean, xmin, xmax, ymin, ymax = prepare(series, opts)
  -- the legend goes right of the plot when its names fit 40% of the width,
  -- else under the plot, one entry per line (the picture grows for it)
  local longest = 0
  for _, s in ipairs(clean) do longest = math.max(longest, #s.name) end
  local legend_w = 60 + math.ceil(7.5 * longest)
  local below = legend_w > 0.4 * W
  local left, right, top, bottom = 80, below and 30 or legend_w, opts.title and 50 or 25, 60
  local pw, ph = W - left - right, H - top - bottom
  if below then H = H + 10 + 22 * #clean end
  local sx, sy = scale(xmin, xmax, opts.logx), scale(ymin, ymax, opts.logy)
  local function X(x) return left + sx(x) * pw end
  local function Y(y) return top + (1 - sy(y)) * ph end
  local out = {}
  local function add(fmt, ...) out[#out + 1] = string.format(fmt, ...) end
  add('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" ' ..
      'font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="13">', W, H, W, H)
  add('<rect x="0" y="0" width="%d" height="%d" fill="white"/>', W, H)
  if opts.title then
    add('<text x="%.1f" y="30" text-anchor="middle" font-size="17" font-weight="bold">%s</text>',
        left + pw / 2, esc(opts.title))
  end
  -- grid and ticks
  for _, v in ipairs(ticks(xmin, xmax, opts.logx, opts.xunit, 8)) do
    local x = X(v)
    add('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e0e0e0"/>', x, top, x, top + ph)
    add('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/>', x, top + ph, x, top + ph + 5)
    add('<text x="%.1f" y="%d" text-anchor="middle">%s</text>', x, top + ph + 20, esc(label(v, opts.xunit)))
  end
  for _, v in ipairs(ticks(ymin, ymax, opts.logy, opts.yunit, 6)) do
    local y = Y(v)
    add('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e0e0e0"/>', left, y, left + pw, y)
    add('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black"/>', left - 5, y, left, y)
    add('<text x="%d" y="%.1f" text-anchor="end" dominant-baseline="middle">%s</text>', left - 8, y,
        esc(label(v, opts.yunit)))
  end
  add('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="black"/>', left, top, pw, ph)
  if opts.xlabel then
    add('<text x="%.1f" y="%d" text-anchor="middle">%s</text>', left + pw / 2, top + ph + 45, esc(opts.xlabel))
  end
  if opts.ylabel then
    add('<text x="20" y="%.1f" text-anchor="middle" transform="rotate(-90 20 %.1f)">%s</text>',
        top + ph / 2, top + ph / 2, esc(opts.ylabel))
  end
  -- series
  for si, s in ipairs(clean) do
    local colr = palette[(si - 1) % #palette + 1]
    local pts = {}
    for _, p in ipairs(s.points) do pts[#pts + 1] = string.format("%.1f,%.1f", X(p[1]), Y(p[2])) end
    if #pts > 1 then
      add('<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>', table.concat(pts, " "), colr)
    end
    for _, p in ipairs(s.points) do
      add('<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>', X(p[1]), Y(p[2]), colr)
    end
    local lx, ly = left + pw + 15, top + 10 + (si - 1) * 22
    if below then lx, ly = left, top + ph + bottom + 5 + (si - 1) * 22 end
    add('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>', lx, ly, lx + 25, ly, colr)
    add('<circle cx="%d" cy="%d" r="3.5" fill="%s"/>', lx + 12, ly, colr)
    add('<text x="%d" y="%d" dominant-baseline="middle">%s</text>', lx + 32, ly, esc(s.name))
  end
  add('</svg>')
  local text = table.concat(out, "\n") .. "\n"
  if opts.path then
    local ok, msg, status = herd.write_file(opts.path, text)
    if not ok then return nil, msg, status end
  end
  return text
end

return M
