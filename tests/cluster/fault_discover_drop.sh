#!/usr/bin/env bash
# A host that drops off while herd discover probes it: four hosts of the
# namespace cluster, h3 slow to answer (its herd is a wrapper that waits
# 2 s) and its link cut once its ssh session is up and the wrapper runs.
# herd discover --timeout 3 returns within 4 s, exits 1, names h3
# and why, and keeps the inventory of the three others (saved, with h3
# among the failed); no ssh client of it is left.  Needs root, iproute2 and
# openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
netns_start 4

cat >"$tmp/slow-herd" <<XEOF
#!/bin/sh
[ "\$(hostname)" = h3 ] && sleep 2
exec "$HERD" "\$@"
XEOF
chmod +x "$tmp/slow-herd"
t0=$(mono)
HERD_PROGRAM=$tmp/slow-herd timeout 60 "$cluster/run" 1 "$HERD" discover --hosts 'h[1-4]' --timeout 3 \
	--save "$tmp/inv.json" >"$tmp/out" 2>"$tmp/err" &
job=$!
for _ in $(seq 200); do
	[[ -n $(host_pids 3 slow-herd) ]] && break
	sleep 0.01
done
[[ -n $(host_pids 3 slow-herd) ]] || fail "h3's probe did not start"
bash tests/harness/netns.sh cut "$cluster" 3
wait $job; rc=$?
secs=$(awk -v a="$t0" -v b="$(mono)" 'BEGIN { printf "%.2f", b - a }')
echo "discover with h3 dropping off: exit $rc after $secs s: $(cat "$tmp/err")"
[[ $rc == 1 ]] || fail "herd discover exited $rc, not 1: $(cat "$tmp/out" "$tmp/err")"
within "$secs" 4 "herd discover returned"
has "$(cat "$tmp/err")" "herd discover: h3: no answer within 3 s (--timeout)"
python3 - "$tmp/inv.json" <<'PY' || fail "the saved inventory: $(head -c 2000 "$tmp/inv.json")"
import json, sys
inv = json.load(open(sys.argv[1]))
hosts = [n["hostname"] for n in inv["nodes"]]
failed = [f["host"] for f in inv.get("failed", [])]
assert hosts == ["h1", "h2", "h4"], hosts
assert failed == ["h3"], failed
print("inventory: nodes %s, failed %s" % (",".join(hosts), ",".join(failed)))
PY
secs=$(job_gone 2 "probe --text") || exit 1
exit 0
