-- cmake/herd_man.lua: the manual pages of the herd program, made from the
-- program's own help at build time, so that a page says what `herd --help`,
-- `herd COMMAND --help` and `herd help env` say and cannot drift from them.
--
--   herd cmake/herd_man.lua HERD OUTDIR DATE SUMMARY
--
-- runs the program HERD and writes OUTDIR/herd.1 (the options, every
-- command, the HERD_* variables) and OUTDIR/herd-COMMAND.1 for each command
-- that `herd --help` lists (but help, which herd.1 covers), then compresses
-- each with gzip -9n, as Debian installs manual pages.  DATE (YYYY-MM-DD)
-- goes in the page headers, SUMMARY in herd.1's NAME line.
--
-- The help text becomes roff as help2man would make it: "usage:" lines are
-- the SYNOPSIS; a line "  TERM  definition" (a term of at most 40
-- characters, indented, two spaces before its definition, and the lines
-- indented as far as the definition that follow) is a tagged paragraph; a
-- short line "Word:" alone starts a section; other lines are filled text.

local herd, outdir, date, summary = arg[1], arg[2], arg[3], arg[4]
if not (herd and outdir and date and summary) then
  io.stderr:write("usage: herd herd_man.lua HERD OUTDIR DATE SUMMARY\n")
  os.exit(2)
end

local function shell_quote(s)
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

