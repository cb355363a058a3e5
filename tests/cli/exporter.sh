#!/usr/bin/env bash
# herd exporter over loopback with the NVML stand-in (tests/mock, three
# H100s) and the figures of a state file: GET /metrics has the DCGM
# exporter's names, labels and the exact figures; promtool check metrics
# parses it (its only complaints are the DCGM names' own style); a real
# Prometheus server (tests/harness/prometheus.sh) scrapes it, finds the
# target up and answers a PromQL query with the three GPUs' figures; 404,
# 405, 400 and 431 (an oversized head); a port taken; SIGTERM ends it
# with 0.  HTTP through bash's /dev/tcp.
source "$(dirname "$0")/../harness/common.sh" "$@"
exporter_pid=
cleanup() {
	[[ -n $exporter_pid ]] && kill "$exporter_pid" 2>/dev/null
	bash tests/harness/prometheus.sh stop "$tmp/prometheus"
	rm -rf "$tmp"
}
trap cleanup EXIT
[[ -x /usr/bin/promtool && -x /usr/bin/prometheus ]] || { echo "skip: no prometheus"; exit 77; }
mock=${HERD_TEST_NVML_MOCK:-$(dirname "$(dirname "$HERD")")/tests/mock}
[[ -f $mock/libnvidia-ml.so.1 ]] || fail "no NVML stand-in in $mock"

# http PORT REQUEST-HEAD: the whole answer to the head (CRLF line ends added).
http() {
	local port=$1 head=$2
	(
		exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
		printf '%s\r\n\r\n' "${head//$'\n'/$'\r\n'}" >&3
		timeout 10 cat <&3
	)
}

cat >"$tmp/state" <<'EOF'
gpu 0 util 37 mem_util 12 mem_used 2147483648 power_mw 312500 temp 51 sm_clock 1980 mem_clock 2619 energy_mj 9876543 throttle 4 ecc_sbe 2 ecc_dbe 0
gpu 1 util 88 mem_used 1048576
gpu 2 util 5
EOF
: >"$tmp/kmsg"
export HERD_NVML_MOCK_STATE=$tmp/state HERD_KERNEL_LOG=$tmp/kmsg HERD_LEASE_DIR=$tmp/leases
LD_LIBRARY_PATH=$mock "$HERD" exporter --listen 127.0.0.1:0 --period 200 \
	>"$tmp/out" 2>"$tmp/err" &
exporter_pid=$!
for ((i = 0; i < 300; i++)); do
	grep -q '^herd exporter: serving ' "$tmp/err" && break
	kill -0 "$exporter_pid" 2>/dev/null || fail "herd exporter exited: $(cat "$tmp/err")"
	sleep 0.1
done
port=$(sed -n 's|^herd exporter: serving http://127\.0\.0\.1:\([0-9]*\)/metrics$|\1|p' "$tmp/err")
[[ -n $port ]] || fail "herd exporter did not say where it serves: $(cat "$tmp/err")"

