#!/usr/bin/env bash
# bench/lua_vs_c.sh - what the Lua path costs: a float32 sum allreduce on
# herd.Buffers from Lua (bench/lua_allreduce.lua under `herd launch`, which
# times out of place then in place as herd bench does) against the same
# calls from C (`herd bench allreduce`), side by side in one run on this
# machine.  The figures are the in-place column's.
#
#   8 B      1, 2 and 4 ranks: the time of a call (1 rank: the binding's
#            own cost, no peer to wait for)
#   128 MiB  2 and 4 ranks: bus bandwidth
#
# Each pair runs REPEAT times, C and Lua alternating; every figure is the
# median of its repeats, with the range of the repeats beside it.
#
# usage: bench/lua_vs_c.sh [BUILD_DIR]
#   environment: REPEAT (7), LAT_ITERS (200000), BW_ITERS (20)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
HERD=$BUILD/bin/herd
REPEAT=${REPEAT:-7}
LAT_ITERS=${LAT_ITERS:-200000}
BW_ITERS=${BW_ITERS:-20}
[[ -x $HERD ]] || { echo "lua_vs_c.sh: $HERD is missing: build first" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "machine: $(uname -m), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "herd: $($HERD --version 2>&1 | head -1)"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "repeats: $REPEAT; 8 B: $LAT_ITERS calls; 128 MiB: $BW_ITERS calls"

run_c() { # np bytes iters warmup -> time_us busbw (in place)
	"$HERD" bench allreduce -b "$2" -e "$2" --iters "$3" -w "$4" -c 0 --np "$1" --json 2>/dev/null |
		python3 -c 'import json,sys; r=json.loads(sys.stdin.readline())["in_place"]; print(r["time_us"], r["busbw"])'
}
run_lua() {
	"$HERD" launch -n "$1" --no-prefix bench/lua_allreduce.lua "$2" "$3" "$4" |
		python3 -c 'import json,sys; r=json.loads(sys.stdin.readline())["in_place"]; print(r["time_us"], r["busbw"])'
}

configs=("1 8 $LAT_ITERS 2000" "2 8 $LAT_ITERS 2000" "4 8 $((LAT_ITERS / 4)) 1000"
	 "2 134217728 $BW_ITERS 3" "4 134217728 $BW_ITERS 3")
for ((rep = 1; rep <= REPEAT; rep++)); do
	for c in "${configs[@]}"; do
		set -- $c
		key="np$1-$2"
		if ((rep % 2)); then
			run_c "$@" >>"$tmp/$key.c"; run_lua "$@" >>"$tmp/$key.lua"
		else
			run_lua "$@" >>"$tmp/$key.lua"; run_c "$@" >>"$tmp/$key.c"
		fi
	done
done

python3 - "$tmp" <<'PY'
import os, statistics, sys
d = sys.argv[1]
def load(key, kind):
    rows = [tuple(map(float, l.split())) for l in open(os.path.join(d, f"{key}.{kind}"))]
    return [r[0] for r in rows], [r[1] for r in rows]
print()
print("%-16s %28s %28s %12s" % ("", "C (herd bench)", "Lua (herd.Buffer)", "Lua - C"))
for np, size in ((1, 8), (2, 8), (4, 8)):
    c, _ = load(f"np{np}-{size}", "c"); l, _ = load(f"np{np}-{size}", "lua")
    mc, ml = statistics.median(c), statistics.median(l)
    print("%-16s %10.3f us [%5.3f-%5.3f] %10.3f us [%5.3f-%5.3f] %+9.3f us" %
          (f"8 B, {np} rank{'s' if np > 1 else ''}", mc, min(c), max(c), ml, min(l), max(l), ml - mc))
for np in (2, 4):
    _, c = load(f"np{np}-134217728", "c"); _, l = load(f"np{np}-134217728", "lua")
    mc, ml = statistics.median(c), statistics.median(l)
    print("%-16s %9.2f GB/s [%5.2f-%5.2f] %9.2f GB/s [%5.2f-%5.2f] %10.1f %%" %
          (f"128 MiB, {np} ranks", mc, min(c), max(c), ml, min(l), max(l), (ml / mc - 1) * 100))
PY
