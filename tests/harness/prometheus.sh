#!/usr/bin/env bash
# tests/harness/prometheus.sh start DIR TARGET... | stop DIR
#
# A private Prometheus server for tests: Debian's prometheus on a free port
# of 127.0.0.1, its storage in DIR/data, scraping each TARGET (HOST:PORT)
# every second as the job "herd".  start returns once the server says it
# is ready (at most 60 s), printing nothing, and leaves DIR/port,
# DIR/prometheus.yml, DIR/prometheus.pid and DIR/prometheus.log; stop
# ends the server whose pid it wrote, and nothing else.  Exits 77 when
# prometheus is not installed, so that a test can skip.
set -euo pipefail

usage() { echo "usage: $0 start DIR TARGET... | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1
dir=$2
shift 2
prometheus=${PROMETHEUS:-/usr/bin/prometheus}

stop() {
	local pid
	[ -f "$dir/prometheus.pid" ] || return 0
	pid=$(cat "$dir/prometheus.pid")
	# Only ours: the pid must still be a prometheus reading this config.
	if [ -n "$pid" ] && grep -qF "$dir/prometheus.yml" "/proc/$pid/cmdline" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -9 "$pid" 2>/dev/null || true
	fi
	rm -f "$dir/prometheus.pid"
}

case $cmd in
start)
	[ $# -ge 1 ] || usage
	if [ ! -x "$prometheus" ]; then
		echo "prometheus.sh: $prometheus is not installed (Debian's prometheus)" >&2
		exit 77
	fi
	mkdir -p "$dir/data"
	# A port the kernel just gave out and took back.
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	echo "$port" >"$dir/port"
	{
		echo "global:"
		echo "  scrape_interval: 1s"
		echo "  scrape_timeout: 1s"
		echo "  evaluation_interval: 1s"
		echo "scrape_configs:"
		echo "  - job_name: herd"
		echo "    static_configs:"
		echo "      - targets:"
		for t in "$@"; do echo "          - '$t'"; done
	} >"$dir/prometheus.yml"
	"$prometheus" --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
		--web.listen-address="127.0.0.1:$port" --log.level=warn \
		</dev/null >"$dir/prometheus.log" 2>&1 &
	echo $! >"$dir/prometheus.pid"
	for _ in $(seq 600); do
		if python3 - "$port" <<'PY' 2>/dev/null; then exit 0; fi
import sys, urllib.request
with urllib.request.urlopen("http://127.0.0.1:%s/-/ready" % sys.argv[1], timeout=1) as r:
    sys.exit(0 if r.status == 200 else 1)
PY
		if ! kill -0 "$(cat "$dir/prometheus.pid")" 2>/dev/null; then
			echo "prometheus.sh: prometheus exited: $(cat "$dir/prometheus.log")" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "prometheus.sh: not ready after 60 s: $(cat "$dir/prometheus.log")" >&2
	stop
	exit 1
	;;
stop)
	stop
	;;
*)
	usage
	;;
esac
