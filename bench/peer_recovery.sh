#!/usr/bin/env bash
# bench/peer_recovery.sh - a lost node, recovered from peers' memory and
# from storage, side by side: on the namespace cluster of the tests
# (tests/harness/netns.sh, 4 hosts over ssh), examples/train_ddp.c trains
# with STATE_MIB of state sharded over its ranks under
#
#   herd launch --hosts h[1-4] --nodes 3-4 --restarts 1 [--ckpt-peers 1] -- example_train_ddp ...
#
# in two modes:
#
#   peers    --ckpt-peers 1: every step saved to peers' memory (the rank's
#            own node and the next), every EVERY-th also to storage;
#   storage  every EVERY-th step saved to storage, nothing in memory.
#
# After step LOSS_AT, h3 is lost (its `herd exec`, rank and checkpoint
# holder killed, SIGKILL), and the page cache is dropped at once, so that
# the restore from storage reads the disk, as a read from a parallel file
# system reads the network, not this machine's memory.  The job excludes
# h3, restarts on h1, h2 and h4, and the ranks restore resharded onto 3.
# Per run: the step restored and the steps lost (the last step done
# before the loss, less the step restored), and from the loss:
#
#   detection  the loss -> the launcher excludes h3 (every rank stopped)
#   restart    -> rank 0 begins its restore (herd exec, store, communicator)
#   restore    the checkpoint read, verified and resharded (rank 0's)
#   total      -> the first step done on the survivors
#
# and the save stall the training loop saw per save (herd_ckpt_get_stats:
# the staging copy and any wait for the save before; rank 0's mean over
# the first run).  STORAGE_MBPS, when set, throttles every read of the
# hosts' processes from the disk to that many MB/s (a blkio cgroup over
# their sshd; cgroup v1), as a parallel file system shared by many nodes
# gives each its share: the restore from storage then reads at that rate.  REPEAT runs of
# each; the figures are medians.  The targets: resumed within 60 s with at
# most one step lost, and the restore from memory at least 5 times faster
# than from storage.  Needs root (namespaces, the page cache), iproute2
# and openssh-server.  Not in CI.
#
# usage: bench/peer_recovery.sh [BUILD_DIR]
#   environment: REPEAT (3), STATE_MIB (1024), EVERY (10), LOSS_AT (20),
#                PACE (3000 ms a step), HERD_TIMEOUT (10), MODES ("peers storage"),
#                STORAGE_MBPS (none)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
REPEAT=${REPEAT:-3}
STATE_MIB=${STATE_MIB:-1024}
EVERY=${EVERY:-10}
LOSS_AT=${LOSS_AT:-20}
PACE=${PACE:-3000}
MODES=${MODES:-peers storage}
export HERD_TIMEOUT=${HERD_TIMEOUT:-10}
HERD=$(cd "$BUILD/bin" 2>/dev/null && pwd)/herd
TRAIN=$(dirname "$HERD")/example_train_ddp
[[ -x $HERD && -x $TRAIN ]] || { echo "peer_recovery.sh: build $BUILD first" >&2; exit 2; }
[[ $(id -u) == 0 ]] || { echo "peer_recovery.sh: needs root (namespaces, the page cache)" >&2; exit 77; }
work=$(mktemp -d)
cluster=$work/cluster
cgroup=
cleanup() {
	[[ -n ${job:-} ]] && kill "$job" 2>/dev/null
	bash tests/harness/netns.sh stop "$cluster" >/dev/null 2>&1 || true
	[[ -n $cgroup ]] && rmdir "$cgroup" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
rc=0
bash tests/harness/netns.sh start "$cluster" 4 >/dev/null || rc=$?
[[ $rc == 77 ]] && { echo "peer_recovery.sh: no namespace cluster here" >&2; exit 77; }
[[ $rc == 0 ]] || { echo "peer_recovery.sh: the cluster did not start" >&2; exit 1; }
id=$(cat "$cluster/id")
export HERD_SSH_ARGS="-F $cluster/ssh_config" HERD_PROGRAM=$HERD HERD_EXCLUDE_FILE=$work/exclude

disk=$(df --output=source "$work" | tail -1)
dev=$(lsblk -no MAJ:MIN "$disk" 2>/dev/null | head -1 | tr -d ' ')
if [[ -n ${STORAGE_MBPS:-} ]]; then
	cgroup=/sys/fs/cgroup/blkio/herd-pfs-$$
	mkdir "$cgroup" || { echo "peer_recovery.sh: no blkio cgroup (v1) here" >&2; exit 77; }
	echo "$dev $((STORAGE_MBPS * 1000000))" >"$cgroup/blkio.throttle.read_bps_device"
	for i in 1 2 3 4; do
		for p in $(ip netns pids "herd-$id-h$i"); do echo "$p" >"$cgroup/cgroup.procs"; done
	done
fi

# pids I TEXT: the processes of host I whose command line begins with TEXT.
pids() {
	local p
	for p in $(ip netns pids "herd-$id-h$1" 2>/dev/null); do
		[[ $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) == "$2"* ]] && echo "$p"
	done
}

# at FILE PATTERN: the launcher's timestamp of the first line with PATTERN.
at() { grep -m1 -F -- "$2" "$1" | cut -d' ' -f1; }

echo "# a node lost, from peers' memory and from storage - $(date -u '+%F %T') UTC"
echo "# $(uname -srm), $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), herd $("$HERD" --version | head -1)"
echo "# 4 hosts, one rank each, --nodes 3-4, state ${STATE_MIB} MiB, steps of ${PACE} ms;"
echo "# peers: every step to memory (own node + 1), every $EVERY to storage; storage: every $EVERY;"
echo "# h3 lost after step $LOSS_AT, page cache dropped; HERD_TIMEOUT=$HERD_TIMEOUT; seconds from the loss"
if [[ -n ${STORAGE_MBPS:-} ]]; then
	echo "# storage: $disk ($dev), reads throttled to $STORAGE_MBPS MB/s a host"
