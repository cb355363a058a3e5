#!/usr/bin/env bash
# herd's ranks started by the engines people already use, with no HERD_*
# variable set: `srun -N2 -n4 herd bench allreduce` in a real two-node
# Slurm cluster (tests/harness/slurm.sh; the node names resolve to two
# loopback addresses through an /etc/hosts of this test's own mount
# namespace), `mpirun -np 2 herd bench allreduce` with a real Open MPI,
# and `torchrun --no-python` from PyPI's torch (on PATH or in the venv
# .ci/torch makes, /opt/herd-torch), whose agent already serves its own
# store on MASTER_PORT.  Rank 0 hosts the job's store at an address every rank derives
# (test_comm_bootstrap covers ports held by others).
# Needs root, unshare, slurm-wlm, munge and openmpi-bin; parts whose
# engine is missing are skipped, and the test exits 77 when all are.
if [[ -z ${BOOTSTRAP_TEST_NS:-} ]] && [[ $(id -u) == 0 ]] && command -v unshare >/dev/null; then
	BOOTSTRAP_TEST_NS=1 exec unshare --mount --propagation private bash "$0" "$@"
fi
source "$(dirname "$0")/../harness/common.sh" "$@"
holder=
cleanup() {
	[[ -n $holder ]] && kill "$holder" 2>/dev/null
	[[ -d $tmp/slurm ]] && bash tests/harness/slurm.sh stop "$tmp/slurm"
	rm -rf "$tmp"
}
trap cleanup EXIT
unset $(env | sed -n 's/^\(HERD_[A-Z_]*\)=.*/\1/p') SLURM_JOB_ID SLURM_JOBID RANK WORLD_SIZE \
	MASTER_ADDR MASTER_PORT
torchrun=$(command -v torchrun || ls /opt/herd-torch/bin/torchrun 2>/dev/null)
export HOME=$tmp/home
mkdir -p "$HOME"
ran=0

# bench_ok OUT N: the bench ran on N ranks and every row has #wrong 0.
bench_ok() {
	has "$1" "# herd bench allreduce: $2 ranks"
	has "$1" "# Out of bounds values : 0 OK"
	local rows
	rows=$(grep -cE '^ +[0-9]+ +[0-9]+ +float32 +sum +-1 .* 0 +[0-9.]+ +[0-9.]+ +[0-9.]+ +0$' <<<"$1")
	(( rows > 0 )) || fail "no bench rows with #wrong 0:
$1"
}

# --- Open MPI: one node, the key mpirun shares keys the secret
if command -v mpirun >/dev/null; then
	export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
	out=$(timeout 90 mpirun --oversubscribe -np 2 "$HERD" bench allreduce -b 8 -e 64K 2>&1) \
		|| fail "mpirun -np 2 herd bench allreduce exited $?: $out"
	bench_ok "$out" 2
	[[ ! -e $HOME/.herd/secret ]] || fail "under mpirun the user's secret file was used"
	ran=$((ran + 1))
else
	echo "mpirun: not found (Debian openmpi-bin); skipped"
fi

# --- torchrun: with its agent's store on MASTER_PORT, and --standalone
if [[ -n $torchrun ]]; then
	for try in 1 2 3; do
		port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
		out=$(timeout 120 "$torchrun" --no-python --nproc-per-node 3 --master-port "$port" \
			"$HERD" bench allreduce -b 8 -e 64K 2>&1) && break
		# The port picked free can be taken before torchrun binds it.
		grep -qi "address already in use" <<<"$out" || break
	done
	bench_ok "$out" 3
	out=$(timeout 120 "$torchrun" --standalone --no-python --nproc-per-node 2 \
		"$HERD" bench allreduce -b 8 -e 64K 2>&1) || fail "torchrun --standalone exited $?: $out"
	bench_ok "$out" 2
	ran=$((ran + 1))
else
	echo "torchrun: not found (bash .ci/torch installs PyPI's torch); skipped"
fi

# --- Slurm: two nodes, rank 0 on node1
if [[ -n ${BOOTSTRAP_TEST_NS:-} ]] && command -v slurmctld >/dev/null; then
	{ cat /etc/hosts; echo "127.0.0.11 node1"; echo "127.0.0.12 node2"; } >"$tmp/hosts"
	mount --bind "$tmp/hosts" /etc/hosts || fail "cannot bind-mount the test's /etc/hosts"
	harness_start slurm Slurm
	export SLURM_CONF=$tmp/slurm/slurm.conf
	out=$(timeout 120 srun -N2 -n4 "$HERD" bench allreduce -b 8 -e 64K 2>&1) \
		|| fail "srun -N2 -n4 herd bench allreduce exited $?: $out"
	bench_ok "$out" 4
	[[ $(stat -c %a "$HOME/.herd/secret") == 600 && $(stat -c %a "$HOME/.herd") == 700 ]] \
		|| fail "the user's secret file: $(ls -la "$HOME/.herd")"

	ran=$((ran + 1))
else
	echo "Slurm: slurmctld or the mount namespace not available; skipped"
fi
(( ran > 0 )) || exit 77
echo "ok: $ran engines"
