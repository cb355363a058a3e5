#!/usr/bin/env bash
# herd launch on this node: the documented commands with their
# exact output and exit statuses, the failure summary, restarts, exec
# failures, refusals, SIGINT forwarded, and no orphans after the launcher
# itself is killed with SIGKILL.
source "$(dirname "$0")/../harness/common.sh" "$@"
launcher=
cleanup() {
	[[ -n $launcher ]] && kill -9 "$launcher" 2>/dev/null
	for f in "$tmp"/pid.*; do [[ -f $f ]] && kill -9 "$(cat "$f")" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
unset HERD_RANK RANK WORLD_SIZE HERD_STORE
host=$(hostname); host=${host%%.*}

# --- four ranks, each line prefixed with its host and rank
out=$("$HERD" launch -n 4 -- sh -c 'echo $HERD_RANK/$HERD_WORLD_SIZE $RANK $LOCAL_RANK' \
	2>"$tmp/err") || fail "launch -n 4 exited $?: $(cat "$tmp/err")"
want="[$host:0] 0/4 0 0
[$host:1] 1/4 1 1
[$host:2] 2/4 2 2
[$host:3] 3/4 3 3"
[[ $(sort <<<"$out") == "$want" ]] || fail "launch -n 4 printed:
$out"
[[ ! -s $tmp/err ]] || fail "launch -n 4 wrote on stderr: $(cat "$tmp/err")"

# --- --prefix and --no-prefix
out=$("$HERD" launch -n 1 --prefix '<%r@%h> ' -- echo hi) || fail "--prefix exited $?"
[[ $out == "<0@$host> hi" ]] || fail "--prefix printed: $out"
out=$("$HERD" launch -n 1 --no-prefix -- echo hi) || fail "--no-prefix exited $?"
[[ $out == "hi" ]] || fail "--no-prefix printed: $out"

# --- a failing rank: its status, and a summary with its stderr
"$HERD" launch -n 2 -- sh -c 'exit 3' >"$tmp/out" 2>"$tmp/err"
rc=$?
[[ $rc == 3 ]] || fail "exit 3 gave status $rc"
grep -qE "^herd launch: job [0-9a-f-]+ failed: rank [01] on $host \(pid [0-9]+\) exited with code 3" \
	"$tmp/err" || fail "no failure summary: $(cat "$tmp/err")"
"$HERD" launch -n 2 -- sh -c '[ $RANK = 1 ] || exec sleep 30; echo bad thing >&2; exit 9' \
	>"$tmp/out" 2>"$tmp/err"
rc=$?
[[ $rc == 9 ]] || fail "exit 9 gave status $rc"
grep -qF "rank 1 on $host" "$tmp/err" || fail "summary lacks the rank: $(cat "$tmp/err")"
grep -qxF "  bad thing" "$tmp/err" || fail "summary lacks the stderr tail: $(cat "$tmp/err")"
grep -qxF "[$host:1] bad thing" "$tmp/err" || fail "stderr line not prefixed: $(cat "$tmp/err")"
[[ ! -s $tmp/out ]] || fail "stdout got: $(cat "$tmp/out")"

# --- a signal: 128 + 9
"$HERD" launch -n 1 -- sh -c 'kill -9 $$' 2>"$tmp/err"
rc=$?
[[ $rc == 137 ]] || fail "kill -9 gave status $rc"
grep -qF "killed by signal 9" "$tmp/err" || fail "no signal in summary: $(cat "$tmp/err")"

# --- --restarts 2 runs the job three times
"$HERD" launch -n 2 --restarts 2 -- sh -c '[ $RANK = 0 ] || exec sleep 30; echo run $HERD_RESTART_COUNT >>"$0/runs"; exit 3' \
	"$tmp" >/dev/null 2>"$tmp/err"
rc=$?
[[ $rc == 3 ]] || fail "--restarts 2 gave status $rc"
[[ $(cat "$tmp/runs") == $'run 0\nrun 1\nrun 2' ]] || fail "runs of rank 0: $(cat "$tmp/runs")"
grep -qF "(restart 2)" "$tmp/err" || fail "summary lacks the restart: $(cat "$tmp/err")"

# --- a command that does not exist: every rank says so, status 127
"$HERD" launch -n 2 -- herd-no-such-command >"$tmp/out" 2>"$tmp/err"
rc=$?
[[ $rc == 127 ]] || fail "missing command gave status $rc"
for r in 0 1; do
	grep -qxF "herd launch: [$host:$r] exec \"herd-no-such-command\": No such file or directory" "$tmp/err" \
		|| fail "rank $r did not report the exec failure: $(cat "$tmp/err")"
done

# --- a command that is there but cannot be executed: status 126, as a
# shell gives it (a file without the execute bit, by path and found on
# PATH, and a directory); 127 stays for one that is not there.
printf '#!/bin/sh\necho ran\n' >"$tmp/noexec"
chmod 644 "$tmp/noexec"
mkdir -p "$tmp/pathdir" "$tmp/adir"
cp "$tmp/noexec" "$tmp/pathdir/herd-noexec-cmd"
for cmd in "$tmp/noexec:no execute permission" "$tmp/adir:a directory" \
	"herd-noexec-cmd:no execute permission"; do
	why=${cmd#*:}
	cmd=${cmd%%:*}
	PATH=$tmp/pathdir:$PATH "$HERD" launch -n 2 -- "$cmd" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[[ $rc == 126 ]] || fail "$cmd (not executable) gave status $rc, want 126: $(cat "$tmp/err")"
	grep -qxF "herd launch: [$host:0] exec \"$cmd\": Permission denied ($why)" "$tmp/err" \
		|| fail "$cmd: no exec failure reported: $(cat "$tmp/err")"
	[[ ! -s $tmp/out ]] || fail "$cmd ran: $(cat "$tmp/out")"
done

# --- SIGTERM, SIGINT or SIGHUP to herd launch ends the job whatever
# --restarts says: the ranks' deaths from the forwarded signal are no
# failure to restart from, and the status is 128 + the signal.  The rank
# appends a line when it starts: one line, one run.
for sig in TERM INT HUP; do
	rm -f "$tmp/runs"
	"$HERD" launch -n 1 --restarts 3 -- sh -c 'echo run $HERD_RESTART_COUNT >>"$0/runs"; exec sleep 30' \
		"$tmp" >/dev/null 2>"$tmp/err" &
	launcher=$!
	for _ in $(seq 400); do [[ -s $tmp/runs ]] && break; sleep 0.1; done
	[[ -s $tmp/runs ]] || fail "SIG$sig with --restarts: the rank did not start"
	kill -$sig "$launcher"
	for _ in $(seq 100); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$launcher" 2>/dev/null && fail "SIG$sig with --restarts: herd launch still running 10 s after it"
	wait "$launcher"
	rc=$?
	launcher=
	want=$((128 + $(kill -l $sig)))
	[[ $rc == "$want" ]] || fail "SIG$sig with --restarts: status $rc, want $want: $(cat "$tmp/err")"
	[[ $(cat "$tmp/runs") == "run 0" ]] || fail "SIG$sig with --restarts restarted the job: $(cat "$tmp/runs")"
	grep -qF "restarting" "$tmp/err" && fail "SIG$sig with --restarts: $(cat "$tmp/err")"
done

# --- refusals before anything starts
"$HERD" launch -n 3 --per-node 2 -- touch "$tmp/started" 2>"$tmp/err"
rc=$?
[[ $rc == 125 ]] || fail "3 ranks at 2 per node on one node gave status $rc"
grep -qF "need 2 nodes; there are 1" "$tmp/err" || fail "refusal: $(cat "$tmp/err")"
[[ ! -e $tmp/started ]] || fail "a rank started before the refusal"
"$HERD" launch -- true 2>/dev/null
[[ $? == 125 ]] || fail "launch without -n is not herd launch's own failure (125)"

# --- --log-dir
"$HERD" launch -n 2 --log-dir "$tmp/logs" -- sh -c 'echo o$RANK; echo e$RANK >&2' \
	>/dev/null 2>&1 || fail "--log-dir run failed"
[[ $(cat "$tmp/logs/rank.1.out") == o1 && $(cat "$tmp/logs/rank.1.err") == e1 ]] \
	|| fail "log files: $(cat "$tmp"/logs/*)"

# --- SIGINT to herd launch reaches the ranks; the job was interrupted
# (130) even when they catch it and exit 0
"$HERD" launch -n 2 -- sh -c 'echo $$ >"$0/pid.$RANK"; trap "echo caught INT; exit 0" INT; \
	while :; do sleep 0.1; done' "$tmp" >"$tmp/out" 2>&1 &
launcher=$!
for _ in $(seq 400); do [[ -s $tmp/pid.0 && -s $tmp/pid.1 ]] && break; sleep 0.1; done
[[ -s $tmp/pid.0 && -s $tmp/pid.1 ]] || fail "ranks did not start"
kill -INT "$launcher"
for _ in $(seq 100); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
kill -0 "$launcher" 2>/dev/null && fail "herd launch still running 10 s after SIGINT"
wait "$launcher"
rc=$?
launcher=
[[ $rc == 130 ]] || fail "ranks that caught SIGINT and exited 0 gave status $rc: $(cat "$tmp/out")"
[[ $(grep -c "caught INT" "$tmp/out") == 2 ]] || fail "SIGINT not forwarded: $(cat "$tmp/out")"
grep -qE "^herd launch: job [0-9a-f-]+: interrupted by SIGINT; ranks 0-1 stopped$" "$tmp/out" \
	|| fail "no interrupt summary: $(cat "$tmp/out")"
rm -f "$tmp"/pid.*

# --- --gpus-per-rank: leases from the planner, on a recorded DGX H100
out=$(HERD_INVENTORY=tests/fixtures/inventory/dgx-h100.json HERD_LEASE_DIR=$tmp/leases \
	"$HERD" launch -n 2 --gpus-per-rank 2 --no-prefix -- sh -c \
	'echo $RANK $CUDA_VISIBLE_DEVICES $CUDA_DEVICE_ORDER; ls "$0" | wc -l' "$tmp/leases") \
	|| fail "--gpus-per-rank exited $?"
grep -qE '^0 GPU-[0-9a-f-]+,GPU-[0-9a-f-]+ PCI_BUS_ID$' <<<"$out" || fail "rank 0 GPUs: $out"
grep -qE '^1 GPU-[0-9a-f-]+,GPU-[0-9a-f-]+ PCI_BUS_ID$' <<<"$out" || fail "rank 1 GPUs: $out"
[[ $(grep -oE 'GPU-[0-9a-f-]+' <<<"$out" | sort -u | wc -l) == 4 ]] || fail "GPUs shared: $out"
HERD_INVENTORY=tests/fixtures/inventory/dgx-h100.json HERD_LEASE_DIR=$tmp/leases \
	"$HERD" launch -n 9 --gpus-per-rank 1 -- touch "$tmp/started" 2>"$tmp/err"
rc=$?
[[ $rc == 125 ]] || fail "9 GPUs of 8 gave status $rc"
grep -qF "9 GPUs for 9 ranks on" "$tmp/err" || fail "GPU refusal: $(cat "$tmp/err")"
[[ ! -e $tmp/started ]] || fail "a rank started without its GPU"

# --- ranks that join a communicator from herd launch's environment
out=$("$HERD" launch -n 4 -- "$HERD" bench allreduce -b 8 -e 64K -c 1 2>"$tmp/err") \
	|| fail "bench under herd launch exited $?: $(cat "$tmp/err")"
grep -qF "[$host:0] # Out of bounds values : 0 OK" <<<"$out" || fail "bench printed:
$out
$(cat "$tmp/err")"
grep -qE "^\[$host:0\] +65536 +16384 +float32 +sum" <<<"$out" || fail "bench lacks 64K row: $out"

# --- no orphans: SIGKILL the launcher; its ranks and what they started in
# the background must go, and their GPU leases stay held until they have
alive() {  # the pids of $* that still run (a zombie waiting for its reaper is gone)
	local p
	for p in "$@"; do
		if kill -0 "$p" 2>/dev/null && [[ $(ps -o stat= -p "$p") != Z* ]]; then echo "$p"; fi
	done
}
held() {  # how many GPUs of the fixture are leased
	HERD_INVENTORY=tests/fixtures/inventory/dgx-h100.json HERD_LEASE_DIR=$tmp/leases \
		"$HERD" gpus --json | grep -c '"lease": "exclusive"'
}
HERD_INVENTORY=tests/fixtures/inventory/dgx-h100.json HERD_LEASE_DIR=$tmp/leases \
	"$HERD" launch -n 3 --gpus-per-rank 1 -- sh -c \
	'sleep 1000 & echo $! >"$0/child.$RANK"; echo $$ >"$0/pid.$RANK"; wait' \
	"$tmp" >/dev/null 2>&1 &
launcher=$!
for _ in $(seq 400); do [[ -s $tmp/pid.0 && -s $tmp/pid.1 && -s $tmp/pid.2 ]] && break; sleep 0.1; done
[[ -s $tmp/pid.2 ]] || fail "ranks did not start"
pids=$(cat "$tmp"/pid.* "$tmp"/child.*)
[[ $(alive $pids | wc -l) == 6 ]] || fail "ranks and children are not all running: $pids"
[[ $(held) == 3 ]] || fail "the job's 3 GPUs are not leased"
kill -9 "$launcher"
wait "$launcher" 2>/dev/null
launcher=
for _ in $(seq 100); do
	left=$(alive $pids)
	gpus=$(held)
	# Leases free while a process of the job runs: unless it is
	# already dying (SIGKILLed a moment ago), that is the bug.
	if [[ -n $left && $gpus != 3 ]]; then
		sleep 1
		[[ -z $(alive $pids) ]] || fail "GPU leases free while $(alive $pids) still run"
	fi
	[[ -z $left && $gpus == 0 ]] && break
	sleep 0.1
done
[[ -z $(alive $pids) ]] || fail "ranks or their children left running after the launcher died: $(alive $pids)"
[[ $(held) == 0 ]] || fail "the dead job's GPU leases are still held"
rm -f "$tmp"/pid.* "$tmp"/child.*

# --- an exported MASTER_PORT and --env win over herd's own values; -l is
# srun's label
out=$(MASTER_PORT=29555 "$HERD" launch -n 2 -- sh -c 'echo $MASTER_PORT') || fail "MASTER_PORT launch exited $?"
[[ $(sort <<<"$out") == "[$host:0] 29555
[$host:1] 29555" ]] || fail "exported MASTER_PORT: $out"
out=$("$HERD" launch -n 2 -l --env FOO=bar --env MASTER_PORT=1234 -- sh -c 'echo $FOO $MASTER_PORT') \
	|| fail "--env launch exited $?"
[[ $(sort <<<"$out") == "0: bar 1234
1: bar 1234" ]] || fail "--env and -l: $out"
"$HERD" launch -n 1 --env =x -- true 2>"$tmp/err"; rc=$?
[[ $rc == 125 ]] || fail "--env =x exited $rc"
has "$(cat "$tmp/err")" "--env =x: expected NAME=VALUE"
"$HERD" launch --max-restarts x -n 1 -- true 2>"$tmp/err"; rc=$?
[[ $rc == 125 ]] || fail "--max-restarts x exited $rc"
has "$(cat "$tmp/err")" "--max-restarts x: expected a whole number from 0 to 1000000"

# --- --json-summary: the job's end for programs, started or not
"$HERD" launch -n 3 --json-summary "$tmp/summary.json" -- sh -c 'exit $((HERD_RANK == 1 ? 7 : 0))' \
	2>/dev/null; rc=$?
[[ $rc == 7 ]] || fail "summary job exited $rc"
"$HERD" launch -n 3 --per-node 2 --json-summary "$tmp/refused.json" -- true 2>/dev/null; rc=$?
[[ $rc == 125 ]] || fail "refused summary job exited $rc"
python3 - "$tmp/summary.json" "$tmp/refused.json" "$host" <<'PY' || fail "summaries: $(cat "$tmp"/summary.json "$tmp"/refused.json)"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["v"] == 1 and d["started"] is True and d["exit_status"] == 7 and d["restarts"] == 0, d
assert d["failure"].startswith("rank 1 on "), d
r = d["ranks"]
assert [x["rank"] for x in r] == [0, 1, 2] and all(x["host"] == sys.argv[3] for x in r), r
assert r[1]["state"] == "exited" and r[1]["exit_code"] == 7 and r[1]["signal"] is None, r
assert all(x["pid"] > 0 for x in r), r
# The others exited 0, or were stopped (SIGTERM) once rank 1 had failed.
for x in (r[0], r[2]):
    assert (x["state"], x["exit_code"], x["signal"]) in (("exited", 0, None), ("signaled", None, 15)), x
f = json.load(open(sys.argv[2]))
assert f["started"] is False and f["exit_status"] == 125 and f["ranks"] == [], f
assert "need 2 nodes; there are 1" in f["failure"], f
PY

# --- out-of-range values name the limit; an unknown % in --prefix is refused
for args in "-n 99999999999999999999|-n 99999999999999999999: expected a whole number from 1 to 1000000" \
	"--restarts 2000000|--restarts 2000000: expected a whole number from 0 to 1000000" \
	"--timeout 1e308|--timeout 1e308: expected a number of seconds from 0 to 2000000" \
	"--prefix %z|'%z' at column 1 is not %h (host), %r (rank) or %% (a %)" \
	"--prefix %|--prefix \"%\": '%' at column 1 is not %h" \
	"--prefix [%h]%|--prefix \"[%h]%\": '%' at column 5 is not %h"; do
	"$HERD" launch ${args%%|*} -n 1 -- true 2>"$tmp/err"; rc=$?
	[[ $rc == 125 ]] || fail "launch ${args%%|*} exited $rc"
	has "$(cat "$tmp/err")" "${args#*|}"
done

# --- a deadline too short for anything: the ranks fail, and no message
# says the store's address twice
HERD_TIMEOUT=0.001 timeout 60 "$HERD" launch -n 2 -- "$HERD" bench allreduce -b 8 -e 8 -c 1 \
	>"$tmp/out" 2>&1 && fail "HERD_TIMEOUT=0.001 succeeded"
grep -E "store ([0-9.]+:[0-9]+): store \1" "$tmp/out" && fail "the store's address twice: $(cat "$tmp/out")"
# ... and the deadline is named by the setting that made it: a store that
# never answers (a socket nobody accepts on), and ranks that never join
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True); time.sleep(60)' >"$tmp/port" &
silent=$!
for _ in $(seq 100); do [[ -s $tmp/port ]] && break; sleep 0.1; done
HERD_RANK=0 HERD_WORLD_SIZE=2 HERD_STORE=127.0.0.1:$(cat "$tmp/port") HERD_JOB_SECRET=s HERD_TIMEOUT=0.0001 \
	timeout 60 "$HERD" -e 'local c, msg, st = herd.comm() io.stderr:write(st, ": ", msg, "\n")' 2>"$tmp/err"
kill "$silent"
grep -q "^HERD_ETIMEDOUT: rank 0 of 2 (herd style): store 127.0.0.1:[0-9]*: .*; the deadline was HERD_TIMEOUT=0.0001 seconds$" "$tmp/err" \
	|| fail "a store that never answers, HERD_TIMEOUT=0.0001: $(cat "$tmp/err")"
HERD_TIMEOUT=0.0001 timeout 60 "$HERD" -e 'local srv = assert(herd.store.serve{})
	local s = assert(herd.store.connect(srv:address(), srv.secret))
	local c, msg, st = herd.comm{store = s, rank = 0, size = 2}
	io.stderr:write(st, ": ", msg, "\n")' 2>"$tmp/err"
grep -q "^HERD_ETIMEDOUT: joining the communicator timed out after .* rank 1 did not join; the deadline was HERD_TIMEOUT=0.0001 seconds$" "$tmp/err" \
	|| fail "a rank that never joins, HERD_TIMEOUT=0.0001: $(cat "$tmp/err")"

# --- torchrun's --nnodes with --nproc-per-node; srun's -N with -n
out=$("$HERD" launch --nnodes 1 --nproc-per-node 3 -- sh -c 'echo $HERD_WORLD_SIZE') || fail "--nnodes exited $?"
[[ $(grep -c "^\[$host:[0-2]\] 3$" <<<"$out") == 3 ]] || fail "--nnodes 1 --nproc-per-node 3: $out"
"$HERD" launch -N 2 -n 3 -- true 2>"$tmp/err"; rc=$?
[[ $rc == 125 ]] || fail "-N 2 on one node exited $rc"
has "$(cat "$tmp/err")" "3 ranks at 2 per node need 2 nodes; there are 1"

# --- a command named herd is this herd program, with herd not on PATH
out=$(PATH=/usr/bin:/bin "$HERD" launch -n 2 -- herd bench allreduce -b 8 -e 8 -c 1) \
	|| fail "herd bench under launch without herd on PATH exited $?: $out"
has "$out" "[$host:0] # herd bench allreduce: 2 ranks"

# --- -u: a process that is killed keeps the lines its C stdio wrote.
# grep reads "progress" from a FIFO and writes it, buffered into the
# rank's pipe unless line-buffered; the rank waits (3 s at most) until
# /proc says grep has written something, then kills it with SIGKILL.
# Without -u nothing is written and the line is lost; with -u it is there.
for u in "" -u; do
	rm -f "$tmp/fifo"
	timeout 30 "$HERD" launch $u -n 1 -- sh -c 'mkfifo "$0/fifo"; grep progress <"$0/fifo" & g=$!
		exec 3>"$0/fifo"; echo progress >&3; i=0
		while [ $i -lt 30 ] && [ "$(sed -n "s/^wchar: //p" /proc/$g/io)" = 0 ]; do
			sleep 0.1; i=$((i + 1)); done
		kill -9 $g; wait $g; exit 0' "$tmp" >"$tmp/out" 2>"$tmp/err"; rc=$?
	[[ $rc == 0 ]] || fail "launch $u of the killed grep exited $rc: $(cat "$tmp/err")"
	if [[ -z $u ]]; then
		grep -q progress "$tmp/out" && fail "without -u the buffered line came out (the test proves nothing)"
	else
		grep -qxF "[$host:0] progress" "$tmp/out" || fail "-u lost the line: $(cat "$tmp/out")"
	fi
done
# -u sets what a user can check
out=$(env -u LD_PRELOAD "$HERD" launch -u -n 1 -- sh -c 'echo "$_STDBUF_O $PYTHONUNBUFFERED $LD_PRELOAD $ASAN_OPTIONS"') \
	|| fail "-u env"
[[ $out =~ ^\[$host:0\]\ L\ 1\ /usr/libexec/coreutils/libstdbuf\.so\ (.*:)?verify_asan_link_order=0$ ]] \
	|| fail "-u environment: $out"

# --- kill -9 of one rank of a collective: its peers fail on its death and
# may be reaped first; the summary blames the killed rank all the same and
# the launch exits with its status (128 + 9), over shared memory and TCP,
# twice each.  The launcher is stopped while the peers exit, so that
# it finds every death at once, as a busy machine makes it do.
for transport in auto tcp; do
	for round in 1 2; do
		rm -f "$tmp/pid.victim"
		# nice: four ranks spinning on two cores must not starve other tests
		timeout 60 nice -n 10 "$HERD" launch -n 4 -- sh -c '[ "$HERD_RANK" = 2 ] && echo $$ >"$0/pid.victim"
			exec "$1" bench allreduce -b 4M -e 4M --iters 100003 --transport "$2"' \
			"$tmp" "$HERD" "$transport" >/dev/null 2>"$tmp/err" & launcher=$!
		for i in $(seq 100); do [[ -s $tmp/pid.victim ]] && break; sleep 0.1; done
		[[ -s $tmp/pid.victim ]] || fail "$transport: rank 2 did not start"
		sleep 1
		supervisor=$(ps -o pid= --ppid "$launcher" | head -1)   # herd (nice execs it), under timeout
		[[ -n $supervisor ]] || fail "$transport: no herd launch under timeout"
		kill -STOP $supervisor
		kill -9 "$(cat "$tmp/pid.victim")"
		sleep 2
		kill -CONT $supervisor
		wait "$launcher"; rc=$?; launcher=
		rm -f "$tmp/pid.victim"
		[[ $rc == 137 ]] || fail "$transport, round $round: exit $rc, want 137: $(cat "$tmp/err")"
		grep -qE "rank 2 on $host \(pid [0-9]+\) was killed by signal 9" "$tmp/err" \
			|| fail "$transport, round $round: the summary does not blame rank 2: $(cat "$tmp/err")"
	done
done

# --- a reader that never reads the job's output (a FIFO held open, never
# read): supervision goes on (rank 1's failure stops rank 0 at once), what
# does not fit the queue is dropped and said, and SIGTERM to the launcher
# waiting for its reader ends it with rank 1's status.
rm -f "$tmp/fifo" "$tmp/pid.r0"
mkfifo "$tmp/fifo"
exec 7<>"$tmp/fifo"
"$HERD" launch -n 2 -- sh -c 'if [ "$HERD_RANK" = 0 ]; then echo $$ >"$0/pid.r0"
	yes "a line of output nobody reads" | head -c 30000000; exec sleep 60; fi
	sleep 3; exit 3' "$tmp" >"$tmp/fifo" 2>"$tmp/err" & launcher=$!
for i in $(seq 100); do [[ -s $tmp/pid.r0 ]] && break; sleep 0.1; done
r0=$(cat "$tmp/pid.r0")
for i in $(seq 150); do kill -0 "$r0" 2>/dev/null || break; sleep 0.1; done
kill -0 "$r0" 2>/dev/null && fail "stalled reader: rank 0 still runs 15 s after rank 1 failed"
rm -f "$tmp/pid.r0"
kill -TERM "$launcher"
for i in $(seq 50); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
kill -0 "$launcher" 2>/dev/null && fail "stalled reader: SIGTERM did not end the launcher within 5 s"
wait "$launcher"; rc=$?; launcher=
exec 7<&-
[[ $rc == 3 ]] || fail "stalled reader: exit $rc, want rank 1's 3: $(cat "$tmp/err")"
grep -qE "^herd launch: [0-9]+ lines \([0-9]+ bytes\) of the ranks' output dropped: " "$tmp/err" \
	|| fail "stalled reader: nothing said of the dropped output: $(cat "$tmp/err")"
grep -q "rank 1 on $host (pid [0-9]*) exited with code 3" "$tmp/err" \
	|| fail "stalled reader: no failure summary: $(cat "$tmp/err")"

# --- a rank stopped with SIGSTOP: its peers time out on it; the summary
# names the stopped rank, and the launch exits as a shell says of a
# stopped job (128 + 19).
rm -f "$tmp/pid.victim"
HERD_TIMEOUT=3 timeout 60 nice -n 10 "$HERD" launch -n 4 --grace 1 -- \
	sh -c '[ "$HERD_RANK" = 1 ] && echo $$ >"$0/pid.victim"
	exec "$1" bench allreduce -b 1M -e 1M --iters 1000000' "$tmp" "$HERD" \
	>/dev/null 2>"$tmp/err" & launcher=$!
for i in $(seq 100); do [[ -s $tmp/pid.victim ]] && break; sleep 0.1; done
[[ -s $tmp/pid.victim ]] || fail "SIGSTOP: rank 1 did not start"
sleep 1
kill -STOP "$(cat "$tmp/pid.victim")"
wait "$launcher"; rc=$?; launcher=
rm -f "$tmp/pid.victim"
[[ $rc == 147 ]] || fail "SIGSTOP: exit $rc, want 147: $(cat "$tmp/err")"
grep -qE "failed: rank 1 on $host \(pid [0-9]+\) was stopped by signal 19 \(.*\) and did not answer; rank [023] said: .*(HERD_ETIMEDOUT|HERD_EPEER)" \
	"$tmp/err" || fail "SIGSTOP: the summary does not name rank 1: $(cat "$tmp/err")"

# A job on one host: its ranks listen on loopback only while they start.
out=$(HERD_LOG=debug timeout 30 "$HERD" launch -n 2 -- "$HERD" -e 'assert(herd.comm():barrier())' 2>&1) ||
	fail "a 2-rank barrier failed: $out"
[[ $(grep -cE 'listened on 127\.0\.0\.1:[0-9]+ during init$' <<<"$out") == 2 ]] ||
	fail "the ranks of a one-host job did not listen on loopback alone: $out"

echo "launch: ok"
