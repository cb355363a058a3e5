#!/usr/bin/env bash
# The REPL driven through a pipe (herd -i): a banner that says how to get
# help and how to leave; expressions print their values, tables
# pretty-printed, a buffer with its first values; multi-line input under
# the ">> " prompt; errors are reported and the session goes on; end of
# input ends it with status 0, as do exit and quit typed alone.
set -u
HERD=${1:?usage: repl_pipe.sh /path/to/herd}
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
export HERD_HISTORY="$tmp/history"

"$HERD" -i >"$tmp/out" 2>"$tmp/err" <<'IN'
x = 21
x * 2
=x
{1, 2, a = {b = "c"}}
1, "two", nil
function double(n)
  local r = n * 2
  return r
end
double(4)
error("boom")
x = = 1
print("still here", x)
local t = {
  "multi",
  "line",
}
for i = 1, 2 do
  print("loop", i)
end
herd.pretty.format({z = 1})
IN
rc=$?
[[ $rc == 0 ]] || fail "REPL exited $rc"

want_out='herd 0.1.0 (libherd 0.1.0, Lua 5.4.x)
Type help() for help, help(name) for one entry, exit or Ctrl-D to leave.
herd> herd> 42
herd> 21
herd> { 1, 2, a = { b = "c" } }
herd> 1	two	nil
herd> >> >> >> herd> 8
herd> herd> herd> still here	21
herd> >> >> >> herd> >> >> loop	1
loop	2
herd> { z = 1 }
herd> '
got_out=$(sed -E '1s/Lua 5\.4\.[0-9]+/Lua 5.4.x/; 1s/[0-9]+\.[0-9]+\.[0-9]+/0.1.0/g' "$tmp/out")
[[ $got_out == "$want_out" ]] || fail "REPL stdout:
$got_out
--- want:
$want_out"

# Errors carry no program name at the prompt, as in lua.c, and a traceback.
grep -q '^stdin:1: boom$' "$tmp/err" || fail "runtime error not reported: $(cat "$tmp/err")"
grep -qF "stdin:1: unexpected symbol near '='" "$tmp/err" || fail "syntax error not reported: $(cat "$tmp/err")"
grep -q '^herd:' "$tmp/err" && fail "errors at the prompt are prefixed: $(cat "$tmp/err")"
[[ ! -e $HERD_HISTORY ]] || fail "history written without a terminal"

# End of input inside an unfinished chunk reports it, then ends.
printf 'function f()\n' | "$HERD" -i >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 0 ]] || fail "EOF in chunk: exit $rc"
grep -qF "'end' expected near <eof>" "$tmp/err" || fail "EOF in chunk: $(cat "$tmp/err")"

# Returned herd objects print through __tostring; fields through the pretty printer.
out=$(printf 'c = herd.discover()\nc\n#c.nodes\nc.nodes[1].threads > 0\n' | "$HERD" -i 2>&1)
grep -qE 'herd> herd\.Cluster \(1 node\)' <<<"$out" || fail "cluster value: $out"
grep -qF 'herd> 1' <<<"$out" || fail "#c.nodes: $out"
grep -qF 'herd> true' <<<"$out" || fail "threads: $out"

# A buffer shows its dtype, length and first values, and its fields.
out=$(printf 'herd.buffer("float32", 1048576):iota(1)\nherd.buffer.from("float64", {0.1, 1/3})\n' \
  | "$HERD" -i 2>&1)
grep -qxF 'herd> herd.Buffer(float32, 1048576) {1, 2, 3, 4, 5, 6, 7, 8, ...}' <<<"$out" \
  || fail "buffer value: $out"
grep -qxF '  bytes = 4194304' <<<"$out" || fail "buffer fields: $out"
grep -qxF 'herd> herd.Buffer(float64, 2) {0.1, 0.3333333333333333}' <<<"$out" || fail "buffer value: $out"

# exit and quit typed alone (or called) leave with status 0: what follows
# is not run, and the objects are closed as at the end of input.
for word in exit quit ' exit ' 'exit()' 'quit()'; do
  printf 'print("be" .. "fore")\n%s\nprint("af" .. "ter")\n' "$word" \
    | "$HERD" -i >"$tmp/out" 2>"$tmp/err"; rc=$?
  [[ $rc == 0 ]] || fail "'$word': exit $rc: $(cat "$tmp/err")"
  grep -qx 'herd> before' "$tmp/out" || fail "'$word': $(cat "$tmp/out")"
  grep -q 'after' "$tmp/out" && fail "'$word' did not leave: $(cat "$tmp/out")"
  [[ -s $tmp/err ]] && fail "'$word': $(cat "$tmp/err")"
done
# a checkpoint saved asynchronously is finished as the shell leaves by exit
printf 'c = herd.checkpoint("%s")\nc:add("t", herd.buffer("int32", 4096):iota(1))\nc:save_async(1)\nexit\n' \
  "$tmp/ck" | "$HERD" -i >"$tmp/out" 2>"$tmp/err" || fail "exit after a save: $(cat "$tmp/err")"
"$HERD" ckpt verify "$tmp/ck" >"$tmp/out" 2>&1 || fail "the save was not finished by exit: $(cat "$tmp/out")"
# a global of that name is the script's: it reads as itself
out=$(printf 'exit = 7\nexit\nquit = "q"\nquit\nprint("still" .. "here")\n' | "$HERD" -i 2>&1)
grep -qF 'herd> 7' <<<"$out" && grep -qF 'herd> q' <<<"$out" && grep -qx 'herd> stillhere' <<<"$out" \
  || fail "exit as a global: $out"
# inside a chunk, exit is Lua's (a syntax error, reported)
out=$(printf 'for i = 1, 2 do\nexit\nend\nprint("go" .. "on")\n' | "$HERD" -i 2>&1)
grep -q 'goon$' <<<"$out" || fail "exit inside a chunk: $out"

# Without -i and without a terminal, stdin is a script: no prompt.
[[ $(printf 'print(6 * 7)\n' | "$HERD") == 42 ]] || fail "stdin script"
echo "repl_pipe: ok"
