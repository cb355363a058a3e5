#!/usr/bin/env bash
# herd launch over ssh, against a real OpenSSH server (tests/harness/sshd.sh)
# answering on the loopback addresses 127.0.0.2 to 127.0.0.5 as four hosts:
# ranks placed on the hosts of a hostlist and of a hostfile, each rank
# really behind that host's ssh session, prefixes and exit codes, a real
# collective across the hosts, and the failures: a host refusing the
# connection and one that never answers (both named, within the connect
# timeout), a herd program missing on the node, a malformed hostlist and a
# malformed hostfile (line and column).
# Needs root and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
silent_pid=
cleanup() {
	[[ -n $silent_pid ]] && kill "$silent_pid" 2>/dev/null
	bash tests/harness/sshd.sh stop "$tmp/sshd"
	rm -rf "$tmp"
}
trap cleanup EXIT
sshd_start
port=$(cat "$tmp/sshd/port")

# --- 8 ranks on 4 hosts: 2 each, in host order; every rank runs in the ssh
# session of its own host (SSH_CONNECTION's server address is that host).
out=$(timeout 60 "$HERD" launch --hosts '127.0.0.[2-5]' -n 8 -- \
	sh -c 'set -- $SSH_CONNECTION; echo $HERD_RANK $HERD_NODE_RANK $HERD_LOCAL_RANK $HERD_WORLD_SIZE $HERD_NNODES via $3') \
	|| fail "launch on 4 hosts exited $?: $out"
want="[127.0.0.2:0] 0 0 0 8 4 via 127.0.0.2
[127.0.0.2:1] 1 0 1 8 4 via 127.0.0.2
[127.0.0.3:2] 2 1 0 8 4 via 127.0.0.3
[127.0.0.3:3] 3 1 1 8 4 via 127.0.0.3
[127.0.0.4:4] 4 2 0 8 4 via 127.0.0.4
[127.0.0.4:5] 5 2 1 8 4 via 127.0.0.4
[127.0.0.5:6] 6 3 0 8 4 via 127.0.0.5
[127.0.0.5:7] 7 3 1 8 4 via 127.0.0.5"
[[ $(sort <<<"$out") == "$want" ]] || fail "ranks on 4 hosts:
$out"

# --- every rank reaches the launcher's store: the store address works
# from the "remote" hosts (a barrier through it, then a sum of ranks).
out=$(timeout 60 "$HERD" launch --hosts '127.0.0.[2-5]' -n 4 -- \
	"$HERD" bench allreduce -b 8 -e 64K -c 1) || fail "bench allreduce under launch exited $?: $out"
has "$out" "[127.0.0.2:0] # herd bench allreduce: 4 ranks"
has "$out" "# Out of bounds values : 0 OK"
[[ $(grep -cE '^\[127\.0\.0\.2:0\] +[0-9]+ +[0-9]+ +float32 +sum .* 0$' <<<"$out") == 14 ]] \
	|| fail "bench rows:
$out"

# --- the first failing rank's exit code is the launcher's
timeout 60 "$HERD" launch --hosts '127.0.0.[2-3]' -n 4 -- \
	sh -c 'exit $((HERD_RANK == 3 ? 7 : 0))' >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 7 ]] || fail "rank 3 exits 7: launcher exited $rc: $(cat "$tmp/err")"
has "$(cat "$tmp/err")" "127.0.0.3"

# --- a hostfile: slots fill each host in turn; duplicates add up
printf '# two hosts\n127.0.0.2 slots=2\n127.0.0.3 slots=1   # small\n127.0.0.2 slots=1\n' \
	>"$tmp/hosts"
out=$(timeout 60 "$HERD" launch --hostfile "$tmp/hosts" -n 4 -- sh -c 'echo $HERD_LOCAL_RANK') \
	|| fail "hostfile launch exited $?: $out"
[[ $(sort <<<"$out") == "[127.0.0.2:0] 0
[127.0.0.2:1] 1
[127.0.0.2:2] 2
[127.0.0.3:3] 0" ]] || fail "hostfile placement:
$out"
timeout 60 "$HERD" launch --hostfile "$tmp/hosts" -n 5 -- true >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc != 0 ]] || fail "5 ranks on 4 slots: exit 0"
has "$(cat "$tmp/err")" "4 slots"

# --- malformed hostfile and hostlist: where, exactly
printf '127.0.0.2 slots=2\n127.0.0.3 slots=two\n' >"$tmp/bad_hosts"
timeout 20 "$HERD" launch --hostfile "$tmp/bad_hosts" -n 2 -- true >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc != 0 && ! -s $tmp/out ]] || fail "bad hostfile: exit $rc"
has "$(cat "$tmp/err")" "$tmp/bad_hosts:2:17: slots: expected a whole number from 1 to 65536, got 'two'"
timeout 20 "$HERD" launch --hosts '127.0.0.[2-' -n 2 -- true >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc != 0 && ! -s $tmp/out ]] || fail "bad hostlist: exit $rc"
has "$(cat "$tmp/err")" "hostlist \"127.0.0.[2-\": column 12: expected a number after '-'"

# --- a host refusing connections (nothing listens on 127.0.0.9): the
# launch fails, names the host and quotes ssh, and nothing stays behind.
start=$SECONDS
timeout 60 "$HERD" launch --hosts '127.0.0.[2,9]' -n 2 -- sleep 29.75 >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc != 0 ]] || fail "unreachable host: exit 0"
(( SECONDS - start < 15 )) || fail "unreachable host: took $((SECONDS - start)) s"
has "$(cat "$tmp/err")" "node 127.0.0.9"
has "$(cat "$tmp/err")" "Connection refused"
pgrep -f "^sleep 29[.]75$" >/dev/null && fail "a rank of the failed launch is still running"

# --- a host that accepts but never speaks SSH: the connect timeout ends it
python3 -c '
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.9", int(sys.argv[1])))
s.listen(8)
held = []
end = time.time() + 60
while time.time() < end:
    s.settimeout(1)
    try:
        held.append(s.accept())
    except OSError:
        pass
' "$port" &
silent_pid=$!
for _ in $(seq 50); do
	python3 -c 'import socket,sys; socket.create_connection(("127.0.0.9", int(sys.argv[1])), 1)' \
		"$port" 2>/dev/null && break
	sleep 0.1
done
start=$SECONDS
HERD_SSH_ARGS="$HERD_SSH_ARGS -o ConnectTimeout=2" timeout 60 "$HERD" launch \
	--hosts '127.0.0.[2,9]' -n 2 -- true >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc != 0 ]] || fail "silent host: exit 0"
(( SECONDS - start <= 8 )) || fail "silent host: took $((SECONDS - start)) s with a 2 s connect timeout"
has "$(cat "$tmp/err")" "node 127.0.0.9"
has "$(cat "$tmp/err")" "timed out"

# --- no herd program on the node
HERD_PROGRAM=/nonexistent/bin/herd timeout 60 "$HERD" launch --hosts 127.0.0.2 -n 1 -- true \
	>"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc != 0 ]] || fail "missing herd program: exit 0"
has "$(cat "$tmp/err")" "node 127.0.0.2"
has "$(cat "$tmp/err")" "/nonexistent/bin/herd"
echo "ok"