-- The standard output of HERD ARGS... (its stderr goes to the build's);
-- the build fails when it fails.
local function run(...)
  local words = { shell_quote(herd) }
  for _, a in ipairs({ ... }) do
    words[#words + 1] = shell_quote(a)
  end
  local cmd = table.concat(words, " ")
  local f = assert(io.popen(cmd, "r"))
  local out = f:read("a")
  local ok, how, code = f:close()
  if not ok then
    error(string.format("herd_man.lua: '%s' failed (%s %s):\n%s", cmd, how, code, out), 0)
  end
  return out
end

local function lines_of(text)
  local t = {}
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    t[#t + 1] = (line:gsub("%s+$", ""))
  end
  while #t > 0 and t[#t] == "" do
    t[#t] = nil
  end
  return t
end

-- Text as roff: a backslash printed as one, every hyphen a minus sign (so
-- that options copy and paste), and a leading . or ' not a request.
local function esc(s)
  s = s:gsub("\\", "\\e"):gsub("%-", "\\-")
  if s:match("^[.']") then
    s = "\\&" .. s
  end
  return s
end

local function indent_of(line)
  return #line:match("^ *")
end

-- "  TERM   definition": the term, the column (1-based) where the
-- definition starts, and the definition; nil for any other line.
local function split_term(line)
  local ind, term, gap, def = line:match("^( +)(%S.-)(  +)(%S.*)$")
  if not ind or #ind > 6 or #term > 40 or term:match("[.,;:!?]$") then
    return nil
  end
  return term, #ind + #term + #gap + 1, def
end

local function is_heading(line)
  return line:match("^%u[%a ]*:$") and select(2, line:gsub(" ", "")) < 3
end

-- Roff for the lines of one part of the help: filled paragraphs and tagged
-- paragraphs (.TP) for the term lines.
local function body(lines)
  local out = {}
  local mode, term_indent, def_col
  local function emit(s)
    out[#out + 1] = s
  end
  local prev = ""
  for _, line in ipairs(lines) do
    if line == "" then
      mode = nil
    elseif indent_of(line) == 0 and line:match(":$")
        and (mode ~= "para" or prev:match("[.:)]$") or indent_of(prev) > 0) then
      -- a heading of the help ("Exit status:", "Signals ...:"): a
      -- paragraph of its own, in bold
      emit(".PP")
      emit("\\fB" .. esc(line) .. "\\fR")
      mode = "heading"
    elseif mode == "list" and indent_of(line) >= def_col - 1 then
      -- the definition goes on
      emit(esc((line:gsub("^ +", ""))))
    else
      local term, col, def = split_term(line)
      if not term and mode == "list" and indent_of(line) == term_indent
          and line:match("^ *%-") and #line > def_col
          and line:sub(def_col - 1, def_col - 1) == " "
          and line:sub(def_col, def_col) ~= " " then
        -- an option that runs into the definitions' column, one space before it
        term, col, def = line:sub(1, def_col - 2):gsub("^ +", ""), def_col, line:sub(def_col)
      end
      if term then
        emit(".TP")
        emit("\\fB" .. esc(term) .. "\\fR")
        emit(esc(def))
        mode, term_indent, def_col = "list", indent_of(line), col
      else
        if mode ~= "para" then
          emit(".PP")
        end
        emit(esc((line:gsub("^ +", ""))))
        mode = "para"
      end
    end
    prev = line
  end
  return out
end

-- The "usage:" line and the lines indented under it: the synopsis; the
-- rest: the body.
local function split_usage(lines)
  local synopsis, i = {}, 1
  if lines[1] and lines[1]:match("^usage: ") then
    synopsis[1] = lines[1]:sub(8)
    i = 2
    while lines[i] and indent_of(lines[i]) >= 7 and lines[i] ~= "" do
      synopsis[#synopsis + 1] = lines[i]:gsub("^ +", "")
      i = i + 1
    end
  end
  local rest = {}
  for j = i, #lines do
    rest[#rest + 1] = lines[j]
  end
  return synopsis, rest
end

local function synopsis_roff(synopsis)
  local out = { ".SH SYNOPSIS", ".nf" }
  for _, s in ipairs(synopsis) do
    local prog, rest = s:match("^(herd %l[%w_-]*)(.*)$")
    if not prog then
      prog, rest = s:match("^(herd)(.*)$")
    end
    if prog then
      out[#out + 1] = "\\fB" .. esc(prog) .. "\\fR" .. esc(rest)
    else
      out[#out + 1] = esc(s)
    end
  end
  out[#out + 1] = ".fi"
  return out
end

local version = run("--version"):match("^herd (%S+)")
assert(version, "herd_man.lua: herd --version does not start with 'herd VERSION'")

local function header(name, section_name)
  return {
    string.format('.TH %s 1 "%s" "herd %s" "herd manual"', esc(name:upper()), date, version),
    -- no hyphenation, ragged right: options and paths stay whole
    ".nh",
    ".ad l",
    ".SH NAME",
    esc(name) .. " \\- " .. esc(section_name),
  }
end

local function write_page(name, parts)
  local path = outdir .. "/" .. name .. ".1"
  local f = assert(io.open(path, "w"))
  for _, part in ipairs(parts) do
    for _, l in ipairs(part) do
      f:write(l, "\n")
    end
  end
  assert(f:close())
  local ok = os.execute("gzip -9nf " .. shell_quote(path))
  if not ok then
    error("herd_man.lua: gzip -9nf " .. path .. " failed", 0)
  end
end

-- herd --help: the synopsis, sections ("Options:", "Commands:") and the
-- commands, each its usage lines and a summary (the text at the summary
-- column, or after two spaces on the first line).
local main_synopsis, main_rest = split_usage(lines_of(run("--help")))
local sections, commands = { { title = "DESCRIPTION", lines = {} } }, {}
local current = sections[1]
for _, line in ipairs(main_rest) do
  if is_heading(line) then
    current = { title = line:sub(1, -2):upper(), lines = {} }
    sections[#sections + 1] = current
  elseif current.title == "COMMANDS" and line:match("^  %l") then
    local usage, summary_text = line:match("^  (.-)%s%s+(%S.*)$")
    commands[#commands + 1] = {
      name = line:match("^  (%l[%w_-]*)"),
      usage = { usage or line:sub(3) },
      summary = { summary_text },
    }
  elseif current.title == "COMMANDS" and line:match("^ ") and #commands > 0 then
    local c = commands[#commands]
    if indent_of(line) >= 12 then
      c.summary[#c.summary + 1] = line:gsub("^ +", "")
    else
      c.usage[#c.usage + 1] = line:gsub("^ +", "")
    end
  else
    -- text after the command list belongs to the description
    if current.title == "COMMANDS" then
      current = sections[1]
    end
    current.lines[#current.lines + 1] = line
  end
end
assert(#commands > 0, "herd_man.lua: herd --help lists no commands under 'Commands:'")

local function summary_of(c)
  local s = table.concat(c.summary, " ")
  if s == "" then
    s = "herd " .. table.concat(c.usage, " ")
  end
  -- the page is that help: drop a pointer to it
  s = s:gsub(" %(see [%w_-]+ %-h%)$", ""):gsub("; see [%w_-]+ %-h%)$", ")")
  return s
end

local pages = {}
for _, c in ipairs(commands) do
  if c.name ~= "help" then
    pages[#pages + 1] = "herd-" .. c.name
  end
end

local function see_also(names)
  local out = { ".SH SEE ALSO" }
  local refs = {}
  for _, n in ipairs(names) do
    refs[#refs + 1] = "\\fB" .. esc(n) .. "\\fR(1)"
  end
  out[#out + 1] = table.concat(refs, ",\n")
  return out
end

-- herd help env: the table of variables (columns found from its header
-- line) as tagged paragraphs, the text between as paragraphs.
local function environment()
  local out = { ".SH ENVIRONMENT" }
  local cols
  local text = {}
  local function flush()
    for _, l in ipairs(body(text)) do
      out[#out + 1] = l
    end
    text = {}
  end
  for _, line in ipairs(lines_of(run("help", "env"))) do
    if line:match("^VARIABLE%s+TYPE%s+DEFAULT%s+MEANING$") then
      cols = { line:find("TYPE"), line:find("DEFAULT"), line:find("MEANING") }
    elseif cols and line:match("^[%u_][%u%d_]+ ") and #line >= cols[3] then
      flush()
      local function field(a, b)
        return (line:sub(a, b and b - 1 or -1):gsub("^%s+", ""):gsub("%s+$", ""))
      end
      local name, typ = field(1, cols[1]), field(cols[1], cols[2])
      local default, meaning = field(cols[2], cols[3]), field(cols[3])
      if default ~= "-" and default ~= "" then
        meaning = meaning .. "; default " .. default
      end
      out[#out + 1] = ".TP"
      out[#out + 1] = "\\fB" .. esc(name) .. "\\fR=\\fI" .. esc(typ) .. "\\fR"
      out[#out + 1] = esc(meaning)
    else
      text[#text + 1] = line
    end
  end
  flush()
  return out
end

-- herd.1
local cmd_part = { ".SH COMMANDS" }
for _, c in ipairs(commands) do
  local name, args = c.usage[1]:match("^(%S+)%s*(.*)$")
  cmd_part[#cmd_part + 1] = ".TP"
  cmd_part[#cmd_part + 1] = "\\fBherd " .. esc(name) .. "\\fR"
  cmd_part[#cmd_part + 1] = ".nf"
  if args ~= "" then
    cmd_part[#cmd_part + 1] = esc(args)
  end
  for k = 2, #c.usage do
    cmd_part[#cmd_part + 1] = esc(c.usage[k])
  end
  cmd_part[#cmd_part + 1] = ".fi"
  local ref = c.name == "help" and "" or ("; see \\fBherd\\-" .. esc(c.name) .. "\\fR(1)")
  cmd_part[#cmd_part + 1] = esc(summary_of(c)) .. ref
end
local parts = { header("herd", summary), synopsis_roff(main_synopsis) }
for _, s in ipairs(sections) do
  if s.title == "COMMANDS" then
    parts[#parts + 1] = cmd_part
  elseif #s.lines > 0 then
    local part = { ".SH " .. esc(s.title) }
    for _, l in ipairs(body(s.lines)) do
      part[#part + 1] = l
    end
    parts[#parts + 1] = part
  end
end
parts[#parts + 1] = environment()
parts[#parts + 1] = see_also(pages)
write_page("herd", parts)

-- herd-COMMAND.1
for _, c in ipairs(commands) do
  if c.name ~= "help" then
    local synopsis, rest = split_usage(lines_of(run(c.name, "--help")))
    if #synopsis == 0 then
      synopsis = { "herd " .. table.concat(c.usage, " ") }
    end
    local desc = { ".SH DESCRIPTION" }
    for _, l in ipairs(body(rest)) do
      desc[#desc + 1] = l
    end
    write_page("herd-" .. c.name,
      { header("herd-" .. c.name, summary_of(c)), synopsis_roff(synopsis), desc, see_also({ "herd" }) })
  end
end
