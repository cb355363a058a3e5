#!/usr/bin/env bash
# The accounting log and herd acct: every job herd launch (and herd.launch)
# runs appends one record when it ends, with exact fields; the log and its
# directory are the user's alone (0600, 0700), a log others may write or
# another user owns is left alone with a warning and the job unaffected;
# two launchers ending at once write two whole lines; herd acct lists the
# records as sacct does, filters them by time, prints JSON with totals,
# skips a damaged line with a warning naming the file and the line, and
# refuses bad options with exit 2 naming the option.
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT
unset HERD_RANK RANK WORLD_SIZE HERD_STORE SLURM_JOB_ID HERD_ACCT_LOG
export XDG_STATE_HOME=$tmp/state
log=$tmp/state/herd/acct.jsonl
host=$(hostname -s)

# --- a job that succeeds and one that fails, each one exact record
t0=$(date +%s.%N)
"$HERD" launch -n 2 --json-summary "$tmp/ok.json" -- true 2>"$tmp/err" \
	|| fail "the job that succeeds exited $?: $(cat "$tmp/err")"
"$HERD" launch -n 2 --json-summary "$tmp/bad.json" -- sh -c 'exit $((HERD_RANK == 1 ? 3 : 0))' \
	2>"$tmp/err"; rc=$?
[[ $rc == 3 ]] || fail "the job that fails exited $rc: $(cat "$tmp/err")"
t1=$(date +%s.%N)
[[ -f $log ]] || fail "no log at $log"
[[ $(stat -c %a "$tmp/state/herd") == 700 ]] || fail "the log's directory is $(stat -c %a "$tmp/state/herd")"
[[ $(stat -c %a "$log") == 600 ]] || fail "the log is $(stat -c %a "$log")"
[[ $(wc -l <"$log") == 2 ]] || fail "not two records: $(cat "$log")"
python3 - "$log" "$tmp/ok.json" "$tmp/bad.json" "$(id -un)" "$(id -u)" "$host" "$t0" "$t1" <<'PY' \
	|| fail "the records: $(cat "$log")"
import json, sys
log, ok, bad, user, uid, host, t0, t1 = sys.argv[1:]
recs = [json.loads(l) for l in open(log)]
for rec, summary, argv, state, status in (
        (recs[0], ok, ["true"], "succeeded", 0),
        (recs[1], bad, ["sh", "-c", "exit $((HERD_RANK == 1 ? 3 : 0))"], "failed", 3)):
    s = json.load(open(summary))
    assert list(rec) == ["v", "job_id", "user", "uid", "argv", "hosts", "ranks", "gpus", "start",
                         "end", "elapsed", "state", "exit_status", "restarts", "gpu_hours_held",
                         "gpu_hours_used"], list(rec)
    assert rec["v"] == 1 and rec["job_id"] == s["job_id"], (rec, s)
    assert rec["user"] == user and rec["uid"] == int(uid), rec
    assert rec["argv"] == argv and rec["hosts"] == host, rec
    assert rec["ranks"] == 2 and rec["gpus"] == 0 and rec["restarts"] == 0, rec
    assert rec["state"] == state and rec["exit_status"] == status, rec
    assert rec["gpu_hours_held"] == 0 and rec["gpu_hours_used"] is None, rec
    assert float(t0) - 0.001 <= rec["start"] <= rec["end"] <= float(t1) + 0.001, (rec, t0, t1)
    assert abs(rec["end"] - rec["start"] - rec["elapsed"]) <= 0.0015, rec
assert recs[0]["end"] <= recs[1]["start"], recs
PY
ok_id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$tmp/ok.json")
bad_id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job_id"])' "$tmp/bad.json")

# --- herd acct: sacct's columns, a row per job, the totals
out=$("$HERD" acct 2>"$tmp/err") || fail "herd acct exited $?: $(cat "$tmp/err")"
[[ -s $tmp/err ]] && fail "herd acct said: $(cat "$tmp/err")"
[[ $(head -1 <<<"$out") =~ ^JobID\ +User\ +Start\ +Elapsed\ +Ranks\ +GPUs\ +State\ +ExitCode\ +GPUh\ held\ +GPUh\ used\ +Command$ ]] \
	|| fail "header: $out"
