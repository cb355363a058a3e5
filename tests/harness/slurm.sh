#!/usr/bin/env bash
# tests/harness/slurm.sh start|stop DIR
#
# A real two-node Slurm cluster on this machine for tests: munged with its
# own key and socket, slurmctld, and two slurmd (-N node1, -N node2) on
# ports of their own, both NodeHostname=localhost.  Each node has two
# "GPUs": device nodes DIR/dev/nvidia0 and nvidia1 (character devices,
# major 195, made with mknod) named in gres.conf, so --gpus-per-node and
# --gpus work and Slurm sets SLURM_STEP_GPUS and CUDA_VISIBLE_DEVICES as on
# a real cluster, without GPUs.  Everything lives in DIR; clients find the
# cluster through SLURM_CONF:
#
#   export SLURM_CONF=DIR/slurm.conf
#   srun -N2 -n4 --gpus-per-node=2 env | grep CUDA_VISIBLE
#
# start returns once sinfo shows both nodes idle (bounded: 60 s); stop kills
# the daemons whose pids start wrote (and nothing else).  Needs root and
# Debian's slurm-wlm and munge; exits 77 when they are missing.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
dir=$2

# The daemons, each with its pid file (written by start).
daemons=(slurmd-node1 slurmd-node2 slurmctld munged)

kill_pidfile() {
	local name=$1 file=$dir/$1.pid pid
	[ -f "$file" ] || return 0
	pid=$(cat "$file")
	# Only a process still running with our configuration is ours.
	if [ -n "$pid" ] && grep -qF "$dir/" "/proc/$pid/cmdline" 2>/dev/null; then
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			echo "slurm.sh: $name ($pid) ignored SIGTERM; killing it" >&2
			kill -9 "$pid" 2>/dev/null || true
		fi
	fi
	rm -f "$file"
}

