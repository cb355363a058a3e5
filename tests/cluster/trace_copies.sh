#!/usr/bin/env bash
# Flight recorders of nodes that do not share the launcher's trace
# directory, on the namespace cluster: HERD_TRACE_DIR is under the home
# directory, which every host has a fresh one of (a bind mount in its own
# mount namespace), so each host's ranks keep their rings on that host and
# the launcher (this machine's mount namespace) sees none of them there.
# 8 ranks on 4 hosts (two each, ranks 4 and 5 on h3), a loop of
# allreduces, HERD_TIMEOUT=2.
#   - rank 5 stops calling before its 50th call: the nodes send copies of
#     their rings, the launcher's summary names rank 5 on h3 as not having
#     called #50 and its process as sleeping, as h3 saw it (not a rank
#     whose ring it could not read), the launcher's
#     directory holds the 8 rings and herd trace on it names rank 5 alone;
#     h3 keeps its own two.
#   - a straggler on h3 (rank 2 of 3, one per host, computing 1.3 times as
#     long before each allreduce; rounds every second) is named from the
#     copies h2 and h3 send at each round; herd trace --live JOB, here,
#     shows all three ranks while the job runs.
#   - a job that succeeds leaves no trace directory on any host.
# Needs root, iproute2 and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
netns_start 4
home=$(getent passwd "$(id -un)" | cut -d: -f6)
[[ -d $home ]] || { echo "trace_copies: no home directory" >&2; exit 77; }
base="$home/.herd-trace-test.$$"
trap 'bash tests/harness/netns.sh stop "$cluster"; rm -rf "$tmp" "$base"' EXIT

# CALLS allreduces of 64 floats; rank STOP_RANK, before call STOP_AT,
# sleeps SLEEP s.
cat >"$tmp/loop.lua" <<'LUA'
local calls, stop_rank, stop_at, sleep = tonumber(arg[1]), tonumber(arg[2]), tonumber(arg[3]), arg[4]
local c = assert(herd.comm())
local b = herd.buffer("float32", 64)
for i = 1, calls do
  if c:rank() == stop_rank and i == stop_at then os.execute("sleep " .. sleep) end
  local ok, msg = c:allreduce(b)
  if not ok then io.stderr:write(msg, "\n"); os.exit(3) end
end
print("done")
LUA

# --- rank 5 does not call #50
HERD_TRACE_DIR=$base HERD_TIMEOUT=2 timeout 120 "$cluster/run" 1 "$HERD" launch \
	--hosts 'h[1-4]' -n 8 -- "$HERD" "$tmp/loop.lua" 100000 5 50 30 >"$tmp/out" 2>"$tmp/err" \
	&& fail "the job succeeded with rank 5 asleep"
s=$(grep -m1 "^herd launch: job .* failed: " "$tmp/err") || fail "no failure summary: $(cat "$tmp/err")"
dir=$(sed -n "s/^herd launch: the ranks' flight recorders: herd trace //p" "$tmp/err")
grep -qE "failed: rank 5 on h3 \(pid [0-9]+\) last completed allreduce #49 [0-9.]+ s ago and has not called allreduce #50 \(the application did not call\); its process is sleeping; rank [0-467], the first to fail, said: " <<<"$s" \
	|| fail "the summary does not name rank 5: $s; herd trace: $("$HERD" trace "$dir" 2>&1); the launcher said: $(grep -v '^\[' "$tmp/err")"
