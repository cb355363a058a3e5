#!/usr/bin/env bash
# herd launch's command line as people type it from habit: long options
# only in full (getopt_long's prefixes refused), torchrun's, mpirun's and
# srun's flags read with herd's meaning or refused naming herd's option,
# the job's time limit (--time, --timeout: status 124), the start deadline
# (--start-timeout), and SIGINT, SIGTERM and SIGHUP to herd launch (128 +
# the signal, a second SIGINT kills at once).  herd bench's -n is the
# number of ranks, as herd launch's.
source "$(dirname "$0")/../harness/common.sh" "$@"
launcher=
cleanup() {
	[[ -n $launcher ]] && kill -9 "$launcher" 2>/dev/null
	for f in "$tmp"/pid.*; do [[ -f $f ]] && kill -9 "$(cat "$f")" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
unset HERD_RANK RANK WORLD_SIZE HERD_STORE SLURM_PROCID OMPI_COMM_WORLD_RANK SLURM_JOB_ID
host=$(hostname); host=${host%%.*}

# refused ARGS... TEXT: herd launch ARGS -- touch started is a usage error
# (125, nothing started) whose message holds TEXT.
refused() {
	local text=${*: -1}
	rm -f "$tmp/started"
	timeout 30 "$HERD" launch "${@:1:$#-1}" -- touch "$tmp/started" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	[[ $rc == 125 ]] || fail "launch ${*:1:$#-1}: exit $rc, want 125: $(cat "$tmp/err")"
	grep -qF -- "herd launch: $text" "$tmp/err" || fail "launch ${*:1:$#-1}: $(cat "$tmp/err")"
	grep -qxF "Try 'herd launch --help' for more information." "$tmp/err" \
		|| fail "launch ${*:1:$#-1}: no hint: $(cat "$tmp/err")"
	[[ ! -e $tmp/started ]] || fail "launch ${*:1:$#-1} started a rank"
}

# ranks N ARGS...: herd launch ARGS -- sh -c 'echo $WORLD_SIZE' runs N ranks,
# each seeing WORLD_SIZE N.
ranks() {
	local n=$1 out
	shift
	out=$(timeout 60 "$HERD" launch "$@" -- sh -c 'echo "$WORLD_SIZE"' 2>"$tmp/err") \
		|| fail "launch $*: exit $?: $(cat "$tmp/err")"
	[[ $(grep -c "^\[$host:[0-9]*\] $n\$" <<<"$out") == "$n" ]] || fail "launch $*: $out"
}

# --- long options are never abbreviated: a prefix is refused, naming the
# options it begins; srun's --ntasks is the number of ranks, not a prefix
# of --ntasks-per-node
refused -n 1 --res 1 "unrecognized option '--res' (options are never abbreviated: --restarts?)"
refused -n 1 --ho x "unrecognized option '--ho' (options are never abbreviated: --hosts or --hostfile?)"
refused -n 1 --gpus-per 1 "unrecognized option '--gpus-per' (options are never abbreviated: --gpus-per-rank or --gpus-per-task?)"
refused -n 1 --bogus "unrecognized option '--bogus'"
refused -n 1 --slurm=yes "option '--slurm' takes no value"
ranks 3 --ntasks 3
ranks 2 --ntasks=2
refused -n 2 --np 3 "--np 3: the number of ranks is 2 already"
# the command's own options are its own, with or without "--"
out=$(timeout 60 "$HERD" launch -n 1 --no-prefix echo --res -np -x 2>&1) || fail "echo --res: $out"
[[ $out == "--res -np -x" ]] || fail "the command's options were read: $out"

# --- torchrun's forms: --nproc-per-node K alone is one node of K ranks,
# '_' spellings, --standalone, --nnodes, --no-python
ranks 2 --nproc-per-node=2
ranks 2 --nproc_per_node 2
ranks 3 --standalone --nproc-per-node 3
ranks 2 --nnodes 1 --nproc-per-node 2
ranks 2 --nproc-per-node 2 --no-python
ranks 2 --ntasks-per-node 2
# an elastic range: srun's MIN-MAX and torchrun's MIN:MAX; MIN equal to
# MAX is that many nodes; the world size follows the nodes, so no -n
ranks 2 --nnodes 1:1 --nproc-per-node 2
refused --hosts h1,h2 --nodes 2-4 -n 4 "--nodes 2-4 with -n 4: an elastic job's world size follows its nodes (--per-node K times the nodes in); give --per-node instead of -n"
refused --hosts h1,h2 --nnodes 3:2 "--nnodes 3:2: expected M, or MIN-MAX (MIN:MAX) with 1 <= MIN <= MAX"
refused --hosts h1,h2 -N 0-2 "-N 0-2: expected M, or MIN-MAX"
refused --nodes 1-2 "--nodes 1-2: an elastic job runs on --hosts, --hostfile or --slurm"
refused --hosts h1,h2 --nodes 1-2 -N 2 "--nodes 1-2 and a fixed number of nodes (-N, --nodes, --nnodes, --standalone): give one"
refused --hosts h1,h2 --nodes 1-2 --monitor-period 100 "--monitor-period needs --monitor or --monitor-out"
refused -n 1 --rdzv-endpoint=node01:29400 "--rdzv-endpoint is torchrun's rendezvous; herd launch hosts the job's rendezvous itself: give the nodes with --hosts, --hostfile or --slurm"
refused -n 1 --rdzv_backend c10d "--rdzv_backend is torchrun's rendezvous"
refused -n 1 --master-addr node01 "--master-addr is torchrun's; herd launch sets MASTER_ADDR (the first node) and MASTER_PORT itself, and an exported one or --env MASTER_ADDR=HOST wins"
refused -n 1 --master_port 29500 "--master_port is torchrun's; herd launch sets MASTER_ADDR and MASTER_PORT"
refused -n 1 --node-rank 0 "--node-rank is torchrun's, for a command run on each node; herd launch starts every node itself"
refused -n 1 -m "-m is torchrun's module flag; herd launch runs CMD as given: herd launch ... python -m MODULE"

# --- mpirun's: -np (not -n p), -x NAME=VALUE and -x NAME (this process's
# value), --tag-output, -hostfile as --hostfile; -H, --map-by refused
ranks 2 -np 2
ranks 2 -n 2 --tag-output
out=$(HERD_FLAGS_TEST=from-here timeout 60 "$HERD" launch -np 2 -x GREETING=hi -x HERD_FLAGS_TEST \
	-- sh -c 'echo "$GREETING $HERD_FLAGS_TEST"' 2>"$tmp/err") || fail "-x: exit $?: $(cat "$tmp/err")"
[[ $(sort <<<"$out") == "[$host:0] hi from-here"$'\n'"[$host:1] hi from-here" ]] || fail "-x: $out"
out=$(HERD_FLAGS_TEST= timeout 60 "$HERD" launch -n 1 --env HERD_FLAGS_TEST --no-prefix \
	-- sh -c 'echo "${HERD_FLAGS_TEST-unset}."' 2>&1) || fail "--env NAME (empty): $out"
[[ $out == "." ]] || fail "--env NAME of an empty variable: $out"
unset HERD_FLAGS_NOT_SET
refused -n 1 -x HERD_FLAGS_NOT_SET "-x HERD_FLAGS_NOT_SET: HERD_FLAGS_NOT_SET is not set here; give HERD_FLAGS_NOT_SET=VALUE"
refused -n 1 --env =x "--env =x: expected NAME=VALUE"
# -hostfile is read as --hostfile: the same words for a file that is not there
timeout 30 "$HERD" launch -n 1 --hostfile "$tmp/none" -- true 2>"$tmp/want"
timeout 30 "$HERD" launch -np 1 -hostfile "$tmp/none" -- true 2>"$tmp/got"; rc=$?
[[ $rc == 125 && -s $tmp/want ]] && cmp -s "$tmp/want" "$tmp/got" \
	|| fail "-hostfile is not --hostfile: $rc: $(cat "$tmp/got") / $(cat "$tmp/want")"
refused -n 1 -H node01,node02 "-H is mpirun's host list; herd launch takes --hosts EXPR (a hostlist: node[01-04], or a,b,c) or --hostfile FILE (host slots=N lines)"
refused -n 1 --host node01 "--host is mpirun's host list; herd launch takes --hosts EXPR"
refused -n 1 --map-by ppr:1:node "--map-by is mpirun's placement; herd launch fills each node's slots in rank order, --per-node K at a time, and with --gpus-per-rank G binds each rank to its GPUs' NUMA node"

# --- srun's: -n, -N, --ntasks, -t/--time; -c, --gpus, -p refused
ranks 2 -n 2 -N 1
ranks 2 --nodes 1 --ntasks 2
refused -n 2 -c 4 "-c is srun's CPUs per task; herd launch has no CPU count per rank: with --gpus-per-rank G each rank is bound to its GPUs' NUMA node"
refused -n 2 --cpus-per-task=4 "--cpus-per-task is srun's CPUs per task"
refused -n 2 --gpus 2 "--gpus is srun's GPU count for the whole job; herd launch takes --gpus-per-rank G"
refused -n 2 --gpus-per-node 2 "--gpus-per-node is srun's GPUs per node; herd launch takes --gpus-per-rank G"
refused -n 2 -p gpu "-p is srun's partition; run herd launch --slurm inside an allocation that has it"
refused -n 2 --mpi=pmix "--mpi is srun's MPI plugin; herd launch needs none"
refused -n 2 --export ALL "--export is srun's environment list; herd launch takes --env NAME=VALUE"

# --- the job's time limit: srun's forms and mpirun's seconds, as the
# JSON summary records them; both at once, or a malformed one, refused
for t in "--time 90|5400" "--time 1:30|90" "--time 1:00:00|3600" "--time 1-2|93600" \
	"--time 1-2:30|95400" "--time 2-03:04:05|183845" "-t 5|300" "--timeout 0.5|0.5" \
	"--time UNLIMITED|None" "--time 0|None" "--timeout 0|None"; do
	args=${t%%|*} want=${t#*|}
	timeout 60 "$HERD" launch -n 1 $args --json-summary "$tmp/limit.json" -- true 2>"$tmp/err" \
		|| fail "launch $args: exit $?: $(cat "$tmp/err")"
	python3 -c 'import json,sys; f = json.load(open(sys.argv[1])); v = f["time_limit_s"]
assert str(v if v is None or v != int(v) else int(v)) == sys.argv[2] and f["state"] == "succeeded", f' \
		"$tmp/limit.json" "$want" || fail "launch $args: $(cat "$tmp/limit.json")"
done
refused -n 1 --time 1:2:3:4 "--time 1:2:3:4: expected srun's minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS"
refused -n 1 --time 1:60 "--time 1:60: expected srun's minutes"
refused -n 1 --time soon "--time soon: expected srun's minutes"
refused -n 1 --time 1 --timeout 30 "--time and --timeout both set the job's time limit; give one"
refused -n 1 --timeout -1 "--timeout -1: expected a number of seconds"

# ranks that run past the limit are stopped: status 124 and the summary
start=$SECONDS
timeout 60 "$HERD" launch -n 2 --time 0:01 --restarts 3 --json-summary "$tmp/tl.json" \
	-- sh -c 'echo run >>"$0/runs"; exec sleep 30' "$tmp" >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 124 ]] || fail "--time 0:01 on ranks of 30 s: exit $rc, want 124: $(cat "$tmp/err")"
