#!/usr/bin/env bash
# herd serve --slurm inside a real two-node Slurm cluster on this machine
# (tests/harness/slurm.sh): two replicas, one on each node of the
# allocation (an srun step each), their addresses from Slurm's NodeAddr
# (the node names do not resolve here), behind one front door; requests
# through it reach both; herd job stop ends the service, and its steps.
# Needs root, slurm-wlm, munge, HAProxy and wrk; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
command -v haproxy >/dev/null && command -v wrk >/dev/null || exit 77
cleanup() {
	bash tests/harness/slurm.sh stop "$tmp/slurm"
	rm -rf "$tmp"
}
trap cleanup EXIT
harness_start slurm Slurm
export SLURM_CONF=$tmp/slurm/slurm.conf
unset SLURM_JOB_ID SLURM_JOBID SLURM_JOB_NODELIST SLURM_NODELIST SLURM_TASKS_PER_NODE \
	SLURM_STEP_GPUS SLURM_JOB_GPUS CUDA_VISIBLE_DEVICES HERD_INVENTORY HERD_LAUNCH_ADDR
export HERD_PROGRAM=$HERD XDG_RUNTIME_DIR=$tmp/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
replica=$(dirname "$HERD")/example_replica
# Three free ports in a row: the front door's and the 2 replicas'.
port=$(free_ports 3)
rport=$((port + 1))

timeout 120 salloc -Q -N2 --ntasks-per-node=1 "$HERD" serve --slurm --replicas 2 --port "$port" \
	--replica-port "$rport" --health /health --grace 2 -- "$replica" --work-ms 1 \
	>"$tmp/out" 2>"$tmp/err" &
svc=$!
for ((k = 0; k < 300; k++)); do
	[[ $(grep -c ' ready ' "$tmp/err") -ge 2 ]] && break
	kill -0 "$svc" 2>/dev/null || break
	sleep 0.1
done
[[ $(grep -c ' ready ' "$tmp/err") -ge 2 ]] || fail "2 replicas not ready: $(cat "$tmp/err")"
id=$(sed -n 's/^herd serve: service \([^ ]*\) .*/\1/p' "$tmp/err")
wrk -t1 -c4 -d2s "http://127.0.0.1:$port/infer" >"$tmp/wrk" 2>&1 || fail "wrk: $(cat "$tmp/wrk")"
grep -qE 'Socket errors|Non-2xx' "$tmp/wrk" && fail "requests failed: $(cat "$tmp/wrk")"
st=$("$HERD" job status --json "$id")
python3 - "$st" <<'PY' || fail "replicas: $st"
import json, sys
d = json.loads(sys.argv[1])
assert sorted(r["host"] for r in d["replicas"]) == ["node1", "node2"], d["replicas"]
assert all(r["requests"] > 0 for r in d["replicas"]), d["replicas"]
PY
"$HERD" job stop "$id" >/dev/null || fail "herd job stop"
wait "$svc" || fail "salloc herd serve exited $?: $(cat "$tmp/err")"
has "$(cat "$tmp/err")" "herd serve: stopped"
echo ok
