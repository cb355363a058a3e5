#!/usr/bin/env bash
# herd launch --slurm inside a real two-node Slurm cluster on this machine
# (tests/harness/slurm.sh: munged, slurmctld, slurmd node1 and node2, two
# device-file "GPUs" per node): ranks placed on the allocation's nodes and
# started through one srun step whose `herd exec`s connect back, exit codes,
# GPUs planned only among those Slurm granted the step (another job holds
# GPU 0 of each node, so Slurm grants GPU 1 and herd must pick GPU 1 of the
# fixture inventory; a job with GPUs per task still gives the step every
# GPU of the node), a node on the excluded nodes' list given no rank, an
# elastic job going on on node1 when Slurm drains node2 and its rank
# fails, and the failures: outside an allocation, and a herd
# program missing on the nodes (srun's words quoted).
# Needs root, slurm-wlm and munge; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
holder=
cleanup() {
	[[ -n $holder ]] && scancel "$holder" 2>/dev/null
	bash tests/harness/slurm.sh stop "$tmp/slurm"
	rm -rf "$tmp"
}
trap cleanup EXIT
harness_start slurm Slurm
export SLURM_CONF=$tmp/slurm/slurm.conf
unset SLURM_JOB_ID SLURM_JOBID SLURM_JOB_NODELIST SLURM_NODELIST SLURM_TASKS_PER_NODE \
	SLURM_STEP_GPUS SLURM_JOB_GPUS CUDA_VISIBLE_DEVICES HERD_INVENTORY HERD_LAUNCH_ADDR
# Both nodes are this machine: each gets a lease directory of its own, as
# separate machines would have.
cat >"$tmp/herd-node" <<EOF
#!/bin/sh
export HERD_LEASE_DIR=$tmp/leases/\$SLURMD_NODENAME
mkdir -p "\$HERD_LEASE_DIR"
exec "$HERD" "\$@"
EOF
chmod +x "$tmp/herd-node"
export HERD_PROGRAM=$tmp/herd-node

# --- 4 ranks on the 2 nodes of the allocation, 2 each, in one srun step
out=$(timeout 120 salloc -Q -N2 --ntasks-per-node=2 "$HERD" launch --slurm -n 4 -- \
	sh -c 'echo $HERD_RANK $HERD_NODE_RANK $HERD_LOCAL_RANK $HERD_NNODES $SLURMD_NODENAME $SLURM_STEP_NUM_TASKS') \
	|| fail "launch --slurm exited $?: $out"
