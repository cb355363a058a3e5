#!/usr/bin/env bash
# herd launch --monitor and --monitor-out: a job of a busy rank and an idle
# one, sampled every 100 ms, prints a summary with both ranks (the CPU
# second the busy one burns is seen), writes the
# series (CSV rows that parse, JSON), the summary (JSON), an SVG per metric
# (XML) and report.html (self-contained: nothing it would fetch), and the
# job is in herd acct.  With the NVML stand-in (LD_LIBRARY_PATH, as the
# discover_nvml_mock test loads it), GPUs leased to the ranks are sampled:
# utilization percentiles, memory, GPU-hours used, and the warnings of a GPU
# under 50% busy and of a CPU saturated while its GPU waited.  Headless
# Chromium renders report.html: the summary table shows both ranks and the
# warnings (skipped without Chromium).  HERD_TEST_KEEP=DIR keeps the
# reports and the PNGs there, to look at.
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT
unset HERD_RANK RANK WORLD_SIZE HERD_STORE SLURM_JOB_ID
export HERD_ACCT_LOG=$tmp/acct.jsonl HERD_LEASE_DIR=$tmp/leases
host=$(hostname -s)
mock=$(dirname "$(dirname "$HERD")")/tests/mock

# The job: rank 0 burns one CPU-second of its own (counted in its
# /proc/self/stat, so the figure does not depend on how busy this machine
# is), rank 1 sleeps until rank 0 is done (the file $BUSY_DONE; 30 s at
# most), so both ranks hold their GPUs as long.  The monitor must see most
# of that second in rank 0's series and next to none in rank 1's:
# cpu_seconds integrates a rank's cpu_pct over its series' times (the CPU
# before the first sample and after the last is not seen: at most a period
# each).
busy='hz=$(getconf CLK_TCK); if [ "$HERD_RANK" = 0 ]; then while read -r -a st </proc/self/stat && (( st[13] + st[14] < hz )); do :; done; : >"$BUSY_DONE"; else i=0; while [ ! -e "$BUSY_DONE" ] && [ $i -lt 60 ]; do sleep 0.5; i=$((i + 1)); done; fi'
export BUSY_DONE=$tmp/busy.done
cpu_seconds='
def cpu_seconds(r):
    t, c = r["time_s"], r["cpu_pct"]
    return sum(c[i] / 100 * (t[i] - t[i - 1]) for i in range(1, len(t)) if c[i] is not None)
'

# check_report DIR RANKS: the files of --monitor-out DIR parse and hold both ranks.
check_report() {
	python3 - "$1" <<'PY' || fail "the files of --monitor-out: $(ls -l "$1")"
import csv, json, os, sys, xml.etree.ElementTree as ET
d = sys.argv[1]
rows = list(csv.reader(open(os.path.join(d, "series.csv"))))
assert rows[0] == ["time_s", "unix_time_s", "rank", "host", "pid", "cpu_pct", "gpu_index",
                   "gpu_uuid", "gpu_util_pct", "gpu_mem_util_pct", "gpu_mem_used_bytes",
                   "gpu_power_w"], rows[0]
assert len(rows) > 5 and all(len(r) == 12 for r in rows), rows
for r in rows[1:]:
    float(r[0]); float(r[1]); int(r[2]); int(r[4])
    for v in r[5:6] + r[8:]:
        assert v == "" or float(v) >= 0, r
assert {r[2] for r in rows[1:]} == {"0", "1"}, rows
times = [float(r[0]) for r in rows[1:]]
assert times == sorted(times), times
series = json.load(open(os.path.join(d, "series.json")))
assert series["v"] == 1 and [r["rank"] for r in series["ranks"]] == [0, 1], series
for r in series["ranks"]:
    assert len(r["time_s"]) == len(r["cpu_pct"]) > 3, r
    for g in r["gpus"]:
        assert len(g["time_s"]) == len(g["util_pct"]) == len(g["mem_used_bytes"]), g
s = json.load(open(os.path.join(d, "summary.json")))
assert s["v"] == 1 and s["samples"] > 3 and s["period_ms"] == 100, s
assert [r["rank"] for r in s["ranks"]] == [0, 1] and all(r["sampled"] for r in s["ranks"]), s
for name in ("gpu_util", "gpu_memory", "cpu", "power"):
    root = ET.parse(os.path.join(d, name + ".svg")).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg", (name, root.tag)
html = open(os.path.join(d, "report.html")).read()
assert html.startswith("<!DOCTYPE html>") and html.count("<svg") == 4, "plots"
low = html.lower()
for bad in ("<script", "src=", "href=", "url(", "@import", "<link", "<iframe", "<img"):
    assert bad not in low, "report.html holds " + bad
assert low.replace('xmlns="http://www.w3.org/2000/svg"', "").find("http") < 0, "a URL"
assert '<tr data-rank="0">' in html and '<tr data-rank="1">' in html, "rows"
print("report: %d rows, %d samples" % (len(rows) - 1, s["samples"]))
PY
}

