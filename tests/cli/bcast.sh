#!/usr/bin/env bash
# herd bcast over a real OpenSSH server (tests/harness/sshd.sh) answering on
# 127.0.0.2 to 127.0.0.8 as hosts; 127.0.0.9 refuses.  Every host writes
# its copy to DEST.<its address> (a wrapper as the remote herd), so that
# each node's copy can be checked here: the bytes and the mode arrive, flat
# and as a tree (relays 127.0.0.2 and .6 forwarding to their groups); a
# host whose directory is missing, one that takes nothing (past --timeout),
# one whose stream is altered on the way (the sum catches it) and the
# unreachable one are each named with the reason, and the others keep
# their copies.  A DEST that is a FIFO, a symbolic link or a device is
# refused on its node before the file is sent there, flat and through a
# relay, and left as it was; a file that shrinks while it is sent is
# named, at once, not its nodes.
# Needs root and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
trap sshd_cleanup EXIT
sshd_start
cat >"$tmp/herd-node" <<SH
#!/bin/sh
server=\$(echo "\$SSH_CONNECTION" | cut -d' ' -f3)
if [ "\$1" = bcast ] && [ "\$2" = --receive ]; then
	# A relay forwards the name it was given: its own suffix comes off.
	dest=\${3%.127.0.0.*}
	shift 3
	case \$MODE:\$server in
	bad:127.0.0.4) dest=$tmp/no-such-dir/f ;;
	bad:127.0.0.5) echo \$\$ >"$tmp/hang.pid"; exec sleep 60 ;;
	bad:127.0.0.7)
		{ dd bs=1 count=1000 2>/dev/null; dd bs=1 count=1 of=/dev/null 2>/dev/null; printf X; cat; } |
			"$HERD" bcast --receive "\$dest.\$server" "\$@"
		exit ;;
	count:*)
		# What the sender sent that the receiver did not read, counted once it ends.
		"$HERD" bcast --receive "\$dest.\$server" "\$@"
		rc=\$?
		wc -c >"$tmp/unread.\$server"
		exit \$rc ;;
	shrink:*) truncate -s 1000 "$tmp/shrinking" ;;
	esac
	exec "$HERD" bcast --receive "\$dest.\$server" "\$@"
fi
exec "$HERD" "\$@"
SH
chmod +x "$tmp/herd-node"
export HERD_PROGRAM=$tmp/herd-node
# ssh passes no environment: the wrapper's mode travels in its own file.
sed -i "2i MODE=\$(cat $tmp/mode 2>/dev/null)" "$tmp/herd-node"
seq 1 400000 >"$tmp/src"
chmod 0750 "$tmp/src"
mkdir "$tmp/out"

check_copies() { # hosts...
	for h in "$@"; do
		cmp -s "$tmp/src" "$tmp/out/f.$h" || fail "$h: no copy, or a wrong one ($1)"
		[[ $(stat -c %a "$tmp/out/f.$h") == 750 ]] || fail "$h: mode $(stat -c %a "$tmp/out/f.$h")"
	done
	! ls "$tmp/out" | grep -q "herd-bcast" || fail "temporary files left: $(ls "$tmp/out")"
}

# --- flat: seven hosts, each its copy
echo ok >"$tmp/mode"
timeout 60 "$HERD" bcast --hosts '127.0.0.[2-8]' "$tmp/src" "$tmp/out/f" 2>"$tmp/err" \
	|| fail "bcast to 7 hosts exited $?: $(cat "$tmp/err")"
