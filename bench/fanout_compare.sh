#!/usr/bin/env bash
# bench/fanout_compare.sh - the remote-run engine's fan-out on the namespace
# cluster of the tests (tests/harness/netns.sh), at 8, 16, 32 and 64
# hosts, side by side with Open MPI's launcher and pdsh, every one of them
# reaching the hosts through the same stand-in for ssh (the cluster's
# DIR/rsh: the host's namespaces entered with nsenter, no crypto, so that
# the fan-out and not ssh's handshakes is measured):
#
#   launch     herd launch --hosts h[1-N] -n N --per-node 1 -- true
#              mpirun --host h1,...,hN -np N --mca plm_rsh_agent RSH true
#              (Open MPI's defaults otherwise: tree spawn, plm_rsh_no_tree_spawn
#              false; oob_tcp_if_include eth0, without which its daemons try
#              the docker0 address every host carries)
#   discovery  herd discover --hosts h[1-N] --json   (herd probe on each,
#              decoded and merged)
#              pdsh -R exec -f N -w h[1-N] RSH %h HERD probe --text (the same
#              probe on each, its text only collected)
#   broadcast  herd bcast --hosts h[1-N] FILE DEST   (a SMALL file)
#              pdcp -R ssh -f N -w h[1-N] FILE DEST, with RSH as pdsh's
#              `ssh` (first in pdcp's PATH: the exec module cannot carry
#              pdcp's own protocol, pdsh forwards no stdin)
#
# The hosts share this machine's file system; DEST lies in a directory
# under /dev/shm onto which each host's mount namespace binds a directory
# of its own, so that every host writes its own copy (each one checked
# after every run, outside the timing).  Everything runs from host h1
# (nsenter into its namespaces), and herd's relays beyond 32 hosts (and
# Open MPI's tree of daemons) run the same RSH from inside the hosts.
#
# For each N in SIZES: the cluster of N hosts (started without sshd:
# NETNS_SSHD=0 unless set), one warm-up round (which also checks that
# discovery found N hosts), then REPEAT rounds, in each of which every
# operation runs herd's and its peer's, alternating which goes first.
# Figures are median wall times; ratio is herd's over the peer's.  A run
# that fails or takes longer than RUN_TIMEOUT is shown as failed and left
# out of the medians (the script then exits 1).  Ends with the verdict on
# "a launch of true on 64 hosts in at most half of mpirun's time".
#
# Needs root (namespaces; exits 77 when they cannot be made), iproute2,
# util-linux's nsenter, openmpi-bin and pdsh.  Not in CI.
#
# usage: bench/fanout_compare.sh [BUILD_DIR]
#   environment: SIZES ("8 16 32 64"), REPEAT (5), SMALL (4K, the broadcast
#                file's size), RUN_TIMEOUT (120 s), NETNS_SSHD (0)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
SIZES=${SIZES:-8 16 32 64}
REPEAT=${REPEAT:-5}
SMALL=${SMALL:-4K}
RUN_TIMEOUT=${RUN_TIMEOUT:-120}
export NETNS_SSHD=${NETNS_SSHD:-0}
HERD=$(cd "$BUILD/bin" 2>/dev/null && pwd)/herd
[[ -x $HERD ]] || { echo "fanout_compare.sh: $BUILD/bin/herd is missing: build first" >&2; exit 2; }
for p in mpirun ompi_info pdsh pdcp nsenter; do
	command -v "$p" >/dev/null || { echo "fanout_compare.sh: $p not found (openmpi-bin, pdsh, util-linux)" >&2; exit 2; }
done
for n in $SIZES; do
	[[ $n =~ ^[0-9]+$ ]] && ((n >= 2 && n <= 64)) || { echo "fanout_compare.sh: SIZES are 2..64, not $n" >&2; exit 2; }
done
[[ $REPEAT =~ ^[0-9]+$ ]] && ((REPEAT >= 1)) || { echo "fanout_compare.sh: REPEAT >= 1, not $REPEAT" >&2; exit 2; }
if [[ $(id -u) != 0 ]]; then
	echo "fanout_compare.sh: needs root (network namespaces): skipped" >&2
	exit 77
fi

work=$(mktemp -d)
shm=$(mktemp -d /dev/shm/fanout_compare.XXXXXX)
cluster=
cleanup() {
	[[ -n $cluster ]] && bash tests/harness/netns.sh stop "$cluster" >/dev/null 2>&1
	rm -rf "$work" "$shm"
}
trap cleanup EXIT
head -c "$(numfmt --from=iec "$SMALL")" /dev/urandom >"$work/file"
mkdir -p "$work/sshbin" "$work/logs" "$shm/dest"
dest=$shm/dest/f
unset HERD_SSH_ARGS HERD_LAUNCH_ADDR HERD_INVENTORY HERD_SOCKET_IFNAME SLURM_JOB_ID
export HERD_PROGRAM=$HERD

