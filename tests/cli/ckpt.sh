#!/usr/bin/env bash
# herd ckpt ls|verify|inspect|diff|export|import on checkpoints that the
# Lua binding writes: one process, and two ranks met through torchrun-style
# variables.  A flipped byte makes verify exit 1 naming file, tensor, shard
# and chunk; export writes a safetensors file that a reader written here
# from the format's description decodes to the saved values; import of that
# file and a second export give the same bytes; hostile files are rejected
# with a reason and leave no step behind; 200,000 tensors go through import,
# verify, export and diff; a save in flight at os.exit is finished, or its
# failure said with exit status 1.
set -u
HERD=${1:?usage: ckpt.sh /path/to/herd}
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT
has() { grep -qF -- "$2" <<<"$1" || fail "output lacks '$2':
$1"; }
has_re() { grep -qE -- "$2" <<<"$1" || fail "output lacks /$2/:
$1"; }
command -v python3 >/dev/null || { echo "python3 is needed to check the files"; exit 77; }

# --- one process: four dtypes, two steps, a tensor added for the second
cat >"$tmp/one.lua" <<'EOF'
local dir = arg[1]
local ck <close> = assert(herd.checkpoint(dir, nil, { chunk_bytes = 4096 }))
local w, n = {}, { 1, -2, 3000000000 }
for i = 1, 20 do w[i] = i * 0.25 end
local h, g = { 0.5, 1, 1.5, 2, -3, 65504 }, { 1.0, -2.5 }
assert(ck:add("w", w, { dtype = "float32", shape = { 4, 5 } }))
assert(ck:add("n", n, { dtype = "int64" }))
assert(ck:add("h", h, { dtype = "float16" }))
assert(ck:add("g", g, { dtype = "bfloat16" }))
assert(ck:save(1))
w[3] = w[3] + 1.5
n[2] = -5
assert(ck:add("extra", { 7, 8 }, { dtype = "uint8" }))
assert(ck:save(2))
EOF
one=$tmp/one
"$HERD" "$tmp/one.lua" "$one" || fail "writing the one-process checkpoint"

out=$("$HERD" ckpt ls "$one") || fail "ls exited $?"
has_re "$out" '^step +state +size +ranks +tensors +blobs +saved$'
has_re "$out" '^1 +committed +[0-9.]+ [KMG]?i?B +1 +4 +0  [0-9]{4}-[0-9]{2}-[0-9]{2} '
has_re "$out" '^2 +committed +[0-9.]+ [KMG]?i?B +1 +5 +0  '
# A save that did not finish shows as partial.
mkdir "$one/.tmp-step-000000000003"
out=$("$HERD" ckpt ls "$one") || fail "ls exited $?"
has_re "$out" '^3 +partial +[0-9.]+ [KMG]?i?B +- +- +- +-$'
rmdir "$one/.tmp-step-000000000003"
# It says what it did not check.
has "$out" "listed, not verified: steps 1 and 2 (manifests and file sizes checked, checksums not read: herd ckpt ls --verify DIR reads them)"
# What is cheap to see, it sees: a data file cut short or gone is damaged.
cp -r "$one" "$tmp/dmg"
size1=$(stat -c %s "$tmp/dmg/step-000000000001/rank-00000.data")
truncate -s $((size1 - 1)) "$tmp/dmg/step-000000000001/rank-00000.data"
rm "$tmp/dmg/step-000000000002/rank-00000.data"
out=$("$HERD" ckpt ls "$tmp/dmg") || fail "ls of a damaged directory exited $?"
has_re "$out" '^1 +damaged +'
has "$out" "  rank-00000.data has $((size1 - 1)) bytes, the manifest says $size1"
has_re "$out" '^2 +damaged +'
has "$out" "  rank-00000.data: missing"
"$HERD" ckpt ls --json "$tmp/dmg" >"$tmp/dmg.json" || fail "ls --json of a damaged directory exited $?"
python3 - "$tmp/dmg.json" <<'PY' || fail "ls --json, damaged: $(cat "$tmp/dmg.json")"
import json, sys
steps = json.load(open(sys.argv[1]))["steps"]
assert [(s["state"], s["verified"]) for s in steps] == [("damaged", False), ("damaged", False)], steps
assert steps[1]["problem"] == "rank-00000.data: missing", steps
PY

# --- a step that does not verify: ls --verify sees it; a resume moves it
# aside and saves its number anew; ls lists it, moved aside, with why
cat >"$tmp/aside.lua" <<'EOF'
local dir, mode = arg[1], arg[2]
local ck <close> = assert(herd.checkpoint(dir, nil, { chunk_bytes = 4096 }))
local w = herd.buffer("float32", 4096):fill(1)
assert(ck:add("w", w))
if mode == "save" then
  for s = 1, 3 do w[1] = s; assert(ck:save(s)) end
  return
end
print("restored " .. assert(ck:restore()))
if mode == "resume" then
  w[1] = 33
  assert(ck:save(3))
  print("saved 3")
  local ok, msg, status = ck:save(3)
  print(("saved 3 again: %s %s: %s"):format(ok, status, msg))
end
EOF
flip() {
  python3 - "$1" "$2" <<'PY' || fail "flipping a byte of $1"
import sys
with open(sys.argv[1], "r+b") as f:
    at = int(sys.argv[2]); f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ 0x5a]))
