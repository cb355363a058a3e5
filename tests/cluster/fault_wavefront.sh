#!/usr/bin/env bash
# The culprit named, from the flight recorders (herd trace) and the
# launcher's summary, on the namespace cluster: 8 ranks on 4 hosts (two
# each, ranks 4 and 5 on h3), a loop of allreduces.
#   - rank 5 stops calling before its 50th call (the application hangs),
#     HERD_TIMEOUT=2: the summary names rank 5 on h3, the last call it
#     completed and that it did not call #50, not the first rank to time
#     out, within the deadline and 1 s of the moment it stopped calling;
#     herd trace on the recorders names rank 5 alone.
#   - rank 5 stopped with SIGSTOP, HERD_TIMEOUT=2: the summary says rank 5
#     on h3 was stopped and did not answer, and the launcher returns within
#     the deadline and 1.5 s.
#   - rank 5 killed (SIGKILL): the summary says rank 5 on h3 was killed.
#   - h3's link cut (its ranks 4 and 5 cut off), HERD_TIMEOUT=2: within
#     the deadline and 2 s, while it waits the grace period for h3's
#     node, the launcher says the job failed, naming a rank of h3 that did
#     not answer the other ranks; its summary at the end names it too.
#   - 64 ranks on one host (h1, oversubscribed; not under the sanitizers),
#     rank 37 stops calling before its 20th call, HERD_TIMEOUT=3: the
#     summary names rank 37 within the deadline and 1.5 s (64 processes to
#     stop on 2 cores), and herd trace names it alone.
# Needs root, iproute2 and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
netns_start 4

# CALLS allreduces of 64 floats; rank STOP_RANK, before call STOP_AT,
# prints "stopping at T" (herd.clock(), the monotonic clock mono reads)
# and sleeps SLEEP s; every rank prints "running" after call 10.
cat >"$tmp/loop.lua" <<'LUA'
local calls, stop_rank, stop_at, sleep = tonumber(arg[1]), tonumber(arg[2]), tonumber(arg[3]), arg[4]
local c = assert(herd.comm())
local b = herd.buffer("float32", 64)
for i = 1, calls do
  if c:rank() == stop_rank and i == stop_at then
    print(string.format("stopping at %.3f", herd.clock()))
    io.stdout:flush()
    os.execute("sleep " .. sleep)
  end
  local ok, msg = c:allreduce(b)
  if not ok then io.stderr:write(msg, "\n"); os.exit(3) end
  if i == 10 then print("running"); io.stdout:flush() end
end
print("done")
LUA

# summary FILE: the launcher's failure summary line of FILE (stderr).
summary() { grep -m1 "^herd launch: job .* failed: " "$1" || fail "no failure summary: $(cat "$1")"; }

# since T: seconds from T (mono) to now.
since() { awk -v a="$1" -v b="$(mono)" 'BEGIN { printf "%.3f", b - a }'; }

# start_endless: the job of 8 ranks, calling until stopped, under a 2 s
# deadline, in the background (job); once it runs, victim is rank 5's pid.
start_endless() {
	local p
	# emptied here: the background job's own truncation may come after
	# wait_lines has read the last job's lines
	: >"$tmp/out"
	HERD_TIMEOUT=2 timeout 120 "$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' -n 8 -- \
		"$HERD" "$tmp/loop.lua" 100000000 -1 0 0 >"$tmp/out" 2>"$tmp/err" &
	job=$!
	wait_lines 8 running "$tmp/out" 30
	victim=
	for p in $(host_pids 3 "$tmp/loop.lua"); do
		grep -q "^HERD_RANK=5$" < <(tr '\0' '\n' <"/proc/$p/environ") && victim=$p
	done
	[[ -n $victim ]] || fail "no process of rank 5 on h3"
}

# --- rank 5 does not call #50
HERD_TIMEOUT=2 timeout 120 "$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' -n 8 -- \
	"$HERD" "$tmp/loop.lua" 100000 5 50 30 >"$tmp/out" 2>"$tmp/err" \
	&& fail "the job succeeded with rank 5 asleep"
t_end=$(mono)
t_stop=$(sed -n 's/^\[h3:5\] stopping at //p' "$tmp/out")
[[ -n $t_stop ]] || fail "rank 5 did not say when it stopped: $(cat "$tmp/out")"
secs=$(awk -v a="$t_stop" -v b="$t_end" 'BEGIN { printf "%.3f", b - a }')
s=$(summary "$tmp/err")
grep -qE "failed: rank 5 on h3 \(pid [0-9]+\) last completed allreduce #49 [0-9.]+ s ago and has not called allreduce #50 \(the application did not call\); rank [0-467], the first to fail, said: " <<<"$s" \
	|| fail "the summary does not name rank 5: $s"
within "$secs" 3 "the summary naming rank 5"
echo "stops calling: summary $secs s after rank 5 stopped: ${s#*failed: }" | cut -c1-200
dir=$(sed -n "s/^herd launch: the ranks' flight recorders: herd trace //p" "$tmp/err")
[[ -d $dir ]] || fail "no recorders: $(cat "$tmp/err")"
"$HERD" trace --json "$dir" >"$tmp/json" && fail "herd trace exited 0"
python3 - "$tmp/json" <<'PY' || fail "herd trace --json: $(cat "$tmp/json")"
import json, sys
c = json.load(open(sys.argv[1]))["communicators"][0]
assert c["size"] == 8 and c["culprits"] == [5] and c["next"]["cseq"] == 50, c
r = c["ranks"][5]
assert r["host"] == "h3" and r["verdict"] == "not called" and r["last_completed"]["cseq"] == 49, r
assert [x["host"] for x in c["ranks"]] == ["h1", "h1", "h2", "h2", "h3", "h3", "h4", "h4"], c
PY
secs=$(job_gone 10 "$tmp/loop.lua" "exec --stdio") || exit 1

