-- herd.plot: line charts of a few series, in the terminal and as SVG.
--
--   local series = {
--     { name = "tcp", points = { { 1024, 0.8, 0.7, 0.9 }, { 4096, 2.1 }, { 16384, 3.9 } } },
--     { name = "shm", points = { { 1024, 0.5 }, { 4096, 1.7 }, { 16384, 4.4 } } },
--   }
--   print(herd.plot.text(series, { logx = true, xlabel = "size", xunit = "bytes",
--                                  ylabel = "busbw", yunit = "GB/s" }))
--   herd.plot.svg(series, { logx = true, title = "allreduce", path = "sweep.svg" })
--
-- A point is { x, y } or { x, y, lo, hi } (also x =, y =, lo =, hi =):
-- lo..hi, the spread of the samples behind y, is drawn as a shaded band
-- around the series' line in SVG (an error bar for a lone point) and as
-- bars of | in the terminal.  Options of both: title, xlabel, ylabel;
-- xunit, yunit (a unit the axis title carries, "size (bytes)"; "bytes"
-- also writes 1K, 4M, 2G on that axis); logx, logy (log-scaled axes:
-- powers of 2 for "bytes", else of 10); xmin, xmax, ymin, ymax (default:
-- the data's range, bands included; a linear y axis starts at 0 when the
-- data are positive); legend (a heading for the legend: what the series
-- differ by); caption (a line under the chart: what the lines and bands
-- show).  A series' name is written as a word: a string as it is, a
-- number in its shortest form, a table through herd.pretty.format.
-- text: width (default 80 columns, the whole chart), height (default 20
-- rows of plot), color (ANSI colours per series; default: stdout is a
-- terminal).  Each series is drawn with its own mark (* + o x # @ % &),
-- points joined by dots, and named in a legend under the chart; with
-- color = false every character is plain ASCII.  svg: width, height
-- (pixels, default 800 x 500), path (also write the file); returns the
-- SVG text.  Points with a missing or non-finite coordinate, or one not
-- above 0 on a log axis, are left out (a band's ends likewise).

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

-- A value as a legend or a label shows it: a string as it is, an integer
-- in full, a float in its fewest digits (%.4g's precision at most), a
-- table as herd.pretty writes it.
local function word(v)
  if type(v) == "string" then return v end
  if math.type(v) == "float" then
    for p = 1, 4 do
      local s = string.format("%." .. p .. "g", v)
      if tonumber(s) == v then return s end
    end
    return string.format("%.4g", v)
  end
  if type(v) == "table" and not (getmetatable(v) and getmetatable(v).__tostring) then
    return require("herd.pretty").format(v)
  end
  return tostring(v)
end
M.word = word

-- An axis title with its unit: "size (bytes)"; the label alone when it
-- names the unit already, the unit alone when there is no label.
local function axis_title(label, unit)
  if unit == nil or unit == "" then return label end
  if label == nil then return unit end
  if label:find(unit, 1, true) then return label end
  return label .. " (" .. unit .. ")"
end

-- The points that can be drawn, and the range of each axis.
local function prepare(series, opts)
  assert(type(series) == "table", "herd.plot: series must be an array of {name =, points =}")
  local xmin, xmax, ymin, ymax = math.huge, -math.huge, math.huge, -math.huge
  local clean = {}
  for i, s in ipairs(series) do
    assert(type(s.points) == "table", "herd.plot: series " .. i .. " has no points")
    local pts, band = {}, false
    local function usable(v) return finite(v) and (not opts.logy or v > 0) end
    for _, p in ipairs(s.points) do
      local x, y = p[1] or p.x, p[2] or p.y
      if finite(x) and finite(y) and (not opts.logx or x > 0) and (not opts.logy or y > 0) then
        local lo, hi = p[3] or p.lo, p[4] or p.hi
        if not (usable(lo) and usable(hi)) then lo, hi = nil, nil end
        pts[#pts + 1] = { x, y, lo, hi }
        band = band or lo ~= nil
        xmin, xmax = math.min(xmin, x), math.max(xmax, x)
        ymin, ymax = math.min(ymin, y, lo or y), math.max(ymax, y, hi or y)
      end
    end
    table.sort(pts, function(a, b) return a[1] < b[1] end)
    clean[#clean + 1] = { name = s.name ~= nil and word(s.name) or ("series " .. i),
                          points = pts, band = band }
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
  for si, s in ipairs(clean) do          -- bars from lo to hi, under the rest
    for _, p in ipairs(s.points) do
      if p[3] then
        for r = row(p[4]), row(p[3]) do
          if grid[r] and grid[r][col(p[1])] == nil then put(r, col(p[1]), "|", si) end
        end
      end
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
  local ytitle, xtitle = axis_title(opts.ylabel, opts.yunit), axis_title(opts.xlabel, opts.xunit)
  if ytitle then lines[#lines + 1] = ytitle end
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
  if xtitle then
    lines[#lines + 1] = string.rep(" ", lw + 2 + math.max(0, (pw - #xtitle) // 2)) .. xtitle
  end
  -- the legend after its heading, as many entries to a line as fit the
  -- width; then the caption, wrapped likewise
  local line, used = string.rep(" ", lw + 2), lw + 2
  if opts.legend then
    local legend = word(opts.legend)
    line, used = line .. legend .. ":", used + #legend + 1
  end
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
  if opts.caption then
    line = string.rep(" ", lw + 2)
    for w in tostring(opts.caption):gmatch("%S+") do
      if #line > lw + 2 and #line + 1 + #w > width then
        lines[#lines + 1] = line
        line = string.rep(" ", lw + 2)
      end
      line = line .. (#line > lw + 2 and " " or "") .. w
    end
    lines[#lines + 1] = line
  end
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
  local legend = opts.legend and word(opts.legend)
  -- the legend goes right of the plot when its names (and its heading, in
  -- bold from where the entries' marks start) fit 40% of the width, else
  -- under the plot, one entry per line (the picture grows for it)
  local longest = legend and math.ceil((8.5 * #legend - 35) / 7.5) or 0
  for _, s in ipairs(clean) do longest = math.max(longest, #s.name) end
  local legend_w = 60 + math.ceil(7.5 * longest)
  local below = legend_w > 0.4 * W
  local heading = legend and 1 or 0
  local left, right, top = 80, below and 30 or legend_w, opts.title and 50 or 25
  local bottom = opts.caption and 80 or 60
  local pw, ph = W - left - right, H - top - bottom
  if below then H = H + 10 + 22 * (#clean + heading) end
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
  local xtitle, ytitle = axis_title(opts.xlabel, opts.xunit), axis_title(opts.ylabel, opts.yunit)
  if xtitle then
    add('<text class="xlabel" x="%.1f" y="%d" text-anchor="middle">%s</text>', left + pw / 2,
        top + ph + 45, esc(xtitle))
  end
  if ytitle then
    add('<text class="ylabel" x="20" y="%.1f" text-anchor="middle" transform="rotate(-90 20 %.1f)">%s</text>',
        top + ph / 2, top + ph / 2, esc(ytitle))
  end
  if opts.caption then
    add('<text class="caption" x="%.1f" y="%d" text-anchor="middle" font-size="12" fill="#444">%s</text>',
        left + pw / 2, top + ph + 68, esc(opts.caption))
  end
  -- the legend's heading
  local lx0, ly0 = left + pw + 15, top + 10
  if below then lx0, ly0 = left, top + ph + bottom + 5 end
  if legend then
    add('<text class="legend-title" x="%d" y="%d" dominant-baseline="middle" font-weight="bold">%s</text>',
        lx0, ly0, esc(legend))
  end
  -- series: the band of lo..hi first, the line and points over it
  for si, s in ipairs(clean) do
    local colr = palette[(si - 1) % #palette + 1]
    local upper, lower = {}, {}
    for _, p in ipairs(s.points) do
      if p[3] then
        upper[#upper + 1] = string.format("%.1f,%.1f", X(p[1]), Y(p[4]))
        table.insert(lower, 1, string.format("%.1f,%.1f", X(p[1]), Y(p[3])))
      end
    end
    if #upper > 1 then
      add('<polygon class="band" points="%s %s" fill="%s" fill-opacity="0.2" stroke="none"/>',
          table.concat(upper, " "), table.concat(lower, " "), colr)
    elseif #upper == 1 then
      for _, p in ipairs(s.points) do
        if p[3] then
          local x = X(p[1])
          add('<path class="errorbar" d="M%.1f,%.1f V%.1f M%.1f,%.1f H%.1f M%.1f,%.1f H%.1f" ' ..
              'stroke="%s" stroke-width="1.5"/>', x, Y(p[4]), Y(p[3]), x - 5, Y(p[4]), x + 5,
              x - 5, Y(p[3]), x + 5, colr)
        end
      end
    end
  end
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
    local lx, ly = lx0, ly0 + (si - 1 + heading) * 22
    if s.band then
      add('<rect x="%d" y="%d" width="25" height="14" fill="%s" fill-opacity="0.2"/>', lx, ly - 7, colr)
    end
    add('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>', lx, ly, lx + 25, ly, colr)
    add('<circle cx="%d" cy="%d" r="3.5" fill="%s"/>', lx + 12, ly, colr)
    add('<text class="legend" x="%d" y="%d" dominant-baseline="middle">%s</text>', lx + 32, ly, esc(s.name))
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