PY
}
aside=$tmp/aside
"$HERD" "$tmp/aside.lua" "$aside" save || fail "writing three steps"
flip "$aside/step-000000000003/rank-00000.data" 100
out=$("$HERD" ckpt ls "$aside") || fail "ls exited $?"
has_re "$out" '^3 +committed +'
has "$out" "listed, not verified: steps 1, 2 and 3 (manifests and file sizes checked"
out=$("$HERD" ckpt ls --verify "$aside") || fail "ls --verify exited $?"
has_re "$out" '^2 +committed +'
has_re "$out" '^3 +damaged +'
has_re "$out" '^  rank-00000\.data: "w" shard 0 chunk 0 \(byte 0 of the file\): checksum mismatch: expected [0-9a-f]{16}, got [0-9a-f]{16}$'
has "$out" "verified: steps 1 and 2 (every checksum read)"
grep -q "not verified" <<<"$out" && fail "ls --verify: $out"
"$HERD" ckpt ls --verify --json "$aside" >"$tmp/aside.json" || fail "ls --verify --json exited $?"
python3 - "$tmp/aside.json" <<'PY' || fail "ls --verify --json: $(cat "$tmp/aside.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["verified"] is True, d
s = [(x["step"], x["state"], x["verified"], x["moved_aside"]) for x in d["steps"]]
assert s == [(1, "committed", True, False), (2, "committed", True, False),
             (3, "damaged", True, False)], s
assert "checksum mismatch" in d["steps"][2]["problem"], d
PY
out=$("$HERD" "$tmp/aside.lua" "$aside" resume 2>"$tmp/err") || fail "resume exited $?: $out $(cat "$tmp/err")"
has "$out" "restored 2"
has "$out" "saved 3"
has "$out" "saved 3 again: nil HERD_EEXIST: checkpoint step 3 is already committed in $aside, and it verifies"
err=$(cat "$tmp/err")
has "$err" "restoring checkpoint step 3: $aside/step-000000000003/rank-00000.data: \"w\" shard 0 chunk 0"
has "$err" "; trying the step before"
moved=$(cd "$aside" && echo step-000000000003.damaged-*)
[[ -d $aside/$moved && -f $aside/$moved/rank-00000.data ]] || fail "no step moved aside: $(ls "$aside")"
[[ $moved =~ ^step-000000000003\.damaged-[0-9]{8}T[0-9]{6}Z$ ]] || fail "moved aside as $moved"
has "$err" "checkpoint step 3 in $aside does not verify: moved it aside to $aside/$moved, kept for inspection (herd ckpt ls lists it); a save of step 3 writes it anew"
out=$("$HERD" ckpt ls "$aside") || fail "ls exited $?"
has_re "$out" '^3 +committed +'
has_re "$out" '^3 +damaged +'
has "$out" "  moved aside as $moved: restoring checkpoint step 3: $aside/step-000000000003/rank-00000.data: \"w\" shard 0 chunk 0"
has "$out" "listed, not verified: steps 1, 2 and 3 ("
"$HERD" ckpt verify "$aside" 3 >/dev/null || fail "verify of step 3 saved anew"
"$HERD" ckpt ls --json "$aside" >"$tmp/aside.json" || fail "ls --json exited $?"
python3 - "$tmp/aside.json" "$moved" <<'PY' || fail "ls --json: $(cat "$tmp/aside.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["verified"] is False, d
s = [(x["step"], x["name"], x["state"], x["verified"], x["moved_aside"]) for x in d["steps"]]
assert s == [(1, "step-000000000001", "committed", False, False),
             (2, "step-000000000002", "committed", False, False),
             (3, "step-000000000003", "committed", False, False),
             (3, sys.argv[2], "damaged", False, True)], s
