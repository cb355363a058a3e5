#!/usr/bin/env bash
# herd exporter: the exposition of this node (GPUs through the NVML
# stand-in and figures a state file gives it, the node's own figures, the
# jobs, leases and collective counters of real jobs) with exact values;
# promtool check metrics reads it; a real Prometheus (tests/harness/
# prometheus.sh) scrapes it and a PromQL query returns herd's series with
# their labels; the HTTP edges (/, 404, 405, HEAD, HTTP/1.0, a request too
# long, a malformed one, an idle connection); a port taken; usage errors;
# SIGTERM and SIGINT.
source "$(dirname "$0")/../harness/common.sh" "$@"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	bash tests/harness/prometheus.sh stop "$tmp/prom" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

mock=${HERD_NVML_MOCK_DIR:-$(dirname "$HERD")/../tests/mock}
[[ -e $mock/libnvidia-ml.so.1 ]] || fail "no NVML stand-in at $mock (build the nvml_mock target)"
export HERD_STATS_DIR=$tmp/stats HERD_LEASE_DIR=$tmp/leases HERD_KERNEL_LOG=$tmp/kmsg
unset HERD_JOB_ID HERD_RANK SLURM_JOB_ID HERD_LAUNCH_ADDR
host=$(cat /proc/sys/kernel/hostname)
uuid() { printf 'GPU-%08x-1111-2222-3333-444444444444' "$1"; }
model='modelName="NVIDIA H100 80GB HBM3"'
# The DCGM labels of the stand-in's GPU I (NVML's index) at bus B.
dcgm() { echo "{gpu=\"$1\",UUID=\"$(uuid "$1")\",pci_bus_id=\"00000000:$2:00.0\",$model,Hostname=\"$host\"}"; }