# /metrics: the head, and the figures of the state file under DCGM's names and labels.
answer=$(http "$port" $'GET /metrics HTTP/1.1\nHost: 127.0.0.1')
head=${answer%%$'\r\n\r\n'*}
body=${answer#*$'\r\n\r\n'}
has "$head" $'HTTP/1.1 200 OK\r'
has "$head" $'Content-Type: text/plain; version=0.0.4; charset=utf-8\r'
has "$head" 'Connection: close'
# The body ends with a newline, which $(...) dropped.
has "$head" $'Content-Length: '"$((${#body} + 1))"$'\r'
printf '%s\n' "$body" >"$tmp/metrics"
host=$(hostname)
labels() { # labels INDEX BUS: the DCGM exporter's labels of the stand-in's GPU INDEX
	echo "gpu=\"$1\",UUID=\"GPU-0000000$1-1111-2222-3333-444444444444\",device=\"nvidia$1\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"$host\",pciBusID=\"$2\""
}
g0=$(labels 0 0000:9a:00.0) g1=$(labels 1 0000:1b:00.0) g2=$(labels 2 0000:5d:00.0)
for line in \
	"# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %)." \
	"# TYPE DCGM_FI_DEV_GPU_UTIL gauge" \
	"DCGM_FI_DEV_GPU_UTIL{$g0} 37" \
	"DCGM_FI_DEV_GPU_UTIL{$g1} 88" \
	"DCGM_FI_DEV_GPU_UTIL{$g2} 5" \
	"DCGM_FI_DEV_MEM_COPY_UTIL{$g0} 12" \
	"DCGM_FI_DEV_FB_USED{$g0} 2048" \
	"DCGM_FI_DEV_FB_USED{$g1} 1" \
	"DCGM_FI_DEV_FB_FREE{$g0} 79511" \
	"DCGM_FI_DEV_POWER_USAGE{$g0} 312.5" \
	"# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter" \
	"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{$g0} 9876543" \
	"DCGM_FI_DEV_GPU_TEMP{$g0} 51" \
	"DCGM_FI_DEV_SM_CLOCK{$g0} 1980" \
	"DCGM_FI_DEV_MEM_CLOCK{$g0} 2619" \
	"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{$g0} 4" \
	"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{$g0} 2" \
	"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{$g0} 0" \
	"DCGM_FI_DEV_XID_ERRORS{$g0} 0" \
	"herd_gpu_processes{gpu=\"0\",UUID=\"GPU-00000000-1111-2222-3333-444444444444\"} 0" \
	"# TYPE herd_node_memory_total_bytes gauge" \
	"# TYPE herd_node_network_receive_bytes_total counter"; do
	grep -qxF -- "$line" "$tmp/metrics" || fail "/metrics lacks the line
$line
--- it is:
$(cat "$tmp/metrics")"
done
mem=$(( $(awk '/^MemTotal:/ { print $2 }' /proc/meminfo) * 1024 ))
grep -qxF "herd_node_memory_total_bytes $mem" "$tmp/metrics" \
	|| fail "herd_node_memory_total_bytes is not $mem: $(grep memory_total "$tmp/metrics")"

# promtool parses it (exit 1 would be a parse error); its style complaints
# (exit 3) are the DCGM exporter's own names only: camelCase labels
# (modelName, pciBusID) and counters without _total.
promtool check metrics <"$tmp/metrics" >"$tmp/promtool" 2>&1; rc=$?
[[ $rc == 0 || $rc == 3 ]] || fail "promtool check metrics exited $rc: $(cat "$tmp/promtool")"
bad=$(grep -vE "^DCGM_FI_[A-Z_]+ (label names should be written in 'snake_case' not 'camelCase'|counter metrics should have \"_total\" suffix)$" "$tmp/promtool" || true)
[[ -z $bad ]] || fail "promtool check metrics: $bad"

# Prometheus scrapes it: the target is up, a PromQL query returns the three GPUs.
bash tests/harness/prometheus.sh start "$tmp/prometheus" "127.0.0.1:$port"; rc=$?
[[ $rc == 77 ]] && exit 77
[[ $rc == 0 ]] || fail "the prometheus harness did not start"
pport=$(cat "$tmp/prometheus/port")
api() { # api PATH: the JSON body of Prometheus's answer
	local a
	a=$(http "$pport" "GET $1 HTTP/1.0") || return 1
	printf '%s' "${a#*$'\r\n\r\n'}"
}
for ((i = 0; i < 300; i++)); do
	health=$(api /api/v1/targets | python3 -c 'import json, sys
t = json.load(sys.stdin)["data"]["activeTargets"]
print(" ".join(x["health"] for x in t))' 2>/dev/null)
	[[ $health == up ]] && break
	sleep 0.1
done
[[ $health == up ]] || fail "Prometheus's target is not up: $(api /api/v1/targets)"
for ((i = 0; i < 300; i++)); do
	got=$(api '/api/v1/query?query=DCGM_FI_DEV_GPU_UTIL' | python3 -c 'import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(" ".join(sorted("%s=%s=%s=%s" % (x["metric"]["gpu"], x["metric"]["UUID"], x["metric"]["job"], x["value"][1]) for x in r)))' 2>/dev/null)
	[[ -n $got ]] && break
	sleep 0.1
done
want="0=GPU-00000000-1111-2222-3333-444444444444=herd=37 1=GPU-00000001-1111-2222-3333-444444444444=herd=88 2=GPU-00000002-1111-2222-3333-444444444444=herd=5"
[[ $got == "$want" ]] || fail "PromQL DCGM_FI_DEV_GPU_UTIL: '$got', expected '$want'"

# Other paths, methods and heads.
has "$(http "$port" $'GET / HTTP/1.0')" 'href="/metrics"'
has "$(http "$port" $'GET /nope HTTP/1.1\nHost: x')" $'HTTP/1.1 404 Not Found\r'
answer=$(http "$port" $'POST /metrics HTTP/1.1\nHost: x\nContent-Length: 0')
has "$answer" $'HTTP/1.1 405 Method Not Allowed\r'
has "$answer" $'Allow: GET, HEAD\r'
has "$(http "$port" $'BREW /metrics HTCPCP/1.0')" $'HTTP/1.1 400 Bad Request\r'
answer=$(http "$port" "HEAD /metrics HTTP/1.0")
has "$answer" $'HTTP/1.1 200 OK\r'
# (its last newline dropped by $(...))
[[ $answer == *$'Connection: close\r\n\r' ]] || fail "HEAD /metrics sent a body: $answer"
big=$(printf 'X-Big: %09000d' 0)
has "$(http "$port" $'GET /metrics HTTP/1.1\n'"$big")" $'HTTP/1.1 431 Request Header Fields Too Large\r'
has "$(http "$port" $'GET /metrics HTTP/1.0')" "DCGM_FI_DEV_GPU_UTIL{$g1} 88"

# The port taken: said, exit 1.
err=$(LD_LIBRARY_PATH=$mock timeout 20 "$HERD" exporter --listen "127.0.0.1:$port" 2>&1); rc=$?
[[ $rc == 1 ]] || fail "a second exporter on the port exited $rc: $err"
[[ $err == "herd exporter: --listen 127.0.0.1:$port: address already in use" ]] \
	|| fail "port taken: $err"

# SIGTERM: exit 0, at once.
kill -TERM "$exporter_pid"
for ((i = 0; i < 100; i++)); do
	kill -0 "$exporter_pid" 2>/dev/null || break
	sleep 0.1
done
kill -0 "$exporter_pid" 2>/dev/null && fail "herd exporter still runs 10 s after SIGTERM"
wait "$exporter_pid"; rc=$?
exporter_pid=
[[ $rc == 0 ]] || fail "herd exporter exited $rc after SIGTERM: $(cat "$tmp/err")"
echo "exporter: ok"
