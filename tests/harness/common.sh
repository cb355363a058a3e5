# tests/harness/common.sh - the setup the launch tests in tests/cli share,
# sourced as their first step:
#
#   source "$(dirname "$0")/../harness/common.sh" "$@"
#
# Sets HERD (the herd program given as $1, as an absolute path), tmp (a
# fresh scratch directory, which the test's own EXIT trap removes) and
# HERD_TRACE_DIR (in tmp), and defines fail, has and harness_start.
set -u
HERD=${1:?usage: $(basename "$0") /path/to/herd}
HERD=$(cd "$(dirname "$HERD")" && pwd)/$(basename "$HERD")
tmp=$(mktemp -d)
# The flight recorders of the jobs a test launches, removed with $tmp.
export HERD_TRACE_DIR=$tmp/trace

fail() { echo "FAIL: $*" >&2; exit 1; }

# has OUTPUT TEXT: fails unless OUTPUT holds TEXT.
has() { grep -qF -- "$2" <<<"$1" || fail "output lacks '$2':
$1"; }

# harness_start NAME LABEL: starts tests/harness/NAME.sh in $tmp/NAME; the
# test is skipped (77) where the harness cannot run here.
harness_start() {
	local rc
	bash "tests/harness/$1.sh" start "$tmp/$1"; rc=$?
	[[ $rc == 77 ]] && exit 77
	[[ $rc == 0 ]] || fail "the $2 harness did not start"
}

# sshd_cleanup: for a test's EXIT trap: ends the process whose pid a
# stand-in "remote" program wrote to $tmp/hang.pid (one the test made hang),
# stops the sshd harness and removes $tmp.
sshd_cleanup() {
	[[ -s $tmp/hang.pid ]] && kill "$(cat "$tmp/hang.pid")" 2>/dev/null
	bash tests/harness/sshd.sh stop "$tmp/sshd"
	rm -rf "$tmp"
}

# sshd_start: the sshd harness (loopback addresses as hosts) in $tmp/sshd,
# and the environment that has herd launch reach it: its ssh_config, this
# herd as the program on the "remote" hosts, no inherited launch address
# or Slurm job.
sshd_start() {
	harness_start sshd sshd
	export HERD_SSH_ARGS="-F $tmp/sshd/ssh_config"
	export HERD_PROGRAM=$HERD
	unset HERD_LAUNCH_ADDR SLURM_JOB_ID
}

# netns_start N: the namespace cluster (tests/harness/netns.sh) of N hosts in
# $cluster ($tmp/cluster), stopped with $tmp removed at exit; id set to its
# id, and the environment that has herd reach its hosts over ssh.
netns_start() {
	local rc
	cluster=$tmp/cluster
	trap 'bash tests/harness/netns.sh stop "$cluster"; rm -rf "$tmp"' EXIT
	bash tests/harness/netns.sh start "$cluster" "$1"; rc=$?
	[[ $rc == 77 ]] && exit 77
	[[ $rc == 0 ]] || fail "the namespace cluster did not start"
	id=$(cat "$cluster/id")
	export HERD_SSH_ARGS="-F $cluster/ssh_config" HERD_PROGRAM=$HERD
	# What the jobs exclude stays with the test.
	export HERD_EXCLUDE_FILE=$tmp/exclude
	unset HERD_LAUNCH_ADDR SLURM_JOB_ID HERD_SOCKET_IFNAME
}

# free_ports N: a port whose N ports from it are free on 127.0.0.1 now.
free_ports() {
	python3 - "$1" <<'EOF'
import random, socket, sys
n = int(sys.argv[1])
for _ in range(200):
    base = random.randrange(20000, 60000 - n)
    socks = []
    try:
        for p in range(base, base + n):
            s = socket.socket(); s.bind(("127.0.0.1", p)); socks.append(s)
        print(base); break
    except OSError:
        pass
    finally:
        for s in socks: s.close()
EOF
}

# The helpers of the fault tests (tests/cluster), after netns_start.

# mono: CLOCK_MONOTONIC in seconds, as herd.clock() gives it to the ranks.
mono() { python3 -c 'import time; print("%.3f" % time.monotonic())'; }

# host_pids I TEXT: the processes of host I whose command line holds TEXT.
host_pids() {
	local p
	for p in $(ip netns pids "herd-$id-h$1" 2>/dev/null); do
		tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "$2" && echo "$p"
	done
}

# program_pids I PROGRAM: the processes of host I that run PROGRAM (their
# argv[0]; not a launcher naming it among its arguments).
program_pids() {
	local p
	for p in $(host_pids $1 "$2"); do
		[[ $(tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | head -1) == "$2" ]] && echo "$p"
	done
}

# wait_lines N TEXT FILE SECS: until FILE holds N lines with TEXT; fails
# after SECS seconds (bounded: polled every 0.1 s).
wait_lines() {
	local k
	for ((k = 0; k < $4 * 10; k++)); do
		[[ $(grep -cF -- "$2" "$3") -ge $1 ]] && return 0
		sleep 0.1
	done
	fail "$1 lines with '$2' did not come within $4 s: $(cat "$3")"
}

# job_gone SECS TEXT...: waits until no process on the cluster's hosts
# has any TEXT in its command line; fails, listing them, when some are
# left after SECS seconds.  Prints how long they took.
job_gone() {
	local k t0 secs=$1 i t left
	shift
	t0=$(mono)
	for ((k = 0; k <= secs * 20; k++)); do
		left=$(for ((i = 1; i <= $(wc -l <"$cluster/hosts"); i++)); do
			for t in "$@"; do host_pids $i "$t"; done
		done)
		[[ -z $left ]] && break
		sleep 0.05
	done
	[[ -z $left ]] || fail "processes of the job are left $secs s on: $(ps -o pid,args -p "$(tr '\n' , <<<"$left")0" 2>&1)"
	awk -v a="$t0" -v b="$(mono)" 'BEGIN { printf "%.2f\n", b - a }'
}

# within SECS LIMIT WHAT: fails unless SECS <= LIMIT.
within() {
	awk -v s="$1" -v l="$2" 'BEGIN { exit !(s <= l) }' || fail "$3 after $1 s, beyond $2 s"
}

# rank_failure R T0 LIMIT FILE: rank R's (on host h<R+1>) "FAILED after"
# line in FILE (tests/cluster/fault_loop.lua's), which must have come at
# most LIMIT seconds after T0 (the fault, by mono); prints the detection
# time and leaves the line in $line.  Not in a subshell.
rank_failure() {
	local at secs
	line=$(grep "^\[h$(($1 + 1)):$1\] FAILED after" "$4") || fail "rank $1 did not fail: $(cat "$4")"
	at=$(sed -E 's/.*\(at ([0-9.]+)\).*/\1/' <<<"$line")
	secs=$(awk -v a="$at" -v k="$2" 'BEGIN { printf "%.3f", a - k }')
	echo "rank $1: detected after $secs s: ${line#*: }"
	within "$secs" "$3" "rank $1 failed"
}

# loop_exact CALLS FLOATS TIMEOUT: from h1, four ranks on h1-h4 run
# tests/cluster/fault_loop.lua CALLS times on FLOATS floats under
# HERD_TIMEOUT=TIMEOUT; fails unless the job succeeds with every rank
# exact.  Leaves the output in $out.
loop_exact() {
	out=$(HERD_TIMEOUT=$3 timeout 200 "$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' -n 4 -- \
		"$HERD" "$PWD/tests/cluster/fault_loop.lua" "$1" "$2" 2>&1) ||
		fail "allreduces of $2 floats failed: $out"
	[[ $(grep -c "done: $1 calls of $2 floats, every result exact" <<<"$out") == 4 ]] ||
		fail "not every rank finished exact: $out"
}
