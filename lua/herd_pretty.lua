-- herd.pretty: readable text for Lua values, tables above all.
--
--   local pretty = require "herd.pretty"   -- also herd.pretty
--   pretty.format({b = 2, a = {1, 2, 3}})  --> '{ a = { 1, 2, 3 }, b = 2 }'
--   pretty.print(v1, v2, ...)              -- what the REPL prints results with
--
-- Tables are written as Lua constructors: the array part (1..n) first, then
-- the other keys sorted (numbers, then strings, then the rest by tostring),
-- strings quoted.  A table that fits on one line within `width` stays on one
-- line; otherwise each entry gets its own line, indented.  A table met again
-- inside itself is written <cycle>; tables deeper than `max_depth` are written
-- {...}; past `max_items` entries a table ends with "... (N more)".  A table
-- whose metatable has __tostring is written through it, as are userdata.

local M = {}

M.defaults = {
  indent = "  ",    -- one level of indentation
  width = 80,       -- the longest line a table is kept on one line within
  max_depth = 8,    -- nesting shown before {...}
  max_items = 50,   -- entries shown per table before "... (N more)"
}

local keywords = {}
for w in ([[and break do else elseif end false for function goto if in
  local nil not or repeat return then true until while]]):gmatch("%a+") do
  keywords[w] = true
end

local escapes = {
  ["\\"] = "\\\\", ['"'] = '\\"', ["\n"] = "\\n", ["\t"] = "\\t",
  ["\r"] = "\\r", ["\a"] = "\\a", ["\b"] = "\\b", ["\f"] = "\\f", ["\v"] = "\\v",
}

-- A string as a Lua literal that reads back to the same bytes.
local function quote(s)
  return '"' .. s:gsub('[%c"\\\127]', function(c)
    return escapes[c] or string.format("\\%03d", c:byte())
  end) .. '"'
end
M.quote = quote

local function is_identifier(k)
  return type(k) == "string" and k:match("^[%a_][%w_]*$") ~= nil
    and not keywords[k]
end

-- Sort order of keys: numbers, strings, booleans, then anything else.
local type_rank = { number = 1, string = 2, boolean = 3 }

local function key_less(a, b)
  local ta, tb = type(a), type(b)
  local ra, rb = type_rank[ta] or 4, type_rank[tb] or 4
  if ra ~= rb then return ra < rb end
  if ta == "number" or ta == "string" then return a < b end
  if ta == "boolean" then return (not a) and b end
  return tostring(a) < tostring(b)
end

local function has_tostring(v)
  local mt = getmetatable(v)
  return type(mt) == "table" and rawget(mt, "__tostring") ~= nil
end

local function scalar(v)
  local t = type(v)
  if t == "string" then return quote(v) end
  if math.type(v) == "float" then
    -- Keep floats recognisable as floats and exact enough to read back.
    if v ~= v then return "0/0" end
    if v == math.huge then return "math.huge" end
    if v == -math.huge then return "-math.huge" end
    local s = string.format("%.14g", v)
    if tonumber(s) ~= v then s = string.format("%.17g", v) end
    if not s:find("[.eEn]") then s = s .. ".0" end
    return s
  end
  local ok, s = pcall(tostring, v)
  return ok and s or ("<" .. t .. ": __tostring failed>")
end

local format_value

