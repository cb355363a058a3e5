#!/usr/bin/env bash
# herd serve: replicas of examples/replica.c behind a real HAProxy, driven
# by wrk through the front door.
#   - a replica killed with SIGKILL under a steady load: the requests that
#     fail are at most those in flight on it (HAProxy retries the rest:
#     here none fail), none fail after; it is restarted alone, with its own
#     restart count, and the others serve on;
#   - a rolling restart of 4 replicas under load: 0 failed requests, every
#     replica a new process;
#   - scaling from 2 to 4 with --target under a load 2 cannot hold, the new
#     replicas serving within 10 s plus their start time, and back to 2
#     after the cool-down once the load stops; herd job scale within the
#     range and refused beyond it;
#   - herd jobs lists the service, herd job status shows each replica;
#   - GPUs per replica: 3 replicas of 2 GPUs on a recorded DGX H100 get
#     6 distinct GPUs;
#   - a rolling restart onto a failing version stops at its first replica,
#     the others serving on; replicas scaled down or stopped while still
#     starting leave no process;
#   - a replica that always fails is left down once its restarts are
#     spent, and a service with every replica down ends, exit 1;
#   - HAProxy missing or too old, the front door's port taken, usage
#     errors: exit 125 or 2 with the reason;
#   - examples/replica.c answers keep-alive, pipelined, HTTP/1.0, HEAD, and
#     refuses what it does not take (413, 501, 400).
source "$(dirname "$0")/../harness/common.sh" "$@"
command -v haproxy >/dev/null && command -v wrk >/dev/null || exit 77
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
export XDG_RUNTIME_DIR=$tmp/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
replica=$(dirname "$HERD")/example_replica
[[ -x $replica ]] || fail "no $replica"