# --- rank 5 stopped with SIGSTOP
start_endless
t_stop=$(mono)
kill -STOP "$victim"
wait $job && fail "the job succeeded with rank 5 stopped under a 2 s deadline"
secs=$(since "$t_stop")
kill -CONT "$victim" 2>/dev/null
s=$(summary "$tmp/err")
grep -qE "failed: rank 5 on h3 \(pid [0-9]+\) was stopped by signal 19 \(Stopped \(signal\)\) and did not answer" <<<"$s" \
	|| fail "the summary does not name rank 5 stopped: $s"
within "$secs" 3.5 "the launcher's return after SIGSTOP"
echo "SIGSTOP: launcher returned $secs s after the stop: ${s#*failed: }" | cut -c1-200
secs=$(job_gone 10 "$tmp/loop.lua" "exec --stdio") || exit 1

# --- rank 5 killed
start_endless
t_stop=$(mono)
kill -KILL "$victim"
wait $job && fail "the job succeeded with rank 5 killed"
secs=$(since "$t_stop")
s=$(summary "$tmp/err")
has "$s" "failed: rank 5 on h3 (pid $victim) was killed by signal 9"
within "$secs" 3 "the launcher's return after SIGKILL"
echo "SIGKILL: launcher returned $secs s after the kill"
secs=$(job_gone 10 "$tmp/loop.lua" "exec --stdio") || exit 1

# --- h3's link cut: its ranks (4 and 5) are named by the others' failures
# (at once, while the launcher waits the grace period for h3's node)
start_endless
t_stop=$(mono)
bash tests/harness/netns.sh cut "$cluster" 3
s=
for ((k = 0; k < 300; k++)); do
	s=$(grep -m1 "warn: job .* failed: " "$tmp/err") && break
	sleep 0.05
done
secs=$(since "$t_stop")
[[ -n $s ]] || fail "no failure said within 15 s of the cut: $(cat "$tmp/err")"
grep -qE "failed: rank [45] on h3 \(pid [0-9]+\) .*; it( and other ranks of its host)? did not answer [0-9]+ ranks \(a link to h3, or the host\).*; waiting up to [0-9]+ s for h3 to stop its ranks$" <<<"$s" \
	|| fail "the failure said does not name h3's rank: $s"
# the deadline, the timeout report's 0.5 s of asking the peers, the
# launcher's 0.25 s settling and 0.1 s before it says it early; 4 s leaves
# room for a loaded machine
within "$secs" 4 "the failure said after the cut"
echo "link cut: said $secs s after the cut: ${s#*failed: }" | cut -c1-250
wait $job && fail "the job succeeded with h3 cut off"
bash tests/harness/netns.sh mend "$cluster" 3
s=$(summary "$tmp/err")
grep -qE "failed: rank [45] on h3 " <<<"$s" || fail "the summary does not name h3's rank: $s"
secs=$(job_gone 15 "$tmp/loop.lua" "exec --stdio") || exit 1

# --- 64 ranks on h1, rank 37 does not call #20.  Not under the sanitizers
# (CI sets ASAN_OPTIONS for that run): 64 instrumented processes on two
# cores do not join within the 3 s deadline this case measures; the code
# it runs is the 8-rank cases' (as .ci/run leaves the 64-rank load tests).
if [[ -n ${ASAN_OPTIONS:-} ]]; then
	echo "64 ranks: SKIPPED under the sanitizers"
	exit 0
fi
HERD_TIMEOUT=3 timeout 300 "$cluster/run" 1 "$HERD" launch -n 64 -- \
	"$HERD" "$tmp/loop.lua" 1000 37 20 30 >"$tmp/out" 2>"$tmp/err" \
	&& fail "the job of 64 succeeded with rank 37 asleep"
t_end=$(mono)
t_stop=$(sed -n 's/^\[h1:37\] stopping at //p' "$tmp/out")
[[ -n $t_stop ]] || fail "rank 37 did not say when it stopped: $(cat "$tmp/out" "$tmp/err" | tail -20)"
secs=$(awk -v a="$t_stop" -v b="$t_end" 'BEGIN { printf "%.3f", b - a }')
s=$(summary "$tmp/err")
grep -qE "failed: rank 37 on h1 \(pid [0-9]+\) last completed allreduce #19 [0-9.]+ s ago and has not called allreduce #20 \(the application did not call\); its process is (sleeping|running); rank [0-9]+, the first to fail, said: " <<<"$s" \
	|| fail "the summary does not name rank 37: $s"
within "$secs" 4.5 "the summary naming rank 37 of 64"
dir=$(sed -n "s/^herd launch: the ranks' flight recorders: herd trace //p" "$tmp/err")
"$HERD" trace --json "$dir" >"$tmp/json" && fail "herd trace exited 0"
python3 - "$tmp/json" <<'PY' || fail "herd trace --json of 64: $(head -c 2000 "$tmp/json")"
import json, sys
c = json.load(open(sys.argv[1]))["communicators"][0]
assert c["size"] == 64 and c["culprits"] == [37] and c["next"]["cseq"] == 20, (c["size"], c["culprits"])
PY
out=$("$HERD" trace "$dir")
has "$out" "): allreduce #20: ranks 0-36,38-63 entered"
has "$out" "ranks 0-36,38-63: in the next call"
echo "64 ranks: summary $secs s after rank 37 stopped calling"
secs=$(job_gone 10 "$tmp/loop.lua" "exec --stdio") || exit 1
exit 0
