#!/usr/bin/env bash
# A missing, corrupt, truncated or hostile inventory file: herd discover
# says "herd discover: <what was wrong>" on stderr, naming the file, prints nothing
# on stdout, and exits with status 2 (never a crash: no signal, no
# sanitizer report).  The same files through herd.discover return nil, msg.
set -u
HERD=${1:?usage: bad_inventory.sh /path/to/herd}
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
dgx=tests/fixtures/inventory/dgx-h100.json

: >"$tmp/empty.json"
head -c 2000 $dgx >"$tmp/truncated.json"
head -c 5000 $dgx | tail -c 3000 >"$tmp/middle.json"
printf 'GPU inventory\n\x00\x01\x02garbage' >"$tmp/garbage.json"
printf '{"v": 1, "nodes": "everything"}' >"$tmp/wrong-type.json"
printf '{"v": 1, "nodes": [{"hostname": 42}]}' >"$tmp/wrong-field.json"
printf '{"v": 999, "nodes": []}' >"$tmp/future-version.json"
printf '{"nodes": []}' >"$tmp/no-version.json"
python3 -c 'print("[" * 200000)' >"$tmp/deep.json"
python3 - "$dgx" "$tmp/huge-count.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["nodes"][0]["gpus"] = d["nodes"][0]["gpus"] * 1000   # 8000 GPUs: over the limit
json.dump(d, open(sys.argv[2], "w"))
PY
printf '\xdd\xff\xff\xff\xff\x00\x01' >"$tmp/array-claims-4g.msgpack"
printf '\x82\xa1v\x01\xa5nodes\x91\xdb\xff\xff\xff\xf0abc' >"$tmp/string-claims-4g.msgpack"
printf '\xc1\xc1\xc1\xc1' >"$tmp/never-used.msgpack"
python3 -c 'import sys; sys.stdout.buffer.write(bytes((i * 73 + 11) % 256 for i in range(4096)))' >"$tmp/noise.bin"

check() {  # file, then a fragment the message must contain
  local f=$1 want=$2
  "$HERD" discover --inventory "$f" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  [[ -n ${VERBOSE:-} ]] && cat "$tmp/err"
  [[ $rc == 2 ]] || fail "$f: exit status $rc, want 2; stderr: $(cat "$tmp/err")"
  [[ ! -s $tmp/out ]] || fail "$f: wrote to stdout: $(head -c 300 "$tmp/out")"
  [[ $(wc -l <"$tmp/err") == 1 ]] || fail "$f: want one line on stderr, got: $(cat "$tmp/err")"
  grep -q '^herd discover: ' "$tmp/err" || fail "$f: message lacks the herd discover: prefix: $(cat "$tmp/err")"
  grep -qF -- "$f" "$tmp/err" || fail "$f: message does not name the file: $(cat "$tmp/err")"
  grep -qiF -- "$want" "$tmp/err" || fail "$f: message lacks '$want': $(cat "$tmp/err")"
  # --json and --save do not change this; nothing is written
  "$HERD" discover --inventory "$f" --json --save "$tmp/never.json" >/dev/null 2>&1; rc=$?
  [[ $rc == 2 ]] || fail "$f with --json --save: exit status $rc"
  [[ ! -e $tmp/never.json ]] || fail "$f: --save wrote a file"
  # the Lua API returns nil, msg for the same file
  out=$("$HERD" -e "local c, msg, st = herd.discover{inventory = arg[1]}; print(c, st); io.stderr:write(msg)" \
        /dev/null "$f" 2>"$tmp/luaerr") || fail "$f: herd -e exited $?"
  [[ $out == nil$'\t'HERD_E* ]] || fail "$f: Lua got: $out"
  grep -qF -- "$f" "$tmp/luaerr" || fail "$f: Lua message does not name the file: $(cat "$tmp/luaerr")"
}

check "$tmp/missing.json" "no such file"
check "$tmp" "directory"
check "$tmp/empty.json" "empty"
check "$tmp/truncated.json" "JSON"
check "$tmp/middle.json" ""
check "$tmp/garbage.json" ""
check "$tmp/wrong-type.json" "nodes"
check "$tmp/wrong-field.json" "hostname"
check "$tmp/future-version.json" "version"
check "$tmp/no-version.json" "v"
check "$tmp/deep.json" "depth"
check "$tmp/huge-count.json" "gpus"
check "$tmp/array-claims-4g.msgpack" "msgpack"
check "$tmp/string-claims-4g.msgpack" "msgpack"
check "$tmp/never-used.msgpack" ""
check "$tmp/noise.bin" ""
echo "bad_inventory: ok"