# --- no GPU: the CPU part, and why no GPU was sampled
rm -f "$BUSY_DONE"
"$HERD" launch -n 2 --monitor --monitor-period 100 --monitor-out "$tmp/cpu" \
	--json-summary "$tmp/cpu.json" -- bash -c "$busy" >"$tmp/out" 2>"$tmp/err" \
	|| fail "the monitored job exited $?: $(cat "$tmp/err")"
err=$(cat "$tmp/err")
job=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$tmp/cpu.json")
grep -qE "^herd launch: job $job: [0-9]+ samples of this node \($host\) every 100 ms over [0-9.]+ s$" <<<"$err" \
	|| fail "the summary's heading: $err"
grep -qE "^ *rank +host +GPUs +util mean +p5 +p50 +p95 +mem peak +idle +CPU mean +CPU peak$" <<<"$err" \
	|| fail "the table's heading: $err"
grep -qE "^ +0 +$host +- +- +- +- +- +- +[0-9]+% +[0-9]+% +[0-9]+%$" <<<"$err" || fail "rank 0: $err"
grep -qE "^ +1 +$host +- +- +- +- +- +- +[0-9]+% +[0-9]+% +[0-9]+%$" <<<"$err" || fail "rank 1: $err"
grep -qE "^no GPU was sampled: ." <<<"$err" || fail "no line saying why no GPU was sampled: $err"
grep -qF "GPU-hours: 0.0000 held (0 GPUs), used not measured" <<<"$err" || fail "GPU-hours: $err"
grep -q "^warning:" <<<"$err" && fail "warnings without a GPU: $err"
CPU_SECONDS=$cpu_seconds python3 - "$tmp/cpu/summary.json" <<'PY' || fail "CPU use: $(cat "$tmp/cpu/summary.json" "$tmp/cpu/series.json")"
import json, os, sys
exec(os.environ["CPU_SECONDS"])
s = json.load(open(sys.argv[1]))
series = json.load(open(sys.argv[1].replace("summary.json", "series.json")))
busy, idle = s["ranks"]
seen = [cpu_seconds(r) for r in series["ranks"]]
assert 0.4 < seen[0] < 1.3 and seen[1] < 0.1, seen
assert busy["cpu_peak_pct"] >= busy["cpu_mean_pct"] > idle["cpu_mean_pct"], (busy, idle)
assert busy["idle_of"] == "cpu" and busy["gpus"] == [] and busy["gpu_util_mean_pct"] is None, busy
assert s["gpu_hours_used"] is None and s["gpu_hours_held"] == 0 and s["warnings"] == [], s
assert s["gpu_note"].startswith("no GPU was sampled: "), s
print("CPU: busy rank %.0f%% (peak %.0f%%, %.2f CPU-s seen), idle rank %.0f%%" % (
    busy["cpu_mean_pct"], busy["cpu_peak_pct"], seen[0], idle["cpu_mean_pct"]))
PY
check_report "$tmp/cpu"
out=$("$HERD" acct) || fail "herd acct exited $?"
grep -qE "^$job .* +2 +0 +succeeded +0 +0\.0000 +- +bash -c " <<<"$out" || fail "herd acct: $out"

# --- from Lua: herd.launch{monitor_out =} writes the same files; herd.report.write
# draws the plots and the page again from the JSON files
DIR=$tmp "$HERD" -e '
local dir = os.getenv("DIR")
local j <close> = herd.launch{cmd = {"sleep", "0.8"}, n = 2, output = "none", monitor_period = 0.1,
                              monitor_out = dir .. "/lua"}
