#!/usr/bin/env bash
# herd health against the stand-in libnvidia-ml.so.1 (tests/mock): every
# driver check of three healthy GPUs passes, the CUDA checks say why they
# could not run (exit 2); each fault the stand-in can play fails the check
# it belongs to and the GPU (exit 1), in the table and in --json; with no
# driver at all the answer is "no GPU checked" (exit 2); bad options are
# usage errors naming the option.
set -u
HERD=${1:?usage: health.sh /path/to/herd}
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
mock=$(cd "$(dirname "$HERD")/../tests/mock" && pwd)
[[ -f $mock/libnvidia-ml.so.1 ]] || fail "no NVML stand-in at $mock"

# No driver: nothing checked, and why.
out=$(LD_LIBRARY_PATH=$tmp "$HERD" health 2>&1); rc=$?
[[ $rc == 2 ]] || fail "no driver: exit $rc, want 2: $out"
grep -q '^no GPU checked: NVIDIA driver not found' <<<"$out" || fail "no driver: $out"

# Three healthy GPUs.
out=$(LD_LIBRARY_PATH=$mock "$HERD" health 2>&1); rc=$?
[[ $rc == 2 ]] || fail "healthy: exit $rc, want 2 (the CUDA checks cannot run here): $out"
[[ $(grep -c '^GPU[0-9].*: pass$' <<<"$out") == 3 ]] || fail "healthy: not three passing GPUs: $out"
for check in ecc memory-rows temperature power clocks clock-events pcie; do
  [[ $(grep -cE "^  $check +pass " <<<"$out") == 3 ]] || fail "healthy: $check did not pass thrice: $out"
done
grep -qE '^  temperature +pass  41 C, slowdown at 87 C$' <<<"$out" || fail "temperature row: $out"
grep -qE '^  pcie +pass  gen 5 x16 of gen 5 x16$' <<<"$out" || fail "pcie row: $out"
grep -qE '^  (cuda|copy-d2d) +skip  ' <<<"$out" || fail "no CUDA check said why it was skipped: $out"

# Each fault fails its check and the GPU at index 1, and only that GPU.
for f in ecc:ecc:'uncorrected 2 since the driver loaded' rows:memory-rows:'a remapping is pending' \
         thermal:temperature:'90 C, slowdown at 87 C' thermal:clock-events:'hardware thermal slowdown' \
         pcie:pcie:'gen 5 x8 of gen 5 x16: fewer lanes'; do
  IFS=: read -r fault check text <<<"$f"
  out=$(LD_LIBRARY_PATH=$mock HERD_NVML_MOCK_FAULT=$fault "$HERD" health 2>&1); rc=$?
  [[ $rc == 1 ]] || fail "$fault: exit $rc, want 1: $out"
  grep -qE "^  $check +fail  .*$text" <<<"$out" || fail "$fault: no failing $check row with '$text': $out"
  [[ $(grep -c '^GPU[0-9].*: fail$' <<<"$out") == 1 ]] || fail "$fault: not exactly one failing GPU: $out"
  grep -q '^GPU1 .*: fail$' <<<"$out" || fail "$fault: GPU1 did not fail: $out"
done

# Xid events in a saved kernel log: 79 fails GPU2, 13 warns GPU1, GPU0 has none;
# a log that cannot be read skips the check.
out=$(LD_LIBRARY_PATH=$mock HERD_KERNEL_LOG=tests/fixtures/kernel-log-xid.txt "$HERD" health 2>&1); rc=$?
[[ $rc == 1 ]] || fail "xid: exit $rc, want 1: $out"
grep -qE '^  xid +fail  Xid 79 x1 \(GPU has fallen off the bus\)$' <<<"$out" || fail "xid 79: $out"
grep -qE '^  xid +warn  Xid 13 x2$' <<<"$out" || fail "xid 13: $out"
grep -q '^GPU2 .*: fail$' <<<"$out" && grep -q '^GPU1 .*: warn$' <<<"$out" && grep -q '^GPU0 .*: pass$' <<<"$out" \
  || fail "xid: GPU results: $out"
out=$(LD_LIBRARY_PATH=$mock HERD_KERNEL_LOG=$tmp/none "$HERD" health 2>&1)
grep -qE "^  xid +skip  the kernel log cannot be read: $tmp/none: No such file or directory$" <<<"$out" \
  || fail "xid without a log: $out"

# --json: the same report, the exit status in it too.
LD_LIBRARY_PATH=$mock HERD_NVML_MOCK_FAULT=ecc "$HERD" health --json >"$tmp/h.json"; rc=$?
[[ $rc == 1 ]] || fail "--json: exit $rc, want 1"
python3 - "$tmp/h.json" <<'PY' || fail "--json: $(cat "$tmp/h.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["level"] == 1 and d["exit_status"] == 1 and d["note"] is None, d
assert [g["result"] for g in d["gpus"]] == ["pass", "fail", "pass"], d
ecc = [c for c in d["gpus"][1]["checks"] if c["name"] == "ecc"][0]
assert ecc["result"] == "fail" and ecc["value"] == 2 and ecc["unit"] == "errors", ecc
t = [c for c in d["gpus"][0]["checks"] if c["name"] == "temperature"][0]
assert t["value"] == 41 and t["unit"] == "C", t
PY

# Usage errors name the option.
for bad in "--level 3:--level 3: expected 1 or 2" "--level:--level needs a value: expected 1 or 2" \
           "--seconds 0:--seconds 0: expected more than 0" "--seconds 1e9:--seconds 1e9: expected" \
           "--bogus:unrecognized option '--bogus'" "extra:unexpected argument 'extra'"; do
  args=${bad%%:*} want=${bad#*:}
  # shellcheck disable=SC2086
  "$HERD" health $args >"$tmp/out" 2>"$tmp/err"; rc=$?
  [[ $rc == 2 ]] || fail "health $args: exit $rc, want 2"
  grep -qF -- "herd health: $want" "$tmp/err" || fail "health $args said: $(cat "$tmp/err")"
done
echo "ok   herd health: healthy, four faults, JSON, no driver, usage errors"