[[ $(sort <<<"$out") == "[node1:0] 0 0 0 2 node1 2
[node1:1] 1 0 1 2 node1 2
[node2:2] 2 1 0 2 node2 2
[node2:3] 3 1 1 2 node2 2" ]] || fail "ranks on the allocation:
$out"

# --- node2 on the excluded nodes' list: both ranks on node1, in a step
# of node1 alone (srun --nodelist=node1), and the launcher says why
export HERD_EXCLUDE_FILE=$tmp/exclude
"$HERD" exclude add --reason "drained for repair" node2 >/dev/null || fail "herd exclude add"
out=$(timeout 120 salloc -Q -N2 --ntasks-per-node=2 "$HERD" launch --slurm -n 2 -- \
	sh -c 'echo $SLURMD_NODENAME $SLURM_STEP_NUM_NODES' 2>"$tmp/err") \
	|| fail "launch --slurm with node2 excluded exited $?: $out $(cat "$tmp/err")"
[[ $(sort <<<"$out") == "[node1:0] node1 1
[node1:1] node1 1" ]] || fail "ranks with node2 excluded: $out"
has "$(cat "$tmp/err")" "nodes left out of the job, as excluded: node2 (drained for repair)"
"$HERD" exclude rm node2 >/dev/null || fail "herd exclude rm"
unset HERD_EXCLUDE_FILE

# --- a failing rank's exit code comes back through salloc
timeout 120 salloc -Q -N2 --ntasks-per-node=1 "$HERD" launch --slurm -n 2 -- \
	sh -c 'exit $((HERD_RANK == 1 ? 5 : 0))' >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 5 ]] || fail "rank 1 exits 5: salloc exited $rc: $(cat "$tmp/err")"
has "$(cat "$tmp/err")" "node2"

# --- GPUs: another job holds GPU 0 of both nodes, so this one is granted
# GPU 1 (SLURM_STEP_GPUS=1), and the ranks get GPU 1 of the inventory
# even though GPU 0 is free as far as herd's own leases know.
holder=$(sbatch --parsable -N2 --gpus-per-node=1 -o /dev/null --wrap 'sleep 100') \
	|| fail "sbatch of the GPU holder failed"
for _ in $(seq 100); do
	[[ $(squeue -h -j "$holder" -o %t) == R ]] && break
	sleep 0.2
done
[[ $(squeue -h -j "$holder" -o %t) == R ]] || fail "the GPU holder job is not running"
export HERD_INVENTORY=$PWD/tests/fixtures/inventory/dgx-h100.json
gpu1=GPU-da60fb1c-eb7a-4995-9588-532d4242aadb
out=$(timeout 120 salloc -Q -N2 --ntasks-per-node=1 --gpus-per-node=1 "$HERD" launch --slurm \
	-n 2 --gpus-per-rank 1 -- sh -c 'echo $SLURM_STEP_GPUS $CUDA_VISIBLE_DEVICES') \
	|| fail "launch --slurm --gpus-per-rank 1 exited $?: $out"
[[ $(sort <<<"$out") == "[node1:0] 1 $gpu1
[node2:1] 1 $gpu1" ]] || fail "GPUs granted by Slurm:
$out"
# Two GPUs per rank do not fit in the one Slurm granted.
timeout 120 salloc -Q -N2 --ntasks-per-node=1 --gpus-per-node=1 "$HERD" launch --slurm \
	-n 2 --gpus-per-rank 2 -- true >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc != 0 ]] || fail "2 GPUs per rank with 1 granted: exit 0"
has "$(cat "$tmp/err")" "GPU0 not granted"
scancel "$holder"
holder=

# --- a job with GPUs per task: the one-task-per-node step still gets every
# GPU of the job on its node, so two ranks per node get GPU 0 and GPU 1.
gpu0=GPU-79c8c292-6b94-45b5-b498-82321e35049e
out=$(timeout 120 salloc -Q -N2 --ntasks-per-node=2 --gpus-per-task=1 "$HERD" launch --slurm \
	-n 4 --gpus-per-rank 1 -- sh -c 'echo $SLURM_STEP_GPUS $CUDA_VISIBLE_DEVICES') \
	|| fail "launch --slurm in a --gpus-per-task job exited $?: $out"
[[ $(sort <<<"$out") == "[node1:0] 0,1 $gpu0
[node1:1] 0,1 $gpu1
[node2:2] 0,1 $gpu0
[node2:3] 0,1 $gpu1" ]] || fail "GPUs of a --gpus-per-task job:
$out"
unset HERD_INVENTORY

# --- an elastic job (--nodes 1-2), one rank per node: node2 is drained
# while the job runs, then its rank fails; the launcher asks Slurm, which
# has node2 draining, excludes it with Slurm's reason and restarts on
# node1 alone, inside the same allocation
export HERD_EXCLUDE_FILE=$tmp/exclude-elastic
rank='if [ "$HERD_RESTART_COUNT" = 0 ]; then
	if [ "$HERD_NODE_RANK" = 1 ]; then
		touch "$T/up"
		for i in $(seq 600); do [ -e "$T/drained" ] && exit 3; sleep 0.1; done
	fi
	sleep 60
fi
echo "rank $HERD_RANK of $HERD_WORLD_SIZE on $SLURMD_NODENAME, restart $HERD_RESTART_COUNT"'
T=$tmp timeout 120 salloc -Q -N2 --ntasks-per-node=1 "$HERD" launch --slurm --nodes 1-2 --restarts 1 \
	--env T -- sh -c "$rank" >"$tmp/out" 2>"$tmp/err" &
job=$!
for ((k = 0; k < 600; k++)); do [[ -e $tmp/up ]] && break; sleep 0.1; done
[[ -e $tmp/up ]] || fail "the elastic job's rank on node2 did not start: $(cat "$tmp/out" "$tmp/err")"
scontrol update NodeName=node2 State=DRAIN Reason="fan failure" || fail "scontrol could not drain node2"
touch "$tmp/drained"
wait $job || fail "the elastic job did not go on on node1: $(cat "$tmp/out" "$tmp/err")"
scontrol update NodeName=node2 State=RESUME || fail "scontrol could not resume node2"
has "$(cat "$tmp/err")" "node node2 excluded: Slurm has it draining: fan failure (the first run)"
has "$(cat "$tmp/err")" "nodes now node1 (1 of 1-2; 1 ranks)"
[[ $(cat "$tmp/out") == "[node1:0] rank 0 of 1 on node1, restart 1" ]] \
	|| fail "the restart on node1: $(cat "$tmp/out")"
# Slurm, not herd's list, says when node2 is back in service.
grep -q "^node2	" "$HERD_EXCLUDE_FILE" 2>/dev/null && fail "node2 is on herd's excluded nodes' list"
unset HERD_EXCLUDE_FILE

# --- outside an allocation: refused, with what to do
"$HERD" launch --slurm -n 2 -- true >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc != 0 && ! -s $tmp/out ]] || fail "outside an allocation: exit $rc"
has "$(cat "$tmp/err")" "not inside a Slurm allocation (SLURM_JOB_ID is not set)"

# --- no herd program on the nodes: srun's complaint is quoted
HERD_PROGRAM=/nonexistent/bin/herd timeout 120 salloc -Q -N2 "$HERD" launch --slurm -n 2 -- true \
	>"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc != 0 ]] || fail "missing herd program: exit 0"
has "$(cat "$tmp/err")" "srun ended before node[1-2] connected back"
has "$(cat "$tmp/err")" "/nonexistent/bin/herd"

# --- nodes that never connect back (their herd ignores SIGTERM and
# waits): the start deadline's error comes within the deadline and a
# second (SIGTERM to srun at the deadline, SIGKILL half a second later),
# measured inside the allocation; the half second more is for a loaded
# machine, far from the 1 s of srun's words and 3 s for srun that were
# waited for before.
printf '#!/bin/sh\ntrap "" TERM\nexec sleep 60\n' >"$tmp/herd-silent"
chmod +x "$tmp/herd-silent"
HERD_PROGRAM=$tmp/herd-silent timeout 120 salloc -Q -N2 sh -c 't0=$(date +%s%N)
	"$0" launch --slurm -n 2 --start-timeout 3 -- true; rc=$?
	echo "rc=$rc ms=$(( ($(date +%s%N) - t0) / 1000000 ))"' "$HERD" >"$tmp/out" 2>"$tmp/err"
grep -qx "rc=125 ms=[0-9]*" "$tmp/out" || fail "nodes that never connect back: $(cat "$tmp/out" "$tmp/err")"
ms=$(sed -n 's/^rc=125 ms=//p' "$tmp/out")
(( ms < 3000 + 1500 )) || fail "nodes that never connect back: the error came after $ms ms: $(cat "$tmp/err")"
has "$(cat "$tmp/err")" "did not connect back within the start timeout"
echo "ok"
