#!/usr/bin/env bash
# The job secret and the job's doors, across four hosts of the namespace
# cluster: a job of four ranks (--log-dir, a checkpoint) runs; meanwhile
# its secret (read from a rank's environment) is on no command line of any
# process on any host, the job's store listens on the launcher's address
# on the hosts' network only (not every interface), so do the ranks
# while their communicators start, and a client on
# another host with a wrong secret or none cannot read or write a key
# (HERD_EAUTH) while one with the secret can.  Afterwards the secret is in
# no log file, checkpoint file, output line or sshd log; the log and
# checkpoint directories and files are owner-only.  Needs root, iproute2
# and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
netns_start 4
prog=$PWD/tests/cluster/security_job.lua

"$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' -n 4 --log-dir "$tmp/logs" -- \
	"$HERD" "$prog" "$tmp/ck" "$tmp/go" "$tmp/go2" >"$tmp/out" 2>"$tmp/err" &
job=$!
wait_lines 4 ready "$tmp/out" 60
rank=$(host_pids 2 "$prog" | head -1)
[[ -n $rank ]] || fail "no rank process on h2"
secret=$(tr '\0' '\n' <"/proc/$rank/environ" | sed -n 's/^HERD_JOB_SECRET=//p')
store=$(tr '\0' '\n' <"/proc/$rank/environ" | sed -n 's/^HERD_STORE=//p')
[[ ${#secret} == 64 && -n $store ]] || fail "the rank's environment lacks the secret or the store"

# On no command line, on any host (every process of this machine).
for f in /proc/[0-9]*/cmdline; do
	if tr '\0' ' ' <"$f" 2>/dev/null | grep -qF -- "$secret"; then
		fail "the secret is on the command line of pid $(basename "$(dirname "$f")"): $(tr '\0' ' ' <"$f")"
	fi
done
echo "secret on no command line of $(ls -d /proc/[0-9]* | wc -l) processes"

# The store listens on the launcher's address on the hosts' network only.
port=${store##*:}
listen=$(ip netns exec "herd-$id-h1" ss -Hltn "sport = :$port" | awk '{print $4}')
[[ $listen == "10.77.0.1:$port" ]] || fail "the store listens on '$listen', not 10.77.0.1:$port only"
echo "store at $store listens on $listen"

# From another host: no secret, a wrong one, the right one.
probe() { # SECRET
	"$cluster/run" 4 env -u HERD_JOB_SECRET "$HERD" -e "
		local s, msg, st = herd.store.connect('$store', $1, { timeout = 5, connect_timeout = 5 })
		if not s then print('refused: ' .. st .. ': ' .. msg) return end
		local ok, m2, st2 = pcall(function() return s:get('herd-probe', 0.1) end)
		print('connected')" 2>&1
}
out=$(probe nil); echo "no secret: $out"; has "$out" "refused: HERD_EINVAL"
wrong=$(printf '%064d' 7)
out=$(probe "'$wrong'"); echo "wrong secret: $out"; has "$out" "refused: HERD_EAUTH"
out=$(probe "'$secret'"); has "$out" "connected"

# A communicator's ranks listen, while it starts, on the address that
# faces the job's store only: ranks 0-2 wait inside a second
# communicator's init for rank 3.
touch "$tmp/go"
wait_lines 4 "joining again" "$tmp/out" 30
rank_pid() { # I: the rank process on h<I> (its first argument is the program)
	local p
	for p in $(host_pids "$1" "$prog"); do
		[[ $(tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | sed -n 2p) == "$prog" ]] && echo "$p"
	done
}
for i in 1 2 3; do
	pid=$(rank_pid "$i")
	[[ $(wc -w <<<"$pid") == 1 ]] || fail "not one rank process on h$i: '$pid'"
	listen=
	for ((k = 0; k < 100 && ${#listen} == 0; k++)); do # at most 10 s
		sleep 0.1
		listen=$(ip netns exec "herd-$id-h$i" ss -Hltnp | grep "pid=$pid," | awk '{print $4}')
	done
	[[ $(wc -l <<<"$listen") == 1 && $listen == 10.77.0.$i:* ]] ||
		fail "the rank on h$i (pid $pid) listens on '$listen', not on 10.77.0.$i alone; listening: $(ip netns exec "herd-$id-h$i" ss -Hltnp); output: $(cat "$tmp/out" "$tmp/err")"
	echo "rank on h$i listens on $listen during init"
done
touch "$tmp/go2"
wait $job || fail "the job failed: $(cat "$tmp/out" "$tmp/err")"
traces=("$tmp/logs" "$tmp/ck" "$tmp/out" "$tmp/err" "$cluster"/sshd.*.log)
if grep -rlF -- "$secret" "${traces[@]}"; then
	fail "the secret is in the files above"
fi
echo "secret in none of: logs, checkpoint, output, sshd logs ($(find "${traces[@]}" -type f | wc -l) files)"
loose=$(find "$tmp/logs" "$tmp/ck" -perm /077 -printf '%m %p\n')
[[ -z $loose ]] || fail "files or directories open to others: $loose"
[[ $(find "$tmp/logs" -type f | wc -l) -ge 4 && $(find "$tmp/ck" -type f | wc -l) -ge 4 ]] ||
	fail "the job left fewer log or checkpoint files than expected: $(find "$tmp/logs" "$tmp/ck")"
echo "log and checkpoint files and directories owner-only"
exit 0