(( SECONDS - start < 30 )) || fail "--time 0:01: the ranks ran for $((SECONDS - start)) s"
grep -qE "^herd launch: job [0-9a-f-]+: time limit of 0:01 reached; ranks 0-1 stopped$" "$tmp/err" \
	|| fail "--time 0:01: $(cat "$tmp/err")"
[[ $(wc -l <"$tmp/runs") == 2 ]] || fail "--time 0:01 restarted the job: $(cat "$tmp/runs")"
python3 -c 'import json,sys; f = json.load(open(sys.argv[1]))
assert f["exit_status"] == 124 and f["state"] == "time_limit" and f["time_limit_s"] == 1, f
assert f["failure"] == "time limit of 0:01 reached; ranks 0-1 stopped" and f["restarts"] == 0, f' \
	"$tmp/tl.json" || fail "--time 0:01 summary: $(cat "$tmp/tl.json")"
# mpirun's --timeout, in seconds, on ranks that ignore SIGTERM: SIGKILL
# after --grace
timeout 60 "$HERD" launch -n 1 --timeout 1 --grace 1 -- sh -c 'trap "" TERM; while :; do sleep 1; done' \
	>"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 124 ]] || fail "--timeout 1: exit $rc, want 124: $(cat "$tmp/err")"
grep -qE "^herd launch: job [0-9a-f-]+: time limit of 0:01 reached; rank 0 stopped$" "$tmp/err" \
	|| fail "--timeout 1: $(cat "$tmp/err")"
