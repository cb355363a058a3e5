#!/usr/bin/env bash
# herd jobs and herd job status|stop: a running herd launch answers on its
# control socket.  A job of two ranks is listed (its state, ranks, nodes,
# command), its status names each rank's host, pid and state, and herd job
# stop ends it as Ctrl-C would (the launcher exits 130), after which it is
# no longer listed.  A launcher killed with SIGKILL leaves a socket nobody
# answers on: herd jobs removes it and lists nothing.  Usage errors.
# XDG_RUNTIME_DIR is the test's own, so that other jobs of this user do
# not show.
source "$(dirname "$0")/../harness/common.sh" "$@"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
export XDG_RUNTIME_DIR=$tmp/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
host=$(hostname -s)

# first_id: the id of the first job herd jobs lists, waited for (at most 10 s).
first_id() {
	local id=
	for ((k = 0; k < 100; k++)); do
		id=$("$HERD" jobs --json | python3 -c 'import json,sys; a=json.load(sys.stdin); print(a[0]["id"] if a else "")')
		[[ -n $id ]] && break
		sleep 0.1
	done
	echo "$id"
}

# listed ID: herd jobs' row of job ID, waited for (at most 10 s).
listed() {
	local row=
	for ((k = 0; k < 100; k++)); do
		row=$("$HERD" jobs | grep "^$1 ") && break
		sleep 0.1
	done
	echo "$row"
}

out=$("$HERD" jobs) || fail "herd jobs with no job: exit $?: $out"
[[ $out == "ID"*"STATE"*"COMMAND" ]] || fail "herd jobs with no job: $out"

# --- a job of two ranks, listed, its status, stopped
: >"$tmp/err"
timeout 60 "$HERD" launch -n 2 -- sleep 30 >/dev/null 2>"$tmp/err" &
job=$!
pids+=("$job")
id=$(first_id)
[[ -n $id ]] || fail "no job listed: $("$HERD" jobs 2>&1); $(cat "$tmp/err")"
row=$(listed "$id")
grep -qE "^$id +(starting|running) +2 +1 +0 +0:00:[0-9]{2}  sleep 30$" <<<"$row" \
	|| fail "the job's row: $row"
for ((k = 0; k < 100; k++)); do
	status=$("$HERD" job status "$id") || fail "herd job status $id: exit $?: $status"
	grep -q "^job $id: running" <<<"$status" && break
	sleep 0.1
done
has "$status" "job $id: running, 2 ranks on 1 node ($host), 0 restarts, up 0:00:"
has "$status" "command: sleep 30"
grep -qE "^  rank 0 on $host, pid [0-9]+: running$" <<<"$status" || fail "rank 0: $status"
grep -qE "^  rank 1 on $host, pid [0-9]+: running$" <<<"$status" || fail "rank 1: $status"
"$HERD" job status --json "$id" >"$tmp/json" || fail "herd job status --json: exit $?"
python3 - "$tmp/json" "$id" <<'PY' || fail "herd job status --json: $(cat "$tmp/json")"
import json, os, sys
o = json.load(open(sys.argv[1]))
assert o["id"] == sys.argv[2] and o["state"] == "running" and o["ranks"] == 2, o
assert o["nodes"] == 1 and o["restarts"] == 0 and o["command"] == "sleep 30", o
assert o["pid"] > 0 and o["age"] >= 0 and o["started"] > 1.7e9, o
assert [r["rank"] for r in o["rank_states"]] == [0, 1], o
for r in o["rank_states"]:
    assert r["state"] == "running" and r["pid"] > 0, r
    os.kill(r["pid"], 0)
PY
echo "listed: $row"
t0=$(date +%s%N)
out=$("$HERD" job stop "$id") || fail "herd job stop: exit $?: $out"
has "$out" "job $id: stopping"
wait "$job"
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[[ $rc == 130 ]] || fail "the launcher exited $rc after herd job stop, not 130: $(cat "$tmp/err")"
has "$(cat "$tmp/err")" "herd launch: job $id: interrupted by SIGINT; ranks 0-1 stopped"
((ms < 10000)) || fail "the job took $ms ms to stop"
out=$("$HERD" jobs)
grep -q "^$id " <<<"$out" && fail "a job that ended is listed: $out"
out=$("$HERD" job status "$id" 2>&1); rc=$?
[[ $rc == 1 ]] || fail "status of an ended job: exit $rc: $out"
has "$out" "herd job status: no running job $id of this user here (herd jobs lists them)"
echo "stopped in $ms ms"

# --- a launcher killed with SIGKILL: its socket is left, nobody answers
# (not under timeout(1): the launcher itself is killed; its rank, sleep 30,
# gets the parent-death signal)
"$HERD" launch -n 1 -- sleep 30 >/dev/null 2>&1 &
job=$!
pids+=("$job")
id=$(first_id)
[[ -n $id ]] || fail "the second job is not listed"
kill -KILL "$job"
wait "$job" 2>/dev/null
[[ -S $XDG_RUNTIME_DIR/herd/jobs/$id.sock ]] || fail "no socket left by the killed launcher"
out=$("$HERD" jobs) || fail "herd jobs after a launcher died: exit $?"
grep -q "^$id " <<<"$out" && fail "a dead launcher's job is listed: $out"
[[ ! -e $XDG_RUNTIME_DIR/herd/jobs/$id.sock ]] || fail "the dead launcher's socket is still there"

# --- usage errors
out=$("$HERD" job 2>&1); rc=$?
[[ $rc == 2 ]] || fail "herd job: exit $rc: $out"
has "$out" "herd job: say status ID, stop ID, scale ID N or restart ID"
out=$("$HERD" job status 2>&1); rc=$?
[[ $rc == 2 ]] || fail "herd job status: exit $rc: $out"
has "$out" "herd job: status: name the job"
out=$("$HERD" job frob x 2>&1); rc=$?
[[ $rc == 2 ]] || fail "herd job frob: exit $rc: $out"
has "$out" "herd job: unknown subcommand 'frob' (status, stop, scale, restart)"
out=$("$HERD" job status ../x 2>&1); rc=$?
[[ $rc == 1 ]] || fail "herd job status ../x: exit $rc: $out"
has "$out" "'../x' is not a job id"
out=$("$HERD" jobs extra 2>&1); rc=$?
[[ $rc == 2 ]] || fail "herd jobs extra: exit $rc: $out"
echo "jobs: ok"
