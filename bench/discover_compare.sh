#!/usr/bin/env bash
# bench/discover_compare.sh - discovery of many hosts against pdsh, side by
# side, over the same OpenSSH server (tests/harness/sshd.sh answering on
# NHOSTS loopback addresses, 127.0.0.1 to 127.0.0.NHOSTS):
#
#   herd discover --hosts 127.0.0.[1-N] --json      (herd probe on each, merged)
#   pdsh -R ssh -f N -w 127.0.0.[1-N] true          (Debian pdsh)
#
# Each runs REPEAT times, alternating (the first of each pair turning with
# the repeat), after one warm-up round; figures are the medians of the wall
# times, and the ratio herd's over pdsh's.  Both use one ssh client per
# host, all at once (pdsh's fanout set to N, herd's HERD_DISCOVER_FANOUT
# default of 256).  Needs root, openssh-server and pdsh.
#
# usage: bench/discover_compare.sh [BUILD_DIR]
#   environment: NHOSTS (32), REPEAT (9)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
NHOSTS=${NHOSTS:-32}
REPEAT=${REPEAT:-9}
HERD=$(cd "$BUILD/bin" && pwd)/herd
[[ -x $HERD ]] || { echo "discover_compare.sh: $HERD is missing: build first" >&2; exit 2; }
command -v pdsh >/dev/null || { echo "discover_compare.sh: pdsh not found (Debian pdsh)" >&2; exit 2; }

tmp=$(mktemp -d)
cleanup() {
	bash tests/harness/sshd.sh stop "$tmp/sshd"
	rm -rf "$tmp"
}
trap cleanup EXIT
SSHD_HARNESS_HOSTS=$NHOSTS bash tests/harness/sshd.sh start "$tmp/sshd"
hosts="127.0.0.[1-$NHOSTS]"
export HERD_SSH_ARGS="-F $tmp/sshd/ssh_config" HERD_PROGRAM=$HERD
export PDSH_SSH_ARGS_APPEND="-F $tmp/sshd/ssh_config"
unset SLURM_JOB_ID HERD_INVENTORY

timed() {
	local t0=$EPOCHREALTIME t1
	if ! "$@" >"$tmp/run.out" 2>&1; then
		echo "discover_compare.sh: failed: $*" >&2
		tail -5 "$tmp/run.out" >&2
		exit 1
	fi
	t1=$EPOCHREALTIME
	python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.4f}')" "$t0" "$t1"
}
herd_run() { timed "$HERD" discover --hosts "$hosts" --json; }
pdsh_run() { timed pdsh -R ssh -f "$NHOSTS" -w "$hosts" true; }

# Every host answered: the inventory has NHOSTS nodes.
"$HERD" discover --hosts "$hosts" --json >"$tmp/inv.json"
python3 -c 'import json,sys; n=len(json.load(open(sys.argv[1]))["nodes"]); assert n == int(sys.argv[2]), n' \
	"$tmp/inv.json" "$NHOSTS"

echo "# herd discover vs pdsh -R ssh, $NHOSTS hosts on loopback - $(date -u '+%F %T') UTC"
echo "# host: $(hostname), nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# $(pdsh -V 2>&1 | head -1); $(ssh -V 2>&1)"
herd_run >/dev/null
pdsh_run >/dev/null
printf '%-8s %10s %10s\n' repeat herd_s pdsh_s
h=() p=()
for ((r = 1; r <= REPEAT; r++)); do
	if ((r % 2)); then a=$(herd_run); b=$(pdsh_run); else b=$(pdsh_run); a=$(herd_run); fi
	h+=("$a") p+=("$b")
	printf '%-8d %10s %10s\n' "$r" "$a" "$b"
done
python3 - "${h[*]}" "${p[*]}" <<'PY'
import statistics, sys
h = [float(x) for x in sys.argv[1].split()]
p = [float(x) for x in sys.argv[2].split()]
mh, mp = statistics.median(h), statistics.median(p)
print(f"median: herd discover {mh:.3f} s, pdsh true {mp:.3f} s: herd/pdsh {mh / mp:.2f} (target <= 1.20): "
      f"{'met' if mh / mp <= 1.2 else 'MISSED'}")
PY