grep -qE "^$ok_id +$(id -un) +[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8} +00:00:0[0-9] +2 +0 +succeeded +0 +0\.0000 +- +true$" <<<"$out" \
	|| fail "the row of the job that succeeded: $out"
grep -qE "^$bad_id .* +2 +0 +failed +3 +0\.0000 +- +sh -c 'exit \\$\(\(HERD_RANK == 1 \? 3 : 0\)\)'$" <<<"$out" \
	|| fail "the row of the job that failed: $out"
[[ $(tail -1 <<<"$out") == "total: 2 jobs, 0.0000 GPU-hours held, used not measured"* ]] || fail "totals: $out"

# --- herd.launch from Lua is recorded too
"$HERD" -e 'local j <close> = herd.launch{cmd = {"sh", "-c", "exit 0"}, n = 1, output = "none"}
assert(j:wait().ok)' 2>"$tmp/err" || fail "herd.launch: $(cat "$tmp/err")"
[[ $(wc -l <"$log") == 3 ]] || fail "herd.launch left no record: $(cat "$log")"
python3 -c 'import json,sys; r = json.loads(open(sys.argv[1]).readlines()[2]); assert r["argv"] == ["sh", "-c", "exit 0"] and r["ranks"] == 1 and r["state"] == "succeeded", r' "$log" \
	|| fail "the record of herd.launch: $(tail -1 "$log")"

# --- --since and --until, on records of known times; --json with totals
when() { date -d "$1" +%s; }
a_start=$(when '2020-03-01 10:00:00') b_start=$(when '2024-06-01 12:00:00')
cat >"$tmp/known.jsonl" <<EOF
{"v":1,"job_id":"a-1","user":"ann","uid":1001,"argv":["train","--lr","0.1"],"hosts":"node[01-02]","ranks":16,"gpus":16,"start":$a_start,"end":$((a_start + 1800)),"elapsed":1800,"state":"succeeded","exit_status":0,"restarts":0,"gpu_hours_held":8.0,"gpu_hours_used":6.0}
{"v":1,"job_id":"b-2","user":"bob","uid":1002,"argv":["eval"],"hosts":"node03","ranks":1,"gpus":2,"start":$b_start,"end":$((b_start + 3600)),"elapsed":3600,"state":"failed","exit_status":1,"restarts":0,"gpu_hours_held":2.0,"gpu_hours_used":null}
EOF
ids() { "$HERD" acct --log "$tmp/known.jsonl" "$@" | awk 'NR > 2 && !/^total/ { print $1 }' | tr '\n' ' '; }
[[ $(ids) == "a-1 b-2 " ]] || fail "all: $(ids)"
[[ $(ids --since 2021-01-01) == "b-2 " ]] || fail "--since 2021-01-01: $(ids --since 2021-01-01)"
[[ $(ids --since 2020-03-01T10:30) == "a-1 b-2 " ]] || fail "--since at a's end: $(ids --since 2020-03-01T10:30)"
[[ $(ids --since 2020-03-01T10:30:01) == "b-2 " ]] || fail "--since after a's end"
[[ $(ids --until 2024-06-01T11:59:59) == "a-1 " ]] || fail "--until: $(ids --until 2024-06-01T11:59:59)"
[[ $(ids -S 2021-01-01 -E 2024-01-01) == "" ]] || fail "-S -E: $(ids -S 2021-01-01 -E 2024-01-01)"
[[ $(ids --since now-1days) == "" ]] || fail "--since now-1days: $(ids --since now-1days)"
[[ $(ids --starttime=2019-12-31) == "a-1 b-2 " ]] || fail "--starttime="
out=$("$HERD" acct --log "$tmp/known.jsonl")
[[ $(tail -1 <<<"$out") == "total: 2 jobs, 10.0000 GPU-hours held, 6.0000 used (75% of what the 1 measured job held)" ]] \
	|| fail "totals: $out"
grep -qE "^a-1 +ann +2020-03-01T10:00:00 +00:30:00 +16 +16 +succeeded +0 +8\.0000 +6\.0000 +train --lr 0\.1$" <<<"$out" \
	|| fail "row a-1: $out"