# a job that ends before its limit is not touched by it
timeout 60 "$HERD" launch -n 2 --time 10 -- sh -c 'exit 3' >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 3 ]] || fail "--time 10 on ranks that exit 3: exit $rc: $(cat "$tmp/err")"
grep -q "time limit" "$tmp/err" && fail "--time 10, job over before it: $(cat "$tmp/err")"
out=$(timeout 60 "$HERD" launch -n 2 --timeout 60 --start-timeout 30 --no-prefix -- echo ok 2>&1) \
	|| fail "--timeout 60 on ranks that exit 0: exit $?: $out"
[[ $out == $'ok\nok' ]] || fail "--timeout 60 on ranks that exit 0: $out"

# --- signals to herd launch: the job is interrupted, 128 + the signal,
# the summary says so; the first one says what a second one does
# start_job ARGS...: herd launch -n 2 ARGS -- CMD in the background, once
# both ranks wrote their pid files.
start_job() {
	rm -f "$tmp"/pid.*
	"$HERD" launch -n 2 "$@" >"$tmp/out" 2>"$tmp/err" &
	launcher=$!
	for _ in $(seq 400); do [[ -s $tmp/pid.0 && -s $tmp/pid.1 ]] && break; sleep 0.1; done
	[[ -s $tmp/pid.0 && -s $tmp/pid.1 ]] || fail "launch $*: the ranks did not start: $(cat "$tmp/err")"
}
# wait_job SECS: the background herd launch's exit status into rc; fails
# when it still runs after SECS seconds.
wait_job() {
	for _ in $(seq $(($1 * 10))); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
	kill -0 "$launcher" 2>/dev/null && fail "herd launch still running $1 s after the signal: $(cat "$tmp/err")"
	wait "$launcher"; rc=$?
	launcher=
}
for sig in INT TERM HUP; do
	start_job --json-summary "$tmp/sig.json" -- sh -c 'echo $$ >"$0/pid.$RANK"; exec sleep 60' "$tmp"
	kill -$sig "$launcher"
	wait_job 20
	want=$((128 + $(kill -l $sig)))
	[[ $rc == "$want" ]] || fail "SIG$sig: exit $rc, want $want: $(cat "$tmp/err")"
	grep -qE "^herd launch: SIG$sig: stopping job [0-9a-f-]+ \(one more within 3 s kills its ranks at once\)$" \
		"$tmp/err" || fail "SIG$sig: no notice: $(cat "$tmp/err")"
	grep -qE "^herd launch: job [0-9a-f-]+: interrupted by SIG$sig; ranks 0-1 stopped$" "$tmp/err" \
		|| fail "SIG$sig: no summary: $(cat "$tmp/err")"
	grep -q "failed" "$tmp/err" && fail "SIG$sig is told as a failure: $(cat "$tmp/err")"
	python3 -c 'import json,sys; f = json.load(open(sys.argv[1]))
