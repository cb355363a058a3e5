#!/usr/bin/env bash
# Elastic jobs (herd launch --nodes MIN-MAX) on the namespace cluster, one
# rank per node, training with examples/train_ddp.c (a checkpoint every 10
# steps, 4 MiB of state sharded over the ranks), HERD_TIMEOUT=5:
#   - 4 hosts, --nodes 3-4: h3's `herd exec` and rank killed at step 20;
#     the launcher excludes h3 (contact lost), restarts on h1, h2 and h4,
#     the ranks resume resharded on 3, and the final weights and state
#     equal those of a run on 3 ranks from the same checkpoint; the end
#     summary names h3, and h3 is on the excluded nodes' list;
#   - --nodes 2-3 on 4 hosts: h4 is a spare; h2 lost, h4 is taken in;
#   - --nodes 2-3 on 3 hosts: h3's link cut, the job goes on on h1 and
#     h2; the link mended and a rank on h1 killed, the restart takes h3
#     back (it answers again) and runs on 3;
#   - --nodes 3-4 on 3 hosts: h2 lost, 2 nodes left: the job stops, saying
#     so;
#   - --nodes 2-3 --health-check with an Xid 79 in h2's kernel log (the
#     NVML stand-in): h2 is excluded before any rank starts and never
#     gets one.
# Needs root, iproute2 and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
netns_start 4
train=$(cd "$(dirname "$HERD")" && pwd)/example_train_ddp
[[ -x $train ]] || fail "no $train"
export HERD_TIMEOUT=5

# elastic NAME HOSTS NODES [herd launch options...]: starts the training
# job NAME in the background from h1 (its output in $tmp/NAME.out and .err).
elastic() {
	local name=$1 hosts=$2 nodes=$3
	shift 3
	timeout 150 "$cluster/run" 1 "$HERD" launch --hosts "$hosts" --nodes "$nodes" --restarts 3 "$@" -- \
		"$train" --dir "$tmp/$name.ck" --steps 80 --every 10 --pace 100 --state-mib 4 \
		--out "$tmp/$name.w" >"$tmp/$name.out" 2>"$tmp/$name.err" &
	job=$!
}

# lose I NAME: kills host I's node supervisor and its rank (SIGKILL).
lose() {
	local p=$(host_pids $1 "exec --stdio"; host_pids $1 "$train")
	[[ -n $p ]] || fail "$2: nothing of the job on h$1: $(cat "$tmp/$2.out" "$tmp/$2.err")"
	kill -9 $p
}

# ranks_on FILE: the hosts of the ranks that printed "done", sorted.
hosts_of() { sed -n 's/^\[\([^:]*\):[0-9]*\] .*/\1/p' "$1" | sort -u | tr '\n' ' '; }

# --- a node lost: on 3 of 4, weights equal to a run on 3 from the checkpoint
elastic lost 'h[1-4]' 3-4 --json-summary "$tmp/lost.json"
wait_lines 1 "[h1:0] step 20:" "$tmp/lost.out" 60
lose 3 lost
wait $job || fail "the job did not finish on 3 nodes: $(tail -5 "$tmp/lost.out"; cat "$tmp/lost.err")"
err=$(cat "$tmp/lost.err")
has "$err" "node h3 excluded: lost contact with it"
has "$err" "nodes now h1,h2,h4 (3 of 3-4; 3 ranks)"
has "$err" "herd launch: job "
has "$err" ": node h3 was excluded: lost contact with it"
resumed=$(sed -n 's/^\[h1:0\] restart 1: resumed from step \([0-9]*\) on 3 ranks .*/\1/p' "$tmp/lost.out")
[[ -n $resumed ]] || fail "no resume on 3 ranks: $(grep restart "$tmp/lost.out")"
ranks=$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
print(" ".join(r["host"] for r in d["ranks"]), " ".join(n["host"] + ":" + n["role"] for n in d["nodes"]))' \
	"$tmp/lost.json")
[[ $ranks == "h1 h2 h4 h1:in h2:in h3:out h4:in" ]] || fail "ranks and nodes after the restart: $ranks"
grep -q "^h3	" "$HERD_EXCLUDE_FILE" || fail "h3 is not on the excluded nodes' list"
# The same from that checkpoint: 4 ranks to it, then 3 from it.
"$HERD" launch -n 4 -- "$train" --dir "$tmp/ref.ck" --steps "$resumed" --every 10 --state-mib 4 \
	>/dev/null 2>&1 || fail "the reference run to step $resumed failed"
"$HERD" launch -n 3 -- "$train" --dir "$tmp/ref.ck" --steps 80 --every 10 --state-mib 4 --resume \
	--out "$tmp/ref.w" >/dev/null 2>&1 || fail "the reference run on 3 ranks failed"
cmp "$tmp/lost.w" "$tmp/ref.w" || fail "weights differ from the run on 3 ranks from step $resumed"
echo "lost: h3 excluded, resumed from step $resumed on 3 ranks, weights and state equal ($(tail -1 "$tmp/ref.w"))"
rm -f "$HERD_EXCLUDE_FILE"