# http PORT REQUEST: the raw response (REQUEST with \r\n escapes), at most 10 s.
http() {
	timeout 10 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0" || exit 1; printf "%b" "$1" >&3; cat <&3' \
		"$1" "$2"
}
# scrape PORT: the body of GET /metrics.
scrape() { http "$1" 'GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n' | sed '1,/^\r$/d'; }
# has_line FILE LINE: FILE holds LINE exactly.
has_line() { grep -qxF -- "$2" "$1" || fail "no line '$2' in: $(grep -F "${2%%\{*}" "$1")"; }

# start_exporter ARGS...: herd exporter on the stand-in, in the background;
# sets exp_pid and port once it serves.
start_exporter() {
	LD_LIBRARY_PATH=$mock HERD_NVML_MOCK_STATE=$tmp/state "$HERD" exporter "$@" \
		>"$tmp/exp.out" 2>"$tmp/exp.err" &
	exp_pid=$!
	pids+=("$exp_pid")
	for ((k = 0; k < 150; k++)); do
		grep -q '^herd exporter: serving ' "$tmp/exp.out" && break
		kill -0 "$exp_pid" 2>/dev/null || fail "herd exporter exited: $(cat "$tmp/exp.err")"
		sleep 0.1
	done
	port=$(sed -n 's|^herd exporter: serving http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p' \
		"$tmp/exp.out")
	[[ -n $port ]] || fail "herd exporter said: $(cat "$tmp/exp.out" "$tmp/exp.err")"
}

# wait_metric PORT TEXT: scrapes until the exposition has a line holding
# TEXT (at most 15 s); leaves the last exposition in $tmp/m.
wait_metric() {
	for ((k = 0; k < 150; k++)); do
		scrape "$1" >"$tmp/m"
		grep -qF -- "$2" "$tmp/m" && return 0
		sleep 0.1
	done
	fail "no '$2' within 15 s: $(cat "$tmp/m")"
}

# ---- usage errors, before anything starts
for bad in "--period 5" "--period x" "--listen nowhere" "--listen 127.0.0.1:70000" \
	"--listen" "--bogus" "extra" "--lis 127.0.0.1:0"; do
	# shellcheck disable=SC2086
	"$HERD" exporter $bad >"$tmp/out" 2>"$tmp/err" </dev/null
	rc=$?
	[[ $rc == 2 ]] || fail "herd exporter $bad exited $rc, not 2: $(cat "$tmp/err")"
	grep -q '^herd exporter: ' "$tmp/err" || fail "herd exporter $bad said: $(cat "$tmp/err")"
done
[[ -e $tmp/stats ]] && fail "a usage error made the stats directory"

# ---- the stand-in's GPUs: figures given for GPU 0 (bus 9A) and 1 (1B),
# GPU 1 without a power reading; a process of a job on GPU 0; an Xid of
# GPU 0 in the kernel log before the start.
HERD_JOB_ID=exp-proc-$$ HERD_RANK=3 sleep 60 &
gpu_proc=$!
pids+=("$gpu_proc")
cat >"$tmp/state" <<EOF
gpu 0 util 37 mem_util 12 mem_used 2147483648 power_mw 123456 power_limit_mw 500000 temp 61
gpu 0 sm_clock 1980 mem_clock 2619 energy_mj 7000000 throttle 4 ecc_sbe 3 ecc_dbe 1
gpu 1 util 88 mem_used 1048576 power_mw na
proc 0 $gpu_proc 1073741824
EOF
echo "[  812.000001] NVRM: Xid (PCI:0000:9a:00): 79, pid=4242, name=python" >"$tmp/kmsg"
start_exporter --listen 127.0.0.1:0 --period 100
[[ -d $tmp/stats ]] || fail "herd exporter did not make \$HERD_STATS_DIR"
grep -qxF "herd exporter: serving http://127.0.0.1:$port/metrics (collective counters: $tmp/stats)" \
	"$tmp/exp.out" || fail "the first line: $(cat "$tmp/exp.out")"
# The second sample has the rates (CPU busy); the first has none.
wait_metric "$port" 'herd_node_cpu_busy_percent '
m=$tmp/m
for f in "DCGM_FI_DEV_GPU_UTIL 37 88" "DCGM_FI_DEV_MEM_COPY_UTIL 12 0" "DCGM_FI_DEV_FB_USED 2048 1" \
	"DCGM_FI_DEV_GPU_TEMP 61 41" "DCGM_FI_DEV_SM_CLOCK 1980 345" \
	"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION 7000000 5000000" "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL 3 0" \
	"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL 1 0" "DCGM_FI_DEV_CLOCKS_EVENT_REASONS 4 1" \
	"DCGM_FI_DEV_XID_ERRORS 79 0" "DCGM_FI_DEV_ENFORCED_POWER_LIMIT 500 700" \
	"DCGM_FI_DEV_FB_TOTAL 81559 81559" "DCGM_FI_DEV_FB_FREE 79511 81558"; do
	read -r name v0 v1 <<<"$f"
	has_line "$m" "$name$(dcgm 0 9A) $v0"
	has_line "$m" "$name$(dcgm 1 1B) $v1"
	grep -qF "# TYPE $name " "$m" || fail "no TYPE line for $name"
	grep -qF "# HELP $name " "$m" || fail "no HELP line for $name"
done
has_line "$m" "DCGM_FI_DEV_POWER_USAGE$(dcgm 0 9A) 123.456"
# No power reading: no series, never a made-up value.
grep -qF "DCGM_FI_DEV_POWER_USAGE$(dcgm 1 1B)" "$m" && fail "a power figure for GPU 1: $(grep POWER_USAGE "$m")"
[[ $(grep -c '^DCGM_FI_DEV_GPU_UTIL{' "$m") == 3 ]] || fail "not 3 GPUs: $(grep GPU_UTIL "$m")"
has_line "$m" "# TYPE DCGM_FI_DEV_GPU_UTIL gauge"
has_line "$m" "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter"
has_line "$m" "herd_gpu_processes{gpu=\"0\",UUID=\"$(uuid 0)\"} 1"
has_line "$m" "herd_gpu_processes{gpu=\"1\",UUID=\"$(uuid 1)\"} 0"
has_line "$m" "herd_gpu_process_info{gpu=\"0\",UUID=\"$(uuid 0)\",pid=\"$gpu_proc\",command=\"sleep\",herd_job=\"exp-proc-$$\",rank=\"3\"} 1"
has_line "$m" "herd_gpu_process_memory_bytes{gpu=\"0\",UUID=\"$(uuid 0)\",pid=\"$gpu_proc\",command=\"sleep\",herd_job=\"exp-proc-$$\",rank=\"3\"} 1073741824"
has_line "$m" "herd_gpu_xid_events_total{gpu=\"0\",UUID=\"$(uuid 0)\"} 0"
has_line "$m" "herd_node_gpus 3"
has_line "$m" "herd_job_ranks{herd_job=\"exp-proc-$$\"} 1"
has_line "$m" "herd_gpu_leases{state=\"free\"} 3"
has_line "$m" "herd_gpu_leases{state=\"exclusive\"} 0"
# The node's own figures, from /proc.
mem_total=$(($(awk '/^MemTotal:/ { print $2 }' /proc/meminfo) * 1024))
has_line "$m" "herd_node_memory_total_bytes $mem_total"
[[ $(grep -c '^herd_node_cpu_core_busy_percent{cpu="[0-9]*"} ' "$m") == "$(grep -c '^cpu[0-9]' /proc/stat)" ]] ||
	fail "not a series per CPU: $(grep core_busy "$m")"
awk '/^herd_node_cpu_busy_percent / { exit !($2 >= 0 && $2 <= 100) }' "$m" ||
	fail "CPU busy out of 0..100: $(grep cpu_busy_percent "$m")"
awk '/^herd_node_memory_available_bytes / { exit !($2 > 0 && $2 <= '"$mem_total"') }' "$m" ||
	fail "available memory out of range: $(grep available "$m")"
ifc=$(awk -F'[: ]+' 'NR > 2 && $2 != "lo" { print $2; exit }' /proc/net/dev)
if [[ -n $ifc ]]; then
	grep -q "^herd_node_network_receive_bytes_total{device=\"$ifc\"} [0-9]" "$m" ||
		fail "no receive bytes of $ifc: $(grep network "$m")"
fi
grep -q 'lo"' <(grep network "$m") && fail "loopback in the network figures"

# An Xid while it runs: counted, and the last one shown.
echo "[  913.000001] NVRM: Xid (PCI:0000:9a:00): 31, pid=4242, name=python" >>"$tmp/kmsg"
wait_metric "$port" "herd_gpu_xid_events_total{gpu=\"0\",UUID=\"$(uuid 0)\"} 1"
has_line "$m" "DCGM_FI_DEV_XID_ERRORS$(dcgm 0 9A) 31"

# ---- promtool reads it: no parse error; its style complaints are DCGM's
# own names only (counters without "_total", the label modelName); herd's
# families pass clean.
promtool=${PROMTOOL:-/usr/bin/promtool}
if [[ -x $promtool ]]; then
	"$promtool" check metrics <"$m" >"$tmp/lint" 2>&1
	rc=$?
	[[ $rc == 0 || $rc == 3 ]] || fail "promtool check metrics exited $rc: $(cat "$tmp/lint")"
	grep -vE "^DCGM_[A-Z_]+ label names should be written in 'snake_case' not 'camelCase'$|^DCGM_FI_DEV_(TOTAL_ENERGY_CONSUMPTION|ECC_SBE_VOL_TOTAL|ECC_DBE_VOL_TOTAL) counter metrics should have \"_total\" suffix$" \
		"$tmp/lint" >"$tmp/other" && fail "promtool complains: $(cat "$tmp/other")"
	grep -v '^DCGM_\|^# [A-Z]* DCGM_' "$m" >"$tmp/herd_only"
	"$promtool" check metrics <"$tmp/herd_only" >"$tmp/lint" 2>&1 ||
		fail "promtool check metrics on herd's families exited $?: $(cat "$tmp/lint")"
	[[ -s $tmp/lint ]] && fail "promtool says of herd's families: $(cat "$tmp/lint")"
else
	echo "promtool not installed: the exposition is not linted"
fi

# ---- a job's ranks and its GPU leases (herd launch holds them in
# $HERD_LEASE_DIR for the job's life).
LD_LIBRARY_PATH=$mock timeout 100 "$HERD" launch -n 2 --gpus-per-rank 1 -- \
	sh -c 'echo "$HERD_JOB_ID" >"$0/job.$HERD_RANK.tmp" && mv "$0/job.$HERD_RANK.tmp" "$0/job.$HERD_RANK"; exec sleep 90' "$tmp" \
	>"$tmp/launch.out" 2>&1 &
launcher=$!
pids+=("$launcher")
for ((k = 0; k < 300; k++)); do [[ -s $tmp/job.0 && -s $tmp/job.1 ]] && break; sleep 0.1; done
[[ -s $tmp/job.1 ]] || fail "the job did not start: $(cat "$tmp/launch.out")"
job=$(cat "$tmp/job.0")
wait_metric "$port" "herd_job_ranks{herd_job=\"$job\"} 2"
has_line "$m" 'herd_gpu_leases{state="exclusive"} 2'
has_line "$m" 'herd_gpu_leases{state="free"} 1'
for f in "$tmp"/leases/*.lock; do
	[[ -s $f ]] || continue
	u=$(sed -n 's/^uuid=//p' "$f")
	i=$((16#$(cut -c5-12 <<<"$u")))
	has_line "$m" "herd_gpu_lease_holder{gpu=\"$i\",UUID=\"$u\",state=\"exclusive\",herd_job=\"$job\",user=\"$(id -un)\"} 1"
done
[[ $(grep -c '^herd_gpu_lease_holder{' "$m") == 2 ]] || fail "not 2 holders: $(grep holder "$m")"
kill "$launcher"
wait "$launcher" 2>/dev/null
wait_metric "$port" 'herd_gpu_leases{state="free"} 3'
grep -qF "herd_job_ranks{herd_job=\"$job\"}" "$m" && fail "job $job still counted after its end"

# ---- collective counters of real ranks: live, then after the job ended,
# with exact counts; the files of ended processes removed.
cat >"$tmp/ranks.lua" <<'EOF'
-- N allreduces of one integer, a barrier; then, given a file name, wait
-- until it exists; given "mismatch", an allreduce of a size of its own.
local c = assert(herd.comm())
local n, go = tonumber(arg[1]), arg[2]
local f = io.open(arg[3] .. "/job." .. herd.rank, "w")
f:write(os.getenv("HERD_JOB_ID"), "\n")
f:close()
for _ = 1, n do assert(c:allreduce(herd.rank)) end
assert(c:barrier())
if go == "mismatch" then
  local t = {}
  for i = 1, herd.rank + 1 do t[i] = i end
  assert(not c:allreduce(t))
elseif go then
  local t0 = herd.clock()
  while herd.clock() - t0 < 60 do
    local g = io.open(go)
    if g then g:close() break end
    os.execute("sleep 0.05")
  end
end
EOF
rm -f "$tmp"/job.*
timeout 100 "$HERD" launch -n 2 -- "$HERD" "$tmp/ranks.lua" 5 "$tmp/go" "$tmp" >"$tmp/launch.out" 2>&1 &
launcher=$!
pids+=("$launcher")
for ((k = 0; k < 300; k++)); do [[ -s $tmp/job.0 ]] && break; sleep 0.1; done
job=$(cat "$tmp/job.0")
[[ -n $job ]] || fail "the ranks did not start: $(cat "$tmp/launch.out")"
wait_metric "$port" "herd_collective_calls_total{herd_job=\"$job\",kind=\"barrier\"} 2"
has_line "$m" "herd_collective_calls_total{herd_job=\"$job\",kind=\"allreduce\"} 10"
has_line "$m" "herd_collective_bytes_total{herd_job=\"$job\",kind=\"allreduce\"} 80"
has_line "$m" "herd_collective_bytes_total{herd_job=\"$job\",kind=\"barrier\"} 0"
has_line "$m" "herd_collective_failures_total{herd_job=\"$job\",kind=\"allreduce\"} 0"
has_line "$m" "herd_collective_communicators{herd_job=\"$job\"} 2"
awk -v j="$job" '$1 == "herd_collective_seconds_total{herd_job=\"" j "\",kind=\"allreduce\"}" { found = 1; ok = $2 > 0 && $2 < 60 }
	END { exit !(found && ok) }' "$m" || fail "allreduce seconds: $(grep seconds "$m")"
[[ $(ls "$tmp"/stats/*.stats | wc -l) == 2 ]] || fail "not one file per rank: $(ls -la "$tmp/stats")"
touch "$tmp/go"
wait "$launcher" || fail "the ranks failed: $(cat "$tmp/launch.out")"
wait_metric "$port" "herd_collective_communicators{herd_job=\"$job\"} 0"
has_line "$m" "herd_collective_calls_total{herd_job=\"$job\",kind=\"allreduce\"} 10"
has_line "$m" "herd_collective_calls_total{herd_job=\"$job\",kind=\"barrier\"} 2"
has_line "$m" "herd_collective_bytes_total{herd_job=\"$job\",kind=\"allreduce\"} 80"
ls "$tmp"/stats/*.stats >/dev/null 2>&1 && fail "files of ended processes left: $(ls -la "$tmp/stats")"
scrape "$port" >"$tmp/m2"
has_line "$tmp/m2" "herd_collective_calls_total{herd_job=\"$job\",kind=\"allreduce\"} 10"

# A job that ended before the scrape, and a failed call: the ranks
# disagree on the size of their second allreduce.
rm -f "$tmp"/job.*
timeout 100 "$HERD" launch -n 2 -- "$HERD" "$tmp/ranks.lua" 3 mismatch "$tmp" >"$tmp/launch.out" 2>&1 ||
	fail "the mismatch ranks failed: $(cat "$tmp/launch.out")"
job=$(cat "$tmp/job.0")
scrape "$port" >"$tmp/m"
has_line "$m" "herd_collective_calls_total{herd_job=\"$job\",kind=\"allreduce\"} 8"
has_line "$m" "herd_collective_failures_total{herd_job=\"$job\",kind=\"allreduce\"} 2"
has_line "$m" "herd_collective_errors_total{herd_job=\"$job\",error=\"mismatch\"} 2"
has_line "$m" "herd_collective_communicators{herd_job=\"$job\"} 0"

# ---- Prometheus scrapes it: the target is up, and PromQL finds herd's
# series with their labels.
if bash tests/harness/prometheus.sh start "$tmp/prom" "127.0.0.1:$port"; then
	prom=$(cat "$tmp/prom/port")
	python3 - "$prom" "$port" "$host" "$(uuid 0)" "$mem_total" >"$tmp/prom.out" 2>&1 <<'PY' ||
import json, sys, time, urllib.parse, urllib.request
prom, port, host, uuid0, mem_total = sys.argv[1:]
base = "http://127.0.0.1:%s/api/v1/" % prom

def get(path):
    with urllib.request.urlopen(base + path, timeout=5) as r:
        return json.load(r)

def query(q):
    return get("query?query=" + urllib.parse.quote(q))["data"]["result"]

deadline = time.monotonic() + 60
while True:
    targets = get("targets")["data"]["activeTargets"]
    up = [t for t in targets if t["health"] == "up"]
    if up and query("DCGM_FI_DEV_GPU_UTIL") and query("herd_node_memory_total_bytes"):
        break
    if time.monotonic() > deadline:
        sys.exit("not up and scraped within 60 s: %s" % json.dumps(targets))
    time.sleep(0.2)
t = up[0]
assert t["labels"]["job"] == "herd" and t["labels"]["instance"] == "127.0.0.1:" + port, t
assert t["scrapeUrl"] == "http://127.0.0.1:%s/metrics" % port, t
r = query('DCGM_FI_DEV_GPU_UTIL{gpu="0"}')
assert len(r) == 1, r
want = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0", "UUID": uuid0,
        "pci_bus_id": "00000000:9A:00.0", "modelName": "NVIDIA H100 80GB HBM3",
        "Hostname": host, "job": "herd", "instance": "127.0.0.1:" + port}
assert r[0]["metric"] == want, r[0]["metric"]
assert r[0]["value"][1] == "37", r[0]
r = query("herd_node_memory_total_bytes")
assert len(r) == 1 and r[0]["value"][1] == mem_total, r
r = query('sum(DCGM_FI_DEV_FB_USED)')
assert r[0]["value"][1] == "2049", r
print("prometheus: target up, %d herd series" % len(query('{__name__=~"herd_.+|DCGM_.+"}')))
PY
		fail "Prometheus: $(cat "$tmp/prom.out"; cat "$tmp/prom/prometheus.log")"
	cat "$tmp/prom.out"
	bash tests/harness/prometheus.sh stop "$tmp/prom"
else
	rc=$?
	[[ $rc == 77 ]] || fail "the Prometheus harness did not start"
	[[ ${CI:-} == true ]] && fail "prometheus is not installed (.ci/deps installs it)"
	echo "prometheus not installed: the scrape by Prometheus is not tested"
fi

# ---- HTTP
r=$(http "$port" 'GET / HTTP/1.1\r\nHost: t\r\n\r\n')
has "$r" $'HTTP/1.1 200 OK\r'
has "$r" 'Content-Type: text/html; charset=utf-8'
has "$r" '<a href="/metrics">/metrics</a>'
r=$(http "$port" 'GET /metrics HTTP/1.0\r\n\r\n')
has "$r" $'HTTP/1.0 200 OK\r'
has "$r" $'Content-Type: text/plain; version=0.0.4; charset=utf-8\r'
has "$r" $'Connection: close\r'
len=$(sed -n 's/^Content-Length: \([0-9]*\)\r$/\1/p' <<<"$r")
body=$(http "$port" 'GET /metrics?x=1 HTTP/1.0\r\n\r\n' | sed '1,/^\r$/d' | wc -c)
[[ $len -gt 1000 && $body -gt 1000 ]] || fail "Content-Length $len, body $body bytes"
r=$(http "$port" 'HEAD /metrics HTTP/1.1\r\nHost: t\r\n\r\n')
has "$r" $'HTTP/1.1 200 OK\r'
[[ -z $(sed '1,/^\r$/d' <<<"$r") ]] || fail "HEAD has a body: $r"
r=$(http "$port" 'GET /nothing HTTP/1.1\r\nHost: t\r\n\r\n')
has "$r" $'HTTP/1.1 404 Not Found\r'
r=$(http "$port" 'POST /metrics HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n')
has "$r" $'HTTP/1.1 405 Method Not Allowed\r'
has "$r" $'Allow: GET, HEAD\r'
r=$(http "$port" 'hello\r\n\r\n')
has "$r" $'HTTP/1.1 400 Bad Request\r'
r=$(http "$port" 'GET /metrics HTTP/2.0\r\n\r\n')
has "$r" $'HTTP/1.1 400 Bad Request\r'
pad=$(head -c 9000 /dev/zero | tr '\0' a)
r=$(http "$port" "GET /metrics HTTP/1.1\\r\\nX-Pad: $pad\\r\\n\\r\\n")
has "$r" $'HTTP/1.1 431 Request Header Fields Too Large\r'
# A client that connects and says nothing holds no one else up.
exec 5<>"/dev/tcp/127.0.0.1/$port"
scrape "$port" | grep -q '^herd_node_gpus 3$' || fail "a scrape beside an idle connection failed"
exec 5>&-

# ---- the port taken: a clear error naming --listen, exit 1
"$HERD" exporter --listen "127.0.0.1:$port" >"$tmp/out" 2>"$tmp/err"
rc=$?
[[ $rc == 1 ]] || fail "a second exporter on port $port exited $rc: $(cat "$tmp/err")"
grep -qF "herd exporter: cannot listen on 127.0.0.1:$port (--listen): Address already in use" "$tmp/err" ||
	fail "port taken: $(cat "$tmp/err")"

# ---- SIGTERM ends it with 0; SIGINT too.
kill -TERM "$exp_pid"
wait "$exp_pid"
rc=$?
[[ $rc == 0 ]] || fail "herd exporter exited $rc on SIGTERM: $(cat "$tmp/exp.err")"
[[ -s $tmp/exp.err ]] && fail "herd exporter wrote on stderr: $(cat "$tmp/exp.err")"
start_exporter --listen 127.0.0.1:0
kill -INT "$exp_pid"
wait "$exp_pid"
rc=$?
[[ $rc == 0 ]] || fail "herd exporter exited $rc on SIGINT: $(cat "$tmp/exp.err")"
echo "exporter: exposition, Prometheus, HTTP and signals as expected"
