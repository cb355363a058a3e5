#!/usr/bin/env bash
# bench/exporter_compare.sh - the CPU time a Prometheus scrape costs: herd
# exporter against Debian's prometheus-node-exporter (default collectors),
# side by side in one run, each on a free port of 127.0.0.1:
#
#   herd exporter --listen 127.0.0.1:0            (its sampler at 1 Hz)
#   prometheus-node-exporter --web.listen-address=127.0.0.1:PORT
#
# Each is scraped SCRAPES times in a row with curl (GET /metrics) after a
# warm-up of 5; the CPU time is the exporter process's utime + stime
# (/proc/PID/stat, all its threads) over the scrapes, so herd's includes its
# sampler's samples taken meanwhile.  Printed: CPU milliseconds per scrape
# of each, the bytes of one answer, and the ratio herd's over node_exporter's.
# With the NVML stand-in built (BUILD_DIR/tests/mock) herd also serves its
# three GPUs, as it would on a GPU node.
#
# usage: bench/exporter_compare.sh [BUILD_DIR]
#   environment: SCRAPES (200)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SCRAPES=${SCRAPES:-200}
HERD=$(cd "$BUILD/bin" && pwd)/herd
NODE_EXPORTER=${NODE_EXPORTER:-/usr/bin/prometheus-node-exporter}
[[ -x $HERD ]] || { echo "exporter_compare.sh: $HERD is missing: build first" >&2; exit 2; }
[[ -x $NODE_EXPORTER ]] || { echo "exporter_compare.sh: no $NODE_EXPORTER (Debian prometheus-node-exporter)" >&2; exit 2; }
command -v curl >/dev/null || { echo "exporter_compare.sh: curl not found" >&2; exit 2; }
[[ $SCRAPES =~ ^[1-9][0-9]*$ ]] || { echo "exporter_compare.sh: SCRAPES=$SCRAPES: want a count" >&2; exit 2; }

tmp=$(mktemp -d)
herd_pid= node_pid=
cleanup() {
	[[ -n $herd_pid ]] && kill "$herd_pid" 2>/dev/null
	[[ -n $node_pid ]] && kill "$node_pid" 2>/dev/null
	wait 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
hz=$(getconf CLK_TCK)

# cpu_ticks PID: utime + stime of the process (fields 14 and 15, after the comm's ')').
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }

# until_serving URL PID: waits (at most 30 s) until URL answers.
until_serving() {
	for ((i = 0; i < 300; i++)); do
		curl -sf -m 1 -o /dev/null "$1" && return 0
		kill -0 "$2" 2>/dev/null || { echo "exporter_compare.sh: $1: the exporter exited" >&2; exit 1; }
		sleep 0.1
	done
	echo "exporter_compare.sh: $1 does not answer" >&2
	exit 1
}

mock=$(cd "$BUILD" && pwd)/tests/mock
if [[ -f $mock/libnvidia-ml.so.1 ]]; then
	export LD_LIBRARY_PATH=$mock${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	gpus="3 stand-in GPUs (NVML stand-in)"
else
	gpus="no GPU"
fi
"$HERD" exporter --listen 127.0.0.1:0 2>"$tmp/herd.err" &
herd_pid=$!
unset LD_LIBRARY_PATH
for ((i = 0; i < 300; i++)); do
	grep -qs '^herd exporter: serving ' "$tmp/herd.err" && break
	kill -0 "$herd_pid" 2>/dev/null || { cat "$tmp/herd.err" >&2; exit 1; }
	sleep 0.1
done
herd_url=$(sed -n 's|^herd exporter: serving \(http://.*\)$|\1|p' "$tmp/herd.err")
[[ -n $herd_url ]] || { echo "exporter_compare.sh: herd exporter did not start: $(cat "$tmp/herd.err")" >&2; exit 1; }

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$NODE_EXPORTER" --web.listen-address="127.0.0.1:$port" >"$tmp/node.log" 2>&1 &
node_pid=$!
node_url=http://127.0.0.1:$port/metrics
until_serving "$herd_url" "$herd_pid"
until_serving "$node_url" "$node_pid"

# measure NAME URL PID: prints "ms_per_scrape bytes".
measure() {
	local url=$2 pid=$3 t0 t1 bytes
	for ((i = 0; i < 5; i++)); do curl -sf -o /dev/null "$url"; done
	bytes=$(curl -sf "$url" | wc -c)
	t0=$(cpu_ticks "$pid")
	for ((i = 0; i < SCRAPES; i++)); do curl -sf -o /dev/null "$url"; done
	t1=$(cpu_ticks "$pid")
	awk -v d=$((t1 - t0)) -v hz="$hz" -v n="$SCRAPES" -v b="$bytes" \
		'BEGIN { printf "%.3f %d\n", d * 1000 / hz / n, b }'
}
read -r herd_ms herd_bytes < <(measure herd "$herd_url" "$herd_pid")
read -r node_ms node_bytes < <(measure node "$node_url" "$node_pid")
node_version=$("$NODE_EXPORTER" --version 2>&1 | head -1 | awk '{ print $3 }')

echo "exporter_compare: $SCRAPES scrapes each over loopback, CPU time of the exporter process"
echo "  ($(nproc) CPUs, $(uname -m), $gpus; one clock tick, 1/$hz s, is" \
	"$(awk -v hz="$hz" -v n="$SCRAPES" 'BEGIN { printf "%.3f", 1000 / hz / n }') ms/scrape here)"
printf '  %-34s %10s %12s\n' exporter "ms/scrape" "bytes/answer"
printf '  %-34s %10s %12s\n' "herd exporter" "$herd_ms" "$herd_bytes"
printf '  %-34s %10s %12s\n' "prometheus-node-exporter $node_version" "$node_ms" "$node_bytes"
awk -v h="$herd_ms" -v n="$node_ms" 'BEGIN {
	if (n > 0) printf "  ratio herd / node_exporter: %.3f\n", h / n
	else print "  ratio: node_exporter used no measurable CPU time"
}'
