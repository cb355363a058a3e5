-- help: every function, method and type of the API has an entry, and
-- docs/lua.md is the reference that help renders.
local missing = {}
local function check(f, where)
  local text = herd.help.text(f)
  if not text then missing[#missing + 1] = where end
end
for k, v in pairs(herd) do
  if type(v) == "function" then check(v, "herd." .. k) end
  if type(v) == "table" then
    for k2, v2 in pairs(v) do
      if type(v2) == "function" and k2:sub(1, 1) ~= "_" then check(v2, "herd." .. k .. "." .. k2) end
    end
  end
end
for tname, mt in pairs(debug.getregistry()) do
  if type(tname) == "string" and tname:match("^herd%.%u") and tname ~= "herd.Held" then
    assert(herd.help.text(tname), "no entry for type " .. tname)
    for name, kind in pairs(rawget(mt, "__members") or {}) do
      if kind == "method" then
        assert(herd.help.text(tname .. ":" .. name), "no entry for " .. tname .. ":" .. name)
      end
    end
  end
end
-- the modules' own helpers that are not the API
local internal = { ["herd.pretty.defaults"] = true, ["herd.pretty.quote"] = true,
                   ["herd.plot.label"] = true, ["herd.plot.ticks"] = true, ["herd.plot.word"] = true,
                   ["herd.experiment.stats"] = true, ["herd.experiment.run"] = true,
                   ["herd.help.help"] = true, ["herd.help.text"] = true,
                   ["herd.help.markdown"] = true, ["herd.help.names"] = true }
local really = {}
for _, m in ipairs(missing) do if not internal[m] then really[#really + 1] = m end end
assert(#really == 0, "no help entry for " .. table.concat(really, ", "))

-- lookups by name and by value
assert(herd.help.text("launch"):match("^herd%.launch{"))
assert(herd.help.text("job:wait"):match("^herd%.Job:wait"))
assert(herd.help.text(herd.buffer("int8", 1)):match("^herd%.Buffer\n"))
assert(herd.help.text(herd.buffer("int8", 1).close):match("^obj:close"))
assert(herd.help.text("herd.Comm:ireduce"):match("^herd%.Comm:iallreduce"))
local none, msg = herd.help.text("nonsense")
assert(none == nil and msg:find("no entry named 'nonsense'", 1, true))
assert(select(2, herd.help.text(print)):find("not part of herd's API", 1, true))
assert(help == herd.help)

-- wrapped to a width: every line within it, the words unchanged, the
-- heading's continuation indented
local function lines_of(text)
  local t = {}
  for l in (text .. "\n"):gmatch("(.-)\n") do t[#t + 1] = l end
  return t
end
local function words_of(text)
  local t = {}
  for w in text:gmatch("%S+") do t[#t + 1] = w end
  return table.concat(t, " ")
end
for _, width in ipairs({ 24, 40, 72, 200 }) do
  for _, name in ipairs({ "herd.store.connect", "launch", "herd.Buffer" }) do
    local plain, wrapped = herd.help.text(name), herd.help.text(name, width)
    assert(words_of(plain) == words_of(wrapped), name)
    local longest = 0
    for _, l in ipairs(lines_of(wrapped)) do
      assert(#l <= width or not l:find(" ", 1, true), ("%s at %d: %q"):format(name, width, l))
      longest = math.max(longest, #l)
    end
    assert(width >= 200 or longest >= width - 12, ("%s at %d: longest line %d"):format(name, width, longest))
  end
end
local heading = lines_of(herd.help.text("herd.store.connect", 40))
assert(heading[1] == "herd.store.connect([address[, secret[," and heading[2]:match("^    %S"), heading[2])
assert(herd.help.text(nil, 40):match("\n  The herd module: herd.version,\n    herd%."))

-- docs/lua.md is the rendering (regenerate: build/bin/herd -e 'io.write(herd.help.markdown())' > docs/lua.md)
local f = assert(io.open("docs/lua.md"))
local doc = f:read("a")
f:close()
assert(doc == herd.help.markdown(), "docs/lua.md differs from herd.help.markdown(): regenerate it")
print("help.lua: ok")
