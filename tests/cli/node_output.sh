#!/usr/bin/env bash
# What a node prints where herd's protocol should be.  Nodes are faked by
# stand-ins for ssh (HERD_SSH) and srun (HERD_SRUN) that run the command
# here, as the node the host name says:
#   junk*    prints 60 MB of junk on stdout (and 10 MB on stderr under srun)
#   banner*  prints a login banner line, then runs herd as asked
#   other    runs herd as asked
# herd discover stops reading a node at 1 MiB (an inventory is a few KiB)
# and names it and the bound, with its own memory staying small (its peak
# RSS against a run without junk); a relay's bound is 1 MiB for each node
# of its group.  Under srun --label, where one stream carries every task,
# the junk task's output beyond the bound is dropped as it comes, however
# long its lines.  Text before herd's protocol is named as such, with its
# first line quoted, by discover and launch (flat and under a relay).  A
# bcast receiver that prints junk is stopped at its bound too.
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT
unset HERD_LAUNCH_ADDR SLURM_JOB_ID SLURM_JOBID SLURM_JOB_NODELIST SLURM_NODELIST \
	SLURM_TASKS_PER_NODE SLURM_JOB_CPUS_PER_NODE HERD_INVENTORY

cat >"$tmp/ssh" <<'SH'
#!/bin/sh
# ssh [OPTIONS] [--] HOST CMD: CMD here, as HOST would run it.
while [ $# -gt 0 ]; do
	case $1 in
	--) shift; break ;;
	-[BbcDEeFIiJLlmOopQRSWw]) shift 2 ;;
	-*) shift ;;
	*) break ;;
	esac
done
host=$1
shift
case $host in
junk*) head -c 60000000 /dev/zero | tr '\0' x; exit 0 ;;
banner*) echo "Welcome to $host"; exec sh -c "$*" ;;
esac
exec sh -c "$*"
SH
# srun --label's stand-in: task t runs as node s<t+1>; each stream's lines
# go out whole, labelled "t: ", a line longer than a read in pieces (the
# first labelled) while the other tasks wait, as one stream carries all.
cat >"$tmp/srun" <<'PY'
#!/usr/bin/env python3
import os, subprocess, sys, threading
args, n = sys.argv[1:], 1
while args and args[0].startswith("--"):
    if args[0].startswith("--nodes="):
        n = int(args[0][8:])
    args.pop(0)
lock = threading.Lock()
def pump(src, dst, label):
    start, held = True, False
    while True:
        b = os.read(src, 65536)
        if not b:
            break
        if not held:
            lock.acquire()
            held = True
        for piece in b.splitlines(keepends=True):
            dst.write((label if start else b"") + piece)
            start = piece.endswith(b"\n")
        dst.flush()
        if start:
            lock.release()
            held = False
    if held:
        lock.release()
