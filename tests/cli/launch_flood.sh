#!/usr/bin/env bash
# herd launch under an output flood: ranks that write many short lines as
# fast as they can.  Every byte reaches the reader, the launch exits 0, and
# memory stays bounded whatever the volume: the node stops reading a
# rank's pipe while its frames wait for the launcher, and the launcher
# stops reading its nodes while its writer's queue is over half full and
# the reader takes what is written.  With the node's herd exec as a local
# thread, as a process of its own (a stand-in ssh runs it here), and with
# a reader slower than the ranks.
source "$(dirname "$0")/../harness/common.sh" "$@"
pid=
cleanup() {
	[[ -n $pid ]] && kill -9 "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
unset HERD_RANK RANK WORLD_SIZE HERD_STORE SLURM_JOB_ID HERD_SSH_ARGS HERD_LAUNCH_ADDR
host=$(hostname); host=${host%%.*}

# A bound on memory, not on time: the flood is 40 MB and the launcher's
# queue holds 16 MiB, so a process that keeps what it cannot pass on at
# once goes far past it (before flow control: 695 MB for the launcher,
# 689 MB for a herd exec).
MAX_KB=$((200 * 1024))
# Under AddressSanitizer freed memory waits in its quarantine (256 MiB by
# default) before it is reused: the bound is the flood's size instead.
ldd "$HERD" 2>/dev/null | grep -q libasan && MAX_KB=$((600 * 1024))

# peak_kb FILE CMD...: runs CMD, its stdout to wc -c (the count in FILE);
# sets rc and kb, the peak RSS of CMD's process and everything it ran, in
# KiB: /usr/bin/time's %M where there is GNU time, else the VmHWM of CMD's
# own process read from /proc every 50 ms while it ran.
peak_kb() {
	local out=$1 k v _ wpid
	shift
	rc=0
	kb=0
	if [[ -x /usr/bin/time ]]; then
		/usr/bin/time -f %M -o "$tmp/rss" timeout 120 "$@" 2>"$tmp/err" | wc -c >"$out"
		rc=${PIPESTATUS[0]}
		kb=$(tail -1 "$tmp/rss")
		return
	fi
	rm -f "$tmp/fifo"
	mkfifo "$tmp/fifo"
	wc -c <"$tmp/fifo" >"$out" & wpid=$!
	timeout 120 "$@" >"$tmp/fifo" 2>"$tmp/err" & pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		while read -r k v _; do
			[[ $k == VmHWM: ]] && (( v > kb )) && kb=$v
		done <"/proc/$pid/status" 2>/dev/null || true
		sleep 0.05
	done
	wait "$pid" || rc=$?
	pid=
	wait "$wpid"
}

# --- one rank, 40 MB of two-byte lines, on this node: every line arrives
# with its prefix, exit 0, memory bounded.
n=40000000
lines=$((n / 2))
want=$((lines * (${#host} + 5 + 2)))   # "[host:0] " and "y\n"
peak_kb "$tmp/count" "$HERD" launch -n 1 -- sh -c "yes | head -c $n"
[[ $rc == 0 ]] || fail "40 MB flood: exit $rc, want 0: $(tail -3 "$tmp/err")"
[[ $(cat "$tmp/count") == "$want" ]] || fail "40 MB flood: $(cat "$tmp/count") bytes reached the reader, want $want: $(tail -3 "$tmp/err")"
(( kb < MAX_KB )) || fail "40 MB flood: the launcher reached $kb KiB (bound $MAX_KB KiB)"
[[ ! -s $tmp/err ]] || fail "40 MB flood wrote on stderr: $(tail -3 "$tmp/err")"

# --- two ranks, one on stdout and one on stderr, in a pipe: every line of
# each stream, and nothing else in it.
"$HERD" launch -n 2 -- sh -c 'if [ $HERD_RANK = 0 ]; then yes out | head -c 8000000
	else yes err | head -c 8000000 >&2; fi' 2>"$tmp/err2" >"$tmp/out2"; rc=$?
[[ $rc == 0 ]] || fail "two streams: exit $rc: $(tail -3 "$tmp/err2")"
[[ $(grep -c -vxF "[$host:0] out" "$tmp/out2") == 0 ]] || fail "two streams: stdout holds other lines"
[[ $(grep -c -xF "[$host:0] out" "$tmp/out2") == 2000000 ]] || fail "two streams: $(grep -c -xF "[$host:0] out" "$tmp/out2") stdout lines, want 2000000"
[[ $(grep -c -vxF "[$host:1] err" "$tmp/err2") == 0 ]] || fail "two streams: stderr holds other lines: $(grep -vxF "[$host:1] err" "$tmp/err2" | head -3)"
[[ $(grep -c -xF "[$host:1] err" "$tmp/err2") == 2000000 ]] || fail "two streams: $(grep -c -xF "[$host:1] err" "$tmp/err2") stderr lines, want 2000000"

# --- the node's herd exec as a process of its own, as over ssh: a stand-in
# ssh runs `herd exec --stdio` here, under /usr/bin/time where there is
# GNU time, and the helper's memory is bounded too.
cat >"$tmp/rsh" <<EOF
#!/bin/sh
while [ \$# -gt 0 ] && [ "\$1" != "--" ]; do shift; done
shift 2
[ -x /usr/bin/time ] || exec sh -c "\$*"
exec /usr/bin/time -f %M -o "$tmp/helper.rss" sh -c "\$*"
EOF
chmod +x "$tmp/rsh"
rm -f "$tmp/helper.rss"
want=$((lines * (2 + 5 + 2)))   # "[h1:0] " and "y\n"
peak_kb "$tmp/count" env HERD_SSH="$tmp/rsh" HERD_PROGRAM="$HERD" \
	"$HERD" launch --hosts h1 -n 1 -- sh -c "yes | head -c $n"
[[ $rc == 0 ]] || fail "40 MB flood through herd exec: exit $rc, want 0: $(tail -3 "$tmp/err")"
[[ $(cat "$tmp/count") == "$want" ]] || fail "40 MB flood through herd exec: $(cat "$tmp/count") bytes reached the reader, want $want"
(( kb < MAX_KB )) || fail "40 MB flood through herd exec: launcher and helper reached $kb KiB (bound $MAX_KB KiB)"
if [[ -s $tmp/helper.rss ]]; then
	hkb=$(tail -1 "$tmp/helper.rss")
	(( hkb < MAX_KB )) || fail "40 MB flood through herd exec: the helper reached $hkb KiB (bound $MAX_KB KiB)"
fi

# --- a reader slower than the ranks (it takes 64 KiB, then naps 5 ms)
# loses nothing: 18 MB of prefixed lines, more than the launcher's queue
# holds, all arrive; the ranks wait for it as they would on a pipe.
n=4000000
want=$(( n / 2 * (${#host} + 5 + 2) ))
timeout 120 "$HERD" launch -n 1 -- sh -c "yes | head -c $n" 2>"$tmp/err" | python3 -c '
import sys, time
n = 0
while True:
    b = sys.stdin.buffer.read1(65536)
    if not b:
        break
    n += len(b)
    time.sleep(0.005)
print(n)' >"$tmp/count"
rc=${PIPESTATUS[0]}
[[ $rc == 0 ]] || fail "slow reader: exit $rc: $(tail -3 "$tmp/err")"
[[ $(cat "$tmp/count") == "$want" ]] || fail "slow reader: $(cat "$tmp/count") bytes arrived, want $want: $(tail -3 "$tmp/err")"
grep -q "dropped" "$tmp/err" && fail "slow reader: lines were dropped: $(cat "$tmp/err")"
# --- while one node floods a reader that takes its output slowly, another
# node's news is not kept waiting: rank 1 (on h2) fails, and the job ends
# with its status, its flooding rank 0 (on h1) stopped.  The node watched
# first (h1) must not be the only one read each time the reader makes
# room.
timeout 60 env HERD_SSH="$tmp/rsh" HERD_PROGRAM="$HERD" "$HERD" launch --hosts h1,h2 -n 2 -- \
	sh -c 'if [ $HERD_RANK = 1 ]; then sleep 1; exit 3; fi; exec yes' 2>"$tmp/err" | python3 -c '
import sys, time
while sys.stdin.buffer.read1(65536):
    time.sleep(0.01)'
rc=${PIPESTATUS[0]}
[[ $rc == 3 ]] || fail "a failure beside a flood: exit $rc, want 3: $(tail -3 "$tmp/err")"
grep -q "rank 1" "$tmp/err" || fail "a failure beside a flood: rank 1 is not named: $(tail -3 "$tmp/err")"
exit 0
