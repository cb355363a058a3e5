#!/usr/bin/env bash
# The flight recorder and herd trace.  Four ranks of allreduces where rank
# 2 stops calling before its 50th (it sleeps): under a 1.5 s deadline the
# launcher's summary names rank 2, its last completed call, that it has
# not called #50 and its last line on stderr, not the first rank to time out, and says where the
# recorders are; herd trace on them prints the wavefront (exit status 1)
# and its JSON form names rank 2 the one culprit.  A rank stopped with
# SIGSTOP under a 30 s deadline: herd trace --live JOB, run while the job
# waits, says it is stopped and the others are inside the call; continued, the
# job succeeds and its recorders are gone.  HERD_TRACE_RING=16 keeps the
# last 16 calls, and herd trace --calls lists them, newest first, with
# the algorithm that ran each.  The culprit's node says what it knows of
# itself in the summary (the NVML stand-in: a GPU slowed down, an Xid 79
# in the kernel log).  Bad paths and usage errors.
source "$(dirname "$0")/../harness/common.sh" "$@"
pid=
trap '[[ -n $pid ]] && kill -CONT "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
host=$(hostname -s)

# A rank program: CALLS allreduces (0: until the file FINISH exists, as
# the ranks agree through the allreduce itself); rank STOP_RANK sleeps
# SLEEP s before call STOP_AT; "running PID" after call 10.
cat >"$tmp/loop.lua" <<'LUA'
local calls, stop_rank, stop_at, sleep = tonumber(arg[1]), tonumber(arg[2]), tonumber(arg[3]), arg[4]
local finish = arg[5]
local c = assert(herd.comm())
local b = herd.buffer("float32", 16)
local i = 0
while calls == 0 or i < calls do
  i = i + 1
  if c:rank() == stop_rank and i == stop_at then
    io.stderr:write("waiting for the data loader\n")
    os.execute("sleep " .. sleep)
  end
  local seen = finish ~= nil and io.open(finish) ~= nil
  b:fill(seen and 1 or 0)
  local ok, msg = c:allreduce(b)
  if not ok then io.stderr:write(msg, "\n"); os.exit(3) end
  if calls == 0 and b:max() > 0 then break end
  if i == 10 then
    local f = assert(io.open("/proc/self/stat"))
    print("running " .. f:read("n"))
    f:close()
    io.stdout:flush()
  end
end
print("done")
LUA

# --- rank 2 does not call #50
t0=$(date +%s%N)
HERD_TIMEOUT=1.5 timeout 60 "$HERD" launch -n 4 -- "$HERD" "$tmp/loop.lua" 100 2 50 5 \
	>"$tmp/out" 2>"$tmp/err" && fail "the job succeeded with rank 2 asleep past the deadline"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
err=$(cat "$tmp/err")
summary=$(grep "^herd launch: job .* failed: " <<<"$err") || fail "no failure summary: $err"
grep -qE "failed: rank 2 on $host \(pid [0-9]+\) last completed allreduce #49 [0-9.]+ s ago and has not called allreduce #50 \(the application did not call\); its process is (sleeping|running); its last line on stderr: waiting for the data loader; rank [013], the first to fail, said: allreduce #50 " <<<"$summary" \
	|| fail "the summary does not name rank 2: $summary"