assert d["steps"][3]["problem"].startswith("restoring checkpoint step 3: "), d
PY
# Damaged again: a second name; asked for by number, it says where it went.
flip "$aside/step-000000000003/rank-00000.data" 200
"$HERD" "$tmp/aside.lua" "$aside" restore >/dev/null 2>"$tmp/err" || fail "restore exited $?: $(cat "$tmp/err")"
[[ $(cd "$aside" && ls -d step-000000000003.damaged-* | wc -l) == 2 ]] || fail "two moved aside: $(ls "$aside")"
[[ $(cat "$aside/latest") == step-000000000002 ]] || fail "latest: $(cat "$aside/latest")"
for cmd in verify inspect; do
  "$HERD" ckpt $cmd "$aside" 3 >/dev/null 2>"$tmp/err"; rc=$?
  [[ $rc == 1 ]] || fail "$cmd of a step moved aside: exit $rc"
  has_re "$(cat "$tmp/err")" "^herd ckpt: checkpoint step 3: there is no $aside/step-000000000003; a step of that number that did not verify was moved aside 2 times, the last as $aside/step-000000000003\.damaged-[0-9]{8}T[0-9]{6}Z(-2)?\$"
done
out=$("$HERD" ckpt ls "$aside") || fail "ls exited $?"
[[ $(grep -c '^3 \+damaged' <<<"$out") == 2 ]] || fail "ls, two moved aside: $out"
has "$out" "listed, not verified: steps 1 and 2 ("

out=$("$HERD" ckpt inspect "$one" 2) || fail "inspect exited $?"
has "$out" "step 2 of $one: saved "
has "$out" "by 1 rank; 5 tensors, 122 bytes; 0 blobs"
has_re "$out" '^name +dtype +shape +shards +bytes$'
has_re "$out" '^w +float32 +\[4, 5\] +1 +80$'
has_re "$out" '^n +int64 +\[3\] +1 +24$'
has_re "$out" '^h +float16 +\[6\] +1 +12$'
has_re "$out" '^g +bfloat16 +\[2\] +1 +4$'
has_re "$out" '^extra +uint8 +\[2\] +1 +2$'
[[ $("$HERD" ckpt inspect "$one" latest) == "$out" ]] || fail "inspect latest is not step 2"

out=$("$HERD" ckpt verify "$one") || fail "verify exited $?"
[[ $out == "$one/step-000000000002: ok: 5 tensors (122 bytes), 0 blobs, saved by 1 ranks" ]] \
  || fail "verify: $out"

out=$("$HERD" ckpt diff "$one" 1 2); rc=$?
[[ $rc == 1 ]] || fail "diff of different steps: exit $rc"
has "$out" "A: step 1, B: step 2 of $one"
has_re "$out" '^w +changed +1 of 20 elements differ, max \|a-b\| 1\.5$'
has_re "$out" '^n +changed +1 of 3 elements differ, max \|a-b\| 3$'
has_re "$out" '^h +same$'
has_re "$out" '^g +same$'
has_re "$out" '^extra +only in B$'
out=$("$HERD" ckpt diff "$one" 2 latest) || fail "diff of a step with itself: exit $?"
[[ $(grep -c ' same$' <<<"$out") == 5 ]] || fail "diff 2 latest: $out"

# --- --json: the same facts and exit statuses as the tables
"$HERD" ckpt ls --json "$one" >"$tmp/ls.json" || fail "ls --json exited $?"
"$HERD" ckpt inspect --json "$one" 2 >"$tmp/inspect.json" || fail "inspect --json exited $?"
"$HERD" ckpt verify --json "$one" >"$tmp/verify.json" || fail "verify --json exited $?"
"$HERD" ckpt diff --json "$one" 1 2 >"$tmp/diff.json"; rc=$?
[[ $rc == 1 ]] || fail "diff --json of different steps: exit $rc"
python3 - "$tmp" "$one" <<'PY' || fail "--json listings: $(cat "$tmp"/*.json)"
import json, sys
t, one = sys.argv[1], sys.argv[2]
ls = json.load(open(t + "/ls.json"))
assert ls["v"] == 1 and ls["dir"] == one, ls
assert [(s["step"], s["state"], s["ranks"], s["tensors"]) for s in ls["steps"]] == \
    [(1, "committed", 1, 4), (2, "committed", 1, 5)], ls
ins = json.load(open(t + "/inspect.json"))
assert ins["step"] == 2 and ins["bytes"] == 122 and ins["ranks"] == 1, ins
w = [x for x in ins["tensors"] if x["name"] == "w"][0]
assert w == {"name": "w", "dtype": "float32", "shape": [4, 5], "shards": 1, "bytes": 80}, w
ver = json.load(open(t + "/verify.json"))
assert ver["ok"] is True and ver["problems"] == [] and ver["step"] == 2 and ver["tensors"] == 5, ver
d = json.load(open(t + "/diff.json"))
assert d["a"] == 1 and d["b"] == 2 and d["same"] is False, d
e = {x["name"]: x for x in d["entries"]}
assert e["w"]["status"] == "changed" and e["w"]["differ"] == 1 and e["w"]["count"] == 20, e
assert e["w"]["max_abs_diff"] == 1.5 and e["h"]["status"] == "same", e
assert e["extra"]["status"] == "only_in_b" and e["extra"]["kind"] == "tensor", e
PY

