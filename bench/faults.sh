#!/usr/bin/env bash
# bench/faults.sh - runs bench/faults.lua (what a failure costs a training
# job, under a scripted schedule of faults) on a namespace cluster of 4
# hosts that it starts (tests/harness/netns.sh) and stops.  HERD_TIMEOUT=5.
# Needs root (namespaces), iproute2 and openssh-server.  Not in CI.
#
# usage: bench/faults.sh [BUILD_DIR [OUT_DIR]]
#   environment: as bench/faults.lua (REPEAT, PACE, STEPS, STATE_MIB)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${2:-bench/out/faults}
HERD=$(cd "$BUILD/bin" 2>/dev/null && pwd)/herd
TRAIN=$(dirname "$HERD")/example_train_ddp
[[ -x $HERD && -x $TRAIN ]] || { echo "faults.sh: build $BUILD first" >&2; exit 2; }
work=$(mktemp -d)
cluster=$work/cluster
cleanup() {
	bash tests/harness/netns.sh stop "$cluster" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
rc=0
bash tests/harness/netns.sh start "$cluster" 4 >/dev/null || rc=$?
[[ $rc == 77 ]] && { echo "faults.sh: no namespace cluster here (root?)" >&2; exit 77; }
[[ $rc == 0 ]] || { echo "faults.sh: the cluster did not start" >&2; exit 1; }
export HERD_SSH_ARGS="-F $cluster/ssh_config" HERD_PROGRAM=$HERD HERD_EXCLUDE_FILE=$work/exclude
export HERD_TIMEOUT=${HERD_TIMEOUT:-5}
echo "# faults on the namespace cluster - $(date -u '+%F %T') UTC"
echo "# $(uname -srm), $(nproc) CPUs, herd $("$HERD" --version | head -1), HERD_TIMEOUT=$HERD_TIMEOUT"
"$HERD" bench/faults.lua "$cluster" "$TRAIN" "$HERD" "$OUT"
