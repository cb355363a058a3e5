#!/usr/bin/env bash
# herd top without a terminal: --once is this node's snapshot (its host
# name, CPU busy over a real period, memory of /proc/meminfo's total, and
# without NVML the note saying why there is no GPU); with the NVML
# stand-in and a state file of known figures, one line per GPU with those
# figures and the job:rank of a process on it (from its environment);
# at 60 columns the bars, the clock and the name are left out, of every GPU line
# alike; --json
# --count 2 is two lines of samples 1 and 2; usage errors exit 2 naming
# the option.  HERD_NVML_MOCK_DIR is the stand-in's directory
# (tests/CMakeLists.txt sets it).
source "$(dirname "$0")/../harness/common.sh" "$@"
pid=
trap '[[ -n $pid ]] && kill "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
mock=${HERD_NVML_MOCK_DIR:?HERD_NVML_MOCK_DIR: the NVML stand-in\'s directory}
[[ -f $mock/libnvidia-ml.so.1 ]] || fail "no NVML stand-in in $mock"

# No NVML: an empty library path where none is.
mkdir "$tmp/none"
out=$(LD_LIBRARY_PATH=$tmp/none timeout 30 "$HERD" top --once --period 200 2>"$tmp/err") \
	|| fail "top --once exited $?: $(cat "$tmp/err")"
[[ -s $tmp/err ]] && fail "top --once wrote on stderr: $(cat "$tmp/err")"
[[ $out != *$'\033'* ]] || fail "top --once wrote escape codes: $out"
head=$(sed -n 1p <<<"$out")
[[ $head == "herd top  $(hostname)  "[0-2][0-9]:[0-5][0-9]:[0-5][0-9]" #2  period 200 ms  sort index  filter none" ]] \
	|| fail "header: $head"
total=$(awk '/^MemTotal:/ { printf "%.1f", $2 / 1048576 }' /proc/meminfo)
node=$(sed -n 2p <<<"$out")
[[ $node =~ ^CPU\ +[0-9]+\.[0-9]%\ \ \[[#.]{10}\]\ \ load\ [0-9]+\.[0-9]{2}\ \ mem\ [0-9]+\.[0-9]/$total\ GiB\ \ \[[#.]{10}\]\ \ net\ rx\ [0-9.]+\ [KMGT]?i?B/s\ tx\ [0-9.]+\ [KMGT]?i?B/s$ ]] \
	|| fail "node line (memory total $total GiB): $node"
# (a machine with a real driver has its GPUs here, not the note)
if ! ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1 '; then
	[[ $(sed -n 3p <<<"$out") == "no GPUs: NVIDIA driver not found"* ]] \
		|| fail "no-GPU note: $(sed -n 3p <<<"$out")"
	[[ $(wc -l <<<"$out") == 3 ]] || fail "expected a header, a node line and the note: $out"
fi

# The stand-in's three GPUs with known figures, a rank of job7 on GPU 0.
(HERD_JOB_ID=job7 HERD_RANK=3 exec sleep 60) &
pid=$!
cat >"$tmp/state" <<EOF
gpu 0 util 87 mem_used 1073741824 power_mw 312000 power_limit_mw 650000 temp 55 sm_clock 1980
gpu 1 util 12 mem_used 42949672960 power_mw 98000 temp 47 sm_clock 1410
gpu 2 util 50 power_mw na temp na
proc 0 $pid 1073741824
EOF
export HERD_NVML_MOCK_STATE=$tmp/state
out=$(LD_LIBRARY_PATH=$mock timeout 30 "$HERD" top --once --period 100 2>"$tmp/err") \
	|| fail "top --once with the stand-in exited $?: $(cat "$tmp/err")"
want="GPU0   H100 80GB HBM3    [#########.]   87%  [..........]    1.0/79.6 GiB   312/650 W   55 C  1980 MHz  job7:3
GPU1   H100 80GB HBM3    [#.........]   12%  [#####.....]   40.0/79.6 GiB    98/700 W   47 C  1410 MHz  -
GPU2   H100 80GB HBM3    [#####.....]   50%  [..........]    0.0/79.6 GiB     -/700 W    - C   345 MHz  -"
[[ $(sed -n '3,$p' <<<"$out") == "$want" ]] || fail "GPU lines:
$out
expected:
$want"

# 60 columns: the bars, the clock and the name go, from every GPU line alike.
out=$(COLUMNS=60 LD_LIBRARY_PATH=$mock timeout 30 "$HERD" top --once --period 100 2>"$tmp/err") \
	|| fail "COLUMNS=60 top --once exited $?: $(cat "$tmp/err")"
want="GPU0    87%    1.0/79.6 GiB   312/650 W   55 C  job7:3
GPU1    12%   40.0/79.6 GiB    98/700 W   47 C  -
GPU2    50%    0.0/79.6 GiB     -/700 W    - C  -"
[[ $(sed -n '3,$p' <<<"$out") == "$want" ]] || fail "60 columns:
$out
expected:
$want"
awk 'length > 60 { exit 1 }' <<<"$out" || fail "a line wider than 60 columns: $out"
kill "$pid"
pid=

# --json: a line per sample, seq 1 and 2, then exit 0.
LD_LIBRARY_PATH=$mock timeout 30 "$HERD" top --json --count 2 --period 100 >"$tmp/json" 2>"$tmp/err" \
	|| fail "top --json exited $?: $(cat "$tmp/err")"
python3 - "$tmp/json" "$(hostname)" <<'PY' || fail "top --json: $(cut -c1-300 "$tmp/json")"
import json, sys
lines = open(sys.argv[1]).read().split("\n")
assert lines[-1] == "" and len(lines) == 3, lines
recs = [json.loads(l) for l in lines[:2]]
assert [r["seq"] for r in recs] == [1, 2], [r["seq"] for r in recs]
assert all(r["host"] == sys.argv[2] for r in recs)
assert [g["util_gpu"] for g in recs[1]["gpus"]] == [12, 50, 87], recs[1]["gpus"]
assert recs[0]["cpu_busy"] == -1 and recs[1]["cpu_busy"] >= 0
PY

# Usage errors: exit 2, the option named.
usage() {
	local want=$1 rc
	shift
	"$HERD" top "$@" >"$tmp/out" 2>"$tmp/err" </dev/null; rc=$?
	[[ $rc == 2 ]] || fail "top $*: exit $rc, expected 2"
	[[ -s $tmp/out ]] && fail "top $*: wrote on stdout: $(cat "$tmp/out")"
	[[ $(head -1 "$tmp/err") == "herd top: $want" ]] || fail "top $*: $(cat "$tmp/err")"
}
usage "--period 5: expected milliseconds from 10 to 3600000" --once --period 5
usage "--period needs a value: expected milliseconds from 10 to 3600000" --once --period
usage "--count 0: expected a whole number from 1" --json --count 0
usage "--count: only with --json" --once --count 2
usage "--json: --once and --json do not go together" --once --json
usage "unrecognized option '--hosts'" --once --hosts a
usage "stdout is not a terminal: use --once for a snapshot or --json for a stream"
echo "top: ok"
