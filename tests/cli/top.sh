#!/usr/bin/env bash
# herd top without a terminal: --once shows this node (its host name, a
# CPU line whose busy share is a percentage, its memory total as
# /proc/meminfo says, the note that there is no GPU), as plain text; with
# the NVML stand-in, three GPU lines with their figures and the job:rank
# of a process on one of them, in the order --sort asks, under --filter,
# and fitted to a narrow $COLUMNS; --json writes records that parse, one
# a line, seq 1, 2, 3; nodes over a stand-in ssh, one of them unreachable;
# stopped 3.5 s and continued, --json streams on;
# usage errors name the option and exit 2; the live view refuses a
# standard output that is not a terminal.
source "$(dirname "$0")/../harness/common.sh" "$@"
mock=$(cd "$(dirname "$HERD")/../tests/mock" && pwd)
[[ -f $mock/libnvidia-ml.so.1 ]] || fail "no NVML stand-in at $mock"
host=$(hostname)
export HERD_LEASE_DIR=$tmp/leases
unset HERD_NVML_MOCK_STATE HERD_NVML_MOCK_FAULT SLURM_JOB_ID SLURM_JOB_NODELIST COLUMNS
holder=
trap '[[ -n $holder ]] && kill "$holder" 2>/dev/null; rm -rf "$tmp"' EXIT

# --- this node, once
out=$(timeout 30 "$HERD" top --once --period 200 2>"$tmp/err"); rc=$?
[[ $rc == 0 ]] || fail "--once exited $rc: $(cat "$tmp/err")"
[[ ! -s $tmp/err ]] || fail "--once said: $(cat "$tmp/err")"
grep -q $'\033' <<<"$out" && fail "--once into a pipe wrote escape codes: $out"
[[ $(head -1 <<<"$out") == "herd top  $host  "[0-9][0-9]:[0-9][0-9]:[0-9][0-9]"  every 200 ms  sort: index" ]] ||
	fail "--once header: $(head -1 <<<"$out")"
node=$(grep "^$host " <<<"$out") || fail "--once: no line of $host: $out"
busy=$(sed -nE 's/.* cpu \[[| ]*([0-9.]+)%\].*/\1/p' <<<"$node")
[[ -n $busy ]] || fail "--once: no CPU figure (rates of one period) in: $node"
awk -v b="$busy" 'BEGIN { exit !(b >= 0 && b <= 100) }' || fail "--once: CPU $busy% busy"
total=$(awk '/^MemTotal:/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)
used=$(sed -nE "s#.* mem \[[| ]*([0-9.]+)/$total"'G\].*#\1#p' <<<"$node")
[[ -n $used ]] || fail "--once: no memory of ${total}G in: $node"
awk -v u="$used" -v t="$total" 'BEGIN { exit !(u > 0 && u <= t) }' || fail "--once: ${used}G of ${total}G used"
[[ $node =~ \ load\ [0-9]+\.[0-9][0-9]\  ]] || fail "--once: no load figure in: $node"
[[ $node =~ \ net\ rx\ [0-9.]+[kMGT]?B/s\ tx\ [0-9.]+[kMGT]?B/s$ ]] || fail "--once: no network rates in: $node"
ngpus=$(timeout 30 "$HERD" top --once --json --period 100 | python3 -c 'import json, sys; print(len(json.loads(sys.stdin.readline())["gpus"]))')
if [[ $ngpus == 0 ]]; then
	has "$out" "  no GPU: NVIDIA driver not found"
else
	echo "top: a driver sees $ngpus GPUs here: the no-GPU note is not checked"
fi

# --- three GPUs of the stand-in, one of them used by rank 3 of job train7
env HERD_JOB_ID=train7 HERD_RANK=3 sleep 120 &
holder=$!
label="train7:3"
if [[ $(stat -L -c %i /proc/self/ns/pid) != 4026531836 ]]; then
	label="pid $holder"   # a pid namespace of its own: NVML's pids name no process here
fi
cat >"$tmp/state" <<EOF
gpu 0 util 10 mem_used 42949672960 power_mw 100000 temp 50 sm_clock 1410
gpu 1 util 90 mem_used 8589934592 power_mw 650000 temp 71 sm_clock 1980
gpu 2 util 50 mem_used 0 power_mw na temp 45
proc 1 $holder 8589934592
EOF
export HERD_NVML_MOCK_STATE=$tmp/state
gpus() { LD_LIBRARY_PATH=$mock timeout 30 "$HERD" top --once --period 100 "$@"; }
out=$(gpus 2>&1) || fail "--once with the stand-in exited $?: $out"
has "$out" "  GPU NAME           UTIL"
has "$out" "    0 H100 80GB HBM3 [||"
[[ $(grep -c '^    [0-9] H100 80GB HBM3 ' <<<"$out") == 3 ]] || fail "not three GPU lines: $out"
[[ $(grep -o '^    [0-9] ' <<<"$out" | tr -d ' \n') == 012 ]] || fail "not in index order: $out"
line0=$(grep '^    0 ' <<<"$out")
[[ $line0 =~ 10%\]\ \[.*\ 40\.0/79\.6G\]\ +100/700W\ +50C\ +1410\ -$ ]] || fail "GPU 0: $line0"
line1=$(grep '^    1 ' <<<"$out")
[[ $line1 =~ 90%\]\ \[.*\ 8\.0/79\.6G\]\ +650/700W\ +71C\ +1980\ "$label"$ ]] || fail "GPU 1: $line1"
line2=$(grep '^    2 ' <<<"$out")
[[ $line2 =~ 50%\]\ \[\ +0\.0/79\.6G\]\ +-\ +45C\ +345\ -$ ]] || fail "GPU 2: $line2"
[[ $(grep -o '^    [0-9] ' <<<"$(gpus --sort util)" | tr -d ' \n') == 120 ]] || fail "--sort util: $(gpus --sort util)"
[[ $(grep -o '^    [0-9] ' <<<"$(gpus --sort memory)" | tr -d ' \n') == 012 ]] || fail "--sort memory: $(gpus --sort memory)"
[[ $(grep -o '^    [0-9] ' <<<"$(gpus --sort power)" | tr -d ' \n') == 102 ]] || fail "--sort power: $(gpus --sort power)"
[[ $(grep -o '^    [0-9] ' <<<"$(gpus --sort temp)" | tr -d ' \n') == 102 ]] || fail "--sort temp: $(gpus --sort temp)"
if [[ $label == train7:3 ]]; then
	out=$(gpus --filter TRAIN7)
	[[ $(grep -o '^    [0-9] ' <<<"$out" | tr -d ' \n') == 1 ]] || fail "--filter TRAIN7: $out"
	has "$out" "$host "
