#!/usr/bin/env bash
# herd discover --slurm inside a real two-node Slurm cluster on this machine
# (tests/harness/slurm.sh): one srun step runs herd probe on both nodes,
# node2 reporting a DGX H100 (HERD_INVENTORY), and the nodes are named as
# Slurm names them; then node2's probe prints garbage, then hangs past
# --timeout: node1 is kept, node2 named with the reason, exit status 1.
# --links measures node1-node2 in a launch through srun; herd bcast copies
# a file to both nodes through one srun step, and refuses a DEST that is a
# FIFO on its node.  Outside an
# allocation it says so (exit 2).
# Needs root, slurm-wlm and munge; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
cleanup() {
	bash tests/harness/slurm.sh stop "$tmp/slurm"
	rm -rf "$tmp"
}
trap cleanup EXIT
harness_start slurm Slurm
export SLURM_CONF=$tmp/slurm/slurm.conf
unset SLURM_JOB_ID SLURM_JOBID SLURM_JOB_NODELIST SLURM_NODELIST SLURM_TASKS_PER_NODE \
	HERD_INVENTORY HERD_LAUNCH_ADDR
fixtures=$PWD/tests/fixtures/inventory
# node2's probe, by $MODE (exported through salloc and srun).
cat >"$tmp/herd-node" <<EOF
#!/bin/sh
# herd bcast: each node's copy at DEST.NODE, to be told apart here.
if [ "\$1" = bcast ] && [ "\$2" = --receive ]; then
	dest=\$3
	shift 3
	# late2: node2 says its word late, so that node1's refusal has surely
	# ended its task before the stream starts
	[ "\$MODE" = late2 ] && [ "\$SLURMD_NODENAME" = node2 ] && sleep 2
	exec "$HERD" bcast --receive "\$dest.\$SLURMD_NODENAME" "\$@"
fi
if [ "\$SLURMD_NODENAME" = node2 ]; then
	case \$MODE in
	dgx) export HERD_INVENTORY=$fixtures/dgx-h100.json ;;
	garbage) echo "not an inventory at all"; exit 0 ;;
	hang) exec sleep 60 ;;
	esac
fi
exec "$HERD" "\$@"
EOF
chmod +x "$tmp/herd-node"
export HERD_PROGRAM=$tmp/herd-node

MODE=dgx timeout 120 salloc -Q -N2 "$HERD" discover --slurm >"$tmp/out" 2>"$tmp/err" \
	|| fail "discover --slurm exited $?: $(cat "$tmp/out" "$tmp/err")"
grep -q "^node1 *1  1x .* no GPU " "$tmp/out" || fail "node1: $(cat "$tmp/out")"
grep -q "^node2 *1  2x Intel(R) Xeon(R) Platinum 8480C 112 cores  2.0 TiB  8x NVIDIA H100" "$tmp/out" \
	|| fail "node2: $(cat "$tmp/out")"
grep -q "^warning: node[12]: GPU count differs" "$tmp/out" || fail "no warning: $(cat "$tmp/out")"
[[ ! -s $tmp/err ]] || fail "stderr: $(cat "$tmp/err")"

MODE=garbage timeout 120 salloc -Q -N2 "$HERD" discover --slurm --json >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "a node printing garbage: exit $rc, want 1: $(cat "$tmp/err")"
python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))
assert [n["hostname"] for n in c["nodes"]] == ["node1"], c["nodes"]
assert c["failed"][0]["host"] == "node2" and "not an inventory" in c["failed"][0]["reason"], c["failed"]
' "$tmp/out" || fail "garbage: $(cat "$tmp/out" "$tmp/err")"

t0=$(date +%s)
MODE=hang timeout 120 salloc -Q -N2 "$HERD" discover --slurm --timeout 3 >"$tmp/out" 2>"$tmp/err"; rc=$?
t1=$(date +%s)
[[ $rc == 1 ]] || fail "a hanging node: exit $rc, want 1: $(cat "$tmp/err")"
grep -q "^herd discover: node2: no answer within 3 s (--timeout)" "$tmp/err" || fail "hang: $(cat "$tmp/err")"
grep -q "^node1 " "$tmp/out" || fail "node1 lost with node2 hanging: $(cat "$tmp/out")"
(( t1 - t0 < 20 )) || fail "discover with a hanging node took $((t1 - t0)) s"

