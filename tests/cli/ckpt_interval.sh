#!/usr/bin/env bash
# herd ckpt interval: the interval per tier against Young's sqrt(2 C M)
# and the bounds that raise it (CheckFreq's overhead bound, a save's own
# time), its JSON, and the usage errors that name what was typed; herd
# ckpt hold's usage errors, and a holder that ends when its input closes.
set -u
HERD=${1:?usage: ckpt_interval.sh /path/to/herd}
fail() { echo "FAIL: $*" >&2; exit 1; }
has() { grep -qF -- "$2" <<<"$1" || fail "output lacks '$2':
$1"; }

out=$("$HERD" ckpt interval --mttf 8h peers=0.1,60.2,0.4 slow=0.1,172,112) \
	|| fail "herd ckpt interval: $out"
has "$out" "mean time to failure 28800 s; saves may stall at most 3.5% of the time"
# sqrt(2 * 0.1 * 28800) = 75.9; the optimum is Young's less about C.
has "$out" "peers          0.10     60.2      75.9        75.8     0.13%   0.9953  the optimum"
has "$out" "slow           0.10    172.0      75.9       112.0     0.09%   0.9912  the save's own time"
# A stall of 10 s a save is kept under 3.5% of the time: every 285.7 s,
# not at the optimum of a failure every 10 minutes.
bound=$("$HERD" ckpt interval --mttf 600 tight=10,60) || fail "tight: $bound"
has "$bound" "285.7     3.50%"
has "$bound" "the overhead bound"
json=$("$HERD" ckpt interval --json --mttf 90m --max-overhead 0.1 storage=4,95) || fail "--json: $json"
python3 -c 'import json, sys, math
d = json.loads(sys.argv[1]); t = d["tiers"][0]
assert d["mttf_s"] == 5400 and d["max_overhead"] == 0.1, d
assert t["tier"] == "storage" and abs(t["young_s"] - math.sqrt(2 * 4 * 5400)) < 1e-9, t
assert 0.9 < t["ettr"] < 1 and t["interval_s"] == t["optimum_s"], t' "$json" || fail "JSON: $json"

err=$("$HERD" ckpt interval peers=1,2 2>&1); rc=$?
[[ $rc == 2 ]] || fail "without --mttf: exit $rc"
has "$err" "interval needs --mttf TIME"
err=$("$HERD" ckpt interval --mttf soon peers=1,2 2>&1); rc=$?
[[ $rc == 2 ]] || fail "--mttf soon: exit $rc"
has "$err" "--mttf 'soon' is not a duration"
err=$("$HERD" ckpt interval --mttf 1h peers=1 2>&1); rc=$?
[[ $rc == 2 ]] || fail "peers=1: exit $rc"
has "$err" "'peers=1' is not TIER=SAVE,LOST[,BUSY]"
err=$("$HERD" ckpt interval --mttf 1h peers=0,2 2>&1); rc=$?
[[ $rc == 1 ]] || fail "a save of 0 s: exit $rc"
has "$err" "save_s is 0"

err=$("$HERD" ckpt hold --steps 3 2>&1 </dev/null); rc=$?
[[ $rc == 2 ]] || fail "hold --steps 3: exit $rc"
has "$err" "--steps '3' is not 1 or 2"
err=$("$HERD" ckpt hold --budget lots 2>&1 </dev/null); rc=$?
[[ $rc == 2 ]] || fail "hold --budget lots: exit $rc"
has "$err" "--budget 'lots' is not a size"
# A holder prints its port and token, and ends when its input does.
line=$(timeout 10 "$HERD" ckpt hold --bind 127.0.0.1 </dev/null) || fail "the holder did not end with its input"
[[ $line =~ ^hold\ [0-9]+\ [0-9a-f]{32}$ ]] || fail "the holder said: $line"
echo "ok: $out"