fi
out=$(gpus --filter "$host")
[[ $(grep -c '^    [0-9] ' <<<"$out") == 3 ]] || fail "--filter HOST: $out"
out=$(gpus --filter nothing-like-this)
has "$out" 'no node or GPU matches "nothing-like-this"'
grep -q '^    [0-9] ' <<<"$out" && fail "--filter nothing-like-this shows GPUs: $out"
# A narrow terminal's width: no line wider, the SM clock and the name left out first.
out=$(COLUMNS=64 gpus)
awk 'length($0) > 64 { bad = 1 } END { exit bad }' <<<"$out" || fail "a line wider than 64 columns: $out"
grep -q "SM MHz\|H100" <<<"$out" && fail "at 64 columns the SM clock and the name are still there: $out"
[[ $(grep -c '^    [0-9] \[' <<<"$out") == 3 ]] || fail "at 64 columns, not three GPU lines: $out"
has "$(grep '^    1 ' <<<"$out")" "71C"

# --- --json: a record a line, seq 1, 2, 3 of this host
timeout 30 "$HERD" top --json --count 3 --period 100 >"$tmp/json" 2>"$tmp/err"; rc=$?
[[ $rc == 0 ]] || fail "--json --count 3 exited $rc: $(cat "$tmp/err")"
python3 - "$tmp/json" "$host" <<'PY' || fail "--json records: $(cat "$tmp/json")"
import json, sys
lines = open(sys.argv[1]).read().split("\n")
assert lines[-1] == "", "no newline at the end"
recs = [json.loads(l) for l in lines[:-1]]
assert [r["seq"] for r in recs] == [1, 2, 3], [r["seq"] for r in recs]
assert all(r["v"] == 1 and r["host"] == sys.argv[2] for r in recs)
assert recs[0]["cpu_busy"] == -1 and 0 <= recs[2]["cpu_busy"] <= 100
assert recs[2]["period_ms"] > 0 and recs[2]["mem_total"] > 0
PY
# a reader that goes away ends it, as yes | head
timeout 30 "$HERD" top --json --period 100 2>"$tmp/err" | head -1 >"$tmp/json"
rc=${PIPESTATUS[0]}
[[ $rc == 141 ]] || fail "--json | head -1: exit $rc, want 141: $(cat "$tmp/err")"
[[ $(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["seq"])' "$tmp/json") == 1 ]] ||
	fail "--json | head -1: $(cat "$tmp/json")"
# SIGTERM ends the stream, exit status 0
timeout 30 "$HERD" top --json --period 100 >"$tmp/json" 2>"$tmp/err" &
pid=$!
for _ in $(seq 100); do [[ -s $tmp/json ]] && break; sleep 0.1; done
kill -TERM "$pid"
wait "$pid"; rc=$?
[[ $rc == 0 ]] || fail "--json after SIGTERM: exit $rc: $(cat "$tmp/err")"
python3 -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' "$tmp/json" ||
	fail "--json cut short by SIGTERM: $(tail -c 300 "$tmp/json")"

# --- nodes over a stand-in ssh that runs each node's command here; one is unreachable
cat >"$tmp/ssh" <<'EOF'
#!/bin/sh
while [ $# -gt 0 ] && [ "$1" != -- ]; do shift; done
shift
host=$1
shift
case $host in
refused) echo "ssh: connect to host $host port 22: Connection refused" >&2; exit 255 ;;
esac
eval "exec $*"
EOF
chmod +x "$tmp/ssh"
export HERD_SSH=$tmp/ssh HERD_PROGRAM=$HERD
out=$(timeout 60 "$HERD" top --once --period 100 --hosts h1,h2,refused 2>"$tmp/err"); rc=$?
[[ $rc == 1 ]] || fail "--hosts with an unreachable node: exit $rc, want 1: $out $(cat "$tmp/err")"
has "$(head -1 <<<"$out")" "herd top  3 nodes: h1,h2,refused  "
grep -q '^h1      cpu \[' <<<"$out" || fail "no line of h1: $out"
grep -q '^h2      cpu \[' <<<"$out" || fail "no line of h2: $out"
has "$out" "refused unreachable: ssh: connect to host refused port 22: Connection refused"
[[ $(cat "$tmp/err") == "herd top: refused: unreachable: ssh: connect to host refused port 22: Connection refused" ]] ||
	fail "--hosts: stderr: $(cat "$tmp/err")"
timeout 60 "$HERD" top --json --count 2 --period 100 --hosts h1,h2 >"$tmp/json" 2>"$tmp/err"; rc=$?
[[ $rc == 0 ]] || fail "--json --hosts h1,h2 exited $rc: $(cat "$tmp/err")"
[[ $(python3 -c 'import json, sys; print(" ".join(sorted("%s:%d" % (r["host"], r["seq"]) for r in map(json.loads, open(sys.argv[1])))))' "$tmp/json") == "h1:1 h1:2 h2:1 h2:2" ]] ||
	fail "--json --hosts h1,h2: $(cut -c1-120 "$tmp/json")"
unset HERD_SSH HERD_PROGRAM

# --- stopped (Ctrl-Z, SIGSTOP) longer than a node's stall deadline (3
# periods and 2 s): continued, it streams on rather than take its own
# lateness for a stalled node
timeout 60 "$HERD" top --json --period 100 --count 40 >"$tmp/json" 2>"$tmp/err" &
job=$!
for ((k = 0; k < 100; k++)); do
	[[ $(wc -l <"$tmp/json") -ge 3 ]] && break
	sleep 0.1
done
kill -STOP $job
sleep 3.5
kill -CONT $job
wait $job || fail "top --json stopped 3.5 s: exit $?: $(cat "$tmp/err")"
[[ $(wc -l <"$tmp/json") == 40 && ! -s $tmp/err ]] || fail "top --json stopped 3.5 s: $(wc -l <"$tmp/json") lines; $(cat "$tmp/err")"

# --- usage errors: exit 2, the option named
usage() {
	local want=$1
	shift
	out=$(timeout 30 "$HERD" top "$@" 2>&1 </dev/null); rc=$?
	[[ $rc == 2 ]] || fail "top $*: exit $rc, want 2: $out"
	[[ $(head -1 <<<"$out") == "herd top: $want"* ]] || fail "top $*: said: $out"
}
usage "--period 50: milliseconds from 100" --once --period 50
usage "--period soon: " --once --period soon
usage "option '--period' needs a value" --once --period
usage "--sort speed: expected index, util, memory, power or temp" --once --sort speed
usage "--count 0: a number of samples" --json --count 0
usage "--count is for --json" --once --count 3
usage "--sort is for the view" --json --sort util
usage "--hosts, --hostfile and --slurm each name the nodes" --once --hosts a --slurm
usage "unrecognized option '--bogus'" --bogus
usage "unrecognized option '--per' (options are never abbreviated: --period?)" --per 100
usage "unexpected argument 'now'" --once now
usage "standard output is not a terminal, which the live view needs: --once prints one snapshot, --json a line per sample"
usage "cannot open $tmp/none: No such file or directory" --once --hostfile "$tmp/none"
out=$(timeout 30 "$HERD" top --once --slurm 2>&1); rc=$?
[[ $rc == 2 ]] || fail "--slurm outside an allocation: exit $rc: $out"
has "$out" "herd top: "
has "$out" "not inside a Slurm allocation"
echo "top: ok"
