#!/usr/bin/env bash
# herd discover of many nodes, against a real OpenSSH server
# (tests/harness/sshd.sh) answering on 127.0.0.2 to 127.0.0.8 as hosts;
# 127.0.0.9 refuses the connection.  On 127.0.0.4 `herd probe` is replaced
# by a program that hangs, on 127.0.0.5 by one that prints garbage, and
# 127.0.0.6 reports a DGX H100 (HERD_INVENTORY): the answering nodes are
# grouped by shape with warnings about the odd one, the others named with
# their reasons (ssh's words, the timeout, the decoder's), at the deadline.
# The same as a tree of relays.  The merged inventory saves and loads; none
# answering is exit status 2.
# --links measures each pair of hosts once, over herd's TCP transport, and
# names a node throttled to a twentieth of a CPU (a cgroup) as the one whose
# every link is slow.
# Needs root and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
cg=
trap 'sshd_cleanup; [[ -n $cg && -d $cg ]] && rmdir "$cg"' EXIT
sshd_start
fixtures=$PWD/tests/fixtures/inventory

# The program the "remote" hosts run as herd, chosen by the address the
# ssh session came in on.
cat >"$tmp/herd-node" <<SH
#!/bin/sh
set -- "\$@"
server=\$(echo "\$SSH_CONNECTION" | cut -d' ' -f3)
# The fabric check's rank on 127.0.0.8 joins a CPU-throttled cgroup when
# the test made one (its procs file named in slow-procs).
if [ "\$1 \$2" = "probe --links" ] && [ "\$server" = 127.0.0.8 ] && [ -s "$tmp/slow-procs" ]; then
	echo \$\$ >"\$(cat "$tmp/slow-procs")"
fi
case \$server in
127.0.0.4) echo \$\$ >"$tmp/hang.pid"; exec sleep 60 ;;
127.0.0.5) echo "garbage, not an inventory"; exit 0 ;;
127.0.0.6) export HERD_INVENTORY=$fixtures/dgx-h100.json ;;
esac
exec "$HERD" "\$@"
SH
chmod +x "$tmp/herd-node"
export HERD_PROGRAM=$tmp/herd-node

# Flat, then as a tree (relays 127.0.0.2 and .6 probing their groups).
for tree in 0 1; do
env=()
[[ $tree == 1 ]] && env=(HERD_SSH_TREE_MIN=2 HERD_SSH_TREE_WIDTH=2)
t0=$(date +%s.%N)
env "${env[@]}" timeout 60 "$HERD" discover --hosts '127.0.0.[2-9]' --timeout 3 >"$tmp/out" 2>"$tmp/err"; rc=$?
t1=$(date +%s.%N)
[[ $rc == 1 ]] || fail "tree=$tree: discover with failing hosts exited $rc, want 1: $(cat "$tmp/out" "$tmp/err")"
# The hung host is given up at the deadline (3 s), not later.
awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a < 3 + 4) }' || fail "tree=$tree: discover took $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') s with --timeout 3"
grep -q "^127.0.0.\[2-3,7-8\] *4  " "$tmp/out" || fail "tree=$tree: no group of the four alike: $(cat "$tmp/out")"
grep -q "^127.0.0.6 *1  2x Intel(R) Xeon(R) Platinum 8480C 112 cores  2.0 TiB  8x NVIDIA H100 80GB HBM3 NV18 all-to-all" "$tmp/out" \
	|| fail "tree=$tree: no line of the DGX: $(cat "$tmp/out")"
grep -q "^warning: 127.0.0.6: GPU count differs: 8 GPUs on 1 node, 0 GPUs on 4 others" "$tmp/out" \
	|| fail "tree=$tree: no GPU count warning: $(cat "$tmp/out")"
