#!/usr/bin/env bash
# herd launch over ssh as a tree (HERD_SSH_TREE_MIN, HERD_SSH_TREE_WIDTH),
# against a real OpenSSH server (tests/harness/sshd.sh) answering on
# 127.0.0.2 to 127.0.0.7 as six hosts.  With a tree from 3 hosts up and a
# fan-out of 2, the launcher reaches 127.0.0.2 and 127.0.0.5 itself; each
# of them starts `herd exec` on two more hosts and relays.  Checked: every
# rank's line with its host's prefix, each rank really behind its own
# host's ssh session, a leaf rank's exit code as the launcher's, a leaf
# host that refuses connections (named, ssh quoted, quickly, nothing left
# running), and a relay killed mid-job (its subtree lost, its leaves'
# ranks stopped).
# Needs root and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
launcher=
cleanup() {
	# A failed check leaves a background launch running: stop it (it stops
	# its ranks) before the server goes.
	[[ -n $launcher ]] && kill "$launcher" 2>/dev/null && wait "$launcher" 2>/dev/null
	bash tests/harness/sshd.sh stop "$tmp/sshd"
	rm -rf "$tmp"
}
trap cleanup EXIT
sshd_start
export HERD_SSH_TREE_MIN=2 HERD_SSH_TREE_WIDTH=2

# --- 12 ranks on 6 hosts, 2 each: every line, prefixed with its host and
# rank, from a rank in its own host's ssh session.
out=$(timeout 60 "$HERD" launch --hosts '127.0.0.[2-7]' -n 12 -- \
	sh -c 'set -- $SSH_CONNECTION; echo $HERD_RANK $HERD_NODE_RANK $HERD_LOCAL_RANK $HERD_WORLD_SIZE $HERD_NNODES via $3') \
	|| fail "tree launch on 6 hosts exited $?: $out"
want="[127.0.0.2:0] 0 0 0 12 6 via 127.0.0.2
[127.0.0.2:1] 1 0 1 12 6 via 127.0.0.2
[127.0.0.3:2] 2 1 0 12 6 via 127.0.0.3
[127.0.0.3:3] 3 1 1 12 6 via 127.0.0.3
[127.0.0.4:4] 4 2 0 12 6 via 127.0.0.4
[127.0.0.4:5] 5 2 1 12 6 via 127.0.0.4
[127.0.0.5:6] 6 3 0 12 6 via 127.0.0.5
[127.0.0.5:7] 7 3 1 12 6 via 127.0.0.5
[127.0.0.6:8] 8 4 0 12 6 via 127.0.0.6
[127.0.0.6:9] 9 4 1 12 6 via 127.0.0.6
[127.0.0.7:10] 10 5 0 12 6 via 127.0.0.7
[127.0.0.7:11] 11 5 1 12 6 via 127.0.0.7"
[[ $(sort -t: -k2 -n <<<"$out" | sort) == "$(sort <<<"$want")" ]] || fail "ranks on 6 hosts:
$out"

# --- the shape: the launcher runs ssh to the two first-level hosts only;
# the other four are reached by ssh clients that the relays run.  (The
# patterns are anchored: the launcher's own command line ends in the
# ranks' command too.)
HERD_SSH_ARGS="$HERD_SSH_ARGS -o ServerAliveInterval=6" "$HERD" launch --hosts '127.0.0.[2-7]' \
	-n 6 -- sleep 96.75 >"$tmp/out" 2>"$tmp/err" &
launcher=$!
for _ in $(seq 400); do
	[[ $(pgrep -fc "^sleep 96[.]75$") == 6 ]] && break
	sleep 0.1
done
[[ $(pgrep -fc "^sleep 96[.]75$") == 6 ]] || fail "6 ranks did not start: $(cat "$tmp/err")"
direct=$(pgrep -P "$launcher" -x ssh | wc -l)
relayed=$(pgrep -f "ServerAliveInterval=6 .* -- 127.0.0.[3467] " | wc -l)
kill "$launcher"
for _ in $(seq 100); do
	kill -0 "$launcher" 2>/dev/null || break
	sleep 0.1
done
wait "$launcher"
launcher=
[[ $direct == 2 && $relayed == 4 ]] || fail "tree shape: $direct ssh from the launcher, $relayed to the leaves"
for _ in $(seq 100); do
	pgrep -f "^sleep 96[.]75$" >/dev/null || break
	sleep 0.1
done
pgrep -f "^sleep 96[.]75$" >/dev/null && fail "a rank of the killed launch is still running"

# --- stderr lines of leaf ranks come through too, on the launcher's stderr
timeout 60 "$HERD" launch --hosts '127.0.0.[2-7]' -n 6 -- sh -c 'echo "e$HERD_RANK" >&2' \
	>"$tmp/out" 2>"$tmp/err" || fail "stderr launch exited $?: $(cat "$tmp/err")"
for r in 0 1 2 3 4 5; do
	has "$(cat "$tmp/err")" "e$r"
done
has "$(cat "$tmp/err")" "[127.0.0.7:5] e5"

# --- the exit code of a rank on a leaf (rank 10 on 127.0.0.7) is the launcher's
timeout 60 "$HERD" launch --hosts '127.0.0.[2-7]' -n 12 -- \
	sh -c 'exit $((HERD_RANK == 10 ? 9 : 0))' >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 9 ]] || fail "rank 10 exits 9: launcher exited $rc: $(cat "$tmp/err")"
has "$(cat "$tmp/err")" "rank 10 on 127.0.0.7"

# --- an unreachable leaf host (127.0.0.9 refuses; under the relay
# 127.0.0.5): the launch fails within the connect timeout, names the host,
# quotes ssh, and no rank of the failed launch is left running anywhere.
start=$SECONDS
timeout 60 "$HERD" launch --hosts '127.0.0.[2-6,9]' -n 6 -- sleep 28.75 \
	>"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc != 0 ]] || fail "unreachable leaf: exit 0"
(( SECONDS - start < 15 )) || fail "unreachable leaf: took $((SECONDS - start)) s"
has "$(cat "$tmp/err")" "node 127.0.0.9"
has "$(cat "$tmp/err")" "Connection refused"
for _ in $(seq 50); do
	pgrep -f "^sleep 28[.]75$" >/dev/null || break
	sleep 0.1
done
pgrep -f "^sleep 28[.]75$" >/dev/null && fail "a rank of the failed launch is still running"

# --- a relay dies mid-job: its subtree is lost (named), and the ranks on
# the leaves below it stop.
timeout 60 "$HERD" launch --hosts '127.0.0.[2-7]' -n 6 -- \
	sh -c 'if [ $HERD_RANK = 3 ]; then sleep 1; kill -9 $(ps -o ppid= $$); fi; exec sleep 27.75' \
	>"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc != 0 ]] || fail "relay killed: exit 0"
has "$(cat "$tmp/err")" "127.0.0.5"
for _ in $(seq 100); do
	pgrep -f "^sleep 27[.]75$" >/dev/null || break
	sleep 0.1
done
pgrep -f "^sleep 27[.]75$" >/dev/null && fail "a rank below the killed relay is still running"
echo "ok"
