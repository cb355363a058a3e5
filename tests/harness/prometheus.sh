#!/usr/bin/env bash
# tests/harness/prometheus.sh start DIR TARGET | stop DIR
#
# A private Prometheus server for tests: listening on a free port of
# 127.0.0.1 only, its data in DIR/data, one scrape job "herd" of TARGET
# (ADDR:PORT, path /metrics) every second.  start waits (at most 60 s) for
# its readiness endpoint and leaves DIR/port (the server's), DIR/prometheus.yml,
# DIR/prometheus.pid and DIR/prometheus.log; stop kills the server whose
# pid it wrote (and nothing else).  Needs Debian's prometheus; exits 77
# when it is missing, so a test can skip.
set -euo pipefail

usage() { echo "usage: $0 start DIR TARGET | stop DIR" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd=$1
dir=$2
prometheus=${PROMETHEUS:-/usr/bin/prometheus}

stop() {
	local pid i
	[ -f "$dir/prometheus.pid" ] || return 0
	pid=$(cat "$dir/prometheus.pid")
	# Only our own server: the pid must still run prometheus with this DIR.
	if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "--config.file=$dir/prometheus.yml"; then
		kill "$pid" 2>/dev/null || true
		for ((i = 0; i < 100; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$dir/prometheus.pid"
}

# A TCP port of 127.0.0.1 nobody listens on now.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

case $cmd in
start)
	[ $# -eq 3 ] || usage
	target=$3
	[ -x "$prometheus" ] || { echo "prometheus.sh: no $prometheus" >&2; exit 77; }
	command -v curl >/dev/null || { echo "prometheus.sh: no curl" >&2; exit 77; }
	mkdir -p "$dir/data"
	cat >"$dir/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: herd
    static_configs:
      - targets: ['$target']
EOF
	port=$(free_port)
	echo "$port" >"$dir/port"
	"$prometheus" --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
		--web.listen-address="127.0.0.1:$port" >"$dir/prometheus.log" 2>&1 </dev/null &
	echo $! >"$dir/prometheus.pid"
	for ((i = 0; i < 600; i++)); do
		if curl -sf -m 1 "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1; then
			exit 0
		fi
		if ! kill -0 "$(cat "$dir/prometheus.pid")" 2>/dev/null; then
			echo "prometheus.sh: prometheus exited:" >&2
			tail -20 "$dir/prometheus.log" >&2
			exit 1
		fi
		sleep 0.1
	done
	echo "prometheus.sh: not ready after 60 s:" >&2
	tail -20 "$dir/prometheus.log" >&2
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