# on1 CMD...: CMD on host h1 (its network, UTS and mount namespaces), with
# this script's environment, killed after RUN_TIMEOUT.
on1() { timeout "$RUN_TIMEOUT" nsenter -t "$h1pid" -n -u -m --wd="$work" -- "$@"; }

# timed NAME CMD...: seconds CMD took on h1, or "failed" (its output kept
# in logs/ and its end shown on stderr).  A broadcast is checked on every host.
timed() {
	local name=$1 t0 t1 rc=0 i bad=
	shift
	[[ $name == *bcast* ]] && rm -f "$shm"/h*/f
	t0=$EPOCHREALTIME
	on1 "$@" >"$work/run.out" 2>&1 || rc=$?
	t1=$EPOCHREALTIME
	if [[ $name == *bcast* && $rc == 0 ]]; then
		for ((i = 1; i <= n; i++)); do
			cmp -s "$work/file" "$shm/h$i/f" || bad="$bad h$i"
			rm -f "$shm/h$i/f"
		done
		[[ -z $bad ]] || { echo "wrong or missing copy on:$bad" >>"$work/run.out"; rc=1; }
	fi
	if [[ $rc != 0 ]]; then
		local log=$work/logs/$name.$n.$BASHPID
		cp "$work/run.out" "$log"
		{
			echo "fanout_compare.sh: $name on $n hosts failed (exit $rc$([[ $rc == 124 ]] && echo ", killed after ${RUN_TIMEOUT} s")): $*"
			tail -5 "$log"
		} >&2
		echo failed
		return
	fi
	python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.4f}')" "$t0" "$t1"
}

median() {
	tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -g |
		awk '{ a[NR] = $1 } END { if (NR == 0) { print "-"; exit } m = int((NR + 1) / 2); printf "%.3f\n", (NR % 2) ? a[m] : (a[m] + a[m + 1]) / 2 }'
}
ratio() { python3 -c "import sys; print('-' if '-' in sys.argv[1:] else f'{float(sys.argv[1]) / float(sys.argv[2]):.2f}')" "$1" "$2"; }

echo "# fan-out on the namespace cluster: herd vs mpirun and pdsh - $(date -u '+%F %T') UTC"
echo "# host: $(hostname), $(nproc) CPUs ($(lscpu | sed -n 's/^Model name: *//p' | head -1)), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $("$HERD" --version | head -1); $(mpirun --version 2>&1 | head -1); $(pdsh -V 2>&1 | head -1)"
echo "# Open MPI plm rsh: $(ompi_info --param plm rsh --level 9 2>/dev/null |
	sed -n 's/.*parameter "\(plm_rsh_no_tree_spawn\|plm_rsh_num_concurrent\)" (current value: "\([^"]*\)".*/\1=\2/p' | tr '\n' ' ')(defaults kept)"
echo "# SIZES=\"$SIZES\" REPEAT=$REPEAT SMALL=$SMALL RUN_TIMEOUT=$RUN_TIMEOUT NETNS_SSHD=$NETNS_SSHD"
echo "# RSH (the stand-in for ssh, written by tests/harness/netns.sh start):"
echo "#   DIR/rsh [SSH OPTIONS] HOST CMD... = env -i (a login's variables) nsenter -t HOSTPID -n -u -m --wdns=HOME -- /bin/sh -c \"CMD...\""

fails=0
declare -A med
for n in $SIZES; do
	cluster=$work/cluster.$n
	rc=0
	bash tests/harness/netns.sh start "$cluster" "$n" || rc=$?
	if [[ $rc == 77 ]]; then
		echo "fanout_compare.sh: network namespaces cannot be made here: skipped" >&2
		exit 77
	fi
	[[ $rc == 0 ]] || { echo "fanout_compare.sh: the cluster of $n hosts did not start" >&2; exit 1; }
	rsh=$cluster/rsh
	h1pid=$(cat "$cluster/host.1.pid")
	ln -sfn "$rsh" "$work/sshbin/ssh"
	export HERD_SSH=$rsh
	# Each host's own DEST directory, in its mount namespace.
	for ((i = 1; i <= n; i++)); do
		mkdir -p "$shm/h$i"
		nsenter -t "$(cat "$cluster/host.$i.pid")" -m mount --bind "$shm/h$i" "$shm/dest"
	done
	mpi_hosts=$(for ((i = 1; i <= n; i++)); do printf 'h%d,' "$i"; done)
	herd_launch=("$HERD" launch --hosts "h[1-$n]" -n "$n" --per-node 1 -- true)
	mpi_launch=(mpirun --allow-run-as-root --host "${mpi_hosts%,}" -np "$n" --mca plm_rsh_agent "$rsh"
		--mca oob_tcp_if_include eth0 --mca btl self,tcp --mca btl_tcp_if_include eth0 true)
	herd_discover=("$HERD" discover --hosts "h[1-$n]" --json)
	pdsh_discover=(pdsh -R exec -f "$n" -w "h[1-$n]" "$rsh" %h "$HERD" probe --text)
	herd_bcast=("$HERD" bcast --hosts "h[1-$n]" "$work/file" "$dest")
	pdcp_bcast=(env "PATH=$work/sshbin:$PATH" pdcp -R ssh -f "$n" -w "h[1-$n]" "$work/file" "$dest")
	echo
	echo "## $n hosts"
	echo "\$ ${herd_launch[*]}"
	echo "\$ ${mpi_launch[*]}"
	echo "\$ ${herd_discover[*]}"
	echo "\$ ${pdsh_discover[*]}"
	echo "\$ ${herd_bcast[*]}"
	echo "\$ PATH=$work/sshbin:\$PATH ${pdcp_bcast[*]:2}    ($work/sshbin/ssh -> RSH)"

	# Warm-up; discovery must find every host, each under its own name.
	if on1 "${herd_discover[@]}" >"$work/inv.json" 2>"$work/inv.err" &&
		python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))["nodes"]; names = {x.get("hostname") for x in d}