stop() {
	[ -d "$dir" ] || return 0
	dir=$(cd "$dir" && pwd)
	# Jobs first, while slurmd is there to end their steps (bounded: 20 s).
	if [ -f "$dir/slurmctld.pid" ] && [ -f "$dir/slurm.conf" ]; then
		export SLURM_CONF=$dir/slurm.conf
		scancel --quiet --full $(squeue -h -o %i 2>/dev/null) 2>/dev/null || true
		for _ in $(seq 100); do
			[ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
			sleep 0.2
		done
	fi
	for d in "${daemons[@]}"; do kill_pidfile "$d"; done
}

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_pidfile() {
	local file=$1
	for _ in $(seq 100); do
		[ -s "$file" ] && return 0
		sleep 0.05
	done
	return 1
}

write_conf() {
	local ctld_port node1_port node2_port srun_lo
	ctld_port=$(free_port)
	node1_port=$(free_port)
	node2_port=$(free_port)
	srun_lo=$((40000 + RANDOM % 10000))
	cat >"$dir/slurm.conf" <<-EOF
	ClusterName=herdtest
	SlurmctldHost=localhost
	SlurmctldPort=$ctld_port
	SlurmdPort=$node1_port
	SrunPortRange=$srun_lo-$((srun_lo + 999))
	SlurmUser=root
	SlurmdUser=root
	AuthType=auth/munge
	AuthInfo=socket=$dir/munge/munge.socket
	CredType=cred/munge
	StateSaveLocation=$dir/state
	SlurmdSpoolDir=$dir/spool/%n
	SlurmctldPidFile=$dir/slurmctld.pid
	SlurmdPidFile=$dir/slurmd-%n.pid
	SlurmctldLogFile=$dir/slurmctld.log
	SlurmdLogFile=$dir/slurmd-%n.log
	SlurmctldDebug=info
	SlurmdDebug=info
	ProctrackType=proctrack/pgid
	TaskPlugin=task/none
	SwitchType=switch/none
	MpiDefault=none
	SelectType=select/cons_tres
	SelectTypeParameters=CR_Core
	SchedulerType=sched/builtin
	SlurmdParameters=config_overrides
	ReturnToService=2
	SlurmctldTimeout=30
	SlurmdTimeout=30
	InactiveLimit=0
	KillWait=5
	MinJobAge=30
	AccountingStorageType=accounting_storage/none
	JobAcctGatherType=jobacct_gather/none
	JobCompType=jobcomp/none
	GresTypes=gpu
	NodeName=node1 NodeHostname=localhost Port=$node1_port CPUs=4 Gres=gpu:2 RealMemory=1000 State=UNKNOWN
	NodeName=node2 NodeHostname=localhost Port=$node2_port CPUs=4 Gres=gpu:2 RealMemory=1000 State=UNKNOWN
	PartitionName=debug Nodes=node[1-2] Default=YES MaxTime=INFINITE State=UP
	EOF
	cat >"$dir/gres.conf" <<-EOF
	NodeName=node[1-2] Name=gpu File=$dir/dev/nvidia[0-1]
	EOF

}

# Starts slurmctld and both slurmds and waits until both nodes are idle
# (bounded: 60 s); 1 when a daemon did not start or died, or the nodes did
# not come up.
daemons_up() {
	export SLURM_CONF=$dir/slurm.conf
	slurmctld -f "$dir/slurm.conf" -i
	wait_pidfile "$dir/slurmctld.pid" || { echo "slurm.sh: slurmctld did not start" >&2; return 1; }
	for n in node1 node2; do
		slurmd -f "$dir/slurm.conf" -N "$n"
		wait_pidfile "$dir/slurmd-$n.pid" || { echo "slurm.sh: slurmd $n did not start" >&2; return 1; }
	done
	local state="" d
	for _ in $(seq 120); do
		state=$(sinfo -h -N -o '%N %t' 2>/dev/null | sort | tr '\n' ' ')
		if [ "$state" = "node1 idle node2 idle " ]; then
			return 0
		fi
		for d in slurmctld slurmd-node1 slurmd-node2; do
			kill -0 "$(cat "$dir/$d.pid" 2>/dev/null)" 2>/dev/null \
				|| { echo "slurm.sh: $d exited" >&2; return 1; }
		done
		sleep 0.5
	done
	echo "slurm.sh: nodes not idle after 60 s: ${state:-no answer from slurmctld}" >&2
	return 1
}

start() {
	if [ "$(id -u)" -ne 0 ]; then
		echo "slurm.sh: needs root" >&2
		exit 77
	fi
	for prog in munged slurmctld slurmd sinfo srun salloc python3; do
		if ! command -v "$prog" >/dev/null; then
			echo "slurm.sh: $prog not found (Debian packages slurm-wlm, munge)" >&2
			exit 77
		fi
	done
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	mkdir -p "$dir/munge" "$dir/state" "$dir/spool/node1" "$dir/spool/node2" "$dir/dev"
	chmod 0700 "$dir/munge"

	# munge: a key of our own, a socket of our own.
	dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
	chmod 0400 "$dir/munge/munge.key"
	munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
		--pid-file="$dir/munged.pid" --log-file="$dir/munge/munged.log" \
		--seed-file="$dir/munge/munged.seed"
	wait_pidfile "$dir/munged.pid" || { echo "slurm.sh: munged did not start" >&2; exit 1; }

	# Two GPUs per node: NVIDIA's character devices, major 195.
	for n in 0 1; do
		rm -f "$dir/dev/nvidia$n"
		mknod -m 0666 "$dir/dev/nvidia$n" c 195 "$n"
	done

	# The ports are picked free, but another process can take one before
	# the daemon binds it; a daemon that died on "Address already in use"
	# makes the whole cluster start again on new ports (3 tries).
	local try
	for try in 1 2 3; do
		write_conf
		if daemons_up; then
			return 0
		fi
		if ! grep -qs "Address already in use" "$dir/slurmctld.log" "$dir"/slurmd-node*.log; then
			tail -5 "$dir/slurmctld.log" "$dir"/slurmd-node*.log >&2 || true
			exit 1
		fi
		echo "slurm.sh: a port was taken before its daemon bound it (try $try); new ports" >&2
		for d in slurmd-node1 slurmd-node2 slurmctld; do kill_pidfile "$d"; done
		rm -f "$dir/slurmctld.log" "$dir"/slurmd-node*.log
		rm -rf "$dir/state" && mkdir -p "$dir/state"
	done
	exit 1
}

case $cmd in
start)
	# A start that fails half-way stops what it started.
	trap 'rc=$?; [ $rc -eq 0 ] || [ $rc -eq 77 ] || stop' EXIT
	start
	;;
stop) stop ;;
*) usage ;;
esac