(( ms < 1500 + 3000 )) || fail "the summary came $ms ms after the start, past the 1.5 s deadline and 3 s"
dir=$(sed -n "s/^herd launch: the ranks' flight recorders: herd trace //p" <<<"$err")
[[ -n $dir && -d $dir && $dir == "$HERD_TRACE_DIR"/* ]] || fail "where the recorders are: $err"
[[ $(ls "$dir"/*.trace | wc -l) == 4 ]] || fail "not four recorders in $dir: $(ls -l "$dir")"
out=$("$HERD" trace "$dir") && fail "herd trace exited 0 with rank 2 missing: $out"
has "$out" "(4 ranks, job "
has "$out" "): allreduce #50: ranks 0-1,3 entered"
grep -qE "^  rank 2 \($host, pid [0-9]+\) last completed allreduce #49 [0-9.]+ s before the last call recorded and has not called allreduce #50 \(the application did not call\); its process is gone$" <<<"$out" \
	|| fail "rank 2's line: $out"
for r in 0 1 3; do
	grep -qE "^  rank $r \($host, pid [0-9]+\) entered allreduce #50, which failed \(HERD_E[A-Z]+\) after [0-9.]+ s" <<<"$out" \
		|| fail "rank $r's line: $out"
done
"$HERD" trace --json "$dir" >"$tmp/json" && fail "herd trace --json exited 0"
python3 - "$tmp/json" <<'PY' || fail "the JSON report: $(cat "$tmp/json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["v"] == 1 and len(d["communicators"]) == 1, d
c = d["communicators"][0]
assert c["size"] == 4 and c["culprits"] == [2] and not c["in_communication"], c
assert c["next"]["op"] == "allreduce" and c["next"]["cseq"] == 50 and c["next"]["dtype"] == "float32", c
r = c["ranks"]
assert [x["verdict"] for x in r] == ["entered", "entered", "not called", "entered"], r
assert r[2]["last_completed"]["cseq"] == 49 and r[2]["last"]["state"] == "done", r[2]
assert all(x["last"]["cseq"] == 50 and x["last"]["state"] == "failed" and x["broke"] for x in (r[0], r[1], r[3])), r
print("JSON: culprits", c["culprits"])
PY

# --- rank 1 stopped with SIGSTOP under a 30 s deadline, herd trace while it waits
export HERD_TRACE_RING=16
: >"$tmp/out"
HERD_TIMEOUT=30 timeout 120 "$HERD" launch -n 3 -- "$HERD" "$tmp/loop.lua" 0 -1 0 0 "$tmp/finish" \
	>"$tmp/out" 2>"$tmp/err" &
job=$!
for ((k = 0; k < 300; k++)); do
	[[ $(grep -c "running" "$tmp/out") == 3 ]] && break
	sleep 0.1
done
pid=$(sed -n 's/^\[[^]]*:1\] running //p' "$tmp/out")
[[ -n $pid ]] || fail "no pid of rank 1: $(cat "$tmp/out" "$tmp/err")"
kill -STOP "$pid"
jobdir=$(ls -d "$HERD_TRACE_DIR"/*/ | grep -v "^$dir/\$" | head -1)
jobid=$(basename "$jobdir")
out=
for ((k = 0; k < 100; k++)); do
	sleep 0.1
	out=$("$HERD" trace --live "$jobid" 2>&1) && continue
	grep -q "inside allreduce" <<<"$out" && break
done
kill -CONT "$pid"
pid=
: >"$tmp/finish"
grep -qE "^  rank 1 \($host, pid [0-9]+\) .*; its process is stopped$" <<<"$out" || fail "rank 1 stopped: $out"
grep -qE "^  rank [02] \($host, pid [0-9]+\) inside allreduce #[0-9]+ for [0-9.]+ s; its process is (running|sleeping)$" <<<"$out" \
	|| fail "the others inside the call: $out"
wait $job || fail "the job failed after SIGCONT: $(cat "$tmp/err")"
[[ $(grep -c "^\[.*\] done" "$tmp/out") == 3 ]] || fail "not every rank done: $(cat "$tmp/out")"
[[ ! -e $jobdir ]] || fail "the recorders of a job that succeeded are left: $(ls -l "$jobdir")"
echo "stopped rank: $(grep -m1 "rank 1 " <<<"$out")"

# --- HERD_TRACE_RING=16: the last 16 calls, in a job that fails at call 40
HERD_TIMEOUT=1 timeout 60 "$HERD" launch -n 2 -- "$HERD" "$tmp/loop.lua" 100 1 40 3 >/dev/null 2>"$tmp/err" \
	&& fail "the job succeeded with rank 1 asleep"
dir=$(sed -n "s/^herd launch: the ranks' flight recorders: herd trace //p" "$tmp/err")
"$HERD" trace --json "$dir" >"$tmp/json"
python3 - "$tmp/json" <<'PY' || fail "the ring of 16: $(cat "$tmp/json")"
import json, sys
c = json.load(open(sys.argv[1]))["communicators"][0]
assert c["culprits"] == [1] and c["ranks"][1]["last_completed"]["cseq"] == 39, c
PY
for f in "$dir"/*.trace; do
	[[ $(stat -c %s "$f") == $((4096 + 16 * 64)) ]] || fail "$f is not a ring of 16: $(stat -c %s "$f")"
done
unset HERD_TRACE_RING
# --calls: each rank's last calls, newest first, with the algorithm
out=$("$HERD" trace --calls 2 "$dir") && fail "herd trace --calls exited 0 with rank 1 missing"
has "$out" ", the last 2 calls of each rank, newest first:"
grep -qE "^  rank 0 \($host, pid [0-9]+\):$" <<<"$out" || fail "rank 0's heading: $out"
grep -qE "^    allreduce #40 \(float32 x 16, sum, [a-z][a-z, -]+\): failed \(HERD_E[A-Z]+\) after [0-9.]+ (ms|s), [0-9.]+ s before the last call recorded$" <<<"$out" \
	|| fail "rank 0's failed call: $out"
grep -qE "^    allreduce #39 \(float32 x 16, sum, [a-z][a-z, -]+\): done in (under )?[0-9.]+ ms, [0-9.]+ s before the last call recorded$" <<<"$out" \
	|| fail "a call done: $out"
[[ $(grep -c "^    allreduce #" <<<"$out") == 4 ]] || fail "not two calls of each of two ranks: $out"
"$HERD" trace --calls 100 --json "$dir" >"$tmp/json"
python3 - "$tmp/json" <<'PY' || fail "the calls as JSON: $(cat "$tmp/json")"
import json, sys
c = json.load(open(sys.argv[1]))["communicators"][0]
r0, r1 = (x["calls"] for x in c["ranks"])
assert len(r0) == 16 and len(r1) == 16, (len(r0), len(r1))
assert [x["cseq"] for x in r0] == list(range(40, 24, -1)), [x["cseq"] for x in r0]
assert [x["cseq"] for x in r1] == list(range(39, 23, -1)), [x["cseq"] for x in r1]
assert r0[0]["state"] == "failed" and r0[0]["status"] != "HERD_OK" and r1[0]["state"] == "done", (r0[0], r1[0])
for x in r0 + r1:
    assert x["op"] == "allreduce" and x["dtype"] == "float32" and x["count"] == 16 and x["redop"] == "sum", x
    assert x["algorithm"] == r0[1]["algorithm"] and x["algorithm"], x
    assert x["device"] is False and x["seconds"] >= 0 and x["start"] > 1.7e9, x
print("calls: algorithm", r0[1]["algorithm"])
PY

# --- what the culprit's node says of itself: NVML's GPU 1 in a hardware
# slowdown (the stand-in) and an Xid 79 of the GPU at 0000:9a:00 (NVML's
# GPU 0) in the kernel log; the GPUs in bus order
mock=$(cd "$(dirname "$HERD")/../tests/mock" && pwd)
[[ -f $mock/libnvidia-ml.so.1 ]] || fail "no NVML stand-in at $mock"
echo "gpu 1 throttle 0x8" >"$tmp/nvml"
echo "[  812.000001] NVRM: Xid (PCI:0000:9a:00): 79, pid=4242, name=python" >"$tmp/kmsg"
LD_LIBRARY_PATH=$mock HERD_NVML_MOCK_STATE=$tmp/nvml HERD_KERNEL_LOG=$tmp/kmsg HERD_TIMEOUT=1 \
	timeout 60 "$HERD" launch -n 2 -- "$HERD" "$tmp/loop.lua" 100 1 20 3 >/dev/null 2>"$tmp/err" \
	&& fail "the job succeeded with rank 1 asleep"
s=$(grep -m1 "^herd launch: job .* failed: " "$tmp/err") || fail "no summary: $(cat "$tmp/err")"
has "$s" "failed: rank 1 on $host (pid "
has "$s" "; its node $host: GPU 1 (0000:1b:00.0) is slowed down: hardware slowdown; GPU 0 (0000:9a:00.0): its last Xid in the kernel log is 79 (GPU has fallen off the bus)"
echo "node words: ${s##*; its node }" | cut -c1-200

# --- bad paths and usage errors
out=$("$HERD" trace "$tmp/none" 2>&1); rc=$?
[[ $rc == 1 ]] || fail "a missing path: exit $rc: $out"
has "$out" "herd trace: $tmp/none: No such file or directory"
mkdir "$tmp/junk" && echo "not a ring" >"$tmp/junk/0.0.trace"
out=$("$HERD" trace "$tmp/junk" 2>&1); rc=$?
[[ $rc == 1 ]] || fail "a junk file: exit $rc: $out"
has "$out" "herd trace: $tmp/junk/0.0.trace: "
mkdir "$tmp/empty"
out=$("$HERD" trace "$tmp/empty" 2>&1)
has "$out" "holds no flight recorder (*.trace)"
out=$("$HERD" trace 2>&1); rc=$?
[[ $rc == 2 ]] || fail "no path: exit $rc: $out"
has "$out" "herd trace: name a trace file or directory"
out=$("$HERD" trace --calls 0 "$dir" 2>&1); rc=$?
[[ $rc == 2 ]] || fail "--calls 0: exit $rc: $out"
has "$out" "herd trace: --calls 0: a count of calls from 1 to 1048576"
out=$("$HERD" trace --live ../x 2>&1); rc=$?
[[ $rc == 2 ]] || fail "--live ../x: exit $rc: $out"
has "$out" "herd trace: --live ../x: '../x' is not a job id"
out=$("$HERD" trace --live 6b0b0000-00000000 2>&1); rc=$?
[[ $rc == 1 ]] || fail "--live of no job: exit $rc: $out"
has "$out" "herd trace: --live: no trace directory $HERD_TRACE_DIR/6b0b0000-00000000: job 6b0b0000-00000000 is not running here"
out=$("$HERD" trace --live "$jobid" "$dir" 2>&1); rc=$?
[[ $rc == 2 ]] || fail "--live with a path: exit $rc: $out"
has "$out" "herd trace: --live names the job: no FILE|DIR with it"
out=$("$HERD" trace --jsn x 2>&1); rc=$?
[[ $rc == 2 ]] || fail "--jsn: exit $rc: $out"
has "$out" "--jsn"
echo "trace: rank 2 named in $ms ms"