grep -q "^warning: 127.0.0.6: RDMA differs" "$tmp/out" || fail "tree=$tree: no RDMA warning: $(cat "$tmp/out")"
grep -q "^herd discover: 127.0.0.9: ssh: connect to host 127.0.0.9 port [0-9]*: Connection refused$" "$tmp/err" \
	|| fail "tree=$tree: 127.0.0.9 not named with ssh's words: $(cat "$tmp/err")"
grep -qx "herd discover: 127.0.0.4: no answer within 3 s (--timeout)" "$tmp/err" \
	|| fail "tree=$tree: the hung host not named: $(cat "$tmp/err")"
grep -q "^herd discover: 127.0.0.5: printed something that is not an inventory: " "$tmp/err" \
	|| fail "tree=$tree: the garbage not named: $(cat "$tmp/err")"
[[ $(wc -l <"$tmp/err") == 3 ]] || fail "tree=$tree: stderr has more than the three failures (progress off a terminal?): $(cat "$tmp/err")"
kill "$(cat "$tmp/hang.pid")" 2>/dev/null
rm -f "$tmp/hang.pid"
done

# --- on a terminal (script(1) gives it one), a progress line on stderr
if command -v script >/dev/null; then
	timeout 60 script -qec "'$HERD' discover --hosts '127.0.0.[2-3]'" /dev/null >"$tmp/tty" 2>&1 \
		|| fail "discover on a terminal exited $?: $(cat "$tmp/tty")"
	grep -aq "discover: [0-2] done, 0 failed, [0-2] pending" "$tmp/tty" || fail "no progress line: $(cat -v "$tmp/tty")"
	grep -aq "^127.0.0.\[2-3\] *2  " "$tmp/tty" || fail "no summary on a terminal: $(cat -v "$tmp/tty")"
fi

# --- the merged inventory: JSON with the failures, saved and loaded back
timeout 60 "$HERD" discover --hosts '127.0.0.[2-3,6]' --json --save "$tmp/c.json" >"$tmp/j" 2>"$tmp/err" \
	|| fail "discover --json exited $?: $(cat "$tmp/err")"
python3 - "$tmp/j" <<'PY' || fail "discover --json: $(cat "$tmp/j")"
import json, sys
c = json.load(open(sys.argv[1]))
assert [n["hostname"] for n in c["nodes"]] == ["127.0.0.2", "127.0.0.3", "127.0.0.6"], c["nodes"]
assert len(c["nodes"][2]["gpus"]) == 8 and "failed" not in c
PY
"$HERD" discover --inventory "$tmp/c.json" --json | cmp - "$tmp/j" || fail "the saved inventory loads differently"
"$HERD" discover --inventory "$tmp/c.json" | grep -q "^warning: 127.0.0.6: GPU count differs" \
	|| fail "the saved inventory gives no warnings"
timeout 60 "$HERD" discover --hosts '127.0.0.[2,9]' --json >"$tmp/j" 2>/dev/null; rc=$?
[[ $rc == 1 ]] || fail "--json with a failed host exited $rc"
python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))
assert [f["host"] for f in c["failed"]] == ["127.0.0.9"] and "Connection refused" in c["failed"][0]["reason"], c
' "$tmp/j" || fail "failures in --json: $(cat "$tmp/j")"

# --- none answers: exit 2, the reasons in the message
timeout 60 "$HERD" discover --hosts '127.0.0.9' >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] || fail "discover of an unreachable host exited $rc, want 2"
grep -q "none of the 1 nodes answered: 127.0.0.9: ssh: connect to host" "$tmp/err" || fail "none answered: $(cat "$tmp/err")"