assert(j:wait().ok)
local paths = assert(herd.report.write(dir .. "/cpu"))
assert(#paths == 5 and paths[5] == dir .. "/cpu/report.html", #paths)
local none, msg = herd.report.write(dir .. "/nowhere")
assert(none == nil and msg:find("summary.json", 1, true), msg)' 2>"$tmp/err" \
	|| fail "herd.launch{monitor_out}: $(cat "$tmp/err")"
grep -qE "^herd: job [0-9a-f-]+: [0-9]+ samples of this node \($host\) every 100 ms" "$tmp/err" \
	|| fail "herd.launch's summary: $(cat "$tmp/err")"
check_report "$tmp/lua"

# --- the NVML stand-in: a GPU leased to each rank, and one more that NVML
# lists rank 1's process on.  Each rank sets its GPUs' figures in the
# stand-in's state file: rank 0 (busy) at 20%, rank 1 (asleep) at 90% on
# its own and 60% on GPU 2.
gpu=0
if [[ -f $mock/libnvidia-ml.so.1 ]]; then
	gpu=1
	export HERD_NVML_MOCK_STATE=$tmp/nvml.state
	: >"$HERD_NVML_MOCK_STATE"
	figures='idx=$((0x$(echo "$CUDA_VISIBLE_DEVICES" | cut -c5-12)))
if [ "$HERD_RANK" = 0 ]; then
	echo "gpu $idx util 20 mem_used 3221225472 power_mw 150000" >>"$HERD_NVML_MOCK_STATE"
else
	echo "gpu $idx util 90 mem_used 1073741824 power_mw 300000" >>"$HERD_NVML_MOCK_STATE"
	echo "gpu 2 util 60 mem_used 2147483648" >>"$HERD_NVML_MOCK_STATE"
	echo "proc 2 $$ 2147483648" >>"$HERD_NVML_MOCK_STATE"
fi
echo "$idx" >"$0/gpu.$HERD_RANK"'
	rm -f "$BUSY_DONE"
	LD_LIBRARY_PATH=$mock "$HERD" launch -n 2 --gpus-per-rank 1 --monitor-out "$tmp/gpu" \
		--monitor-period 100 --json-summary "$tmp/gpu.json" -- bash -c "$figures
$busy" "$tmp" >"$tmp/out" 2>"$tmp/err" \
		|| fail "the job on the stand-in's GPUs exited $?: $(cat "$tmp/err")"
	err=$(cat "$tmp/err")
	g0=$(cat "$tmp/gpu.0") g1=$(cat "$tmp/gpu.1")
	check_report "$tmp/gpu"
	grep -qE "^ +0 +$host +$g0 +[0-9]+% +[0-9]+% +20% +20% +3\.0 GiB +[0-9]+% +[0-9]+% +[0-9]+%$" <<<"$err" \
		|| fail "rank 0 on GPU $g0: $err"
	grep -qE "^ +1 +$host +($g1,2|2,$g1) +[0-9]+% +" <<<"$err" || fail "rank 1 on GPUs $g1 and 2: $err"
	grep -qE "^GPU-hours: 0\.[0-9]{4} held \(2 GPUs\), 0\.[0-9]{4} used \([0-9]+% of held\)$" <<<"$err" \
		|| fail "GPU-hours: $err"
	grep -q "^no GPU was sampled" <<<"$err" && fail "GPUs sampled, yet: $err"
	CPU_SECONDS=$cpu_seconds python3 - "$tmp/gpu/summary.json" "$HERD_ACCT_LOG" "$g0" "$g1" <<'PY' || fail "GPUs: $err"
import json, os, re, sys
exec(os.environ["CPU_SECONDS"])
s = json.load(open(sys.argv[1]))
g0, g1 = int(sys.argv[3]), int(sys.argv[4])
r0, r1 = s["ranks"]
assert s["gpus_held"] == 2 and sorted(g["index"] for g in s["gpus"]) == sorted([g0, g1, 2]), s
assert [g["index"] for g in r0["gpus"]] == [g0] and r0["idle_of"] == "gpu", r0
assert sorted(g["index"] for g in r1["gpus"]) == sorted([g1, 2]), r1
assert r0["gpu_util_p50_pct"] == 20 and r0["gpu_util_p95_pct"] == 20, r0
assert r0["gpu_util_mean_pct"] <= 20 and r0["gpu_mem_peak_bytes"] == 3221225472, r0
assert r1["gpu_util_p95_pct"] == 90 and r1["gpu_mem_peak_bytes"] == 3221225472, r1
series = json.load(open(sys.argv[1].replace("summary.json", "series.json")))
assert 0.4 < cpu_seconds(series["ranks"][0]) < 1.3, series["ranks"][0]
w = s["warnings"]
assert w[0] == "GPU %d (rank 0) sat under 50%% busy for 100%% of the run" % g0, w
# the saturation warning, as rank 0's series say (this machine is shared:
# its CPU may not reach 90% of a core in most samples): samples with both
# figures, and those at 90% of a core or more while the GPU was under 50%
sr = series["ranks"][0]
util = dict(zip(sr["gpus"][0]["time_s"], sr["gpus"][0]["util_pct"]))
both = [(c, util[t]) for t, c in zip(sr["time_s"], sr["cpu_pct"])
        if c is not None and util.get(t) is not None]
sat = [(c, u) for c, u in both if c >= 90 and u < 50]
# (series.json rounds to 0.1: a figure that close to 90 or 50 may fall either way)
near = any(abs(c - 90) < 0.1 or abs(u - 50) < 0.1 for c, u in both)
if len(both) >= 2 and 2 * len(sat) > len(both):
    m = re.fullmatch(r"rank 0: CPU saturated \((\d+)% of a core\) while its GPU waited "
                     r"\((\d+)% busy\) for (\d+)% of the run", w[1] if len(w) > 1 else "")
    assert m or near, (w, both)
    if m and not near:
        got = [int(x) for x in m.groups()]
        want = [sum(c for c, _ in sat) / len(sat), sum(u for _, u in sat) / len(sat),
                100 * len(sat) / len(both)]
        assert all(abs(g - x) <= 1 for g, x in zip(got, want)) and len(w) == 2, (w, want)
else:
    assert w[1:] == [] or near, (w, both)
rec = [json.loads(l) for l in open(sys.argv[2])][-1]
assert rec["job_id"] == s["job_id"] and rec["gpus"] == 2, rec
assert abs(rec["gpu_hours_held"] - 2 * rec["elapsed"] / 3600) < 1e-6, rec
assert 0.5 * rec["gpu_hours_held"] < rec["gpu_hours_used"] < rec["gpu_hours_held"], rec
print("GPUs: rank 0 on %d, rank 1 on %d and 2; %s; rank 0 saturated in %d of %d samples" % (
    g0, g1, w, len(sat), len(both)))
PY
	grep -qF "warning: GPU $g0 (rank 0) sat under 50% busy for 100% of the run" <<<"$err" \
		|| fail "the warning on stderr: $err"
fi

# --- headless Chromium renders the page: both ranks in the table, the warnings
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $browser ]]; then
	echo "monitor: the rendering SKIPPED (chromium not installed)"
	exit 0
