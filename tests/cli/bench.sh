#!/usr/bin/env bash
# herd bench: small checked sweeps of allreduce on 2 and 3 local ranks print
# nccl-tests' table with #wrong 0 everywhere and exit 0; every operation runs
# once on 2 ranks, with other types, reductions and roots too; --json
# prints one object per size that parses; bad arguments are usage errors
# (message and usage on stderr, nothing on stdout, exit status 2).
set -u
HERD=${1:?usage: bench.sh /path/to/herd}
fail() { echo "FAIL: $*" >&2; exit 1; }
has() { grep -qF -- "$2" <<<"$1" || fail "output lacks '$2':
$1"; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
# Short per-call deadlines: a hang fails the test in seconds, not minutes.
export HERD_TIMEOUT=30
unset HERD_TRANSPORT HERD_ALGO

HEAD1='#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong'
HEAD2='#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)'

# check_table FILE NROWS: nccl-tests' header, NROWS rows, #wrong 0 in each
# column that has one, and the closing lines.
check_table() {
  local f=$1 want=$2
  grep -qxF -- "$HEAD1" "$f" || fail "no column header in $(cat "$f")"
  grep -qxF -- "$HEAD2" "$f" || fail "no units header in $(cat "$f")"
  grep -qE '^# Avg bus bandwidth    : [0-9.e+-]+$' "$f" || fail "no average in $(cat "$f")"
  grep -qxF '# Out of bounds values : 0 OK' "$f" || fail "wrong values in $(cat "$f")"
  awk -v want="$want" '
    /^#/ { next }
    NF != 13 { print "row with " NF " fields: " $0; bad = 1; next }
    { rows++
      if ($9 != "0" || ($13 != "0" && $13 != "N/A")) { print "wrong elements: " $0; bad = 1 }
      if ($6 !~ /^[0-9.]+$/ || $7 !~ /^[0-9.]+$/ || $8 !~ /^[0-9.]+$/) { print "bad figures: " $0; bad = 1 } }
    END { if (rows != want) { print rows " rows, want " want; bad = 1 }; exit bad }' "$f" \
    || fail "table $(cat "$f")"
}

# --- allreduce sweeps, checked, on 2 and 3 ranks
for np in 2 3; do
  "$HERD" bench allreduce -b 8 -e 64K -f 8 --iters 3 -w 1 -c 1 --np $np >"$tmp/out" 2>"$tmp/err" \
    || fail "allreduce --np $np exited $?: $(cat "$tmp/err")"
  grep -qE "^# herd bench allreduce: $np ranks on .+, transport auto, algo auto$" "$tmp/out" \
    || fail "first line: $(head -1 "$tmp/out")"
  check_table "$tmp/out" 5 # 8 B, 64 B, 512 B, 4 KiB, 32 KiB
  awk '!/^#/ && ($3 != "float32" || $4 != "sum" || $5 != "-1") { exit 1 }' "$tmp/out" \
    || fail "type, redop or root columns: $(cat "$tmp/out")"
done
# --- every operation once on 2 ranks
for op in allreduce allgather reduce_scatter broadcast reduce alltoall sendrecv; do
  "$HERD" bench $op -b 1K -e 64K -f 8 --iters 2 -w 1 --np 2 >"$tmp/out" 2>"$tmp/err" \
    || fail "$op exited $?: $(cat "$tmp/err") $(cat "$tmp/out")"
  grep -q "^# herd bench $op: 2 ranks" "$tmp/out" || fail "$op header: $(head -1 "$tmp/out")"
  check_table "$tmp/out" 3
done
# per-rank counts: allgather of 64 KiB on 2 ranks moves 8192 float32 per rank
grep -qE '^ +65536 +8192 +float32 +none +-1 ' <("$HERD" bench allgather -b 64K -e 64K --iters 1 -w 0 --np 2) \
  || fail "allgather count column"

# --- other types, reductions and roots, on 3 ranks
while read -r args; do
  "$HERD" bench $args -b 8 -e 4K -f 8 --iters 2 -w 1 --np 3 >"$tmp/out" 2>"$tmp/err" \
    || fail "bench $args exited $?: $(cat "$tmp/err") $(cat "$tmp/out")"
  check_table "$tmp/out" 4
done <<'EOF'
allreduce -d float16 -o sum
allreduce -d bfloat16 -o max
allreduce -d int8 -o prod
all_reduce -d int32 -o avg -a 1
allreduce -d float64 -o min -a 0
reduce_scatter_perf -d uint8 -o sum -t 1 -g 1
reduce -r 2 -o avg -a 2
broadcast -r 1 -d int64
EOF

# --- --json: one object per size, the table's fields
"$HERD" bench reduce_scatter -b 64 -e 4K -f 4 --iters 2 -w 1 --np 2 --json >"$tmp/json" 2>"$tmp/err" \
  || fail "--json exited $?: $(cat "$tmp/err")"
python3 - "$tmp/json" <<'PY' || fail "--json output: $(cat "$tmp/json")"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["size"] for r in rows] == [64, 256, 1024, 4096], rows
for r in rows:
    assert r["op"] == "reduce_scatter" and r["ranks"] == 2 and r["type"] == "float32"
    assert r["redop"] == "sum" and r["root"] == -1 and r["count"] * 2 * 4 == r["size"]
    for k in ("out_of_place", "in_place"):
        p = r[k]
        assert p["wrong"] == 0 and p["time_us"] > 0 and p["busbw"] >= 0, p
        assert abs(p["busbw"] - p["algbw"] / 2) <= 1e-5 + 1e-6 * p["algbw"], p