assert f["state"] == "interrupted" and f["exit_status"] == int(sys.argv[2]), f' "$tmp/sig.json" "$want" \
		|| fail "SIG$sig summary: $(cat "$tmp/sig.json")"
	for r in 0 1; do kill -0 "$(cat "$tmp/pid.$r")" 2>/dev/null && fail "SIG$sig: rank $r still runs"; done
done
# ranks that ignore SIGINT and SIGTERM, with a grace of 10 minutes: a
# second SIGINT, sent as soon as the first is told of, kills them at once
# (two sent back to back could merge into one delivery)
start_job --grace 600 -- sh -c 'trap "" INT TERM; echo $$ >"$0/pid.$RANK"; while :; do sleep 1; done' "$tmp"
kill -INT "$launcher"
for _ in $(seq 200); do grep -q "one more within" "$tmp/err" && break; sleep 0.02; done
kill -INT "$launcher"
wait_job 60
[[ $rc == 130 ]] || fail "two SIGINTs: exit $rc, want 130: $(cat "$tmp/err")"
grep -qE "^herd launch: SIGINT again: killing the ranks of job [0-9a-f-]+$" "$tmp/err" \
	|| fail "two SIGINTs: $(cat "$tmp/err")"
grep -qE "^herd launch: job [0-9a-f-]+: interrupted by SIGINT; ranks 0-1 stopped$" "$tmp/err" \
	|| fail "two SIGINTs: no summary: $(cat "$tmp/err")"