assert len(d) == int(sys.argv[2]) and len(names) == len(d), (len(d), sorted(map(str, names)))' "$work/inv.json" "$n"; then :; else
		echo "fanout_compare.sh: herd discover did not find the $n hosts: $(tail -3 "$work/inv.err")" >&2
		fails=$((fails + 1))
	fi
	# pair OP: herd's command of OP in a, its peer's in b.
	pair() {
		case $1 in
		launch) a=("${herd_launch[@]}") b=("${mpi_launch[@]}") ;;
		discover) a=("${herd_discover[@]}") b=("${pdsh_discover[@]}") ;;
		bcast) a=("${herd_bcast[@]}") b=("${pdcp_bcast[@]}") ;;
		esac
	}
	for op in launch discover bcast; do
		pair "$op"
		for x in "$(timed "herd-$op" "${a[@]}")" "$(timed "peer-$op" "${b[@]}")"; do
			[[ $x == failed ]] && fails=$((fails + 1))
		done
	done

	declare -A runs=()
	for ((r = 1; r <= REPEAT; r++)); do
		for op in launch discover bcast; do
			pair "$op"
			if ((r % 2)); then
				x=$(timed "herd-$op" "${a[@]}"); y=$(timed "peer-$op" "${b[@]}")
			else
				y=$(timed "peer-$op" "${b[@]}"); x=$(timed "herd-$op" "${a[@]}")
			fi
			[[ $x == failed ]] && fails=$((fails + 1))
			[[ $y == failed ]] && fails=$((fails + 1))
			runs[herd-$op]="${runs[herd-$op]:-} $x"
			runs[peer-$op]="${runs[peer-$op]:-} $y"
		done
	done

	echo
	echo "runs (s), in order:"
	for op in launch discover bcast; do
		echo "  $op: herd${runs[herd-$op]}; peer${runs[peer-$op]}"
	done
	echo
	printf '| %-22s | %8s | %-34s | %8s | %9s |\n' "$n hosts, median of $REPEAT" "herd s" "peer" "peer s" "herd/peer"
	printf '|%s|%s|%s|%s|%s|\n' "------------------------" "----------" "------------------------------------" "----------" "-----------"
	for op in launch discover bcast; do
		case $op in
		launch) what="launch of true" peer="mpirun (plm_rsh_agent RSH)" ;;
		discover) what="discovery" peer="pdsh -R exec RSH %h herd probe" ;;
		bcast) what="broadcast of $SMALL" peer="pdcp -R ssh (RSH as ssh)" ;;
		esac
		h=$(echo "${runs[herd-$op]}" | median)
		p=$(echo "${runs[peer-$op]}" | median)
		med[$op-$n-herd]=$h med[$op-$n-peer]=$p
		printf '| %-22s | %8s | %-34s | %8s | %9s |\n' "$what" "$h" "$peer" "$p" "$(ratio "$h" "$p")"
	done
	unset runs
	bash tests/harness/netns.sh stop "$cluster"
	cluster=
done

echo
if [[ -n ${med[launch-64-herd]:-} ]]; then
	h=${med[launch-64-herd]} m=${med[launch-64-peer]}
	r=$(ratio "$h" "$m")
	verdict=$(python3 -c "import sys; print('MISSED' if sys.argv[1] == '-' or float(sys.argv[1]) > 0.5 else 'met')" "$r")
	echo "verdict: launch of true on 64 hosts: herd $h s, mpirun $m s, herd/mpirun $r (target <= 0.50): $verdict"
else
	echo "verdict: launch of true on 64 hosts: not measured (64 is not in SIZES)"
fi
if ((fails > 0)); then
	echo "fanout_compare.sh: $fails runs failed (see above)" >&2
	exit 1
fi