# --- the fabric check: every pair of three hosts once, named, with figures;
# exit status 1 exactly when a pair is flagged slow
timeout 120 "$HERD" discover --hosts '127.0.0.[2-3,7]' --links --links-bytes 1M >"$tmp/out" 2>"$tmp/err"; rc=$?
pairs=$(grep -E '^127\.0\.0\.[0-9]+ +127\.0\.0\.[0-9]+ +[0-9]+\.[0-9] +[0-9]+\.[0-9]{3} +[0-9]+%' "$tmp/out" | awk '{print $1, $2}')
[[ $pairs == "127.0.0.2 127.0.0.7
127.0.0.2 127.0.0.3
127.0.0.3 127.0.0.7" ]] || fail "links pairs: $(cat "$tmp/out" "$tmp/err")"
grep -q "^median: [0-9.]* us, [0-9.]* GB/s; [0-3] of 3 pairs slow" "$tmp/out" || fail "links median: $(cat "$tmp/out")"
slow=$(grep -c "SLOW$" "$tmp/out")
[[ $rc == $((slow > 0 ? 1 : 0)) ]] || fail "links exited $rc with $slow slow pairs: $(cat "$tmp/out" "$tmp/err")"

# --- a node whose every link is slow is named: its rank runs in a cgroup
# of its own throttled to a twentieth of a CPU (cgroup v1's cpu controller,
# or v2's cpu.max), which slows everything it sends and receives
if [[ -w /sys/fs/cgroup/cpu/cgroup.procs ]]; then
	cg=/sys/fs/cgroup/cpu/herd-test-links-$$
	mkdir "$cg" || fail "cannot make the cgroup $cg"
	{ echo 20000 >"$cg/cpu.cfs_period_us" && echo 1000 >"$cg/cpu.cfs_quota_us"; } \
		|| { rmdir "$cg"; fail "cannot throttle the cgroup $cg"; }
	echo "$cg/tasks" >"$tmp/slow-procs"
elif grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
	cg=/sys/fs/cgroup/herd-test-links-$$
	mkdir "$cg" || fail "cannot make the cgroup $cg"
	echo "1000 20000" >"$cg/cpu.max" || { rmdir "$cg"; fail "cannot throttle the cgroup $cg"; }
	echo "$cg/cgroup.procs" >"$tmp/slow-procs"
fi
if [[ -n $cg ]]; then
	timeout 120 "$HERD" discover --hosts '127.0.0.[2-3,6-8]' --links --links-bytes 4M >"$tmp/out" 2>"$tmp/err"; rc=$?
	procs=$(cat "$tmp/slow-procs")
	rm -f "$tmp/slow-procs"
	# The rank has ended with the job; its process may take a moment to go.
	for _ in $(seq 100); do [[ -z $(cat "$procs") ]] && break; sleep 0.1; done
	rmdir "$cg" || fail "the cgroup $cg still holds $(cat "$procs")"
	cg=
	[[ $rc == 1 ]] || fail "links with a throttled node exited $rc: $(cat "$tmp/out" "$tmp/err")"
	[[ $(grep -cE '(^127\.0\.0\.8 |  127\.0\.0\.8 ).*SLOW$' "$tmp/out") == 4 ]] \
		|| fail "the throttled node's four pairs are not all slow: $(cat "$tmp/out")"
	[[ $(grep "^warning: .*every link" "$tmp/out") == "warning: 127.0.0.8: every link of it is slow (a cable, port or NIC of this node?)" ]] \
		|| fail "the throttled node is not named alone: $(cat "$tmp/out")"
else
	echo "links: no CPU cgroup to throttle a node here; the slow-node case is not run"
fi

# --- usage
for args in "--hosts" "--hosts a --slurm" "--timeout 0 --hosts a" "--timeout 5" "--inventory x --hosts a" \
	"--links" "--hosts a --links --json" "--hosts a --links-bytes 4"; do
	"$HERD" discover $args >/dev/null 2>"$tmp/err"; rc=$?
	[[ $rc == 2 ]] || fail "discover $args exited $rc, want 2"
	grep -q "^herd discover: " "$tmp/err" || fail "discover $args: $(cat "$tmp/err")"
done
"$HERD" discover --hosts 'node[' 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] && grep -q "column" "$tmp/err" || fail "a malformed hostlist: $rc $(cat "$tmp/err")"
exit 0
