#!/usr/bin/env bash
# bench/output_flood.sh - ranks that write many short lines as fast as they
# can, side by side with the same writers into a plain pipe:
#
#   sh -c 'yes | head -c N' | cat | wc -c                     (the floor)
#   herd launch -n 1 -- sh -c 'yes | head -c N' | wc -c
#   herd launch -n 1 --hosts h1 ... | wc -c    (herd exec, a process of its own)
#
# and two writers of N2 bytes each into a pipe:
#
#   (two of them at once) | cat | wc -c
#   herd launch -n 2 -- sh -c 'yes | head -c N2' | cat | wc -c
#   herd launch -n 2 --hosts h1 ... | cat | wc -c
#
# The --hosts rows reach "h1" through a stand-in ssh (HERD_SSH) that runs
# the node's `herd exec --stdio` here under /usr/bin/time, which gives its
# peak RSS; without --hosts the node's helper is a thread of the launcher,
# inside the launcher's figure.  The launcher's peak RSS is its VmHWM, read
# from /proc while it runs (/usr/bin/time would count its children with
# it, the helper among them).  For each row: wall time (median of REPEAT
# runs), the largest peaks, every exit status, and the bytes that reached
# the reader (yes's lines, each with the "[host:rank] " prefix for herd).
# Builds nothing: BUILD_DIR (default build) must hold bin/herd.
#
# usage: bench/output_flood.sh [BUILD_DIR]
#   environment: N (40000000), N2 (100000000), REPEAT (3)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
N=${N:-40000000}
N2=${N2:-100000000}
REPEAT=${REPEAT:-3}
HERD=$(cd "$BUILD/bin" && pwd)/herd
TIME=/usr/bin/time
[[ -x $HERD ]] || { echo "output_flood.sh: $HERD is missing: build first" >&2; exit 2; }
[[ -x $TIME ]] || { echo "output_flood.sh: $TIME is missing (GNU time)" >&2; exit 2; }
unset SLURM_JOB_ID HERD_SSH_ARGS HERD_LAUNCH_ADDR

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The stand-in ssh: `ssh [options] -- HOST 'PROGRAM' exec --stdio` runs
# the command here, its peak RSS in a file of its own.
{
	echo '#!/bin/sh'
	echo 'while [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done'
	echo 'shift 2'
	echo "exec $TIME -f %M -o \"$tmp/helper.\$\$\" sh -c \"\$*\""
} >"$tmp/rsh"
chmod +x "$tmp/rsh"

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { m = int((NR + 1) / 2); print (NR % 2) ? a[m] : (a[m] + a[m + 1]) / 2 }'; }
maxof() { tr ' ' '\n' | grep -v '^$' | sort -g | tail -1; }

# once READER CMD...: runs CMD with its stdout into READER (a shell command
# ending in wc -c) and sets secs, rc, bytes and peak: the VmHWM of CMD's
# process, read from /proc every 20 ms while it runs (it only grows, so
# the last reading is the peak, but for the last 20 ms of its life).
once() {
	local reader=$1 t0 t1 rpid pid k v _
	shift
	rm -f "$tmp/fifo" "$tmp"/helper.*
	mkfifo "$tmp/fifo"
	bash -c "$reader" <"$tmp/fifo" >"$tmp/count" & rpid=$!
	t0=$EPOCHREALTIME
	"$@" >"$tmp/fifo" 2>"$tmp/err" & pid=$!
	peak=0
	while kill -0 "$pid" 2>/dev/null; do
		while read -r k v _; do
			[[ $k == VmHWM: ]] && peak=$v
		done <"/proc/$pid/status" 2>/dev/null || true
		sleep 0.02
	done
	rc=0
	wait "$pid" || rc=$?
	t1=$EPOCHREALTIME
	wait "$rpid" || true
	secs=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$t0" "$t1")
	bytes=$(tail -1 "$tmp/count")
	[[ $rc == 0 ]] || echo "  (exit $rc: $(tail -2 "$tmp/err" | tr '\n' ' '))" >&2
}

# row NAME READER CMD...: REPEAT runs of once; one line of figures.
row() {
	local name=$1 reader=$2 times="" rss="" hrss="" rcs="" all="" f
	shift 2
	for _ in $(seq "$REPEAT"); do
		once "$reader" "$@"
		times+=" $secs"
		rss+=" $peak"
		for f in "$tmp"/helper.*; do [[ -f $f ]] && hrss+=" $(tail -1 "$f")"; done
		rcs+=" $rc"
		all+=" $bytes"
	done
	printf '%-46s %7s s %9s KB %10s KB  exit%s  bytes %s\n' "$name" "$(median <<<"$times")" \
		"$(maxof <<<"$rss")" "$(if [[ -n $hrss ]]; then maxof <<<"$hrss"; else echo "-"; fi)" \
		"$rcs" "$(tr ' ' '\n' <<<"$all" | grep -v '^$' | sort -u | tr '\n' ' ')"
}

flood() { sh -c "yes | head -c $1"; }
two_floods() { flood "$1" & flood "$1"; wait; }
ssh_env=(env HERD_SSH="$tmp/rsh" HERD_PROGRAM="$HERD")

echo "# output flood: herd launch vs a plain pipe — $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(nproc) CPUs"
echo "# $HERD ($(git describe --always --dirty 2>/dev/null || echo '?'))"
echo "# wall: median of $REPEAT runs; RSS: the largest peak (helper: herd exec as a process"
echo "# of its own; on the local node it is a thread inside the launcher's figure)"
printf '%-46s %9s %12s %13s\n' "# what" "wall" "launcher RSS" "helper RSS"
row "pipe: yes | head -c $N | cat" "cat | wc -c" flood "$N"
row "herd launch -n 1 (local node)" "wc -c" "$HERD" launch -n 1 -- sh -c "yes | head -c $N"
row "herd launch -n 1 --hosts h1 (herd exec)" "wc -c" \
	"${ssh_env[@]}" "$HERD" launch --hosts h1 -n 1 -- sh -c "yes | head -c $N"
row "pipe: 2 x yes | head -c $N2 | cat" "cat | wc -c" two_floods "$N2"
row "herd launch -n 2 (local node) | cat" "cat | wc -c" \
	"$HERD" launch -n 2 -- sh -c "yes | head -c $N2"
row "herd launch -n 2 --hosts h1 (herd exec) | cat" "cat | wc -c" \
	"${ssh_env[@]}" "$HERD" launch --hosts h1 -n 2 -- sh -c "yes | head -c $N2"