else
	echo "# storage: $disk ($dev), reads as fast as it reads"
fi
printf '%-8s %-3s %8s %5s %9s %9s %9s %9s %9s\n' mode run restored lost detection restart restore total stall
declare -A sums
for mode in $MODES; do
	for ((k = 1; k <= REPEAT; k++)); do
		rm -rf "$work/ck" "$work/exclude"
		opts=() every=$EVERY extra=()
		if [[ $mode == peers ]]; then
			opts=(--ckpt-peers 1)
			every=1 extra=(--storage-every "$EVERY")
		fi
		"$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' --nodes 3-4 --restarts 1 "${opts[@]}" -- \
			"$TRAIN" --dir "$work/ck" --steps $((LOSS_AT + 6)) --every "$every" "${extra[@]}" \
			--pace "$PACE" --state-mib "$STATE_MIB" --stall >"$work/out" \
			2> >(while IFS= read -r l; do echo "$EPOCHREALTIME $l"; done >"$work/err") &
		job=$!
		for ((t = 0; t < 3000; t++)); do
			grep -q "^\[h1:0\] step $LOSS_AT:" "$work/out" && break
			sleep 0.1
		done
		grep -q "^\[h1:0\] step $LOSS_AT:" "$work/out" || { echo "no step $LOSS_AT: $(tail "$work/out" "$work/err")" >&2; exit 1; }
		t_loss=$EPOCHREALTIME
		kill -9 $(pids 3 "$HERD exec") $(pids 3 "$TRAIN") $(pids 3 "$HERD ckpt hold") 2>/dev/null || true
		last=$(sed -n 's/^\[h1:0\] step \([0-9]*\):.*/\1/p' "$work/out" | tail -1)
		sync
		echo 3 >/proc/sys/vm/drop_caches
		wait "$job" || { echo "the job failed: $(tail -3 "$work/out"; cat "$work/err")" >&2; exit 1; }
		job=
		sleep 0.2
		line=$(grep "^\[h1:0\] restart 1: resumed" "$work/out") || { echo "no resume: $(cat "$work/out")" >&2; exit 1; }
		restored=$(sed -E 's/.*resumed from step ([0-9]+) .*/\1/' <<<"$line")
		t_rbeg=$(sed -E 's/.*restore began at ([0-9.]+).*/\1/' <<<"$line")
		t_rest=$(sed -E 's/.*restored in ([0-9.]+) s.*/\1/' <<<"$line")
		t_step=$(sed -n 's/^\[h1:0\] restart 1: first step done at \([0-9.]*\)$/\1/p' "$work/out")
		t_excl=$(at "$work/err" "node h3 excluded")
		stall=$(sed -n '/restart 1:/q; s/^\[h1:0\] save stall: mean \([0-9.]*\) s .*/\1/p' "$work/out" | tail -1)
		tier=$(grep -o "^\[h1:0\] restart 1: rank 0 restored step [0-9]* from [a-z' ]*" "$work/out" | sed -e 's/.* from //' -e 's/ *$//')
		[[ -n $t_excl && -n $t_step ]] || { echo "missing lines: $(cat "$work/err")" >&2; exit 1; }
		[[ $mode == peers && $tier != "peers' memory" ]] && { echo "run $k restored from $tier: $(grep restored "$work/out")" >&2; exit 1; }
		read -r d r s tot < <(awk -v l="$t_loss" -v x="$t_excl" -v b="$t_rbeg" -v rs="$t_rest" \
			-v st="$t_step" 'BEGIN { printf "%.2f %.2f %.3f %.2f\n", x - l, b - x, rs, st - l }')
		printf '%-8s %-3s %8s %5s %9s %9s %9s %9s %9s\n' "$mode" "$k" "$restored" $((last - restored)) \
			"$d" "$r" "$s" "$tot" "${stall:--}"
		sums[$mode]+="$((last - restored)) $d $r $s $tot ${stall:-0}"$'\n'
	done
done
echo "# medians"
declare -A med_restore
for mode in $MODES; do
	read -r lost d r s tot stall < <(printf '%s' "${sums[$mode]}" | awk '
		{ for (i = 1; i <= 6; i++) v[i, NR] = $i }
		END {
			for (i = 1; i <= 6; i++) {
				n = 0
				for (j = 1; j <= NR; j++) {
					x = v[i, j] + 0
					for (p = ++n; p > 1 && a[p - 1] > x; p--) a[p] = a[p - 1]
					a[p] = x
				}
				printf "%s ", n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
				delete a
			}
			printf "\n"
		}')
	printf '%-8s %-3s %8s %5s %9.2f %9.2f %9.3f %9.2f %9s\n' "$mode" med - "$lost" "$d" "$r" "$s" "$tot" "$stall"
	med_restore[$mode]=$s
	echo "# $mode: resumed $tot s after the loss, $lost steps lost: $(awk -v t="$tot" -v l="$lost" 'BEGIN { print (t <= 60 && l <= 1) ? "within" : "BEYOND" }') the target (60 s, 1 step)"
done
if [[ -n ${med_restore[peers]:-} && -n ${med_restore[storage]:-} ]]; then
	awk -v p="${med_restore[peers]}" -v s="${med_restore[storage]}" 'BEGIN {
		r = s / p
		printf "# restore from storage / from peers'"'"' memory: %.1fx (%s the target of 5x)\n", r, (r >= 5) ? "within" : "BELOW" }'
fi
