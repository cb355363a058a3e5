#!/usr/bin/env bash
# bench/bcast_compare.sh - a file to many hosts: herd bcast against pdcp,
# side by side, over the same OpenSSH server (tests/harness/sshd.sh on
# NHOSTS loopback addresses, 127.0.0.1 to 127.0.0.NHOSTS):
#
#   herd bcast --hosts 127.0.0.[1-N] FILE DEST     (verified, fsync, rename)
#   pdcp -R ssh -f N -w 127.0.0.[1-N] FILE DEST    (Debian pdsh's pdcp)
#
# FILE is SIZE bytes of random data; DEST lies in DIR (default /dev/shm, so
# that the fan-out and not this machine's one disk is measured; every host
# is this machine and writes the same DEST).  Each runs REPEAT times,
# alternating, after a warm-up; figures are medians of wall times, and the
# ratio herd's over pdcp's.  Needs root, openssh-server and pdsh.
#
# usage: bench/bcast_compare.sh [BUILD_DIR]
#   environment: NHOSTS (8), SIZE (256M), REPEAT (7), DIR (/dev/shm)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
NHOSTS=${NHOSTS:-8}
SIZE=${SIZE:-256M}
REPEAT=${REPEAT:-7}
DIR=${DIR:-/dev/shm}
HERD=$(cd "$BUILD/bin" && pwd)/herd
[[ -x $HERD ]] || { echo "bcast_compare.sh: $HERD is missing: build first" >&2; exit 2; }
command -v pdcp >/dev/null || { echo "bcast_compare.sh: pdcp not found (Debian pdsh)" >&2; exit 2; }

tmp=$(mktemp -d)
dest=$(mktemp -d "$DIR/bcast_compare.XXXXXX")
cleanup() {
	bash tests/harness/sshd.sh stop "$tmp/sshd"
	rm -rf "$tmp" "$dest"
}
trap cleanup EXIT
SSHD_HARNESS_HOSTS=$NHOSTS bash tests/harness/sshd.sh start "$tmp/sshd"
hosts="127.0.0.[1-$NHOSTS]"
export HERD_SSH_ARGS="-F $tmp/sshd/ssh_config" HERD_PROGRAM=$HERD
export PDSH_SSH_ARGS_APPEND="-F $tmp/sshd/ssh_config"
unset SLURM_JOB_ID
head -c "$(numfmt --from=iec "$SIZE")" /dev/urandom >"$tmp/file"

timed() {
	local t0=$EPOCHREALTIME t1
	if ! "$@" >"$tmp/run.out" 2>&1; then
		echo "bcast_compare.sh: failed: $*" >&2
		tail -5 "$tmp/run.out" >&2
		exit 1
	fi
	t1=$EPOCHREALTIME
	cmp -s "$tmp/file" "$dest/f" || { echo "bcast_compare.sh: $* left a wrong copy" >&2; exit 1; }
	rm -f "$dest/f"
	python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.4f}')" "$t0" "$t1"
}
herd_run() { timed "$HERD" bcast --hosts "$hosts" "$tmp/file" "$dest/f"; }
pdcp_run() { timed pdcp -R ssh -f "$NHOSTS" -w "$hosts" "$tmp/file" "$dest/f"; }

echo "# herd bcast vs pdcp -R ssh, $SIZE to $NHOSTS hosts on loopback, into $DIR - $(date -u '+%F %T') UTC"
echo "# host: $(hostname), nproc $(nproc), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# $(pdsh -V 2>&1 | head -1); $(ssh -V 2>&1)"
herd_run >/dev/null
pdcp_run >/dev/null
printf '%-8s %10s %10s\n' repeat herd_s pdcp_s
h=() p=()
for ((r = 1; r <= REPEAT; r++)); do
	if ((r % 2)); then a=$(herd_run); b=$(pdcp_run); else b=$(pdcp_run); a=$(herd_run); fi
	h+=("$a") p+=("$b")
	printf '%-8d %10s %10s\n' "$r" "$a" "$b"
done
python3 - "${h[*]}" "${p[*]}" "$SIZE" "$NHOSTS" <<'PY'
import statistics, sys
h = [float(x) for x in sys.argv[1].split()]
p = [float(x) for x in sys.argv[2].split()]
mh, mp = statistics.median(h), statistics.median(p)
print(f"median: herd bcast {mh:.3f} s, pdcp {mp:.3f} s: herd/pdcp {mh / mp:.2f}")
PY
