#!/usr/bin/env bash
# The Lua examples of examples/lua, run as their headers say (the sweep
# runs in plot_svg.sh, which renders its SVG).
set -u
HERD=${1:?usage: examples_lua.sh /path/to/herd}
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
host=$(hostname)

# spmd_hello: four prefixed lines, one per rank, and the allreduce
out=$(timeout 120 "$HERD" launch -n 4 examples/lua/spmd_hello.lua 2>&1) || fail "spmd_hello exited $?: $out"
for r in 0 1 2 3; do
  grep -qxE "\[$host:$r\] rank $r of 4 on $host \(local rank $r\), GPUs: .+" <<<"$out" \
    || fail "spmd_hello: no line of rank $r: $out"
done
grep -qxF "[$host:0] allreduce of the ranks 0..3: 6 (expected 6)" <<<"$out" \
  || fail "spmd_hello: no collective result: $out"
[[ $(wc -l <<<"$out") == 5 ]] || fail "spmd_hello printed more than 5 lines: $out"

# cluster_report: a fixture's report, and this node's
out=$(timeout 60 "$HERD" examples/lua/cluster_report.lua tests/fixtures/inventory/dgx-h100.json) \
  || fail "cluster_report exited $?"
grep -qxF "CPUs    2 x Intel(R) Xeon(R) Platinum 8480C: 112 cores, 224 threads" <<<"$out" || fail "report: $out"
grep -qxF "  GPU7  NVIDIA H100 80GB HBM3  0000:df:00.0  79.6 GiB  cc 9.0  NUMA 1" <<<"$out" || fail "report: $out"
grep -qE "^GPU0  X     NV18 .* PIX   NODE  NODE  NODE  SYS   SYS   SYS   SYS$" <<<"$out" || fail "matrix: $out"
grep -qxF "  NIC7: mlx5_7" <<<"$out" || fail "report NICs: $out"
timeout 60 "$HERD" examples/lua/cluster_report.lua >"$tmp/local" || fail "cluster_report of this node exited $?"
grep -qxF "== $host" "$tmp/local" || fail "this node's report: $(cat "$tmp/local")"

# restart_demo: killed, restarted, the same weights as the undisturbed run
out=$(timeout 300 "$HERD" examples/lua/restart_demo.lua "$tmp/ckpt" 2>"$tmp/err") \
  || fail "restart_demo exited $?: $out $(cat "$tmp/err")"
grep -qF "killed:      1 restart, resumed from step 4" <<<"$out" || fail "restart_demo: $out"
grep -qxF "the same weights, bit for bit, on both ranks" <<<"$out" || fail "restart_demo: $out"
grep -qF "restarting every rank (restart 1 of 1)" "$tmp/err" || fail "no restart: $(cat "$tmp/err")"
[[ ! -e $tmp/ckpt ]] || fail "restart_demo left its directory"

# restart_demo --damage: the newest step (6) damaged in a copy; the resume
# moves it aside, goes back to step 4 and trains on past step 6 (saving it
# anew), and ends with the weights of the copy resumed from step 4 without
# step 6, and of the undisturbed run, bit for bit.  Twice: the same digits.
for k in 1 2; do
  out=$(timeout 300 "$HERD" examples/lua/restart_demo.lua --damage "$tmp/dmg" 2>"$tmp/err") \
    || fail "restart_demo --damage exited $?: $out $(cat "$tmp/err")"
  grep -qE '^damaged: +step 6 moved aside as step-000000000006\.damaged-[0-9]{8}T[0-9]{6}Z, resumed from step 4, w\[1\] = ' <<<"$out" \
    || fail "restart_demo --damage: $out"
  grep -qE '^removed: +step 6 removed, resumed from step 4, w\[1\] = ' <<<"$out" \
    || fail "restart_demo --damage: $out"
  grep -qxF "the same weights, bit for bit, on both ranks, in all three runs" <<<"$out" \
    || fail "restart_demo --damage: $out"
  grep -qF "restoring checkpoint step 6: " "$tmp/err" && grep -qF "; trying the step before" "$tmp/err" \
    || fail "restart_demo --damage: no fallback said: $(cat "$tmp/err")"
  grep -qE "checkpoint step 6 in $tmp/dmg/damaged does not verify: moved it aside to $tmp/dmg/damaged/step-000000000006\.damaged-[0-9]{8}T[0-9]{6}Z, kept for inspection" "$tmp/err" \
    || fail "restart_demo --damage: no warning naming where step 6 went: $(cat "$tmp/err")"
  [[ ! -e $tmp/dmg ]] || fail "restart_demo --damage left its directory"
  weights[k]=$(grep -o 'w\[1\] = .*' <<<"$out")
done
[[ ${weights[1]} == "${weights[2]}" ]] || fail "two runs of restart_demo --damage differ: ${weights[1]} / ${weights[2]}"
echo "examples_lua: ok"