# --- two ranks (torchrun's variables; rank 0 hosts the store): a sharded tensor
cat >"$tmp/two.lua" <<'EOF'
local ck = assert(herd.checkpoint(arg[1], herd.comm(), { chunk_bytes = 4096 }))
local r, n = ck:rank(), ck:size()
local part = {}
for i = 1, 4096 do part[i] = r * 4096 + i end
assert(ck:add("w", part, { dtype = "float32", global = { 4096 * n }, offset = { 4096 * r },
                           shape = { 4096 } }))
assert(ck:add("bias", { 0.5, 0.25 }))
assert(ck:save(5))
assert(ck:close())
EOF
two=$tmp/two
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port HERD_JOB_SECRET=ckpt-test \
    HERD_TIMEOUT=60 timeout 90 "$HERD" "$tmp/two.lua" "$two" &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a rank of the two-rank save exited $?"; done
pids=()
out=$("$HERD" ckpt inspect "$two" 5) || fail "inspect two exited $?"
has "$out" "by 2 ranks; 2 tensors, 32784 bytes; 0 blobs"
has_re "$out" '^w +float32 +\[8192\] +2 +32768$'
has_re "$out" '^bias +float64 +\[2\] +1 +16$'
"$HERD" ckpt verify "$two" 5 >/dev/null || fail "verify of the intact two-rank step"

# A flipped byte in chunk 2 of rank 1's shard (bytes 8192..12287 of its file).
python3 - "$two/step-000000000005/rank-00001.data" <<'EOF' || fail "flipping a byte"
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(8192 + 10); b = f.read(1); f.seek(8192 + 10); f.write(bytes([b[0] ^ 0x5a]))
EOF
"$HERD" ckpt verify "$two" 5 >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "verify after a flip: exit $rc"
[[ $(wc -l <"$tmp/out") == 1 ]] || fail "verify: one problem expected: $(cat "$tmp/out")"
has_re "$(cat "$tmp/out")" "^$two/step-000000000005/rank-00001\\.data: tensor \"w\" shard 1 chunk 2 \\(byte 8192 of the file\\): checksum mismatch: expected [0-9a-f]{16}, got [0-9a-f]{16}\$"
[[ $(cat "$tmp/err") == "herd ckpt: $two/step-000000000005: 1 problem" ]] || fail "verify stderr: $(cat "$tmp/err")"
"$HERD" ckpt verify --json "$two" 5 >"$tmp/out" 2>/dev/null; rc=$?
[[ $rc == 1 ]] || fail "verify --json after a flip: exit $rc"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
p = d["problems"]
assert d["ok"] is False and len(p) == 1, d
assert p[0]["file"] == "rank-00001.data" and p[0]["tensor"] == "w" and p[0]["blob"] is None, p
assert (p[0]["shard"], p[0]["chunk"], p[0]["offset"]) == (1, 2, 8192), p
assert p[0]["message"].startswith("checksum mismatch: expected "), p' "$tmp/out" \
  || fail "verify --json after a flip: $(cat "$tmp/out")"
# Reading the tensor whole verifies too: export refuses, naming the chunk.
"$HERD" ckpt export "$two" 5 "$tmp/two.safetensors" >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "export of a corrupt step: exit $rc"
has "$(cat "$tmp/err")" "rank-00001.data"
[[ ! -e $tmp/two.safetensors ]] || fail "export of a corrupt step left a file"
ls "$tmp" | grep -q 'two.safetensors.tmp' && fail "export left its temporary file"

# --- export: a standard safetensors file of the full tensors
out=$("$HERD" ckpt export --format safetensors "$one" 2 "$tmp/one.safetensors") || fail "export exited $?"
[[ $out == "$tmp/one.safetensors: step 2 of $one, 5 tensors" ]] || fail "export: $out"
python3 - "$tmp/one.safetensors" <<'EOF' || fail "the exported file does not read back"
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
assert n % 8 == 0 and b[8:9] == b"{", "header length or start"
h = json.loads(b[8:8 + n].decode("utf-8"))
data = b[8 + n:]
assert h["__metadata__"] == {"herd.step": "2", "herd.ranks": "1"}, h["__metadata__"]
want = {"w": ("F32", [4, 5], "<20f", [i * 0.25 for i in range(1, 21)]),
        "n": ("I64", [3], "<3q", [1, -5, 3000000000]),
        "h": ("F16", [6], "<6e", [0.5, 1, 1.5, 2, -3, 65504]),
        "g": ("BF16", [2], "<2H", [0x3f80, 0xc020]),
        "extra": ("U8", [2], "<2B", [7, 8])}
