#!/usr/bin/env bash
# bench/trace_cost.sh - what the flight recorder costs a call: herd bench
# allreduce of 8 B over shared memory (2 ranks on this host), ITERS
# calls a run, with the recorder off (HERD_TRACE_RING=0) and on (the
# default ring of 1024, in a file of HERD_TRACE_DIR as under herd launch),
# the two alternating ROUNDS times in one run; then the recorder alone
# (bench_trace_record: an entry begun and ended, 20 million times).
# Prints each run's time per call, the medians, their difference, and the
# recorder's own time per call with its ratio to the call.
#
# Builds nothing: it uses BUILD_DIR (default build) as built by
#   cmake -S . -B build && cmake --build build -j$(nproc)
#
# usage: bench/trace_cost.sh [BUILD_DIR]
#   environment: ROUNDS (7), ITERS (50000), BYTES (8)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
herd=$build/bin/herd
rounds=${ROUNDS:-7}
iters=${ITERS:-50000}
bytes=${BYTES:-8}
[[ -x $herd ]] || { echo "trace_cost.sh: $herd is missing: build first" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# one RING: the out-of-place time per call in us of one run
one() {
	HERD_TRACE_RING=$1 HERD_TRACE_DIR=$tmp/trace "$herd" bench allreduce -n 2 -b "$bytes" \
		-e "$bytes" --iters "$iters" -w 1000 2>/dev/null |
		awk -v b="$bytes" '$1 == b && $2 ~ /^[0-9]+$/ { print $6; exit }'
}

off=() on=()
for ((i = 0; i < rounds; i++)); do
	off+=("$(one 0)")
	on+=("$(one 1024)")
	echo "round $((i + 1)): off ${off[-1]} us, on ${on[-1]} us"
done
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
m_off=$(median "${off[@]}")
m_on=$(median "${on[@]}")
rec=$("$build/bin/bench_trace_record" | awk '/^record_ns/ { print $2 }')
awk -v off="$m_off" -v on="$m_on" -v b="$bytes" -v rec="$rec" 'BEGIN {
	printf "allreduce of %d B, 2 ranks: recorder off %.3f us, on %.3f us (medians, %+.3f us)\n",
		b, off, on, on - off
	printf "the recorder alone: %.1f ns a call, %.1f%% of the call with it off\n", rec,
		100 * rec / 1000 / off }'