grep -qE "^b-2 +bob +2024-06-01T12:00:00 +01:00:00 +1 +2 +failed +1 +2\.0000 +- +eval$" <<<"$out" \
	|| fail "row b-2: $out"
"$HERD" acct --log "$tmp/known.jsonl" --json --since 2019-01-01 >"$tmp/acct.json" || fail "--json exited $?"
python3 - "$tmp/acct.json" <<'PY' || fail "--json: $(cat "$tmp/acct.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert [j["job_id"] for j in d["jobs"]] == ["a-1", "b-2"], d
assert d["jobs"][0]["argv"] == ["train", "--lr", "0.1"] and d["jobs"][1]["gpu_hours_used"] is None, d
t = d["totals"]
assert t == {"jobs": 2, "gpu_hours_held": 10.0, "gpu_hours_used": 6.0, "measured_jobs": 1,
             "used_of_held_pct": 75.0}, t
PY
"$HERD" acct --log "$tmp/known.jsonl" --json --since 2030-01-01 | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["jobs"] == [] and d["totals"]["jobs"] == 0 and d["totals"]["gpu_hours_used"] is None, d' \
	|| fail "--json with no job"

# --- a damaged line is skipped with a warning naming the file and the line
cp "$tmp/known.jsonl" "$tmp/damaged.jsonl"
{ echo 'not json'; echo '{"v":1,"job_id":"c-3"}'; echo '{"v":9,"job_id":"d-4"}'; } >>"$tmp/damaged.jsonl"
sed -n 1p "$tmp/known.jsonl" | sed 's/a-1/e-5/' >>"$tmp/damaged.jsonl"
printf '{"v":1,"job_id":"cut' >>"$tmp/damaged.jsonl"
out=$("$HERD" acct --log "$tmp/damaged.jsonl" 2>"$tmp/err") || fail "damaged log: exit $?"
err=$(cat "$tmp/err")
has "$err" "herd acct: warning: $tmp/damaged.jsonl:3: not JSON"
has "$err" "herd acct: warning: $tmp/damaged.jsonl:4: \"user\" is missing, skipped"
has "$err" "herd acct: warning: $tmp/damaged.jsonl:5: a record of format 9, which this herd does not read (it reads 1), skipped"
has "$err" "herd acct: warning: $tmp/damaged.jsonl:7: a line cut short (no newline), skipped"
[[ $(wc -l <<<"$err") == 4 ]] || fail "warnings: $err"
[[ $(awk 'NR > 2 && !/^total/ { print $1 }' <<<"$out" | tr '\n' ' ') == "a-1 e-5 b-2 " ]] \
	|| fail "the records around the damaged lines: $out"

# --- a log others may write, or another user's, is not written; the job is unaffected
chmod 620 "$log"
lines=$(wc -l <"$log")
"$HERD" launch -n 1 -- true 2>"$tmp/err" || fail "a job with a writable log exited $?"
has "$(cat "$tmp/err")" "herd launch: warning: accounting log $log: group or others may write it (mode 0620; chmod 600 it); this job is not recorded"
[[ $(wc -l <"$log") == "$lines" ]] || fail "a record went into a log others may write"
chmod 600 "$log"
if [[ $(id -u) == 0 ]] && id nobody >/dev/null 2>&1; then
	chown nobody "$log"
	"$HERD" launch -n 1 -- true 2>"$tmp/err" || fail "a job with another user's log exited $?"
	has "$(cat "$tmp/err")" "herd launch: warning: accounting log $log: owned by another user"
	[[ $(wc -l <"$log") == "$lines" ]] || fail "a record went into another user's log"
	chown "$(id -u)" "$log"