want["w"][3][2] += 1.5
assert set(h) == set(want) | {"__metadata__"}, h.keys()
end = 0
for name, (dtype, shape, fmt, values) in want.items():
    t = h[name]
    assert t["dtype"] == dtype and t["shape"] == shape, (name, t)
    lo, hi = t["data_offsets"]
    assert list(struct.unpack(fmt, data[lo:hi])) == values, (name, struct.unpack(fmt, data[lo:hi]))
    end = max(end, hi)
assert end == len(data), "data after the tensors"
EOF

# --- import: the file as a single-rank step (as step 2 again, the step its
# metadata names); exporting it again gives the same bytes
out=$("$HERD" ckpt import "$tmp/one.safetensors" "$tmp/imported" 2) || fail "import exited $?"
[[ $out == "$tmp/imported/step-000000000002: 5 tensors from $tmp/one.safetensors" ]] || fail "import: $out"
"$HERD" ckpt verify "$tmp/imported" 2 >/dev/null || fail "verify of the imported step"
"$HERD" ckpt export "$tmp/imported" latest "$tmp/again.safetensors" >/dev/null || fail "export again"
cmp "$tmp/one.safetensors" "$tmp/again.safetensors" || fail "export -> import -> export differs"
# Into the same directory, as a new step: diff finds it identical to step 2.
"$HERD" ckpt import "$tmp/one.safetensors" "$one" 9 >/dev/null || fail "import into $one"
"$HERD" ckpt diff "$one" 2 9 >"$tmp/out" || fail "diff 2 9: $(cat "$tmp/out")"
# The step exists: import refuses to overwrite it.
"$HERD" ckpt import "$tmp/one.safetensors" "$one" 9 >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "import over an existing step: exit $rc"
has "$(cat "$tmp/err")" "already"

# A file of someone else's, with a scalar and metadata of its own: import
# then export gives back the same tensors, shapes (the scalar's too) and
# metadata, with herd's keys beside it.
python3 - "$tmp/theirs.safetensors" <<'EOF' || fail "making theirs.safetensors"
import json, struct, sys
h = {"__metadata__": {"format": "pt", "note": "lr=0.1"},
     "loss": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]},
     "w": {"dtype": "F64", "shape": [2, 1], "data_offsets": [4, 20]},
     "q": {"dtype": "F8_E4M3", "shape": [3], "data_offsets": [20, 23]},
     "s": {"dtype": "F8_E5M2", "shape": [2], "data_offsets": [23, 25]}}
text = json.dumps(h).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(text)) + text +
                              struct.pack("<f", 2.5) + struct.pack("<2d", 1.0, -2.0) +
                              bytes([0x38, 0xfe, 0x01, 0x3c, 0x7b]))
EOF
"$HERD" ckpt import "$tmp/theirs.safetensors" "$tmp/theirs" 3 >/dev/null 2>"$tmp/err" || fail "import theirs: $(cat "$tmp/err")"
[[ ! -s $tmp/err ]] || fail "import theirs said: $(cat "$tmp/err")"
"$HERD" ckpt export "$tmp/theirs" 3 "$tmp/theirs.back" >/dev/null 2>"$tmp/err" || fail "export theirs"
[[ ! -s $tmp/err ]] || fail "export theirs said: $(cat "$tmp/err")"
python3 - "$tmp/theirs.back" <<'EOF' || fail "theirs did not come back as it was"
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
data = b[8 + n:]
assert h["__metadata__"] == {"herd.step": "3", "herd.ranks": "1", "format": "pt", "note": "lr=0.1"}, h
assert h["loss"]["dtype"] == "F32" and h["loss"]["shape"] == [], h["loss"]
assert h["w"]["dtype"] == "F64" and h["w"]["shape"] == [2, 1], h["w"]
lo, hi = h["loss"]["data_offsets"]
assert struct.unpack("<f", data[lo:hi]) == (2.5,)
lo, hi = h["w"]["data_offsets"]
assert struct.unpack("<2d", data[lo:hi]) == (1.0, -2.0)
assert h["q"]["dtype"] == "F8_E4M3" and h["s"]["dtype"] == "F8_E5M2", (h["q"], h["s"])
lo, hi = h["q"]["data_offsets"]
assert data[lo:hi] == bytes([0x38, 0xfe, 0x01]), data[lo:hi]
lo, hi = h["s"]["data_offsets"]
assert data[lo:hi] == bytes([0x3c, 0x7b]), data[lo:hi]
EOF
"$HERD" ckpt inspect "$tmp/theirs" 3 >"$tmp/out" 2>&1 || fail "inspect theirs: $(cat "$tmp/out")"
grep -Eq '^q +float8_e4m3 +\[3\] +1 +3$' "$tmp/out" || fail "inspect theirs: $(cat "$tmp/out")"