for r in 0 1; do kill -0 "$(cat "$tmp/pid.$r")" 2>/dev/null && fail "two SIGINTs: rank $r still runs"; done
# ... and one SIGINT ends them with SIGKILL after --grace
start_job --grace 1 -- sh -c 'trap "" INT TERM; echo $$ >"$0/pid.$RANK"; while :; do sleep 1; done' "$tmp"
kill -INT "$launcher"
wait_job 60
[[ $rc == 130 ]] || fail "SIGINT on ranks that ignore it: exit $rc, want 130: $(cat "$tmp/err")"
rm -f "$tmp"/pid.*

# --- a Lua script's Ctrl-C interrupts the jobs it launched: the ranks end,
# and the script reports "interrupted!"
FLAGS_DIR=$tmp "$HERD" -e 'local j <close> = assert(herd.launch{ cmd = { "sh", "-c",
	"echo $$ >\"$FLAGS_DIR/pid.$RANK\"; exec sleep 60" }, n = 2 }); j:wait()' \
	>"$tmp/out" 2>"$tmp/err" &
launcher=$!
for _ in $(seq 400); do [[ -s $tmp/pid.0 && -s $tmp/pid.1 ]] && break; sleep 0.1; done
[[ -s $tmp/pid.0 && -s $tmp/pid.1 ]] || fail "Lua herd.launch: the ranks did not start: $(cat "$tmp/err")"
kill -INT "$launcher"
wait_job 30
[[ $rc == 1 ]] || fail "Lua herd.launch, Ctrl-C: exit $rc: $(cat "$tmp/err")"
grep -q "interrupted!" "$tmp/err" || fail "Lua herd.launch, Ctrl-C: $(cat "$tmp/err")"
for r in 0 1; do kill -0 "$(cat "$tmp/pid.$r")" 2>/dev/null && fail "Lua Ctrl-C: rank $r still runs"; done
rm -f "$tmp"/pid.*

# --- herd bench: -n is the number of ranks (-np too), iterations are
# --iters, never abbreviated; under a launcher -n must be its count
out=$(timeout 120 "$HERD" bench allreduce -b 8 -e 8 --iters 1 -w 0 -n 2 2>&1) || fail "bench -n 2: $out"
grep -q "^# herd bench allreduce: 2 ranks" <<<"$out" || fail "bench -n 2: $out"
out=$(timeout 120 "$HERD" bench allreduce -b 8 -e 8 --iters 1 -w 0 -np 3 2>&1) || fail "bench -np 3: $out"
grep -q "^# herd bench allreduce: 3 ranks" <<<"$out" || fail "bench -np 3: $out"
for t in "-n 2 --np 3|-n/--np 3: the number of ranks is 2 already (timed calls per size: --iters)" \
	"--iter 1|unrecognized option '--iter' (options are never abbreviated: --iters?)" \
	"--warmup 1|unrecognized option '--warmup' (options are never abbreviated: --warmup_iters?)" \
	"-n 0|bad value '0' for -n"; do
	timeout 60 "$HERD" bench allreduce -b 8 -e 8 ${t%%|*} >"$tmp/out" 2>"$tmp/err"; rc=$?
	[[ $rc == 2 ]] || fail "bench ${t%%|*}: exit $rc: $(cat "$tmp/err")"
	grep -qxF "herd bench: ${t#*|}" "$tmp/err" || fail "bench ${t%%|*}: $(cat "$tmp/err")"
done
out=$(timeout 120 "$HERD" launch -n 2 -- "$HERD" bench allreduce -b 8 -e 8 --iters 1 -w 0 -n 2 2>&1) \
	|| fail "bench -n 2 under herd launch -n 2: $out"
grep -q "# herd bench allreduce: 2 ranks" <<<"$out" || fail "bench -n 2 under herd launch -n 2: $out"
timeout 120 "$HERD" launch -n 2 -- "$HERD" bench allreduce -b 8 -e 8 -n 20 >"$tmp/out" 2>&1; rc=$?
[[ $rc == 2 ]] || fail "bench -n 20 under herd launch -n 2: exit $rc: $(cat "$tmp/out")"
grep -qF "herd bench: -n 20: this process is a rank that herd launch started (HERD_WORLD_SIZE=2); -n and --np start ranks only where no launcher did (timed calls per size: --iters)" \
	"$tmp/out" || fail "bench -n 20 under herd launch -n 2: $(cat "$tmp/out")"
echo "launch_flags: ok"
