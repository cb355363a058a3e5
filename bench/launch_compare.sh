#!/usr/bin/env bash
# bench/launch_compare.sh - job startup, end to end, side by side:
#
#   herd launch -n N bench_launch_barrier      (herd_comm_init_env + barrier)
#   mpirun --oversubscribe -np N bench_mpi_init_barrier   (MPI_Init + MPI_Barrier)
#
# bare launches, a job of `true` and nothing else, at N = BARE_NPS:
#
#   herd launch -n N -- true                    mpirun --oversubscribe -np N true
#
# and, when an OpenSSH server can be started here (root, openssh-server;
# tests/harness/sshd.sh on loopback), ssh fan-out:
#
#   one `ssh HOST true`, four of them in a row, four at once, and
#   herd launch --hosts 127.0.0.[2-5] -n 4 true
#
# Each command runs REPEAT times, round-robin, and every figure is the
# median wall time of its repeats; the ratios are herd's time over the
# peer's.  Builds nothing: BUILD_DIR (default build) must hold bin/herd,
# bin/bench_launch_barrier and bin/bench_mpi_init_barrier.
#
# usage: bench/launch_compare.sh [BUILD_DIR]
#   environment: NP (16), REPEAT (7), BARE_NPS ("1 4 16 64")
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
NP=${NP:-16}
REPEAT=${REPEAT:-7}
BARE_NPS=${BARE_NPS:-1 4 16 64}
HERD=$(cd "$BUILD/bin" && pwd)/herd
BARRIER=$BUILD/bin/bench_launch_barrier
MPI_BARRIER=$BUILD/bin/bench_mpi_init_barrier
for p in "$HERD" "$BARRIER" "$MPI_BARRIER"; do
	[[ -x $p ]] || { echo "launch_compare.sh: $p is missing: build first" >&2; exit 2; }
done
command -v mpirun >/dev/null || { echo "launch_compare.sh: mpirun not found (openmpi-bin)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset SLURM_JOB_ID

tmp=$(mktemp -d)
sshd_up=0
cleanup() {
	[[ $sshd_up == 1 ]] && bash tests/harness/sshd.sh stop "$tmp/sshd"
	rm -rf "$tmp"
}
trap cleanup EXIT

# Seconds one run of "$@" takes (output to a file; a failure stops the script).
timed() {
	local t0=$EPOCHREALTIME t1
	if ! "$@" >"$tmp/run.out" 2>&1; then
		echo "launch_compare.sh: failed: $*" >&2
		tail -5 "$tmp/run.out" >&2
		exit 1
	fi
	t1=$EPOCHREALTIME
	python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.4f}')" "$t0" "$t1"
}

# The same, for runs that may hang (mpirun -np 64 true does, now and then,
# on a 2-CPU machine): after 60 s the run is killed and "hung" printed.
timed_or_hung() {
	local t0=$EPOCHREALTIME t1 rc=0
	timeout 60 "$@" >"$tmp/run.out" 2>&1 || rc=$?
	if [[ $rc == 124 ]]; then
		echo hung
		return
	fi
	if [[ $rc != 0 ]]; then
		echo "launch_compare.sh: failed: $*" >&2
		tail -5 "$tmp/run.out" >&2
		exit 1
	fi
	t1=$EPOCHREALTIME
	python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.4f}')" "$t0" "$t1"
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { m = int((NR + 1) / 2); print (NR % 2) ? a[m] : (a[m] + a[m + 1]) / 2 }'; }

echo "# herd launch vs mpirun: job startup — $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "host $(hostname), $(nproc) CPUs ($(lscpu | sed -n 's/^Model name: *//p' | head -1)), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$("$HERD" --version | head -1); $(mpirun --version 2>&1 | head -1)"
echo

herd_cmd=("$HERD" launch -n "$NP" -- "$BARRIER")
mpi_cmd=(mpirun --oversubscribe --mca btl self,vader -np "$NP" "$MPI_BARRIER")
echo "herd:    ${herd_cmd[*]}"
echo "Open MPI: ${mpi_cmd[*]}"
herd_t=() mpi_t=()
for r in $(seq "$REPEAT"); do
	herd_t+=("$(timed "${herd_cmd[@]}")")
	mpi_t+=("$(timed "${mpi_cmd[@]}")")