fi
render() { # HTML PNG DOM
	HOME=$tmp timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
		--no-first-run --host-resolver-rules="MAP * ~NOTFOUND" --window-size=1000,2400 \
		--screenshot="$2" "file://$1" >"$tmp/chromium.log" 2>&1 \
		|| fail "chromium exited $?: $(tail -5 "$tmp/chromium.log")"
	[[ -s $2 ]] || fail "no PNG: $(tail -5 "$tmp/chromium.log")"
	HOME=$tmp timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
		--host-resolver-rules="MAP * ~NOTFOUND" --dump-dom "file://$1" >"$3" 2>"$tmp/chromium.log" \
		|| fail "chromium --dump-dom exited $?: $(tail -5 "$tmp/chromium.log")"
}
render "$tmp/cpu/report.html" "$tmp/cpu.png" "$tmp/cpu.dom"
[[ -n ${HERD_TEST_KEEP:-} ]] && mkdir -p "$HERD_TEST_KEEP" && cp -r "$tmp/cpu" "$tmp/cpu.png" "$HERD_TEST_KEEP/"
python3 - "$tmp/cpu.dom" "$tmp/cpu.png" "$tmp/cpu/summary.json" <<'PY' || fail "the rendered page: $(cat "$tmp/cpu.dom" | head -50)"
import json, re, struct, sys
dom = open(sys.argv[1]).read()
rows = re.findall(r'<tr data-rank="(\d+)"><td>(\d+)</td><td class="text">([^<]*)</td>((?:<td[^>]*>[^<]*</td>)+)</tr>', dom)
assert [r[0] for r in rows] == ["0", "1"], rows
cells = [re.findall(r"<td[^>]*>([^<]*)</td>", r[3]) for r in rows]
assert all(len(c) == 9 and c[0] == "-" and c[-2].endswith("%") for c in cells), cells
# the CPU means the summary holds
means = [r["cpu_mean_pct"] for r in json.load(open(sys.argv[3]))["ranks"]]
assert all(abs(int(c[-2][:-1]) - m) <= 1 for c, m in zip(cells, means)), (cells, means)
assert '<p id="warnings">none</p>' in dom, "warnings"
assert dom.count("<svg") == 4, "plots"
png = open(sys.argv[2], "rb").read()
assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (1000, 2400), "PNG"
print("rendered: ranks %s" % [(r[0], c[-2]) for r, c in zip(rows, cells)])
PY
if [[ $gpu == 1 ]]; then
	render "$tmp/gpu/report.html" "$tmp/gpu.png" "$tmp/gpu.dom"
	[[ -n ${HERD_TEST_KEEP:-} ]] && cp -r "$tmp/gpu" "$tmp/gpu.png" "$HERD_TEST_KEEP/"
	python3 - "$tmp/gpu.dom" "$tmp/gpu/summary.json" <<'PY' || fail "the rendered page of the GPU job"
import json, re, sys
dom, s = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
rows = re.findall(r'<tr data-rank="(\d+)"><td>\d+</td><td class="text">[^<]*</td><td>([^<]*)</td>', dom)
assert rows == [(str(r["rank"]), ",".join(str(g["index"]) for g in r["gpus"])) for r in s["ranks"]], rows
shown = re.findall(r"<li>([^<]*)</li>", dom)
assert shown == s["warnings"], (shown, s["warnings"])
print("rendered: GPUs %s, warnings %s" % (rows, shown))
PY
fi
echo "monitor: ok"
