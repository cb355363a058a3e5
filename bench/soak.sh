#!/usr/bin/env bash
# bench/soak.sh - a long run of collectives and checkpoints (not in CI):
# N ranks (default 4) on this host, or across HOSTS (a hostlist; then
# herd launch --hosts), for SECONDS (default 1800), allreduces of 4 MiB and
# 4 KiB with every result checked and a checkpoint saved and restored every
# INTERVAL seconds (default 60) in DIR.  Rank 0 prints throughput per
# interval and any error as it happens; the exit status is the job's.
#
# usage: bench/soak.sh [BUILD_DIR]
#   environment: SECONDS_TOTAL (1800), INTERVAL (60), N (4), HOSTS, DIR
#   (default: a fresh temporary directory, removed at the end)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
HERD=$(cd "$BUILD/bin" && pwd)/herd
total=${SECONDS_TOTAL:-1800}
interval=${INTERVAL:-60}
n=${N:-4}
dir=${DIR:-$(mktemp -d)}
[[ -n ${DIR:-} ]] || trap 'rm -rf "$dir"' EXIT
where=()
[[ -n ${HOSTS:-} ]] && where=(--hosts "$HOSTS")
echo "# soak: $n ranks${HOSTS:+ on $HOSTS}, $total s, report every $interval s, checkpoints in $dir"
echo "# $(uname -n), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
exec "$HERD" launch -n "$n" "${where[@]}" -- "$HERD" "$PWD/bench/soak.lua" "$total" "$interval" "$dir"
