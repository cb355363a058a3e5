#!/usr/bin/env bash
# bench/elastic_recovery.sh - what losing a node costs an elastic job: on
# the namespace cluster of the tests (tests/harness/netns.sh, 4 hosts over
# ssh), examples/train_ddp.c trains with STATE_MIB of state sharded over
# its ranks (the checkpoint: the state and the weights, every EVERY steps)
# under
#
#   herd launch --hosts h[1-4] --nodes 3-4 --restarts 1 -- example_train_ddp ...
#
# and at step 40 host h3 is lost, in one of two ways:
#
#   kill   its `herd exec` and its rank killed (SIGKILL): the launcher's
#          channel to it ends at once;
#   cut    its link cut (eth0 down): the ranks of the others fail their
#          allreduce at their deadline (HERD_TIMEOUT), and h3, silent, is
#          given up once the stop's grace period (--grace) and its slack
#          are over.
#
# The job excludes h3, restarts on h1, h2 and h4, and the ranks resume
# from the newest committed checkpoint, resharded onto 3.  From the
# loss to the first step done on the survivors, split into:
#
#   detection  the loss -> the launcher excludes h3 (every rank stopped)
#   exclusion  -> the restart begins (the list written, the nodes chosen)
#   restart    -> rank 0's process runs again, and up to its restore
#              (herd exec on each node, the store, the communicator)
#   restore    the checkpoint read, verified and resharded
#   step       -> the first step done
#
# Timestamps: the launcher's lines as they arrive (bash's EPOCHREALTIME),
# the ranks' own (CLOCK_REALTIME: one machine, one clock).  REPEAT runs
# of each; the figures are medians.  The target: at most 30 s plus the
# restore.  Needs root (namespaces; exits 77 when they cannot be made),
# iproute2 and openssh-server.  Not in CI.
#
# usage: bench/elastic_recovery.sh [BUILD_DIR]
#   environment: REPEAT (3), STATE_MIB (256), EVERY (10), HERD_TIMEOUT (10),
#                GRACE (5), MODES ("kill cut")
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
REPEAT=${REPEAT:-3}
STATE_MIB=${STATE_MIB:-256}
EVERY=${EVERY:-10}
GRACE=${GRACE:-5}
MODES=${MODES:-kill cut}
export HERD_TIMEOUT=${HERD_TIMEOUT:-10}
HERD=$(cd "$BUILD/bin" 2>/dev/null && pwd)/herd
TRAIN=$(dirname "$HERD")/example_train_ddp
[[ -x $HERD && -x $TRAIN ]] || { echo "elastic_recovery.sh: build $BUILD first" >&2; exit 2; }
work=$(mktemp -d)
cluster=$work/cluster
cleanup() {
	[[ -n ${job:-} ]] && kill "$job" 2>/dev/null
	bash tests/harness/netns.sh stop "$cluster" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
rc=0
bash tests/harness/netns.sh start "$cluster" 4 >/dev/null || rc=$?
[[ $rc == 77 ]] && { echo "elastic_recovery.sh: no namespace cluster here (root?)" >&2; exit 77; }
[[ $rc == 0 ]] || { echo "elastic_recovery.sh: the cluster did not start" >&2; exit 1; }
id=$(cat "$cluster/id")
export HERD_SSH_ARGS="-F $cluster/ssh_config" HERD_PROGRAM=$HERD HERD_EXCLUDE_FILE=$work/exclude

# pids I TEXT: the processes of host I whose command line begins with TEXT.
pids() {
	local p
	for p in $(ip netns pids "herd-$id-h$1" 2>/dev/null); do
		[[ $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) == "$2"* ]] && echo "$p"
	done
}

# at FILE PATTERN: the launcher's timestamp of the first line with PATTERN.
at() { grep -m1 -F -- "$2" "$1" | cut -d' ' -f1; }

