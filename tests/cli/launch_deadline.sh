#!/usr/bin/env bash
# Deadlines of the commands that start helpers on nodes, against nodes
# that never answer: a stand-in ssh (HERD_SSH) that connects nowhere and
# waits, one that ends on SIGTERM and one that ignores it.  The error
# names the deadline and comes within it and a second: herd launch's start
# deadline (--start-timeout) with two such nodes, herd discover's and herd
# bcast's --timeout.
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT
unset SLURM_JOB_ID HERD_SSH_ARGS HERD_LAUNCH_ADDR HERD_PROGRAM

# A host whose ssh never gets anywhere and ends on SIGTERM, and one whose
# ssh ignores SIGTERM (what it runs inherits that) and needs SIGKILL.
printf '#!/bin/sh\nexec sleep 60\n' >"$tmp/ssh-waits"
printf '#!/bin/sh\ntrap "" TERM\nexec sleep 60\n' >"$tmp/ssh-stubborn"
chmod +x "$tmp/ssh-waits" "$tmp/ssh-stubborn"
echo data >"$tmp/file"

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# within NAME DEADLINE_MS CMD...: runs CMD (bounded by timeout(1)) and
# fails unless it took less than DEADLINE_MS + 1500 ms.  The promise is
# "within the deadline and a second" (the helpers get SIGTERM at the
# deadline and SIGKILL half a second later); the half second more is for
# a loaded machine's start-up of herd and its helpers, and still far from
# what a helper waited for in turn would take (5 s each).  Sets rc, ms.
within() {
	local name=$1 limit=$2 t0
	shift 2
	t0=$(now_ms)
	rc=0
	timeout 60 "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
	ms=$(( $(now_ms) - t0 ))
	(( ms < limit + 1500 )) || fail "$name: the error came after $ms ms, deadline $limit ms: $(cat "$tmp/err")"
}

for ssh in waits stubborn; do
	export HERD_SSH=$tmp/ssh-$ssh
	# --- herd launch: two nodes never up within --start-timeout 3
	within "launch ($ssh)" 3000 "$HERD" launch --hosts 'h[1-2]' -n 2 --start-timeout 3 -- true
	[[ $rc == 125 ]] || fail "launch ($ssh): exit $rc, want 125: $(cat "$tmp/err")"
	grep -qF "herd launch: node supervisor not up within 3000 ms on h1, h2" "$tmp/err" \
		|| fail "launch ($ssh): the error does not name the deadline and the hosts: $(cat "$tmp/err")"

	# --- herd discover --timeout 2
	within "discover ($ssh)" 2000 "$HERD" discover --hosts 'h[1-2]' --timeout 2
	[[ $rc == 2 ]] || fail "discover ($ssh): exit $rc, want 2: $(cat "$tmp/err")"
	grep -qF "h1: no answer within 2 s (--timeout)" "$tmp/err" \
		|| fail "discover ($ssh): the error does not name the deadline: $(cat "$tmp/err")"

	# --- herd bcast --timeout 2
	within "bcast ($ssh)" 2000 "$HERD" bcast --hosts 'h[1-2]' --timeout 2 "$tmp/file" "$tmp/dest"
	[[ $rc == 1 ]] || fail "bcast ($ssh): exit $rc, want 1: $(cat "$tmp/err")"
	grep -qF "h2: no word within 2 s" "$tmp/err" \
		|| fail "bcast ($ssh): the error does not name the deadline: $(cat "$tmp/err")"
done
exit 0
