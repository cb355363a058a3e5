#!/usr/bin/env bash
# examples/lua/sweep_allreduce.lua prints its table and terminal chart and
# writes an SVG, which headless Chromium renders into a PNG: the picture
# must be drawn (the expected size, a white page with black axes and text,
# and the line colour of every series).  Reported skipped (exit 77)
# without Chromium (Debian's chromium, which .ci/deps installs).
set -u
HERD=${1:?usage: plot_svg.sh /path/to/herd}
fail() { echo "FAIL: $*" >&2; exit 1; }
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $browser ]]; then
  echo "plot_svg: SKIPPED (chromium not installed)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$HERD" examples/lua/sweep_allreduce.lua --svg "$tmp/sweep.svg" --json "$tmp/sweep.json" \
  --sizes 4K,256K --np 2,3 --transports auto,tcp --repeats 2 --iters 5 \
  >"$tmp/out" 2>"$tmp/err" || fail "sweep exited $?: $(cat "$tmp/err")"
out=$(cat "$tmp/out")
# the table: 8 rows of transport, np, size and three statistics
[[ $(grep -cE '^(auto|tcp) +[23] +(4096|262144) +[0-9.e+-]+ +[0-9.e+-]+ +[0-9.e+-]+$' "$tmp/out") == 8 ]] \
  || fail "table: $out"
# the chart: at most 80 columns, four marks in the legend, the axis in bytes
while IFS= read -r line; do
  (( ${#line} <= 80 )) || fail "a line of ${#line} columns: $line"
done <"$tmp/out"
grep -qF "* transport=auto np=2" "$tmp/out" || fail "legend: $out"
grep -qF "x transport=tcp np=3" "$tmp/out" || fail "legend: $out"
grep -qE '^ +4K +.*256K$' "$tmp/out" || fail "x axis labels: $out"
grep -qF "wrote $tmp/sweep.svg" "$tmp/out" || fail "no SVG written: $out"
python3 - "$tmp/sweep.json" <<'PY' || fail "the saved experiment"
import json, sys
e = json.load(open(sys.argv[1]))
assert e["order"] == ["transport", "np", "size"], e["order"]
assert len(e["records"]) == 8 and all(len(r["samples"]["busbw"]) == 2 for r in e["records"])
s = e["records"][0]["stats"]["busbw"]
assert s["min"] <= s["median"] <= s["max"] and s["n"] == 2, s
PY

# render: an 800 x 500 page the size of the SVG
HOME=$tmp timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --no-first-run --window-size=800,500 --screenshot="$tmp/sweep.png" "file://$tmp/sweep.svg" \
  >"$tmp/chromium.log" 2>&1 || fail "chromium exited $?: $(tail -5 "$tmp/chromium.log")"
[[ -s $tmp/sweep.png ]] || fail "no PNG: $(tail -5 "$tmp/chromium.log")"
python3 - "$tmp/sweep.png" <<'PY' || fail "the rendered picture"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, chunks = 8, {}
idat = b""
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
assert (w, h) == (800, 500), (w, h)
assert depth == 8 and ctype in (2, 6) and interlace == 0, (depth, ctype, interlace)
bpp = 3 if ctype == 2 else 4
raw = zlib.decompress(idat)
stride = w * bpp
rows, prev, i = [], bytearray(stride), 0
for _ in range(h):
    f = raw[i]; line = bytearray(raw[i + 1:i + 1 + stride]); i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b = prev[x]
        c = prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c; pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(bytes(line)); prev = line
colors = {}
for row in rows:
    for x in range(0, stride, bpp):
        px = row[x:x + 3]
        colors[px] = colors.get(px, 0) + 1
white = colors.get(b"\xff\xff\xff", 0)
dark = sum(n for c, n in colors.items() if max(c) < 80)
assert white > 0.6 * w * h, "not a white page: %d white pixels" % white
assert dark > 2000, "no axes or text: %d dark pixels" % dark
series = [b"\x1f\x77\xb4", b"\xd6\x27\x28", b"\x2c\xa0\x2c", b"\x94\x67\xbd"]
for s in series:
    assert colors.get(s, 0) > 100, "series colour %s drawn on %d pixels" % (s.hex(), colors.get(s, 0))
print("png: %dx%d, %d white, %d dark, %d colours" % (w, h, white, dark, len(colors)))
PY
echo "plot_svg: ok"
