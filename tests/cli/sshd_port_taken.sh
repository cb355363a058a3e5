#!/usr/bin/env bash
# The sshd harness when the port it picked is taken on one of its
# addresses between the pick and sshd's bind (sshd then starts on the
# other addresses and only logs the failure): the harness must notice,
# move to another port, and serve on every address.  The race is forced:
# a listener holds the first port on 127.0.0.1 before the harness starts.
# Needs root and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
holder=
cleanup() {
	[[ -n $holder ]] && kill "$holder" 2>/dev/null
	bash tests/harness/sshd.sh stop "$tmp/sshd"
	rm -rf "$tmp"
}
trap cleanup EXIT

# A port free on every loopback address the harness uses, then held on
# 127.0.0.1 alone (bounded: 30 s).
python3 - "$tmp/held" <<'PY' &
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
open(sys.argv[1] + ".tmp", "w").write(str(s.getsockname()[1]))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(30)
PY
holder=$!
for _ in $(seq 100); do
	[[ -s $tmp/held ]] && break
	sleep 0.05
done
held=$(cat "$tmp/held") || fail "the port holder did not start"

SSHD_HARNESS_FIRST_PORT=$held harness_start sshd sshd
port=$(cat "$tmp/sshd/port")
[[ $port != "$held" ]] || fail "the harness kept port $held, which another socket holds on 127.0.0.1"
grep -q "Bind to port $held" "$tmp/sshd/sshd.log" && fail "the log of the sshd that serves is the failed one's"
for h in 127.0.0.1 127.0.0.2 127.0.0.8; do
	out=$(timeout 20 ssh -F "$tmp/sshd/ssh_config" -o ConnectTimeout=5 "$h" echo up 2>&1) \
		|| fail "no login on $h port $port: $out"
	[[ $out == up ]] || fail "login on $h said: $out"
done
echo "sshd moved from the held port $held to $port and serves every address"