# --- hostile files: exit 2, the reason, no step written
hostile() { # NAME EXPECTED-MESSAGE PYTHON-BYTES-EXPRESSION
  python3 -c "import json, struct, sys
def st(h, data=b'', pad=True):
    j = json.dumps(h).encode() if not isinstance(h, bytes) else h
    if pad: j += b' ' * (-len(j) % 8)
    return struct.pack('<Q', len(j)) + j + data
sys.stdout.buffer.write($3)" >"$tmp/bad-$1.safetensors" || fail "making $1"
  "$HERD" ckpt import "$tmp/bad-$1.safetensors" "$tmp/bad" >"$tmp/out" 2>"$tmp/err"; rc=$?
  [[ $rc == 2 ]] || fail "hostile $1: exit $rc: $(cat "$tmp/err")"
  [[ ! -s $tmp/out ]] || fail "hostile $1: wrote to stdout"
  has "$(cat "$tmp/err")" "$tmp/bad-$1.safetensors: $2"
  [[ ! -e $tmp/bad ]] || fail "hostile $1: created the checkpoint directory"
}
f32='{"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}'
hostile short "3 bytes: too short for a safetensors file" "b'\\x10\\x00\\x00'"
hostile hugelen "header length 1099511627776: expected 2..104857600 bytes" \
  "struct.pack('<Q', 1 << 40) + b'{}      '"
hostile beyond "header length 64: expected 2..104857600 bytes within the file's 16" \
  "struct.pack('<Q', 64) + b'{}      '"
hostile notjson "header JSON, byte" "st(b'{\"a\": [1, 2}')"
hostile notbrace "the header does not start with '{'" "st(b' {}')"
hostile array "the header does not start with '{'" "st([1, 2])"
hostile dupkey "header JSON, byte 65: duplicate object key" \
  "st(b'{\"a\": $f32, \"a\": $f32}', b'\\0' * 8)"
hostile dtype 'tensor "a": dtype "I16" is not one herd holds' \
  "st({'a': {'dtype': 'I16', 'shape': [2], 'data_offsets': [0, 4]}}, b'\\0' * 4)"
hostile size 'tensor "a": data_offsets [0, 12] hold 12 bytes; its shape and dtype need 8' \
  "st({'a': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 12]}}, b'\\0' * 12)"
hostile reversed 'tensor "a": "data_offsets" must be [BEGIN, END]' \
  "st({'a': {'dtype': 'F32', 'shape': [0], 'data_offsets': [8, 0]}}, b'\\0' * 8)"
hostile negative 'tensor "a": shape[0] must be an integer of 0 or more' \
  "st({'a': {'dtype': 'F32', 'shape': [-2], 'data_offsets': [0, 8]}}, b'\\0' * 8)"
hostile overflow 'tensor "a": shape 1: the size overflows' \
  "st({'a': {'dtype': 'F64', 'shape': [1 << 40, 1 << 40], 'data_offsets': [0, 8]}}, b'\\0' * 8)"
hostile ndim 'tensor "a": "shape" must be an array of at most 8 sizes' \
  "st({'a': {'dtype': 'U8', 'shape': [1] * 9, 'data_offsets': [0, 1]}}, b'\\0')"
hostile outside 'tensor "a": data_offsets end 8 lies beyond the 4 data bytes' \
  "st({'a': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]}}, b'\\0' * 4)"
hostile overlap 'tensor "b": data_offsets begin 4 where 8 was expected' \
  "st({'a': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]},
       'b': {'dtype': 'F32', 'shape': [2], 'data_offsets': [4, 12]}}, b'\\0' * 12)"
hostile gap 'tensor "b": data_offsets begin 12 where 8 was expected' \
  "st({'a': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]},
       'b': {'dtype': 'F32', 'shape': [1], 'data_offsets': [12, 16]}}, b'\\0' * 16)"
hostile trailing "4 bytes after the last tensor's data" \
  "st({'a': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]}}, b'\\0' * 12)"
hostile name 'tensor "caf\xc3\xa9": a herd tensor name is printable ASCII' \
  "st({'caf\u00e9': {'dtype': 'U8', 'shape': [1], 'data_offsets': [0, 1]}}, b'\\0')"
hostile metadata '"__metadata__" must be an object of strings' \
  "st({'__metadata__': {'n': 1}})"
hostile notobject 'tensor "a": expected an object' "st({'a': 3})"
# One more tensor than the bound (the count is checked before the entries).
hostile count "1048577 tensors: more than the 1048576 that herd imports from one file" \
  "st({'t%d' % i: 0 for i in range(1048577)})"

# --- many tensors: 200,000 import, verify, export to the same tensors and
# diff, each bounded well above what it takes (work that grew with the
# square of the tensors would take minutes)
python3 - "$tmp/many.safetensors" <<'EOF' || fail "making many.safetensors"
import json, struct, sys
n = 200000
h = {"__metadata__": {"source": "many"}}
for i in range(n):
    h["layers.%d.w" % i] = {"dtype": "F32", "shape": [2], "data_offsets": [8 * i, 8 * i + 8]}
