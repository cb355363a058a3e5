#!/usr/bin/env bash
# examples/lua/sweep_allreduce.lua prints its table and terminal chart and
# writes an SVG, which headless Chromium renders into a PNG: the picture
# must be drawn (the expected size, a white page with black axes and text,
# and the colour of every series, in its legend swatch at least: measured
# lines may lie on each other).  Both charts title their axes with
# units, name the series in words under a heading, draw the spread of the
# repeats (bars in the terminal, shaded bands in SVG) and say what the
# lines and bands are in a caption; a chart of known bands renders them in
# each series' tint.  Reported skipped (exit 77) without Chromium
# (Debian's chromium, which .ci/deps installs).  HERD_TEST_KEEP=DIR keeps the
# two PNGs there, to look at.
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
grep -qE '^ +transport, np: +\* auto, 2 +\+ auto, 3 +o tcp, 2 +x tcp, 3$' "$tmp/out" || fail "legend: $out"
grep -qE '^ +4K +.*256K$' "$tmp/out" || fail "x axis labels: $out"
grep -qE '^ +size \(bytes\)$' "$tmp/out" || fail "x axis title: $out"
grep -qx 'busbw (GB/s)' "$tmp/out" || fail "y axis title: $out"
grep -qE '^ +lines: median of 2 runs per point; bars \(\|\): min to max$' "$tmp/out" || fail "caption: $out"
grep -qF "wrote $tmp/sweep.svg" "$tmp/out" || fail "no SVG written: $out"
# the SVG: the same titles, legend and caption, a band per series
svg=$(cat "$tmp/sweep.svg")
grep -qE 'class="xlabel"[^>]*>size \(bytes\)</text>' <<<"$svg" || fail "SVG x title: $svg"
grep -qE 'class="ylabel"[^>]*>busbw \(GB/s\)</text>' <<<"$svg" || fail "SVG y title: $svg"
grep -qE 'class="legend-title"[^>]*>transport, np</text>' <<<"$svg" || fail "SVG legend heading: $svg"
for name in "auto, 2" "auto, 3" "tcp, 2" "tcp, 3"; do
  grep -qE "class=\"legend\"[^>]*>$name</text>" <<<"$svg" || fail "SVG legend lacks '$name': $svg"
done
grep -qE 'class="caption"[^>]*>lines: median of 2 runs per point; bands: min to max</text>' <<<"$svg" \
  || fail "SVG caption: $svg"
[[ $(grep -c '<polygon class="band"' <<<"$svg") == 4 ]] || fail "SVG bands: $svg"
grep -qE '>[^<]*(table: 0x|=)[^<]*</text>' <<<"$svg" && fail "a key or a table in the SVG's text: $svg"
python3 - "$tmp/sweep.json" <<'PY' || fail "the saved experiment"
import json, sys
e = json.load(open(sys.argv[1]))
assert e["order"] == ["transport", "np", "size"], e["order"]
assert len(e["records"]) == 8 and all(len(r["samples"]["busbw"]) == 2 for r in e["records"])
s = e["records"][0]["stats"]["busbw"]
assert s["min"] <= s["median"] <= s["max"] and s["n"] == 2, s
PY

# render: an 800 x 500 page the size of the SVG
# png.py FILE [BANDS]: decodes the PNG (8-bit RGB or RGBA, Chromium's) and
# checks the page; with BANDS, the tint of each of the first two series'
# colours at 20% over white must cover a band's area
cat >"$tmp/png.py" <<'PY'
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
# a white page, where the sweep's bands (tints at 20%, wide where the
# measurements spread) may cover much of the plot
light = sum(n for c, n in colors.items() if min(c) >= 150)
assert white > 0.25 * w * h and light > 0.6 * w * h, \
    "not a white page: %d white pixels, %d light" % (white, light)
assert dark > (1000 if len(sys.argv) > 2 else 2000), "no axes or text: %d dark pixels" % dark
series = [b"\x1f\x77\xb4", b"\xd6\x27\x28", b"\x2c\xa0\x2c", b"\x94\x67\xbd"]
# The sweep's lines follow measured figures, and one series' line may lie
# under another's: its legend swatch (a line and a dot, some 60 pixels) is
# what is sure to show.  The chart of known bands has lines apart.
least = 100 if len(sys.argv) > 2 else 30
for s in series[:2 if len(sys.argv) > 2 else 4]:
    assert colors.get(s, 0) > least, "series colour %s drawn on %d pixels" % (s.hex(), colors.get(s, 0))
if len(sys.argv) > 2:
    for s in series[:2]:
        tint = [255 - 0.2 * (255 - v) for v in s]
        n = sum(k for c, k in colors.items() if all(abs(c[j] - tint[j]) <= 3 for j in range(3)))
        assert n > 20000, "the band of %s: %d pixels of its tint" % (s.hex(), n)
        print("band %s: %d pixels" % (s.hex(), n))
print("png: %dx%d, %d white, %d light, %d dark, %d colours" % (w, h, white, light, dark, len(colors)))
PY
render() { # SVG PNG
  HOME=$tmp timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --no-first-run --window-size=800,500 --screenshot="$2" "file://$1" \
    >"$tmp/chromium.log" 2>&1 || fail "chromium exited $?: $(tail -5 "$tmp/chromium.log")"
  [[ -s $2 ]] || fail "no PNG: $(tail -5 "$tmp/chromium.log")"
}
render "$tmp/sweep.svg" "$tmp/sweep.png"
python3 "$tmp/png.py" "$tmp/sweep.png" || fail "the rendered picture"

# a chart of two series whose bands do not overlap, 1.6 units high across
# the plot: each is shaded in its colour's tint
OUT=$tmp/bands.svg "$HERD" -e '
local s = {}
for i, base in ipairs({ 1.5, 5 }) do
  local pts = {}
  for k = 0, 4 do pts[#pts + 1] = { 2 ^ (10 + 2 * k), base + 0.1 * k, base - 0.8 + 0.1 * k, base + 0.8 + 0.1 * k } end
  s[i] = { name = ({ "auto", "tcp" })[i], points = pts }
end
assert(herd.plot.svg(s, { logx = true, xlabel = "size", xunit = "bytes", ylabel = "busbw", yunit = "GB/s",
                          legend = "transport", title = "bands", path = os.getenv("OUT"),
                          caption = "lines: median of 5 runs per point; bands: min to max" }))' \
  || fail "the chart of bands"
render "$tmp/bands.svg" "$tmp/bands.png"
[[ -n ${HERD_TEST_KEEP:-} ]] && cp "$tmp/sweep.png" "$tmp/bands.png" "$HERD_TEST_KEEP"/
python3 "$tmp/png.py" "$tmp/bands.png" bands || fail "the rendered bands"

echo "plot_svg: ok"
