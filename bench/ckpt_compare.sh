#!/usr/bin/env bash
# bench/ckpt_compare.sh - herd checkpoints against dd and plain reads, in one
# run, on one filesystem, for the same number of bytes (bench/ckpt_bench.c
# says what is measured and how):
#
#   synchronous save      >= 90% of `dd conv=fdatasync`'s write bandwidth
#   restore with verify   >= 90% of a plain read(2) of the same bytes into
#                            the same memory (page cache dropped before each
#                            read when run as root; dd to /dev/null shown too)
#   save_async blocking   <= a memcpy of the state + 10%
#   checksums             <= 10% of the save time
#
# Prints the machine, the filesystem, the load, every repeat's seconds and
# the medians with their ratios and verdicts.  Builds nothing: it uses
# BUILD_DIR (default build) as built by
#   cmake -S . -B build && cmake --build build -j$(nproc)
#
# usage: bench/ckpt_compare.sh [BUILD_DIR]
#   environment: BYTES (1G: a multiple of 4M), REPEATS (5),
#                DIR (a directory to work in, on the filesystem to measure;
#                default /var/tmp, which is on disk where /tmp may be tmpfs;
#                DIR=/dev/shm, a tmpfs, takes the disk out and compares the
#                software alone); the script works in a fresh directory
#                inside it, removed after
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
BENCH=$BUILD/bin/bench_ckpt
BYTES=${BYTES:-1G}
REPEATS=${REPEATS:-5}

[[ -x $BENCH ]] || { echo "ckpt_compare.sh: $BENCH is missing: build first (see the top of $0)" >&2; exit 2; }
command -v dd >/dev/null || { echo "ckpt_compare.sh: dd not found" >&2; exit 2; }

case $BYTES in
	*G|*g) bytes=$(( ${BYTES%?} << 30 )) ;;
	*M|*m) bytes=$(( ${BYTES%?} << 20 )) ;;
	*) bytes=$BYTES ;;
esac

work=${DIR:-/var/tmp}/herd-ckpt-bench.$$
mkdir -p "$(dirname "$work")"
trap 'rm -rf "$work"' EXIT

# At the peak: the source file, dd's file and three steps on disk; the
# state, two copies and the staging memory (plus page cache) in memory.
free_disk=$(( $(df -Pk "$(dirname "$work")" | awk 'NR == 2 { print $4 }') * 1024 ))
(( free_disk >= 6 * bytes )) || {
	echo "ckpt_compare.sh: $(dirname "$work") has $free_disk bytes free; 6 x $bytes needed" >&2
	exit 2
}
avail_mem=$(( $(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo) * 1024 ))
(( avail_mem >= 6 * bytes )) || {
	echo "ckpt_compare.sh: $avail_mem bytes of memory available; 6 x $bytes needed" >&2
	exit 2
}

echo "# herd checkpoints vs dd — $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "host:        $(hostname), nproc $(nproc), $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
echo "memory:      $(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
echo "kernel:      $(uname -r)"
mnt=$(df -P "$(dirname "$work")" | awk 'NR == 2 { print $6 }')
echo "filesystem:  $(df -PT "$(dirname "$work")" | awk 'NR == 2 { print $1 " (" $2 ")" }') mounted at $mnt ($(findmnt -no OPTIONS "$mnt" 2>/dev/null || echo 'options unknown'))"
echo "user:        $(id -un)$([[ $(id -u) == 0 ]] || echo ' (not root: the page cache cannot be dropped)')"
echo "load:        $(cut -d' ' -f1-3 /proc/loadavg)"
echo "herd:        $(git rev-parse --short HEAD 2>/dev/null || echo unknown) ($BUILD)"
echo
"$BENCH" "$work" --bytes "$bytes" --repeats "$REPEATS"
echo
echo "load after:  $(cut -d' ' -f1-3 /proc/loadavg)"