j = json.dumps(h, separators=(",", ":")).encode()
j += b" " * (-len(j) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(j)) + j)
    f.write(b"".join(struct.pack("<2f", i, -i) for i in range(n)))
EOF
out=$(timeout 60 "$HERD" ckpt import "$tmp/many.safetensors" "$tmp/many" 0) || fail "import of 200000 tensors exited $?"
[[ $out == "$tmp/many/step-000000000000: 200000 tensors from $tmp/many.safetensors" ]] || fail "import: $out"
out=$(timeout 60 "$HERD" ckpt verify "$tmp/many" 0) || fail "verify of 200000 tensors exited $?: $out"
has "$out" "ok: 200000 tensors (1600000 bytes), 1 blobs"
timeout 60 "$HERD" ckpt export "$tmp/many" latest "$tmp/many.out" >/dev/null || fail "export of 200000 tensors exited $?"
python3 - "$tmp/many.safetensors" "$tmp/many.out" <<'EOF' || fail "the export of 200000 tensors is not the imported file"
import json, struct, sys
def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]
(a, da), (b, db) = load(sys.argv[1]), load(sys.argv[2])
assert b.pop("__metadata__")["source"] == a.pop("__metadata__")["source"] == "many"
assert a == b and da == db
EOF
timeout 60 "$HERD" ckpt diff "$tmp/many" 0 0 >"$tmp/out" || fail "diff of 200000 tensors exited $?"
[[ $(grep -c '  same$' "$tmp/out") == 200001 ]] || fail "diff of 200000 tensors: $(tail -3 "$tmp/out")"
rm -rf "$tmp/many" "$tmp/many.safetensors" "$tmp/many.out"

# --- os.exit right after save_async finishes the save in flight: a step,
# no temporary, exit 0.  A save that fails there (a file size limit), or at
# the end of the script where the collector closes the checkpoint, is said
# on stderr, leaves nothing behind, and the exit status is 1.
cat >"$tmp/exit.lua" <<'EOF'
local ck = assert(herd.checkpoint(arg[1]))
local w = herd.buffer("float32", 16 * 1024 * 1024)   -- 64 MiB
w[1] = 42
assert(ck:add("w", w))
assert(ck:save_async(1))
if arg[2] == "exit" then os.exit(0) end
EOF
"$HERD" "$tmp/exit.lua" "$tmp/ex" exit 2>"$tmp/err"; rc=$?
[[ $rc == 0 ]] || fail "os.exit(0) after save_async exited $rc: $(cat "$tmp/err")"
[[ ! -s $tmp/err ]] || fail "os.exit(0) after save_async said: $(cat "$tmp/err")"
compgen -G "$tmp/ex/.tmp-step-*" >/dev/null && fail "os.exit(0) after save_async left $(ls -a "$tmp/ex")"
"$HERD" ckpt verify "$tmp/ex" 1 >/dev/null || fail "the step saved at os.exit does not verify"
for how in exit end; do
  rm -rf "$tmp/ex"
  (trap '' XFSZ; ulimit -f 2048; exec "$HERD" "$tmp/exit.lua" "$tmp/ex" "$how") 2>"$tmp/err"; rc=$?
  [[ $rc == 1 ]] || fail "a save in flight that failed at $how: exit $rc: $(cat "$tmp/err")"
  has "$(cat "$tmp/err")" "herd: a checkpoint save in flight when its checkpoint was closed did not complete: saving checkpoint step 1 in $tmp/ex: "
  has "$(cat "$tmp/err")" "File too large"
  [[ $(ls -A "$tmp/ex") == .lock ]] || fail "a save that failed at $how left $(ls -A "$tmp/ex")"
done

# --- usage and missing things
"$HERD" ckpt frob "$one" >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] || fail "unknown command: exit $rc"
has "$(cat "$tmp/err")" "herd ckpt: unknown command 'frob'"
"$HERD" ckpt inspect "$one" soon >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] || fail "bad step: exit $rc"
has "$(cat "$tmp/err")" "'soon' is not a step"
"$HERD" ckpt export --format npz "$one" 2 "$tmp/x" >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] || fail "unknown format: exit $rc"
"$HERD" ckpt inspect "$one" 4 >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "missing step: exit $rc"
has "$(cat "$tmp/err")" "step-000000000004"
"$HERD" ckpt ls "$tmp/nowhere" >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "missing directory: exit $rc"
has "$(cat "$tmp/err")" "$tmp/nowhere"
out=$("$HERD" ckpt --help) || fail "--help exited $?"
has "$out" "herd ckpt export [--format safetensors] DIR STEP OUT"
# --- an export ended by SIGTERM (stopped while its temporary file is being
# written, then signalled) leaves no temporary file behind
python3 - "$tmp/big.safetensors" <<'PY' || fail "making a big safetensors file"
import json, os, sys
n = 64 << 20  # float32 elements: 256 MiB
h = json.dumps({"w": {"dtype": "F32", "shape": [n], "data_offsets": [0, 4 * n]}}).encode()
with open(sys.argv[1], "wb") as f:
    f.write(len(h).to_bytes(8, "little") + h)
    f.truncate(8 + len(h) + 4 * n)
