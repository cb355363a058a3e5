#!/usr/bin/env bash
# herd serve across hosts: from host h1 of the namespace cluster, four
# replicas of examples/replica.c on h1 and h2 (over ssh, two each) behind
# one front door on h1; wrk through it reaches replicas on both hosts
# with no failed request, and h2's replicas killed at once (as a lost
# node's) cost no request either: HAProxy retries on h1's, and herd
# restarts them away from the node they failed on, on h1.
# Needs root, iproute2, openssh-server, HAProxy and wrk; exits 77 without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
command -v haproxy >/dev/null && command -v wrk >/dev/null || exit 77
netns_start 2
on1() { timeout 120 "$cluster/run" 1 "$@"; }
replica=$(dirname "$HERD")/example_replica
export XDG_RUNTIME_DIR=$tmp/run
mkdir -m 700 "$XDG_RUNTIME_DIR"

on1 "$HERD" serve --hosts 'h[1-2]' --replicas 4 --port 8080 --health /health --grace 3 -- \
	"$replica" --work-ms 5 >"$tmp/out" 2>"$tmp/err" &
svc=$!
id=
for ((k = 0; k < 300; k++)); do
	id=$(sed -n 's/^herd serve: service \([^ ]*\) .*/\1/p' "$tmp/err")
	[[ -n $id ]] && [[ $(grep -c ' ready ' "$tmp/err") -ge 4 ]] && break
	sleep 0.1
done
[[ $(grep -c ' ready ' "$tmp/err") -ge 4 ]] || fail "4 replicas not ready: $(cat "$tmp/err")"
on1 wrk -t2 -c8 -d3s http://127.0.0.1:8080/infer >"$tmp/wrk1" 2>&1 || fail "wrk: $(cat "$tmp/wrk1")"
grep -qE 'Socket errors|Non-2xx' "$tmp/wrk1" && fail "requests failed: $(cat "$tmp/wrk1")"
st=$(on1 "$HERD" job status --json "$id")
python3 - "$st" <<'PY' || fail "replicas: $st"
import json, sys
d = json.loads(sys.argv[1])
hosts = sorted(r["host"] for r in d["replicas"])
assert hosts == ["h1", "h1", "h2", "h2"], hosts
assert all(r["requests"] > 0 and r["state"] == "ready" for r in d["replicas"]), d["replicas"]
print("requests per replica:", " ".join("%s:%d" % (r["host"], r["requests"]) for r in d["replicas"]))
PY
on1 "$HERD" job status "$id"

# h2's replicas killed under load: none of the requests fails
on1 wrk -t2 -c8 -d6s http://127.0.0.1:8080/infer >"$tmp/wrk2" 2>&1 &
w=$!
sleep 2
for p in $(python3 -c "import json,sys; d=json.loads(sys.argv[1]); print(' '.join(str(r['pid']) for r in d['replicas'] if r['host'] == 'h2'))" "$st"); do
	"$cluster/run" 2 kill -9 "$p"
done
wait "$w"
cat "$tmp/wrk2"
grep -qE 'Socket errors|Non-2xx' "$tmp/wrk2" && fail "requests failed: $(cat "$tmp/wrk2")"
for ((k = 0; k < 200; k++)); do
	[[ $(grep -c ' ready ' "$tmp/err") -ge 6 ]] && break
	sleep 0.1
done
[[ $(grep -c ' ready ' "$tmp/err") -ge 6 ]] || fail "h2's replicas not back: $(cat "$tmp/err")"
st=$(on1 "$HERD" job status --json "$id")
python3 -c "import json,sys; d=json.loads(sys.argv[1]); h=sorted(r['host'] for r in d['replicas']); assert h == ['h1'] * 4, h" "$st" \
	|| fail "restarted where they failed: $st"
on1 "$HERD" job stop "$id" >/dev/null
wait "$svc" || fail "herd serve exited $?: $(cat "$tmp/err")"
cat "$tmp/err"
echo ok
