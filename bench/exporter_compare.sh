#!/usr/bin/env bash
# bench/exporter_compare.sh - the CPU time a scrape costs: herd exporter and
# Debian's prometheus-node-exporter side by side, in one run.
#
# Both listen on free ports of 127.0.0.1 with their defaults (herd exporter:
# a sample every 1000 ms, all its parts; node_exporter: its default
# collectors).  After one warm-up scrape of each, the script scrapes them
# in turn, SCRAPES times each, as Prometheus does (its Accept and
# Accept-Encoding: gzip headers, one connection per scrape), and reads each
# server's user and system CPU time (/proc/PID/stat, utime + stime) before
# and after.  The CPU time per scrape is the difference over SCRAPES: for
# herd it includes its sampler's thread over the same wall time (node_exporter
# reads everything at the scrape).  Then the same with PAUSE seconds between
# rounds, so that herd's sampler runs for as long as at a 1 s scrape
# interval, ROUNDS_PAUSED rounds.  Prints one line per exporter and run, and
# the ratio.  Stops both (by pid) whatever happens.
#
# Builds nothing: it uses BUILD_DIR (default build) as built by
#   cmake -S . -B build && cmake --build build -j$(nproc)
# and prometheus-node-exporter installed (.ci/deps).
#
# usage: bench/exporter_compare.sh [BUILD_DIR]
#   environment: SCRAPES (200), ROUNDS_PAUSED (30), PAUSE (1.0),
#                NODE_EXPORTER (/usr/bin/prometheus-node-exporter),
#                NVML_MOCK (a directory with the NVML stand-in,
#                BUILD_DIR/tests/mock: herd then reads its 3 GPUs, as on a
#                machine with GPUs; default none)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
herd=$build/bin/herd
node_exporter=${NODE_EXPORTER:-/usr/bin/prometheus-node-exporter}
scrapes=${SCRAPES:-200}
rounds_paused=${ROUNDS_PAUSED:-30}
pause=${PAUSE:-1.0}
[[ -x $herd ]] || { echo "exporter_compare.sh: no $herd (build first)" >&2; exit 2; }
[[ -x $node_exporter ]] || { echo "exporter_compare.sh: no $node_exporter (apt-get install prometheus-node-exporter)" >&2; exit 2; }

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
hport=$(free_port)
nport=$(free_port)
[[ -z ${NVML_MOCK:-} ]] || export LD_LIBRARY_PATH=$NVML_MOCK${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
HERD_STATS_DIR=$tmp/stats "$herd" exporter --listen "127.0.0.1:$hport" >"$tmp/herd.out" 2>&1 &
pids+=($!)
hpid=$!
env -u LD_LIBRARY_PATH "$node_exporter" --web.listen-address="127.0.0.1:$nport" >"$tmp/node.out" 2>&1 &
pids+=($!)
npid=$!

python3 - "$hpid" "$hport" "$npid" "$nport" "$scrapes" "$rounds_paused" "$pause" <<'PY'
import http.client, os, sys, time

hpid, hport, npid, nport = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
scrapes, rounds_paused, pause = int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7])
tick = os.sysconf("SC_CLK_TCK")
# What Prometheus 2.42 sends.
headers = {"Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                     "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
           "Accept-Encoding": "gzip", "User-Agent": "Prometheus/2.42.0",
           "X-Prometheus-Scrape-Timeout-Seconds": "10"}

def cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14, 15)

def scrape(port):
    c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=10)
    c.request("GET", "/metrics", headers=headers)
    r = c.getresponse()
    body = r.read()
    c.close()
    if r.status != 200:
        sys.exit("scrape of port %s: HTTP %d" % (port, r.status))
    return body, r.getheader("Content-Encoding") or "identity"

deadline = time.monotonic() + 30
for port in (hport, nport):
    while True:
        try:
            scrape(port)
            break
        except OSError:
            if time.monotonic() > deadline:
                sys.exit("port %s does not answer within 30 s" % port)
            time.sleep(0.1)
time.sleep(2.5)  # herd's second sample (its rates) is in
info = {}
for name, port in (("herd exporter", hport), ("node_exporter", nport)):
    body, enc = scrape(port)
    if enc == "gzip":
        import gzip
        text = gzip.decompress(body)
    else:
        text = body
    series = sum(1 for l in text.split(b"\n") if l and not l.startswith(b"#"))
    info[name] = (len(body), enc, series)

def run(n, gap):
    t0 = time.monotonic()
    h0, n0 = cpu(hpid), cpu(npid)
    for _ in range(n):
        scrape(hport)
        scrape(nport)
        if gap:
            time.sleep(gap)
    h1, n1 = cpu(hpid), cpu(npid)
    return (h1 - h0) / n, (n1 - n0) / n, time.monotonic() - t0

print("machine: %d CPUs, %s; clock tick %d Hz" % (os.cpu_count(), os.uname().release, tick))
for name, (size, enc, series) in info.items():
    print("%-14s %6d series, %7d bytes per scrape (%s)" % (name, series, size, enc))
for label, n, gap in (("back to back", scrapes, 0), ("1 round per %.1f s" % pause, rounds_paused, pause)):
    h, nd, wall = run(n, gap)
    print("%s: %d scrapes of each in %.1f s" % (label, n, wall))
    print("  herd exporter  %.3f ms CPU per scrape" % (h * 1000))
    print("  node_exporter  %.3f ms CPU per scrape" % (nd * 1000))
    print("  herd / node_exporter: %.3f" % (h / nd if nd > 0 else float("nan")))
PY