fi
mkfifo "$tmp/fifo"
HERD_ACCT_LOG=$tmp/fifo timeout 60 "$HERD" launch -n 1 -- true 2>"$tmp/err" || fail "a FIFO log: exit $?"
has "$(cat "$tmp/err")" "accounting log $tmp/fifo: not a regular file"
# set but empty: no log
HERD_ACCT_LOG= "$HERD" launch -n 1 -- true 2>"$tmp/err" || fail "HERD_ACCT_LOG= exited $?"
[[ -s $tmp/err ]] && fail "HERD_ACCT_LOG= said: $(cat "$tmp/err")"
[[ $(wc -l <"$log") == "$lines" ]] || fail "HERD_ACCT_LOG= still recorded"
HERD_ACCT_LOG= "$HERD" acct 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "herd acct with HERD_ACCT_LOG= exited $rc"
has "$(cat "$tmp/err")" "herd acct: no accounting log: HERD_ACCT_LOG is set but empty"

# --- two launchers ending at once: two whole lines (long ones, 4 KiB of command each)
long=$(head -c 3000 /dev/zero | tr '\0' x)
HERD_ACCT_LOG=$tmp/pair.jsonl "$HERD" launch -n 1 -- sh -c 'sleep 0.3' "$long" 2>"$tmp/err1" &
p1=$!
HERD_ACCT_LOG=$tmp/pair.jsonl "$HERD" launch -n 1 -- sh -c 'sleep 0.3' "$long" 2>"$tmp/err2" &
p2=$!
wait $p1 || fail "the first of the pair exited $?: $(cat "$tmp/err1")"
wait $p2 || fail "the second of the pair exited $?: $(cat "$tmp/err2")"
python3 - "$tmp/pair.jsonl" <<'PY' || fail "the pair's records: $(cat "$tmp/pair.jsonl")"
import json, sys
lines = open(sys.argv[1]).read().split("\n")
assert lines[-1] == "" and len(lines) == 3, len(lines)
recs = [json.loads(l) for l in lines[:2]]
assert all(r["argv"][3] == "x" * 3000 for r in recs), "argv"
assert recs[0]["job_id"] != recs[1]["job_id"]
PY

# --- the missing log: an empty listing; a missing --log FILE: exit 1
out=$(XDG_STATE_HOME=$tmp/none "$HERD" acct 2>"$tmp/err") || fail "no log yet: exit $?"
has "$(cat "$tmp/err")" "herd acct: no job recorded yet (no $tmp/none/herd/acct.jsonl)"
[[ $(tail -1 <<<"$out") == "total: 0 jobs, 0.0000 GPU-hours held, used not measured"* ]] || fail "no log: $out"
"$HERD" acct --log "$tmp/nothing.jsonl" 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "--log of a missing file exited $rc"
has "$(cat "$tmp/err")" "herd acct: cannot read $tmp/nothing.jsonl: No such file or directory"

# --- usage errors name the option and exit 2
for args in "--since yesterday|--since yesterday: expected YYYY-MM-DD[THH:MM[:SS]]" \
	"--until 2024-13-01|--until 2024-13-01: expected" \
	"-S 2024-02-30|-S 2024-02-30: expected" \
	"--endtime now-3fortnights|--endtime now-3fortnights: expected" \
	"--sinc 2024-01-01|unrecognized option '--sinc' (options are never abbreviated: --since?)" \
	"--bogus|unrecognized option '--bogus'" \
	"--log|option '--log' needs a value" \
	"extra|unexpected argument 'extra'"; do
	"$HERD" acct ${args%%|*} >"$tmp/out" 2>"$tmp/err"; rc=$?
	[[ $rc == 2 ]] || fail "acct ${args%%|*} exited $rc"
	has "$(head -1 "$tmp/err")" "herd acct: ${args#*|}"
	[[ -s $tmp/out ]] && fail "acct ${args%%|*} printed: $(cat "$tmp/out")"
done
"$HERD" launch -n 1 --monitor-period 100 -- true 2>"$tmp/err"; rc=$?
[[ $rc == 125 ]] || fail "--monitor-period alone exited $rc"
has "$(cat "$tmp/err")" "herd launch: --monitor-period needs --monitor or --monitor-out"
"$HERD" launch -n 1 --monitor --monitor-period 5 -- true 2>"$tmp/err"; rc=$?
[[ $rc == 125 ]] || fail "--monitor-period 5 exited $rc"
has "$(cat "$tmp/err")" "herd launch: --monitor-period 5: expected milliseconds from 10 to 3600000"
echo "acct: ok"