PY
# allreduce: busbw = algbw * 2(n-1)/n, 4/3 on 3 ranks
"$HERD" bench allreduce -b 4K -e 4K --iters 2 -w 1 --np 3 --json >"$tmp/json" || fail "allreduce --json"
python3 -c '
import json, sys
p = json.loads(open(sys.argv[1]).read())["out_of_place"]
assert abs(p["busbw"] - p["algbw"] * 4 / 3) <= 1e-5 + 1e-6 * p["algbw"], p' "$tmp/json" \
  || fail "allreduce busbw on 3 ranks: $(cat "$tmp/json")"
"$HERD" bench alltoall -b 1K -e 1K --iters 1 -w 0 -c 0 --np 2 --json >"$tmp/json" || fail "alltoall --json"
python3 -c '
import json, sys
r = json.loads(open(sys.argv[1]).read())
assert r["in_place"] is None and r["out_of_place"]["wrong"] is None, r' "$tmp/json" \
  || fail "alltoall -c 0 --json: $(cat "$tmp/json")"
# per call: median_us <= p99_us, and no call outlasts the whole timed loop
# (iters times the slowest rank's mean); the table has no such columns
"$HERD" bench allreduce -b 8 -e 512 -f 8 --iters 101 -w 2 -n 2 --json >"$tmp/json" \
  || fail "allreduce --iters 101 --json"
python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["size"] for r in rows] == [8, 64, 512], rows
for r in rows:
    for k in ("out_of_place", "in_place"):
        p = r[k]
        assert 0 < p["median_us"] <= p["p99_us"] <= p["time_us"] * 101 * (1 + 1e-9), p' "$tmp/json" \
  || fail "--json median_us and p99_us: $(cat "$tmp/json")"
"$HERD" bench allreduce -b 8 -e 8 --iters 3 -w 0 -n 2 >"$tmp/out" || fail "allreduce table"
! grep -q "median\|p99" "$tmp/out" || fail "the table grew columns: $(cat "$tmp/out")"

# --- usage
out=$("$HERD" bench --help) || fail "bench --help exited $?"
grep -qF "usage: herd bench OP" <<<"$out" || fail "bench --help: $out"
"$HERD" --help | grep -qF "bench OP" || fail "herd --help lacks bench"
while read -r args; do
  "$HERD" bench $args >"$tmp/out" 2>"$tmp/err"; rc=$?
  [[ $rc == 2 ]] || fail "bench $args exited $rc, want 2"
  [[ ! -s $tmp/out ]] || fail "bench $args wrote to stdout"
  grep -qxF "Try 'herd bench --help' for more information." "$tmp/err" || fail "bench $args: no hint: $(cat "$tmp/err")"
  [[ $(wc -l <"$tmp/err") == 2 ]] || fail "bench $args: more than one line and the hint: $(cat "$tmp/err")"
  grep -q "^herd bench: " "$tmp/err" || fail "bench $args: no message: $(cat "$tmp/err")"
done <<'EOF'

allscatter
allreduce extra
allreduce --bogus
allreduce -q
allreduce -b
allreduce -b 12Q
allreduce -b 1M -e 1K
allreduce -c 2
allreduce -n 0
allreduce -f x
allreduce -d float7
allreduce -t float32
allreduce -t 4
allreduce -g 8
allreduce -a 4
allreduce -N 0
allreduce -b 3 -e 3
allreduce -b 4 -e 8 -d float64
allreduce -o mean
allreduce --np 0
allreduce --np 2 -r 2
allreduce --transport ib
allreduce --algo tree
allreduce --device tpu
EOF
# --device gpu where no GPU is: why (bench_no_gpu.sh), exit 1, nothing
# measured (on a GPU machine the gpu tests run it); a herd built without
# CUDA on a machine with a driver refuses the option, as a usage error
if python3 -c 'import ctypes; ctypes.CDLL("libnvidia-ml.so.1")' 2>/dev/null; then
  if "$HERD" --version | grep -q "built without CUDA"; then
    "$HERD" bench allreduce --device gpu -b 8 -e 8 --np 2 >"$tmp/out" 2>"$tmp/err"; rc=$?
    [[ $rc == 2 ]] && grep -q -- "--device gpu: this herd was built without CUDA" "$tmp/err" \
      || fail "--device gpu in a herd without CUDA: exit $rc: $(cat "$tmp/err")"
  fi