# --- the fabric check between the two nodes, through one srun step
MODE= timeout 120 salloc -Q -N2 "$HERD" discover --slurm --links --links-bytes 1M >"$tmp/out" 2>"$tmp/err"; rc=$?
grep -qE "^node1 +node2 +[0-9.]+ +[0-9.]+ +100%$" "$tmp/out" || fail "links node1-node2: $rc $(cat "$tmp/out" "$tmp/err")"
[[ $rc == 0 ]] || fail "links with one pair exited $rc"

# --- herd bcast through one srun step (the default inside an allocation)
seq 1 300000 >"$tmp/src"
mkdir "$tmp/copies"
MODE= timeout 120 salloc -Q -N2 "$HERD" bcast "$tmp/src" "$tmp/copies/f" 2>"$tmp/err" \
	|| fail "bcast in the allocation exited $?: $(cat "$tmp/err")"
cmp -s "$tmp/src" "$tmp/copies/f.node1" && cmp -s "$tmp/src" "$tmp/copies/f.node2" \
	|| fail "bcast copies: $(ls -l "$tmp/copies")"
# one node: its step's one task answers for it
MODE= timeout 120 salloc -Q -N1 -w node2 "$HERD" bcast "$tmp/src" "$tmp/copies/one" 2>"$tmp/err" \
	|| fail "bcast to one node exited $?: $(cat "$tmp/err")"
cmp -s "$tmp/src" "$tmp/copies/one.node2" || fail "bcast to one node: $(ls -l "$tmp/copies")"
# srun that cannot run: the call fails with its reason, not one per node
MODE= HERD_SRUN=/nonexistent/srun timeout 120 salloc -Q -N2 "$HERD" discover --slurm \
	>/dev/null 2>"$tmp/err"; rc=$?
[[ $rc != 0 ]] && grep -q 'cannot run "/nonexistent/srun"' "$tmp/err" &&
	! grep -q "none of the" "$tmp/err" || fail "discover with no srun: $rc $(cat "$tmp/err")"
MODE= timeout 120 salloc -Q -N2 "$HERD" bcast --slurm "$tmp/src" "$tmp/no-such-dir/f" 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "bcast to a missing directory exited $rc"
grep -q "^herd bcast: node1: cannot create a file beside $tmp/no-such-dir/f.node1" "$tmp/err" &&
	grep -q "^herd bcast: node2: cannot create" "$tmp/err" || fail "bcast failures: $(cat "$tmp/err")"
# a DEST that is a FIFO on node1: refused there, before the step's stdin
# carries the file; node2 gets its copy
mkfifo "$tmp/copies/p.node1"
# 8 MB: more than srun and node1's slurmstepd take in for a task that has
# ended (about 1 MiB each)
head -c 8000000 /dev/urandom >"$tmp/big"
MODE=late2 timeout 120 salloc -Q -N2 "$HERD" bcast --slurm --timeout 5 "$tmp/big" "$tmp/copies/p" 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "bcast onto a FIFO exited $rc: $(cat "$tmp/err")"
grep -qxF "herd bcast: node1: $tmp/copies/p.node1 exists and is a FIFO: a new file replaces only a regular file (remove it first, or name another path)" "$tmp/err" \
	|| fail "bcast onto a FIFO: $(cat "$tmp/err")"
[[ -p $tmp/copies/p.node1 ]] || fail "bcast replaced the FIFO: $(ls -l "$tmp/copies")"
cmp -s "$tmp/big" "$tmp/copies/p.node2" || fail "bcast beside a refused node: $(ls -l "$tmp/copies") $(cat "$tmp/err")"
! compgen -G "$tmp/copies/*.herd-bcast.*" >/dev/null || fail "bcast left temporaries: $(ls -l "$tmp/copies")"

"$HERD" discover --slurm >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] && grep -q "SLURM_JOB_ID" "$tmp/err" || fail "outside an allocation: $rc $(cat "$tmp/err")"
exit 0
