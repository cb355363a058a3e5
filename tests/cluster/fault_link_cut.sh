#!/usr/bin/env bash
# A host's link cut in the middle of a loop of allreduces (four hosts of
# the namespace cluster, tests/harness/netns.sh; HERD_TIMEOUT=5): every
# rank on the other hosts fails its call within the deadline plus 1 s,
# naming host h3 and its rank (itself or through the rank that failed first); the job fails; and once it is over no
# process of it is left on any host, h3's included.
# Needs root, iproute2 and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
netns_start 4

# Each rank times the call that fails and says how it failed.
cat >"$tmp/loop.lua" <<'LUA'
local c = herd.comm()
local b = herd.buffer("float32", 1024)
for i = 1, 10000000 do
  local t0 = herd.clock()
  local ok, msg, st = c:allreduce(b)
  if not ok then
    print(string.format("FAILED after %.3f s: %s: %s", herd.clock() - t0, st, msg))
    os.exit(3)
  end
  if i == 200 then print("running") io.stdout:flush() end
end
LUA
HERD_TIMEOUT=5 timeout 120 "$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' -n 4 -- "$HERD" "$tmp/loop.lua" \
	>"$tmp/out" 2>"$tmp/err" &
job=$!
for _ in $(seq 300); do
	[[ $(grep -c "running" "$tmp/out") == 4 ]] && break
	sleep 0.1
done
[[ $(grep -c "running" "$tmp/out") == 4 ]] || fail "the ranks did not start: $(cat "$tmp/out" "$tmp/err")"
ip -n "herd-$id-h3" link set eth0 down
wait $job; rc=$?
[[ $rc != 0 ]] || fail "the job succeeded with h3 cut off"
# Each names h3's rank: itself, or through the rank that failed first (a
# rank tells its peers why it failed before its caller sees the error).
for r in 0 1 3; do
	line=$(grep "^\[h$((r + 1)):$r\] FAILED after" "$tmp/out") || fail "rank $r did not fail: $(cat "$tmp/out" "$tmp/err")"
	secs=$(sed -E 's/.*FAILED after ([0-9.]+) s.*/\1/' <<<"$line")
	echo "rank $r: failed after $secs s: ${line#*: }"
	awk -v s="$secs" 'BEGIN { exit !(s <= 5 + 1) }' || fail "rank $r failed after $secs s, beyond the deadline (5 s) plus 1 s"
	grep -q "HERD_E[A-Z]*: .*rank 2 (host h3" <<<"$line" || fail "rank $r does not name h3's rank: $line"
done
# Nothing of the job is left on any host (h3's rank ends at its own deadline).
for _ in $(seq 300); do
	pgrep -f "$tmp/loop.lua" >/dev/null || break
	sleep 0.1
done
! pgrep -fa "$tmp/loop.lua" || fail "processes of the job are left"
exit 0