# serve LOG ARGS...: herd serve in the background (its stderr in LOG); id set
# once herd jobs lists it (10 s at most).
serve() {
	local log=$1
	shift
	: >"$log"
	timeout 120 "$HERD" serve "$@" >"$log.out" 2>"$log" &
	svc=$!
	pids+=("$svc")
	id=
	for ((k = 0; k < 100 && ${#id} == 0; k++)); do
		id=$(sed -n 's/^herd serve: service \([^ ]*\) .*/\1/p' "$log")
		[[ -n $id ]] || sleep 0.1
	done
	[[ -n $id ]] || fail "herd serve $*: not started: $(cat "$log")"
}

# ready N: waits until N replicas are ready (at most 20 s); prints the status.
ready() {
	local st=
	for ((k = 0; k < 200; k++)); do
		st=$("$HERD" job status --json "$id")
		[[ $(grep -o '"state":"ready"' <<<"$st" | wc -l) -ge $1 ]] && return 0
		sleep 0.1
	done
	fail "$1 replicas not ready within 20 s: $st"
}

# failed WRK_OUTPUT: requests that failed (socket errors and non-2xx answers).
failed() {
	python3 - "$1" <<'EOF'
import re, sys
t = open(sys.argv[1]).read()
n = sum(int(x) for x in re.findall(r"(?:connect|read|write|timeout) (\d+)", t))
m = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
print(n + (int(m.group(1)) if m else 0))
EOF
}

field() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# stop: herd job stop, and herd serve exits 0 within 30 s.
stop() {
	"$HERD" job stop "$id" >/dev/null || fail "herd job stop $id"
	for ((k = 0; k < 300; k++)); do kill -0 "$svc" 2>/dev/null || break; sleep 0.1; done
	wait "$svc"
	rc=$?
	[[ $rc == 0 ]] || fail "herd serve exited $rc after herd job stop: $(cat "$1")"
}

# --- usage errors and what keeps a service from starting
out=$("$HERD" serve -- true 2>&1); rc=$?
[[ $rc == 2 ]] && has "$out" "--port PORT is required" || fail "no --port: $rc: $out"
out=$("$HERD" serve --port 9 --replicas 4-2 -- true 2>&1); rc=$?
[[ $rc == 2 ]] && has "$out" "--replicas 4-2: expected N, or MIN-MAX" || fail "4-2: $rc: $out"
out=$("$HERD" serve --port 9 --target 3 -- true 2>&1); rc=$?
[[ $rc == 2 ]] && has "$out" "--target needs a range" || fail "--target: $rc: $out"
out=$("$HERD" serve --port 9 --health 'a b' -- true 2>&1); rc=$?
[[ $rc == 2 ]] && has "$out" "--health a b: expected an HTTP path" || fail "--health: $rc: $out"
out=$(HERD_HAPROXY=$tmp/none "$HERD" serve --port 9 -- true 2>&1); rc=$?
[[ $rc == 125 ]] && has "$out" "HAProxy is not installed here" || fail "no haproxy: $rc: $out"
printf '#!/bin/sh\necho "HA-Proxy version 1.8.19 2019/02/11"\n' >"$tmp/old-haproxy"
chmod +x "$tmp/old-haproxy"
out=$(HERD_HAPROXY=$tmp/old-haproxy "$HERD" serve --port 9 -- true 2>&1); rc=$?
[[ $rc == 125 ]] && has "$out" "is HAProxy 1.8.19; herd needs 2.0 or newer" \
	|| fail "old haproxy: $rc: $out"
base=$(free_ports 8)
python3 -c "import socket,time; s=socket.socket(); s.bind(('127.0.0.1', $base)); s.listen(); time.sleep(30)" &
pids+=($!)
for ((k = 0; k < 50; k++)); do
	python3 -c "import socket; socket.create_connection(('127.0.0.1', $base), 0.2)" 2>/dev/null && break
	sleep 0.1
done
out=$(timeout 30 "$HERD" serve --port "$base" -- "$replica" 2>&1); rc=$?
[[ $rc == 125 ]] && has "$out" "the front door 127.0.0.1:$base cannot be opened" \
	|| fail "port taken: $rc: $out"

out=$("$HERD" serve --port 9 --prefix '[%h:%x] ' -- true 2>&1); rc=$?
[[ $rc == 125 ]] && has "$out" "'%x' at column 5 is not %h (host), %r (rank) or %% (a %)" \
	|| fail "a bad prefix: $rc: $out"
out=$("$HERD" serve --port 9 --replica-port 8 --replicas 2 -- true 2>&1); rc=$?
[[ $rc == 2 ]] && has "$out" "--port 9 is among the replicas' ports, 8 to 9 (--replica-port)" \
	|| fail "the front door among the replicas' ports: $rc: $out"

# --- examples/replica.c as an HTTP/1.1 server: keep-alive, pipelined
# requests, HTTP/1.0 and Connection: close, HEAD, and bodies it refuses
base=$(free_ports 1)
"$replica" --port "$base" --work-ms 0 >"$tmp/alone.out" 2>&1 &
pids+=($!)
python3 - "$base" <<'EOF' || fail "examples/replica.c over HTTP"
import socket, sys, time
port = int(sys.argv[1])
for _ in range(50):
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close(); break
    except OSError:
        time.sleep(0.1)
def ask(req):
    s = socket.create_connection(("127.0.0.1", port)); s.sendall(req); s.settimeout(1)
    out = b""
    try:
        while True:
            d = s.recv(4096)
            if not d: return out, True
            out += d
    except socket.timeout:
        return out, False
out, closed = ask(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
assert out.startswith(b"HTTP/1.1 200 OK") and b'"ok":true' in out and not closed, out
out, closed = ask(b"GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\nConnection: close\r\n\r\n")
assert out.count(b"HTTP/1.1 200 OK") == 2 and closed, out
out, closed = ask(b"GET /infer HTTP/1.0\r\n\r\n")
assert b"Connection: close" in out and closed, out
out, closed = ask(b"HEAD /infer HTTP/1.1\r\nConnection: close\r\n\r\n")
assert out.endswith(b"\r\n\r\n") and b"Content-Length: " in out, out
for req, code in ((b"POST /i HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n", b"413"),
                  (b"POST /i HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", b"501"),
                  (b"POST /i HTTP/1.1\r\nContent-Length: x\r\n\r\n", b"400")):
    out, closed = ask(req)
    assert out.startswith(b"HTTP/1.1 " + code) and closed, (req, out)
EOF

# --- a replica killed under load
base=$(free_ports 8)
serve "$tmp/kill" --port "$base" --replicas 3-4 --health /health --grace 5 -- \
	"$replica" --work-ms 5
st=$("$HERD" job status --json "$id")
[[ $(field 'd["kind"]' <<<"$st") == service ]] || fail "status at the start: $st"
ready 3
grep -q '^\[[^]]*:r1\] replica 1 listening on 127.0.0.1:' "$tmp/kill.out" \
	|| fail "replica 1's lines: $(cat "$tmp/kill.out")"
rows=$("$HERD" jobs)
grep -qE "^$id +serving +3 +1 +0 +" <<<"$rows" || fail "herd jobs: $rows"
status=$("$HERD" job status "$id")
has "$status" "service $id: serving on 127.0.0.1:$base (HAProxy"
has "$status" "REPLICA HOST"
st=$("$HERD" job status --json "$id")
victim=$(field 'd["replicas"][1]["pid"]' <<<"$st")
timeout 30 wrk -t2 -c6 -d6s "http://127.0.0.1:$base/infer" >"$tmp/wrk1" 2>&1 &
w=$!
sleep 2
inflight=$("$HERD" job status --json "$id" | field 'd["replicas"][1]["in_flight"]')
kill -9 "$victim"
wait "$w" || fail "wrk: $(cat "$tmp/wrk1")"
n=$(failed "$tmp/wrk1")
echo "kill: $n requests failed; $inflight were in flight on replica 1 just before the kill"
grep -q "requests in" "$tmp/wrk1" || fail "wrk ran no request: $(cat "$tmp/wrk1")"
# At most those in flight on it (at most all 6 connections' one each).
((n <= 6)) || fail "$n requests failed after a kill with 6 connections: $(cat "$tmp/wrk1")"
ready 3
st=$("$HERD" job status --json "$id")
[[ $(field 'd["replicas"][1]["restarts"]' <<<"$st") == 1 ]] || fail "restart count: $st"
[[ $(field 'd["replicas"][0]["restarts"]' <<<"$st") == 0 ]] || fail "others restarted: $st"
[[ $(field 'd["replicas"][1]["pid"]' <<<"$st") != "$victim" ]] || fail "same pid: $st"
grep -q "replica 1 on .* failed: .*killed by signal 9.*restarting it in 1 s (restart 1 of 3 in a row)" \
	"$tmp/kill" || fail "no failure event: $(cat "$tmp/kill")"
timeout 30 wrk -t2 -c6 -d2s "http://127.0.0.1:$base/infer" >"$tmp/wrk2" 2>&1
[[ $(failed "$tmp/wrk2") == 0 ]] || fail "requests failed after the restart: $(cat "$tmp/wrk2")"
out=$("$HERD" job scale "$id" 9 2>&1) && fail "scale 9 of 3-4: $out"
has "$out" "runs 3 to 4 replicas: 9 is beyond them"
"$HERD" job scale "$id" 4 >/dev/null || fail "herd job scale 4"
ready 4
stop "$tmp/kill"
has "$(cat "$tmp/kill")" "herd serve: stopped"

# --- a rolling restart of 4 under load: not one request fails
base=$(free_ports 8)
serve "$tmp/roll" --port "$base" --replicas 4 --health /health --grace 5 -- \
	"$replica" --work-ms 5 --start-delay 300
ready 4
before=$("$HERD" job status --json "$id" | field '" ".join(str(r["pid"]) for r in d["replicas"])')
timeout 60 wrk -t2 -c8 -d30s "http://127.0.0.1:$base/infer" >"$tmp/wrk3" 2>&1 &
w=$!
sleep 1
"$HERD" job restart --rolling "$id" >/dev/null || fail "herd job restart --rolling"
out=$("$HERD" job restart --rolling "$id" 2>&1) && fail "a second rolling restart: $out"
has "$out" "a restart is under way"
for ((k = 0; k < 250; k++)); do
	grep -q "rolling restart done" "$tmp/roll" && break
	sleep 0.1
done
grep -q "rolling restart done: 4 replicas ready" "$tmp/roll" || fail "not done: $(cat "$tmp/roll")"
kill -INT "$w"
wait "$w"
n=$(failed "$tmp/wrk3")
echo "rolling restart: $n requests failed of $(grep -o '[0-9]* requests in' "$tmp/wrk3")"
[[ $n == 0 ]] || fail "$n requests failed in a rolling restart: $(cat "$tmp/wrk3")"
after=$("$HERD" job status --json "$id" | field '" ".join(str(r["pid"]) for r in d["replicas"])')
for p in $before; do
	[[ " $after " != *" $p "* ]] || fail "pid $p still there after the rolling restart: $after"
done
stop "$tmp/roll"

# --- a rolling restart onto a version that fails: it stops at the first
# replica, and the others go on serving what they ran
base=$(free_ports 8)
serve "$tmp/badroll" --port "$base" --replicas 3 --restarts 1 --health /health --grace 2 -- \
	sh -c 'test -e "$1" && exit 1; exec "$0" --work-ms 1' "$replica" "$tmp/broken"
ready 3
before=$("$HERD" job status --json "$id" | field '" ".join(str(r["pid"]) for r in d["replicas"][1:])')
touch "$tmp/broken"
"$HERD" job restart --rolling "$id" >/dev/null || fail "herd job restart --rolling"
for ((k = 0; k < 200; k++)); do
	grep -q "rolling restart stopped" "$tmp/badroll" && break
	sleep 0.1
done
has "$(cat "$tmp/badroll")" "rolling restart stopped: replica 0 failed after its restart"
has "$(cat "$tmp/badroll")" "exited with code 1"
sleep 1
st=$("$HERD" job status --json "$id")
[[ $(field '" ".join(str(r["pid"]) for r in d["replicas"][1:])' <<<"$st") == "$before" ]] \
	|| fail "replicas 1 and 2 restarted by a roll that failed: $st"
[[ $(field '" ".join(r["state"] for r in d["replicas"][1:])' <<<"$st") == "ready ready" ]] \
	|| fail "replicas 1 and 2 not serving: $st"
timeout 30 wrk -t1 -c2 -d1s "http://127.0.0.1:$base/infer" >"$tmp/wrk5" 2>&1
[[ $(failed "$tmp/wrk5") == 0 ]] || fail "requests failed while 2 serve: $(cat "$tmp/wrk5")"
stop "$tmp/badroll"

# --- scaled down, and stopped, while replicas are still starting
base=$(free_ports 8)
serve "$tmp/early" --port "$base" --replicas 1-3 --health /health --grace 2 -- \
	"$replica" --start-delay 3000 --work-ms 1
ready 1
"$HERD" job scale "$id" 3 >/dev/null && "$HERD" job scale "$id" 1 >/dev/null || fail "scale 3, 1"
for ((k = 0; k < 50; k++)); do
	st=$("$HERD" job status --json "$id")
	[[ $(field '" ".join(r["state"] for r in d["replicas"])' <<<"$st") =~ ^ready(\ off)*$ ]] && break
	sleep 0.1
done
[[ $(field '" ".join(r["state"] for r in d["replicas"])' <<<"$st") =~ ^ready(\ off)*$ ]] \
	|| fail "scaled down while starting: $st"
"$HERD" job scale "$id" 3 >/dev/null || fail "scale 3"
sleep 0.5
t0=$(mono)
stop "$tmp/early"
t1=$(mono)
python3 -c "import sys; sys.exit(0 if $t1 - $t0 < 10 else 1)" || fail "stopped in $t1 - $t0 s"
for ((k = 0; k < 50; k++)); do
	pgrep -f -- "$replica --start-delay 3000" >/dev/null || break
	sleep 0.1
done
pgrep -f -- "$replica --start-delay 3000" >/dev/null && fail "replicas left running"

# --- scaling with demand, and by request
base=$(free_ports 8)
serve "$tmp/scale" --port "$base" --replicas 2-4 --target 2 --cooldown 3 --health /health \
	--grace 5 -- "$replica" --work-ms 20 --start-delay 500
ready 2
t0=$(mono)
timeout 60 wrk -t2 -c16 -d30s "http://127.0.0.1:$base/infer" >"$tmp/wrk4" 2>&1 &
w=$!
ready 4
t1=$(mono)
python3 -c "import sys; sys.exit(0 if $t1 - $t0 < 10.5 else 1)" \
	|| fail "4 replicas serving $t1 - $t0 s after the load began"
grep -q "scaling up 2 -> 4 replicas: .* requests in flight .*above the target of 2" \
	"$tmp/scale" || fail "no scaling event: $(cat "$tmp/scale")"
kill -INT "$w"
wait "$w"
# Down to the most wanted over the cool-down: 4 -> 2 at once, or in steps
# when the window began on a dip while the load was still ending.
for ((k = 0; k < 300; k++)); do
	grep -qE "scaling down [34] -> 2 " "$tmp/scale" && break
	sleep 0.1
done
grep -qE "scaling down [34] -> 2 replicas: at most [0-9]+ requests in flight over the last 3 s" \
	"$tmp/scale" || fail "not scaled down: $(cat "$tmp/scale")"
grep "scaling down" "$tmp/scale" | grep -vqE "over the last 3 s, [0-9.]+ each of [234], below the target of 2$" \
	&& fail "a scale-down without its window: $(cat "$tmp/scale")"
stop "$tmp/scale"

# --- GPUs per replica, leased and bound as a rank's (a recorded DGX H100)
base=$(free_ports 8)
HERD_INVENTORY=tests/fixtures/inventory/dgx-h100.json HERD_LEASE_DIR=$tmp/leases \
	serve "$tmp/gpus" --port "$base" --replicas 3 --gpus-per-replica 2 -- \
	sh -c 'echo "gpus $CUDA_VISIBLE_DEVICES"; exec "$0" --work-ms 1' "$replica"
ready 3
gpus=$(grep -E 'gpus GPU-[0-9a-f-]+,GPU-[0-9a-f-]+$' "$tmp/gpus.out")
[[ $(wc -l <<<"$gpus") == 3 ]] || fail "3 replicas' 2 GPUs: $(cat "$tmp/gpus.out")"
[[ $(grep -oE 'GPU-[0-9a-f-]+' <<<"$gpus" | sort -u | wc -l) == 6 ]] || fail "GPUs shared: $gpus"
stop "$tmp/gpus"

# --- a replica that always fails: down, then the service ends
base=$(free_ports 4)
timeout 60 "$HERD" serve --port "$base" --restarts 2 -- false >/dev/null 2>"$tmp/down"
rc=$?
[[ $rc == 1 ]] || fail "a service of failing replicas exited $rc: $(cat "$tmp/down")"
has "$(cat "$tmp/down")" "exited with code 1"
has "$(cat "$tmp/down")" "restarting it in 1 s (restart 1 of 2 in a row)"
has "$(cat "$tmp/down")" "3 failures in a row, its restarts spent: left down"
has "$(cat "$tmp/down")" "every replica is down for good"
out=$("$HERD" jobs)
[[ $(wc -l <<<"$out") == 1 ]] || fail "services left listed: $out"
echo "ok"
