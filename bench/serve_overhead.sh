#!/usr/bin/env bash
# bench/serve_overhead.sh - what herd serve's front door (HAProxy) costs:
# wrk through the front door against wrk straight to the replicas, side
# by side in one run, alternating, REPEAT times each, medians.
#
#   bench/serve_overhead.sh [BUILD_DIR]     (default build)
#
# herd serve runs REPLICAS replicas of examples/replica.c (--work-ms
# WORK_MS: the model's time per request; 0: the cost of HTTP alone,
# where the balancer's share is largest) on this node; "direct" runs one
# wrk per replica at once, CONNS / REPLICAS connections each, and sums
# their requests per second (p99: the worst of them); "door" runs one wrk
# with CONNS connections through the front door.  Settings: REPLICAS (2),
# CONNS (16), DURATION (5 s), WORK_MS (0 and 5, space-separated), REPEAT (3).
# Output: a table, and the ratio door / direct of requests per second and
# of p99 latency per WORK_MS.
set -euo pipefail
build=${1:-build}
herd=$(cd "$build/bin" && pwd)/herd
replica=$(cd "$build/bin" && pwd)/example_replica
REPLICAS=${REPLICAS:-2} CONNS=${CONNS:-16} DURATION=${DURATION:-5} REPEAT=${REPEAT:-3}
WORK_MS=${WORK_MS:-"0 5"}
command -v haproxy >/dev/null && command -v wrk >/dev/null || {
	echo "serve_overhead: needs haproxy and wrk (apt install haproxy wrk)" >&2; exit 1; }
out=$(mktemp -d)
export XDG_RUNTIME_DIR=$out/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
svc=
trap '[[ -n $svc ]] && kill -INT $svc 2>/dev/null; wait 2>/dev/null; rm -rf "$out"' EXIT

# rps_p99 FILE...: the summed requests/s and the worst p99 (ms) of wrk outputs.
rps_p99() {
	python3 - "$@" <<'PY'
import re, sys
rps, p99 = 0.0, 0.0
def ms(v, u): return float(v) * {"us": 1e-3, "ms": 1.0, "s": 1e3}[u]
for f in sys.argv[1:]:
    t = open(f).read()
    rps += float(re.search(r"Requests/sec:\s+([\d.]+)", t).group(1))
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)\b", t)
    p99 = max(p99, ms(*m.groups()))
    if re.search(r"Socket errors|Non-2xx", t):
        print("failed requests in %s" % f, file=sys.stderr)
print("%.0f %.3f" % (rps, p99))
PY
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "# herd serve's front door (HAProxy $(haproxy -v | sed -n 's/.*version \([^ ]*\).*/\1/p')) against wrk straight to the replicas"
echo "# $(hostname): $(nproc) CPUs; $REPLICAS replicas, $CONNS connections, ${DURATION} s a run, median of $REPEAT"
printf '%-8s %-7s %12s %10s\n' work_ms mode req_per_s p99_ms
for w in $WORK_MS; do
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	base=$((20000 + RANDOM % 30000))
	"$herd" serve --port "$port" --replica-port "$base" --replicas "$REPLICAS" --health /health \
		--grace 2 --no-prefix -- "$replica" --work-ms "$w" --concurrency 64 >"$out/svc.out" 2>"$out/svc.err" &
	svc=$!
	for ((k = 0; k < 200; k++)); do
		[[ $(grep -c ' ready ' "$out/svc.err") -ge $REPLICAS ]] && break
		sleep 0.1
	done
	[[ $(grep -c ' ready ' "$out/svc.err") -ge $REPLICAS ]] || { cat "$out/svc.err" >&2; exit 1; }
	: >"$out/door.$w"; : >"$out/direct.$w"
	for ((r = 0; r < REPEAT; r++)); do
		wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency "http://127.0.0.1:$port/infer" >"$out/d" 2>&1
		rps_p99 "$out/d" >>"$out/door.$w"
		files=()
		for ((i = 0; i < REPLICAS; i++)); do
			wrk -t1 -c$((CONNS / REPLICAS)) -d"${DURATION}s" --latency \
				"http://127.0.0.1:$((base + i))/infer" >"$out/x$i" 2>&1 &
			files+=("$out/x$i")
		done
		wait $(jobs -p | grep -v "^$svc$") 2>/dev/null || true
		rps_p99 "${files[@]}" >>"$out/direct.$w"
	done
	kill -INT "$svc"; wait "$svc" || true; svc=
	for m in direct door; do
		printf '%-8s %-7s %12s %10s\n' "$w" "$m" "$(cut -d' ' -f1 "$out/$m.$w" | median)" \
			"$(cut -d' ' -f2 "$out/$m.$w" | median)"
	done
	python3 - "$(cut -d' ' -f1 "$out/door.$w" | median)" "$(cut -d' ' -f1 "$out/direct.$w" | median)" \
		"$(cut -d' ' -f2 "$out/door.$w" | median)" "$(cut -d' ' -f2 "$out/direct.$w" | median)" "$w" <<'PY'
import sys
a, b, c, d, w = map(float, sys.argv[1:])
print("# work %g ms: through the front door %.2fx the requests per second of direct, p99 %.2fx" % (w, a / b, c / d))
PY
done