done
h=$(echo "${herd_t[*]}" | median)
m=$(echo "${mpi_t[*]}" | median)
echo "runs (s): herd ${herd_t[*]}"
echo "runs (s): mpirun ${mpi_t[*]}"
echo
printf '| %-44s | %9s |\n' "job of $NP ranks, init + barrier + exit" "median s"
printf '|%s|%s|\n' "$(printf -- '-%.0s' $(seq 46))" "$(printf -- '-%.0s' $(seq 11))"
printf '| %-44s | %9.3f |\n' "herd launch -n $NP (herd_comm_init_env)" "$h"
printf '| %-44s | %9.3f |\n' "mpirun --oversubscribe -np $NP (MPI_Init)" "$m"
printf '| %-44s | %9.2f |\n' "ratio herd / Open MPI (target <= 0.5)" \
	"$(python3 -c "import sys; print(float(sys.argv[1]) / float(sys.argv[2]))" "$h" "$m")"
echo

echo "bare launches, median of $REPEAT (herd: herd launch -n N -- true; Open MPI: mpirun --oversubscribe -np N true):"
printf '| %5s | %9s | %9s | %9s |\n' "N" "herd s" "mpirun s" "ratio"
printf '|%s|%s|%s|%s|\n' "-------" "-----------" "-----------" "-----------"
for n in $BARE_NPS; do
	bh=() bm=()
	for r in $(seq "$REPEAT"); do
		bh+=("$(timed_or_hung "$HERD" launch -n "$n" -- true)")
		bm+=("$(timed_or_hung mpirun --oversubscribe -np "$n" true)")
	done
	hung=$(echo "${bh[*]} ${bm[*]}" | tr ' ' '\n' | grep -c hung || true)
	[[ $hung == 0 ]] || echo "N=$n: runs that hung and were killed after 60 s: herd ${bh[*]}; mpirun ${bm[*]}"
	h=$(echo "${bh[*]}" | tr ' ' '\n' | grep -v hung | tr '\n' ' ' | median)
	m=$(echo "${bm[*]}" | tr ' ' '\n' | grep -v hung | tr '\n' ' ' | median)
	printf '| %5s | %9.3f | %9.3f | %9.2f |\n' "$n" "$h" "$m" \
		"$(python3 -c "import sys; print(float(sys.argv[1]) / float(sys.argv[2]))" "$h" "$m")"
done
echo

if [[ $(id -u) != 0 ]] || ! command -v /usr/sbin/sshd >/dev/null; then
	echo "ssh: skipped (needs root and openssh-server for tests/harness/sshd.sh)"
	exit 0
fi
bash tests/harness/sshd.sh start "$tmp/sshd"
sshd_up=1
export HERD_SSH_ARGS="-F $tmp/sshd/ssh_config" HERD_PROGRAM=$HERD
ssh1=(ssh -F "$tmp/sshd/ssh_config" 127.0.0.2 true)
ssh_seq() { for h in 2 3 4 5; do ssh -F "$tmp/sshd/ssh_config" 127.0.0.$h true || return 1; done; }
ssh_par() {
	local pids=() rc=0
	for h in 2 3 4 5; do ssh -F "$tmp/sshd/ssh_config" 127.0.0.$h true & pids+=($!); done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	return $rc
}
herd_ssh=("$HERD" launch --hosts '127.0.0.[2-5]' -n 4 -- true)
one=() seq4=() par4=() hl=()
for r in $(seq "$REPEAT"); do
	one+=("$(timed "${ssh1[@]}")")
	seq4+=("$(timed ssh_seq)")
	par4+=("$(timed ssh_par)")
	hl+=("$(timed "${herd_ssh[@]}")")
done
echo "ssh to loopback hosts 127.0.0.2-5 (tests/harness/sshd.sh), median of $REPEAT:"
printf '| %-44s | %9s |\n' "command" "median s"
printf '|%s|%s|\n' "$(printf -- '-%.0s' $(seq 46))" "$(printf -- '-%.0s' $(seq 11))"
printf '| %-44s | %9.3f |\n' "ssh 127.0.0.2 true (one connection)" "$(echo "${one[*]}" | median)"
printf '| %-44s | %9.3f |\n' "4 x ssh HOST true, one after another" "$(echo "${seq4[*]}" | median)"
printf '| %-44s | %9.3f |\n' "4 x ssh HOST true, all at once" "$(echo "${par4[*]}" | median)"
printf '| %-44s | %9.3f |\n' "herd launch --hosts 127.0.0.[2-5] -n 4 true" "$(echo "${hl[*]}" | median)"