echo "# elastic recovery on the namespace cluster - $(date -u '+%F %T') UTC"
echo "# $(uname -srm), $(nproc) CPUs, herd $("$HERD" --version | head -1)"
echo "# 4 hosts, one rank each, --nodes 3-4, state ${STATE_MIB} MiB, checkpoint every $EVERY steps,"
echo "# HERD_TIMEOUT=$HERD_TIMEOUT, --grace $GRACE; seconds from the loss of h3"
printf '%-5s %-4s %9s %9s %9s %9s %9s %9s\n' mode run detection exclusion restart restore step total
declare -A sums
for mode in $MODES; do
	for ((k = 1; k <= REPEAT; k++)); do
		rm -rf "$work/ck" "$work/exclude"
		bash tests/harness/netns.sh mend "$cluster" 3 >/dev/null 2>&1 || true
		"$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' --nodes 3-4 --restarts 1 --grace "$GRACE" -- \
			"$TRAIN" --dir "$work/ck" --steps 80 --every "$EVERY" --pace 100 \
			--state-mib "$STATE_MIB" >"$work/out" \
			2> >(while IFS= read -r l; do echo "$EPOCHREALTIME $l"; done >"$work/err") &
		job=$!
		for ((t = 0; t < 1200; t++)); do
			grep -q "^\[h1:0\] step 40:" "$work/out" && break
			sleep 0.1
		done
		grep -q "^\[h1:0\] step 40:" "$work/out" || { echo "no step 40: $(cat "$work/out" "$work/err")" >&2; exit 1; }
		t_loss=$EPOCHREALTIME
		if [[ $mode == kill ]]; then
			kill -9 $(pids 3 "$HERD exec") $(pids 3 "$TRAIN") 2>/dev/null
		else
			bash tests/harness/netns.sh cut "$cluster" 3
		fi
		wait "$job" || { echo "the job failed: $(tail -3 "$work/out"; cat "$work/err")" >&2; exit 1; }
		job=
		sleep 0.2
		line=$(grep "^\[h1:0\] restart 1: resumed" "$work/out") || { echo "no resume: $(cat "$work/out")" >&2; exit 1; }
		t_main=$(sed -E 's/.*started at ([0-9.]+).*/\1/' <<<"$line")
		t_rbeg=$(sed -E 's/.*restore began at ([0-9.]+).*/\1/' <<<"$line")
		t_rest=$(sed -E 's/.*restored in ([0-9.]+) s.*/\1/' <<<"$line")
		t_step=$(sed -n 's/^\[h1:0\] restart 1: first step done at \([0-9.]*\)$/\1/p' "$work/out")
		t_excl=$(at "$work/err" "node h3 excluded")
		t_go=$(at "$work/err" "restarting every rank")
		[[ -n $t_excl && -n $t_go && -n $t_step ]] || { echo "missing lines: $(cat "$work/err")" >&2; exit 1; }
		read -r d e r s f tot < <(awk -v l="$t_loss" -v x="$t_excl" -v g="$t_go" -v b="$t_rbeg" \
			-v rs="$t_rest" -v st="$t_step" 'BEGIN {
			printf "%.2f %.2f %.2f %.2f %.2f %.2f\n", x - l, g - x, b - g, rs, st - b - rs, st - l }')
		printf '%-5s %-4s %9s %9s %9s %9s %9s %9s\n' "$mode" "$k" "$d" "$e" "$r" "$s" "$f" "$tot"
		sums[$mode]+="$d $e $r $s $f $tot"$'\n'
	done
done
echo "# medians"
for mode in $MODES; do
	printf '%s' "${sums[$mode]}" | awk -v m="$mode" '
		{ for (i = 1; i <= 6; i++) v[i, NR] = $i }
		END {
			printf "%-5s %-4s", m, "med"
			for (i = 1; i <= 6; i++) {
				n = 0
				for (j = 1; j <= NR; j++) {       # insertion sort (POSIX awk)
					x = v[i, j] + 0
					for (p = ++n; p > 1 && a[p - 1] > x; p--) a[p] = a[p - 1]
					a[p] = x
				}
				med[i] = n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
				printf " %9.2f", med[i]; delete a
			}
			printf "\n# %s: %.2f s from the loss to the first step on the survivors, %s the target of 30 s plus the restore (%.2f s)\n",
				m, med[6], med[6] - med[4] <= 30 ? "within" : "BEYOND", med[4]
		}'
done
