#!/usr/bin/env bash
# kill -9 of herd launch (on host h1) while its four ranks on four hosts of
# the namespace cluster run a loop of allreduces: the node supervisors see
# their channel to the launcher close (ssh drops, or the local pipe) and
# stop their ranks, so that within 2 s no process of the job is left on any
# host: no rank, no herd exec, no ssh.  Needs root, iproute2 and
# openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
netns_start 4
loop=$PWD/tests/cluster/fault_loop.lua

"$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' -n 4 -- "$HERD" "$loop" \
	>"$tmp/out" 2>"$tmp/err" &
launcher=$!
wait_lines 4 running "$tmp/out" 30
for i in 1 2 3 4; do
	[[ -n $(host_pids $i "$loop") ]] || fail "no rank on h$i"
done
kill -9 "$launcher"
wait "$launcher" 2>/dev/null
# The job's processes: its ranks, the herd exec supervisors and the ssh
# clients that carry them, on every host.
secs=$(job_gone 2 "$loop" "exec --stdio" "sshd: $(id -un)@notty") || exit 1
echo "launcher killed: every process of the job gone after $secs s"
exit 0