procs, pumps = [], []
for t in range(n):
    env = dict(os.environ, SLURMD_NODENAME="s%d" % (t + 1), SLURM_PROCID=str(t))
    p = subprocess.Popen(args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    procs.append(p)
    for src, dst in ((p.stdout, sys.stdout.buffer), (p.stderr, sys.stderr.buffer)):
        th = threading.Thread(target=pump, args=(src.fileno(), dst, b"%d: " % t))
        th.start()
        pumps.append(th)
for th in pumps:
    th.join()
sys.exit(max(p.wait() for p in procs))
PY
# herd on the srun "nodes": s2 is the junk one.
cat >"$tmp/herd-node" <<SH
#!/bin/sh
if [ "\$SLURMD_NODENAME" = s2 ]; then
	yes "a line of junk on the stderr of s2" | head -n 300000 >&2
	head -c 60000000 /dev/zero | tr '\0' x
	exit 0
fi
exec "$HERD" "\$@"
SH
chmod +x "$tmp/ssh" "$tmp/srun" "$tmp/herd-node"
export HERD_SSH=$tmp/ssh HERD_PROGRAM=$HERD

# peak KIB CMD...: runs CMD (its stdout and stderr to $tmp/out, $tmp/err),
# sets rc, and the peak resident set of it and what it waited for, in KiB.
peak() {
	python3 - "$@" >"$tmp/peak" <<'PY'
import resource, subprocess, sys
with open(sys.argv[1] + "/out", "wb") as out, open(sys.argv[1] + "/err", "wb") as err:
    rc = subprocess.call(["timeout", "120"] + sys.argv[2:], stdout=out, stderr=err)
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
PY
	read -r rc kib <"$tmp/peak"
}
peak_of() { peak "$tmp" "$@"; }

# --- flat: the junk node is named with the bound, the other kept; the
# launcher's peak memory is that of a run without junk, give or take
peak_of "$HERD" discover --hosts 'n1,n2'
[[ $rc == 0 ]] || fail "discover of two good nodes exited $rc: $(cat "$tmp/err")"
base=$kib
peak_of "$HERD" discover --hosts 'n1,junk1'
[[ $rc == 1 ]] || fail "discover with a junk node exited $rc, want 1: $(cat "$tmp/err")"
[[ $(cat "$tmp/err") == "herd discover: junk1: printed more than 1 MiB on stdout, more than an inventory may take; stopped reading it" ]] \
	|| fail "the junk node: $(cat "$tmp/err")"
grep -q "^n1 *1 " "$tmp/out" || fail "the good node is not kept: $(cat "$tmp/out")"
(( kib < base + 20000 )) || fail "discover held $kib KiB with a junk node, $base KiB without"

# --- a relay's group: a junk child is named by its relay; a junk relay
# is stopped at 1 MiB for each node of its group, and its group named
HERD_SSH_TREE_MIN=2 HERD_SSH_TREE_WIDTH=2 timeout 120 "$HERD" discover --hosts 'n1,junk1,junk2,n2' \
	>"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "tree discover with junk exited $rc: $(cat "$tmp/err")"
has "$(cat "$tmp/err")" "herd discover: junk1: printed more than 1 MiB on stdout, more than an inventory may take; stopped reading it"
has "$(cat "$tmp/err")" "herd discover: junk2: printed more than 2 MiB on stdout, more than the inventories of its 2 nodes may take (1 MiB a node); stopped reading it"
has "$(cat "$tmp/err")" "herd discover: n2: not reached: its relay junk2 failed: printed more than 2 MiB"
grep -q "^n1 *1 " "$tmp/out" || fail "the relay n1 is not kept: $(cat "$tmp/out")"

# --- one srun step: the junk task's stdout (one 60 MB line) and stderr
# (10 MB of lines) are dropped beyond the bound as they come
export HERD_SRUN=$tmp/srun SLURM_JOB_ID=1 SLURM_JOB_NODELIST='s[1-2]'
HERD_PROGRAM=$tmp/herd-node peak_of "$HERD" discover --slurm --timeout 100
[[ $rc == 1 ]] || fail "discover --slurm with a junk task exited $rc: $(cat "$tmp/err")"
[[ $(cat "$tmp/err") == "herd discover: s2: printed more than 1 MiB on stdout, more than an inventory may take; the rest was dropped" ]] \
	|| fail "the junk task: $(cat "$tmp/err")"
grep -q "^s1 *1 " "$tmp/out" || fail "the good task is not kept: $(cat "$tmp/out")"
(( kib < base + 20000 )) || fail "discover --slurm held $kib KiB with a junk task, $base KiB without"

# --- srun's last words arrive with the end of its stdout: a task's reason
# is still sorted to it.  The stand-in stops the launcher while it says
# them and ends, so both come to the launcher's same turn; a helper it
# starts continues the launcher half a second later.
cat >"$tmp/srun-last" <<'SH'
#!/bin/bash
while [[ $1 == --* ]]; do shift; done
SLURMD_NODENAME=s1 SLURM_PROCID=0 "$@" | sed 's/^/0: /'
setsid sh -c "sleep 0.5; kill -CONT $PPID" </dev/null >/dev/null 2>&1 &
kill -STOP $PPID
echo "1: boom on s2" >&2
exit 1
SH
chmod +x "$tmp/srun-last"
HERD_SRUN=$tmp/srun-last timeout 60 "$HERD" discover --slurm --timeout 30 >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "discover --slurm with a failing task exited $rc: $(cat "$tmp/err")"
grep -q "^herd discover: s2: .*boom on s2" "$tmp/err" || fail "srun's last words are lost: $(cat "$tmp/err")"
grep -q "^s1 *1 " "$tmp/out" || fail "the good task is not kept: $(cat "$tmp/out")"
unset HERD_SRUN SLURM_JOB_ID SLURM_JOB_NODELIST

# --- a login banner before the protocol: named, its line quoted
timeout 60 "$HERD" discover --hosts 'n1,banner1' >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "discover with a banner exited $rc: $(cat "$tmp/err")"
[[ $(cat "$tmp/err") == "herd discover: banner1: printed text before herd's protocol: 'Welcome to banner1'; a login banner on stdout?" ]] \
	|| fail "discover's banner: $(cat "$tmp/err")"
timeout 60 "$HERD" launch -n 2 --hosts 'n1,banner1' -- true >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 125 ]] || fail "launch with a banner exited $rc: $(cat "$tmp/err")"
[[ $(cat "$tmp/err") == "herd launch: node banner1: printed text before herd's protocol: 'Welcome to banner1'; a login banner on stdout?" ]] \
	|| fail "launch's banner: $(cat "$tmp/err")"
# under a relay (n1 reaches banner1)
HERD_SSH_TREE_MIN=2 HERD_SSH_TREE_WIDTH=2 timeout 60 "$HERD" launch -n 4 --hosts 'n1,banner1,n2,n3' \
	-- true >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 125 ]] || fail "tree launch with a banner exited $rc: $(cat "$tmp/err")"
grep -q "^herd launch: node banner1: .*printed text before herd's protocol: 'Welcome to banner1'; a login banner on stdout? (started over ssh by relay node n1)" "$tmp/err" \
	|| fail "tree launch's banner: $(cat "$tmp/err")"

# --- a bcast receiver that prints junk is stopped at its bound
echo data >"$tmp/file"
timeout 60 "$HERD" bcast --hosts 'n1,junk1' "$tmp/file" "$tmp/copy" >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "bcast with a junk receiver exited $rc: $(cat "$tmp/err")"
has "$(cat "$tmp/err")" "junk1: printed more than 1 MiB on its stdout, the most herd reads from it; stopped reading it"
echo "node_output: ok"