check_copies 127.0.0.{2..8}
rm -f "$tmp"/out/*

# --- a tree: two relays, each forwarding to its group
HERD_SSH_TREE_MIN=2 HERD_SSH_TREE_WIDTH=2 timeout 60 "$HERD" bcast --hosts '127.0.0.[2-8]' \
	"$tmp/src" "$tmp/out/f" 2>"$tmp/err" || fail "bcast as a tree exited $?: $(cat "$tmp/err")"
check_copies 127.0.0.{2..8}
rm -f "$tmp"/out/*

# --- failures, flat and as a tree: each named, the others keep their copies
echo bad >"$tmp/mode"
for tree in 0 1; do
	env=()
	[[ $tree == 1 ]] && env=(HERD_SSH_TREE_MIN=2 HERD_SSH_TREE_WIDTH=2)
	t0=$(date +%s)
	env "${env[@]}" timeout 60 "$HERD" bcast --hosts '127.0.0.[2-9]' --timeout 3 "$tmp/src" "$tmp/out/f" \
		2>"$tmp/err"; rc=$?
	t1=$(date +%s)
	[[ $rc == 1 ]] || fail "tree=$tree: bcast with failing hosts exited $rc: $(cat "$tmp/err")"
	grep -q "^herd bcast: 127.0.0.4: cannot create a file beside $tmp/no-such-dir/f.127.0.0.4: No such file or directory$" "$tmp/err" \
		|| fail "tree=$tree: missing directory: $(cat "$tmp/err")"
	grep -Eq "^herd bcast: 127.0.0.5: .*(took nothing for 3 s|no word within 3 s)" "$tmp/err" \
		|| fail "tree=$tree: the hang: $(cat "$tmp/err")"
	grep -q "^herd bcast: 127.0.0.7: checksum mismatch: sent [0-9a-f]\{16\}, received [0-9a-f]\{16\}$" "$tmp/err" \
		|| fail "tree=$tree: altered stream: $(cat "$tmp/err")"
	grep -q "^herd bcast: 127.0.0.9: .*ssh: connect to host 127.0.0.9 port [0-9]*: Connection refused" "$tmp/err" \
		|| fail "tree=$tree: unreachable: $(cat "$tmp/err")"
	[[ $(wc -l <"$tmp/err") == 4 ]] || fail "tree=$tree: more than four failures: $(cat "$tmp/err")"
	(( t1 - t0 < 20 )) || fail "tree=$tree: bcast took $((t1 - t0)) s with --timeout 3"
	check_copies 127.0.0.{2,3,6,8}
	[[ ! -e $tmp/out/f.127.0.0.7 ]] || fail "tree=$tree: the altered copy was kept"
	kill "$(cat "$tmp/hang.pid")" 2>/dev/null
	rm -f "$tmp"/out/* "$tmp/hang.pid"
done

# --- a DEST that is not a regular file: refused on its node before the file
# is sent there (nothing is left unread), named with what it is, unchanged
echo "not yours" >"$tmp/victim"
echo count >"$tmp/mode"
for tree in 0 1; do
	mkfifo "$tmp/out/g.127.0.0.2"
	ln -s "$tmp/victim" "$tmp/out/g.127.0.0.3"
	mknod -m 0666 "$tmp/out/g.127.0.0.4" c 1 3   # a /dev/null of our own
	env=()
	[[ $tree == 1 ]] && env=(HERD_SSH_TREE_MIN=2 HERD_SSH_TREE_WIDTH=2)   # relays .2 and .4
	before=$(stat -c '%F %i' "$tmp"/out/g.127.0.0.[2-4])
	env "${env[@]}" timeout 60 "$HERD" bcast --hosts '127.0.0.[2-5]' --timeout 20 "$tmp/src" "$tmp/out/g" \
		2>"$tmp/err"; rc=$?
	[[ $rc == 1 ]] || fail "tree=$tree: bcast onto a FIFO, a link and a device exited $rc: $(cat "$tmp/err")"
	for h in 2 3 4; do
		what=("" "" "a FIFO" "a symbolic link" "a character device")
		grep -qxF "herd bcast: 127.0.0.$h: $tmp/out/g.127.0.0.$h exists and is ${what[$h]}: a new file replaces only a regular file (remove it first, or name another path)" "$tmp/err" \
			|| fail "tree=$tree: 127.0.0.$h: $(cat "$tmp/err")"
		[[ $(cat "$tmp/unread.127.0.0.$h") == 0 ]] || fail "tree=$tree: 127.0.0.$h was sent $(cat "$tmp/unread.127.0.0.$h") bytes it refused"
	done
	[[ $(wc -l <"$tmp/err") == 3 ]] || fail "tree=$tree: more than three failures: $(cat "$tmp/err")"
	[[ $(stat -c '%F %i' "$tmp"/out/g.127.0.0.[2-4]) == "$before" ]] \
		|| fail "tree=$tree: replaced: $before / $(stat -c '%F %i' "$tmp"/out/g.127.0.0.[2-4])"
	[[ $(cat "$tmp/victim") == "not yours" ]] || fail "tree=$tree: the link's target was written"
	cmp -s "$tmp/src" "$tmp/out/g.127.0.0.5" || fail "tree=$tree: 127.0.0.5 has no copy"
	! ls "$tmp/out" | grep -q "herd-bcast" || fail "tree=$tree: temporary files left: $(ls "$tmp/out")"
	rm -f "$tmp"/out/* "$tmp"/unread.*
done

# --- a file that shrinks while it is sent (each node's helper truncates it
# as it starts): the file is named, in time, not its nodes
seq 1 400000 >"$tmp/shrinking"
echo shrink >"$tmp/mode"
t0=$(date +%s)
timeout 60 "$HERD" bcast --hosts '127.0.0.[2-3]' --timeout 20 "$tmp/shrinking" "$tmp/out/s" 2>"$tmp/err"; rc=$?
t1=$(date +%s)
[[ $rc == 1 ]] || fail "a shrinking file: exit $rc: $(cat "$tmp/err")"
grep -qF "$tmp/shrinking shrank while it was sent (1000 of its 2688895 bytes are left)" "$tmp/err" \
	|| fail "a shrinking file: $(cat "$tmp/err")"
grep -q "127.0.0" "$tmp/err" && fail "a shrinking file is blamed on a node: $(cat "$tmp/err")"
(( t1 - t0 < 15 )) || fail "a shrinking file was named after $((t1 - t0)) s (--timeout 20)"
for ((k = 0; k < 100; k++)); do [[ -z $(ls "$tmp/out") ]] && break; sleep 0.1; done
[[ -z $(ls "$tmp/out") ]] || fail "a shrinking file left $(ls "$tmp/out"); the sender said: $(cat "$tmp/err"); receivers still running: $(ps -eo pid,stat,etime,args | grep '[b]cast --receive')"

# --- usage
for args in "" "--hosts a" "--hosts a x" "--hosts a x rel/path" "--hosts a --slurm x /y" "--timeout 0 --hosts a x /y"; do
	"$HERD" bcast $args >/dev/null 2>"$tmp/err"; rc=$?
	[[ $rc == 2 ]] || fail "bcast $args exited $rc, want 2"
	grep -q "^herd bcast: " "$tmp/err" || fail "bcast $args: $(cat "$tmp/err")"
done
"$HERD" bcast --hosts 127.0.0.2 "$tmp/missing" /tmp/x 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] && grep -q "cannot open $tmp/missing" "$tmp/err" || fail "a missing file: $rc $(cat "$tmp/err")"
exit 0