else
  for op in allreduce alltoall sendrecv; do
    "$HERD" bench $op --device gpu -b 8 -e 8 --np 2 >"$tmp/out" 2>"$tmp/err"; rc=$?
    [[ $rc == 1 ]] || fail "$op --device gpu without a GPU exited $rc, want 1"
    grep -q "^herd bench: --device gpu: no GPU: " "$tmp/err" || fail "$op --device gpu: $(cat "$tmp/err")"
    grep -q "^ *8 " "$tmp/out" && fail "$op --device gpu measured without a GPU: $(cat "$tmp/out")"
  done
fi
# --- nccl-tests' messages for its own flags, and the one-rank notice
"$HERD" bench allreduce -t float32 2>&1 | grep -qF -- "-t float32: -t is nccl-tests' thread count; the datatype is -d" \
  || fail "-t float32 message"
"$HERD" bench allreduce -g 8 2>&1 | grep -qF -- "-g 8: herd bench uses one GPU per rank" || fail "-g 8 message"
out=$(env -u HERD_RANK -u RANK -u SLURM_PROCID -u OMPI_COMM_WORLD_RANK "$HERD" bench allreduce -b 8 -e 8 --iters 1 -w 0 2>&1) \
  || fail "one-rank bench exited $?: $out"
grep -qF "herd bench: running one rank (no -n and no launcher's variables)" <<<"$out" || fail "one-rank notice: $out"
# -N 2: the sweep twice
[[ $("$HERD" bench allreduce -b 8 -e 64 -f 8 --iters 1 -w 0 -N 2 --np 2 | grep -c '^ ') == 4 ]] || fail "-N 2 rows"

# --- a reader that goes away (| head -1): the first record, no words
# about the peers of the rank that got SIGPIPE, status 128+13 as `yes | head`
for np in 1 4; do
	"$HERD" bench allreduce -b 8 -e 16M --np $np --json 2>"$tmp/pipe_err" | head -1 >"$tmp/pipe_out"
	rc=${PIPESTATUS[0]}
	[[ $rc == 141 ]] || fail "--np $np --json | head -1: exit $rc"
	! grep -v "warning: this machine is busy" "$tmp/pipe_err" \
		|| fail "--np $np --json | head -1 wrote on stderr: $(cat "$tmp/pipe_err")"
	grep -q '^{"op":"allreduce","ranks":'$np',' "$tmp/pipe_out" || fail "first record: $(cat "$tmp/pipe_out")"
done

# --explain: the algorithm of each size and why; a forced class says only that
out=$("$HERD" bench allreduce -b 8 -e 2M -f 512 --iters 1 -w 0 --np 2 --explain 2>&1) || fail "--explain: $out"
has "$out" "# algorithm at 8 B: 8 bytes (sized as 8) on 2 ranks, 1 host with at most 2 ranks, algo auto: shared-memory direct, small"
has "$out" "# algorithm at 4096 B: 4096 bytes (sized as 4096) on 2 ranks, 1 host with at most 2 ranks, algo auto: shared-memory direct, small"
has "$out" "# algorithm at 2097152 B: 2097152 bytes (sized as 2097152) on 2 ranks, 1 host with at most 2 ranks, algo auto: shared-memory direct; passed over"
out=$(HERD_ALGO=ring "$HERD" bench allgather -b 64 -e 64 --iters 1 -w 0 --np 3 --explain 2>&1) || fail "--explain, ring: $out"
has "$out" "# algorithm at 48 B: 16 bytes (sized as 48) on 3 ranks, 1 host with at most 3 ranks, algo ring: ring"
out=$(HERD_ALGO=hier "$HERD" bench allreduce -b 8 -e 8 --iters 1 -w 0 --np 2 --explain 2>&1) || fail "--explain, hier: $out"
has "$out" "# algorithm at 8 B: 8 bytes (sized as 8) on 2 ranks, 1 host with at most 2 ranks, algo hier: shared-memory direct, small"
exit 0
