#!/usr/bin/env bash
# herd launch --monitor of ranks on other nodes (the sshd harness's
# loopback hosts): a watch (herd probe --watch over ssh) streams those
# nodes' samples, and each rank's GPUs are those on which NVML there lists
# a process of the job with its rank (the NVML stand-in, through a herd
# program that loads it on the nodes); their CPU use is not known, and the
# summary says so.
# Needs root and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
trap sshd_cleanup EXIT
sshd_start
unset HERD_RANK RANK WORLD_SIZE HERD_STORE
export HERD_ACCT_LOG=$tmp/acct.jsonl
mock=$(dirname "$(dirname "$HERD")")/tests/mock
[[ -f $mock/libnvidia-ml.so.1 ]] || { echo "monitor_ssh: SKIPPED (no NVML stand-in built)"; exit 77; }
: >"$tmp/nvml.state"
cat >"$tmp/herd-nodes" <<EOF
#!/bin/sh
export LD_LIBRARY_PATH=$mock HERD_NVML_MOCK_STATE=$tmp/nvml.state
exec $HERD "\$@"
EOF
chmod +x "$tmp/herd-nodes"
export HERD_PROGRAM=$tmp/herd-nodes

# Rank R puts a process of its own on GPU R at 25% busy.
timeout 120 "$HERD" launch --hosts '127.0.0.[2-3]' -n 2 --monitor --monitor-period 200 \
	--monitor-out "$tmp/rep" -- sh -c 'echo "gpu $HERD_RANK util 25" >>"$0"
echo "proc $HERD_RANK $$ 1073741824" >>"$0"; sleep 3' "$tmp/nvml.state" >"$tmp/out" 2>"$tmp/err" \
	|| fail "the job exited $?: $(cat "$tmp/err")"
err=$(cat "$tmp/err")
grep -qE "^ +0 +127\.0\.0\.2 +0 +[0-9]+% .* +- +-$" <<<"$err" || fail "rank 0: $err"
grep -qE "^ +1 +127\.0\.0\.3 +1 +[0-9]+% .* +- +-$" <<<"$err" || fail "rank 1: $err"
has "$err" "ranks 0-1 on other nodes: GPUs as NVML there lists this job's processes; CPU use not sampled"
has "$err" "warning: GPU 0 (rank 0) sat under 50% busy for 100% of the run"
has "$err" "warning: GPU 1 (rank 1) sat under 50% busy for 100% of the run"
python3 - "$tmp/rep/summary.json" <<'PY' || fail "summary: $err"
import json, sys
s = json.load(open(sys.argv[1]))
r0, r1 = s["ranks"]
assert r0["host"] == "127.0.0.2" and [g["index"] for g in r0["gpus"]] == [0], r0
assert r1["host"] == "127.0.0.3" and [g["index"] for g in r1["gpus"]] == [1], r1
assert r0["cpu_mean_pct"] is None and r0["gpu_util_p95_pct"] == 25, r0
assert s["gpus_held"] == 2 and s["gpu_hours_used"] > 0, s
PY

echo "monitor_ssh: ok"
