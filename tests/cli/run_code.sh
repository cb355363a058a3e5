#!/usr/bin/env bash
# Running Lua: -e CODE, FILE.lua with `arg` and `...` as lua sets them,
# stdin as a script, exit statuses, and the example of the issue.
set -u
HERD=${1:?usage: run_code.sh /path/to/herd}
[[ $HERD == */* ]] && HERD=$(cd "$(dirname "$HERD")" && pwd)/$(basename "$HERD")
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT

# -e, several in order, with the herd module loaded
[[ $("$HERD" -e 'print(1 + 1)') == 2 ]] || fail "-e print"
[[ $("$HERD" -e 'x = 20' -e 'print(x + 1)') == 21 ]] || fail "two -e in order"
[[ $("$HERD" -e 'print(type(herd), type(herd.discover), herd.version())') == "table	function	$("$HERD" -e 'io.write(herd.version())')" ]] \
  || fail "herd table"
[[ $("$HERD" -e 'print(require("herd") == herd, require("herd.pretty") == herd.pretty)') == "true	true" ]] \
  || fail "require herd"
[[ $("$HERD" -l pp=herd.pretty -e 'print(pp.format({1, a = 2}))') == "{ 1, a = 2 }" ]] || fail "-l mod=name"

# errors: message with traceback on stderr, exit status 1
"$HERD" -e 'error("boom")' >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "-e error exited $rc"
grep -qF "herd: (command line):1: boom" "$tmp/err" || fail "-e error message: $(cat "$tmp/err")"
grep -qF "stack traceback:" "$tmp/err" || fail "-e error has no traceback"
"$HERD" -e 'x = = 1' 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "syntax error exited $rc"
grep -qF "unexpected symbol" "$tmp/err" || fail "syntax error message: $(cat "$tmp/err")"
"$HERD" -e 'error(setmetatable({}, {__tostring = function() return "custom" end}))' 2>"$tmp/err"
grep -qF "herd: custom" "$tmp/err" || fail "error object with __tostring: $(cat "$tmp/err")"
"$HERD" -e 'os.exit(3)'; rc=$?
[[ $rc == 3 ]] || fail "os.exit(3) exited $rc"

# a script with arguments
cat >"$tmp/args.lua" <<'LUA'
local n = select("#", ...)
print("n", n, #arg)
print("0", arg[0])
for i = 1, #arg do print(i, arg[i], (select(i, ...))) end
print("-1", arg[-1] ~= nil)
return 7
LUA
out=$("$HERD" "$tmp/args.lua" one "two words" --three) || fail "script exited $?"
want="n	3	3
0	$tmp/args.lua
1	one	one
2	two words	two words
3	--three	--three
-1	true"
[[ $out == "$want" ]] || fail "script arguments: got
$out"
# options before the script land at negative indices
[[ $("$HERD" -e 'x=1' "$tmp/args.lua" | sed -n 2p) == "0	$tmp/args.lua" ]] || fail "-e before script"
out=$("$HERD" -e 'x=1' -e 'print(arg[-2], arg[-3], arg[-4], arg[-5] ~= nil, arg[-6])' "$tmp/args.lua" | head -1)
[[ $out == "-e	x=1	-e	true	nil" ]] || fail "arg negative indices: $out"
# -- ends options: a script named like an option
printf 'print("dash script", ...)\n' >"$tmp/-e"
(cd "$tmp" && [[ $("$HERD" -- -e x) == "dash script	x" ]]) || fail "-- then script"

# script failures
printf 'local t = nil\nprint(t.x)\n' >"$tmp/bad.lua"
"$HERD" "$tmp/bad.lua" >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "failing script exited $rc"
grep -qF "bad.lua:2: attempt to index a nil value (local 't')" "$tmp/err" || fail "script error: $(cat "$tmp/err")"
"$HERD" "$tmp/missing.lua" >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "missing script exited $rc"
grep -qF "cannot open $tmp/missing.lua" "$tmp/err" || fail "missing script: $(cat "$tmp/err")"

# SIGINT (Ctrl-C) stops running Lua code with an "interrupted!" error.
# The output file is removed first: a stale one from the run before would
# let the signal go before this herd has started.
rm -f "$tmp/out"
"$HERD" -e 'io.stdout:write("running\n"); io.stdout:flush(); while true do end' >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 100); do [[ -s $tmp/out ]] && break; sleep 0.05; done
kill -INT $pid
wait $pid; rc=$?
[[ $rc == 1 ]] || fail "interrupted code exited $rc"
grep -qx "herd: interrupted!" "$tmp/err" || fail "interrupt message: $(cat "$tmp/err")"
# ... and the message is the same when the signal lands inside a C function
# (the hook then fires on its return, one level below the chunk)
rm -f "$tmp/out"
"$HERD" -e 'io.stdout:write("running\n"); io.stdout:flush(); while true do io.stdout:flush() end' >"$tmp/out" 2>"$tmp/err" &
pid=$!
for _ in $(seq 100); do [[ -s $tmp/out ]] && break; sleep 0.05; done
kill -INT $pid
wait $pid; rc=$?
[[ $rc == 1 ]] || fail "code interrupted in C exited $rc"
grep -qx "herd: interrupted!" "$tmp/err" || fail "interrupt message in C: $(cat "$tmp/err")"

# stdin as a script: with no arguments when stdin is not a terminal, and with -
[[ $(echo 'print("from stdin", ...)' | "$HERD") == "from stdin" ]] || fail "stdin script"
[[ $(echo 'print("dash", ...)' | "$HERD" - a b) == "dash	a	b" ]] || fail "- script"
echo 'error("in stdin")' | "$HERD" >/dev/null 2>&1 && fail "failing stdin script exited 0"

# the example of the issue
fixture=tests/fixtures/inventory/dgx-h100.json
if [[ -f $fixture ]]; then
  out=$("$HERD" -e "local c = herd.discover{inventory=\"$fixture\"}; print(#c.nodes[1].gpus, c.nodes[1]:link(0, 1))") \
    || fail "dgx example exited $?"
  [[ $out == "8	NV18" ]] || fail "dgx example printed: $out"
else
  fail "missing $fixture (run from the source directory)"
fi
echo "run_code: ok"