local function format_table(t, opts, level, visiting)
  if has_tostring(t) then return scalar(t) end
  if visiting[t] then return "<cycle>" end
  if next(t) == nil then return "{}" end
  if level >= opts.max_depth then return "{...}" end
  visiting[t] = true

  local n = 0
  while rawget(t, n + 1) ~= nil do n = n + 1 end
  local keys = {}
  for k in next, t do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then
      keys[#keys + 1] = k
    end
  end
  table.sort(keys, key_less)

  local items, total = {}, n + #keys
  local shown = math.min(total, opts.max_items)
  for i = 1, shown do
    if i <= n then
      items[i] = format_value(rawget(t, i), opts, level + 1, visiting)
    else
      local k = keys[i - n]
      local ks = is_identifier(k) and k
        or "[" .. format_value(k, opts, level + 1, visiting) .. "]"
      items[i] = ks .. " = " .. format_value(rawget(t, k), opts, level + 1, visiting)
    end
  end
  if total > shown then
    items[#items + 1] = string.format("... (%d more)", total - shown)
  end
  visiting[t] = nil

  local one = "{ " .. table.concat(items, ", ") .. " }"
  if #one + #opts.indent * level <= opts.width and not one:find("\n", 1, true) then
    return one
  end
  local pad = opts.indent:rep(level + 1)
  if #keys == 0 and not one:find("\n", 1, true) then
    -- An array of short items: as many to a line as fit.
    local lines, line = {}, pad .. items[1] .. ","
    for i = 2, #items do
      if #line + 1 + #items[i] + 1 > opts.width then
        lines[#lines + 1] = line
        line = pad .. items[i] .. ","
      else
        line = line .. " " .. items[i] .. ","
      end
    end
    lines[#lines + 1] = line
    return "{\n" .. table.concat(lines, "\n") .. "\n" .. opts.indent:rep(level) .. "}"
  end
  return "{\n" .. pad .. table.concat(items, ",\n" .. pad) .. ",\n"
    .. opts.indent:rep(level) .. "}"
end

function format_value(v, opts, level, visiting)
  if type(v) == "table" then return format_table(v, opts, level, visiting) end
  return scalar(v)
end

local function options(opts)
  if opts == nil then return M.defaults end
  if type(opts) ~= "table" then
    error("bad argument #2 to 'format' (table expected, got " .. type(opts) .. ")", 3)
  end
  local o = {}
  for k, v in pairs(M.defaults) do o[k] = v end
  for k, v in pairs(opts) do
    if M.defaults[k] == nil then
      error("bad argument #2 to 'format' (unknown option '" .. tostring(k) .. "')", 3)
    end
    o[k] = v
  end
  return o
end

--- The text of any value; strings are quoted.
-- opts: indent, width, max_depth, max_items (see M.defaults).
function M.format(v, opts)
  return format_value(v, options(opts), 0, {})
end

-- A size in bytes as people read it: 85520809984 -> "79.6 GiB".
local function human_bytes(n)
  local units = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" }
  local i = 1
  while n >= 1024 and i < #units do n = n / 1024; i = i + 1 end
  return i == 1 and string.format("%d B", n) or string.format("%.1f %s", n, units[i])
end

-- A field's value in an object's summary: arrays of records by their
-- names ("8 x NVIDIA H100 80GB HBM3"), sizes in bytes with their reading.
local function summary(k, v, opts)
  if type(v) == "table" and not has_tostring(v) and #v > 0 and type(v[1]) == "table" then
    local names, same = {}, true
    for i, x in ipairs(v) do
      names[i] = type(x) == "table" and type(rawget(x, "name")) == "string" and x.name or nil
      if names[i] == nil then names = nil; break end
      same = same and names[i] == names[1]
    end
    if names and same then return string.format("%d x %s", #v, quote(names[1])) end
    if names then return M.format(names, opts) end
    return string.format("{ %d items }", #v)
  end
  local s = M.format(v, opts)
  if math.type(v) == "integer" and v > 0 and type(k) == "string" and k:match("_bytes$") then
    s = s .. " -- " .. human_bytes(v)
  end
  return s
end

--- An object of the herd bindings with its fields, one per line: the
-- fields its metatable's __members names (what tab completion offers),
-- summarized.  Other values as M.format.
function M.object(v, opts)
  local mt = getmetatable(v)
  local members = type(mt) == "table" and rawget(mt, "__members")
  if type(members) ~= "table" then return M.format(v, opts) end
  local names = {}
  for k, kind in pairs(members) do if kind == "field" then names[#names + 1] = k end end
  table.sort(names)
  local head = tostring(v)
  if #names == 0 then return head end
  local o = options(opts)
  o = setmetatable({ max_depth = 2, width = o.width - 4 }, { __index = o })
  local lines, width = { head }, 0
  for _, k in ipairs(names) do width = math.max(width, #k) end
  for _, k in ipairs(names) do
    local ok, x = pcall(function() return v[k] end)
    if not ok then return head end     -- a closed object: its text says so
    if x ~= nil then
      lines[#lines + 1] = string.format("  %-" .. width .. "s = %s", k,
                                        (summary(k, x, o):gsub("\n", "\n  ")))
    end
  end
  return table.concat(lines, "\n")
end

--- Writes its arguments to stdout separated by tabs, as print does, but
-- tables formatted by M.format and herd objects by M.object.  The REPL
-- shows results through it.
function M.print(...)
  local n = select("#", ...)
  local out = {}
  for i = 1, n do
    local v = select(i, ...)
    if type(v) == "table" and not has_tostring(v) then
      out[i] = M.format(v)
    elseif type(v) == "userdata" then
      out[i] = M.object(v)
    else
      out[i] = tostring(v)
    end
  end
  io.stdout:write(table.concat(out, "\t"), "\n")
end

return M