echo "summary: ${s#*failed: }" | cut -c1-200
[[ $dir == "$base"/* && -d $dir ]] || fail "no recorders in $base: $(cat "$tmp/err")"
job=${dir##*/}
n=$(find "$dir" -name '*.trace' | wc -l)
[[ $n == 8 ]] || fail "the launcher's directory holds $n rings, not 8: $(ls -l "$dir")"
n=$(find "$cluster/home/h3/${base##*/}/$job" -name '*.trace' | wc -l)
[[ $n == 2 ]] || fail "h3 keeps $n rings of its own, not 2"
"$HERD" trace --json "$dir" >"$tmp/json" && fail "herd trace exited 0"
python3 - "$tmp/json" <<'PY' || fail "herd trace --json: $(cat "$tmp/json")"
import json, sys
c = json.load(open(sys.argv[1]))["communicators"][0]
assert c["size"] == 8 and c["culprits"] == [5] and c["next"]["cseq"] == 50, c
r = c["ranks"][5]
assert r["host"] == "h3" and r["verdict"] == "not called" and r["last_completed"]["cseq"] == 49, r
assert [x["host"] for x in c["ranks"]] == ["h1", "h1", "h2", "h2", "h3", "h3", "h4", "h4"], c
PY
echo "the launcher's directory: 8 rings, herd trace names rank 5 alone"
job_gone 10 "$tmp/loop.lua" "exec --stdio" >/dev/null || exit 1

# --- a straggler on h3, named from the copies (steps.lua as in
# tests/cli/straggler.sh: 20 ms of work per step, rank SLOW FACTOR times
# as long, until FINISH exists)
cat >"$tmp/steps.lua" <<'LUA'
local steps, slow, factor, finish = tonumber(arg[1]), tonumber(arg[2]), tonumber(arg[3]), arg[4]
local c = assert(herd.comm())
local b = herd.buffer("float32", 1024)
local work = 0.020 * (c:rank() == slow and factor or 1)
for i = 1, steps do
  local t = herd.clock()
  while herd.clock() - t < work do end
  b:fill(io.open(finish) ~= nil and 1 or 0)
  assert(c:allreduce(b))
  if b:max() > 0 then break end
end
print("done")
LUA
: >"$tmp/err"
HERD_TRACE_DIR=$base HERD_STRAGGLER_CHECK=1 timeout 150 "$cluster/run" 1 "$HERD" launch \
	--hosts 'h[1-3]' -n 3 -- "$HERD" "$tmp/steps.lua" 4000 2 1.3 "$tmp/finish" \
	>"$tmp/out" 2>"$tmp/err" &
job=$!
line=
for ((k = 0; k < 1200; k++)); do
	line=$(grep "is a straggler" "$tmp/err") && break
	kill -0 "$job" 2>/dev/null || break
	sleep 0.1
done
live=
if [[ -n $line ]]; then
	jid=$(sed -n 's/.*warn: job \([0-9a-f-]*\): rank .*/\1/p' <<<"$line")
	live=$(HERD_TRACE_DIR=$base "$HERD" trace --live "$jid" 2>&1)
fi
touch "$tmp/finish"
wait "$job" || fail "the straggler's job failed: $(cat "$tmp/err")"
[[ -n $line ]] || fail "no straggler named: $(cat "$tmp/err")"
for k in 0 1 2; do
	grep -qE "^  rank $k \(h$((k + 1)), pid [0-9]+\) " <<<"$live" \
		|| fail "herd trace --live $jid does not show rank $k on h$((k + 1)): $live"
done
echo "herd trace --live $jid: $(grep -m1 "rank 2 " <<<"$live")" | cut -c1-200
grep -qE "warn: job [0-9a-f-]+: rank 2 on h3 is a straggler: it arrived last at the collectives" <<<"$line" \
	|| fail "the straggler named is not rank 2 on h3: $line"
echo "straggler from copies: ${line#*warn: }" | cut -c1-200

# --- jobs that succeed (the one above, and this) leave nothing behind on
# any host
HERD_TRACE_DIR=$base timeout 120 "$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' -n 8 -- \
	"$HERD" "$tmp/loop.lua" 20 -1 0 0 >"$tmp/out" 2>"$tmp/err" \
	|| fail "the job of 20 calls failed: $(cat "$tmp/err")"
left=$(find "$base" "$cluster"/home/h*/"${base##*/}" -mindepth 1 -newer "$tmp/json" 2>/dev/null)
[[ -z $left ]] || fail "a job that succeeded left: $left"
echo "trace_copies: ok"