PY
"$HERD" ckpt import "$tmp/big.safetensors" "$tmp/big" 0 >/dev/null || fail "import of the big file"
interrupted=0
for try in 1 2 3; do
  rm -f "$tmp/big.out"*
  "$HERD" ckpt export "$tmp/big" 0 "$tmp/big.out" >/dev/null 2>&1 &
  pid=$!
  for _ in $(seq 1000); do
    compgen -G "$tmp/big.out.tmp-*" >/dev/null && break
    sleep 0.01
  done
  kill -STOP "$pid" 2>/dev/null
  if compgen -G "$tmp/big.out.tmp-*" >/dev/null; then
    kill -TERM "$pid"; kill -CONT "$pid"
    wait "$pid"; rc=$?
    [[ $rc == 143 ]] || fail "the interrupted export exited $rc"
    interrupted=1
    break
  fi
  kill -CONT "$pid" 2>/dev/null; wait "$pid"   # it finished first: again
done
(( interrupted )) || fail "the export always finished before it could be stopped"
compgen -G "$tmp/big.out*" >/dev/null && fail "an interrupted export left $(ls "$tmp" | grep big.out)"
rm -rf "$tmp/big" "$tmp/big.safetensors"

# --- one writer per directory: a second job's open is refused, naming the
# first, and the first one's files are left alone; after it, the second opens
mkfifo "$tmp/hold"
W=$tmp/w1 "$HERD" -e 'local ck = assert(herd.checkpoint(os.getenv("W")))
  assert(ck:add("w", { 1 })); assert(ck:save(1))
  print("open") io.stdout:flush()
  io.read("a")
  ck:close()' <"$tmp/hold" >"$tmp/holder.out" &
holder=$!
exec 8>"$tmp/hold"
for _ in $(seq 100); do grep -q open "$tmp/holder.out" 2>/dev/null && break; sleep 0.05; done
grep -q open "$tmp/holder.out" || fail "the first writer did not open"
mkdir "$tmp/w1/.tmp-step-000000000002"     # as if its save 2 were in flight
out=$(W=$tmp/w1 "$HERD" -e 'print(herd.checkpoint(os.getenv("W")))') || fail "second open raised: $out"
has "$out" "checkpoint directory $tmp/w1 is being written by pid $holder on"
has "$out" "HERD_EBUSY"
[[ -d $tmp/w1/.tmp-step-000000000002 ]] || fail "the refused open swept the first writer's save in flight"
exec 8>&-
wait "$holder" || fail "the first writer failed"
out=$(W=$tmp/w1 "$HERD" -e 'print(herd.checkpoint(os.getenv("W")) ~= nil)') || fail "open after the first: $out"
[[ $out == true ]] || fail "open after the first writer closed: $out"

# --- a corrupt manifest: its path said once
cp -r "$one" "$tmp/bad"
printf garbage >"$tmp/bad/step-000000000001/manifest.msgpack"
"$HERD" ckpt verify "$tmp/bad" 1 >"$tmp/out" 2>/dev/null; rc=$?
[[ $rc == 1 ]] || fail "verify of a corrupt manifest: exit $rc"
[[ $(grep -o "manifest.msgpack" "$tmp/out" | wc -l) == 1 ]] || fail "the path twice: $(cat "$tmp/out")"
has "$(cat "$tmp/out")" "$tmp/bad/step-000000000001/manifest.msgpack: truncated or not a checkpoint manifest"

# --- HERD_CKPT_STAGING_BYTES: a size as everywhere else ("8M"); anything
# but a positive size is said and the default used ("-1" too)
for v in -1 0 abc 1e23 8X; do
  err=$(HERD_CKPT_STAGING_BYTES=$v "$HERD" -e "local ck = assert(herd.checkpoint(\"$tmp/staging\")); ck:close()" 2>&1) \
    || fail "staging $v: $err"
  has "$err" "HERD_CKPT_STAGING_BYTES=\"$v\" is not a positive size in bytes (as 268435456, 256M or 1.5GiB); using 268435456"
done
for v in 8M 1.5MiB 4194304; do
  err=$(HERD_CKPT_STAGING_BYTES=$v "$HERD" -e "local ck = assert(herd.checkpoint(\"$tmp/staging\")); ck:close()" 2>&1) \
    || fail "staging $v: $err"
  [[ -z $err ]] || fail "staging $v said: $err"
done
echo "ckpt: all checks passed"
