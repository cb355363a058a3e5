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
#     gets one;
#   - the health gate's fabric check with h3's link shaped to 400 Mbit/s:
#     a fixed job is refused naming h3, an elastic one runs without it;
#   - examples/lua/elastic_demo.lua on 4 hosts loses h4 and checks its
#     result against a run on 3 from the same checkpoint.
# Needs root, iproute2 and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
netns_start 4
train=$(cd "$(dirname "$HERD")" && pwd)/example_train_ddp
[[ -x $train ]] || fail "no $train"
export HERD_TIMEOUT=5

# elastic NAME HOSTS NODES [herd launch options...]: starts the training
# job NAME in the background from h1 (its output in $tmp/NAME.out and .err):
# $steps steps (default 50) of at least 60 ms.
elastic() {
	local name=$1 hosts=$2 nodes=$3
	shift 3
	timeout 150 "$cluster/run" 1 "$HERD" launch --hosts "$hosts" --nodes "$nodes" --restarts 3 "$@" -- \
		"$train" --dir "$tmp/$name.ck" --steps "${steps:-50}" --every 10 --pace 60 --state-mib 4 \
		--out "$tmp/$name.w" >"$tmp/$name.out" 2>"$tmp/$name.err" &
	job=$!
}

# lose I NAME: kills host I's node supervisor and its rank (SIGKILL).
lose() {
	local p=$(host_pids $1 "exec --stdio"; program_pids $1 "$train")
	[[ -n $p ]] || fail "$2: nothing of the job on h$1: $(cat "$tmp/$2.out" "$tmp/$2.err")"
	kill -9 $p
}

# placed NAME: from job NAME's --json-summary, the hosts of its last run's
# ranks, in rank order, then every node's host:role.
placed() {
	python3 -c 'import json, sys; d = json.load(open(sys.argv[1]))
print(" ".join(r["host"] for r in d["ranks"]), " ".join(n["host"] + ":" + n["role"] for n in d["nodes"]))' \
		"$tmp/$1.json"
}

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
ranks=$(placed lost)
[[ $ranks == "h1 h2 h4 h1:in h2:in h3:out h4:in" ]] || fail "ranks and nodes after the restart: $ranks"
grep -q "^h3	" "$HERD_EXCLUDE_FILE" || fail "h3 is not on the excluded nodes' list"
# The same from that checkpoint: 4 ranks to it, then 3 from it.
"$HERD" launch -n 4 -- "$train" --dir "$tmp/ref.ck" --steps "$resumed" --every 10 --state-mib 4 \
	>/dev/null 2>&1 || fail "the reference run to step $resumed failed"
"$HERD" launch -n 3 -- "$train" --dir "$tmp/ref.ck" --steps 50 --every 10 --state-mib 4 --resume \
	--out "$tmp/ref.w" >/dev/null 2>&1 || fail "the reference run on 3 ranks failed"
cmp "$tmp/lost.w" "$tmp/ref.w" || fail "weights differ from the run on 3 ranks from step $resumed"
echo "lost: h3 excluded, resumed from step $resumed on 3 ranks, weights and state equal ($(tail -1 "$tmp/ref.w"))"
rm -f "$HERD_EXCLUDE_FILE"

# --- a spare taken in: h4 waits beyond MAX, h2 is lost, h4 takes its place
elastic spare 'h[1-4]' 2-3 --json-summary "$tmp/spare.json"
wait_lines 1 "[h1:0] step 20:" "$tmp/spare.out" 60
# herd jobs lists the job, and herd job status shows where each node stands.
jobs=$("$cluster/run" 1 "$HERD" jobs) || fail "herd jobs: $jobs"
jid=$(awk -v d="$tmp/spare.ck" 'index($0, d) { print $1; exit }' <<<"$jobs")
[[ -n $jid ]] || fail "herd jobs does not list the elastic job: $jobs"
st=$("$cluster/run" 1 "$HERD" job status "$jid") || fail "herd job status $jid: $st"
has "$st" "nodes (2 to 3):
  h1: in
  h2: in
  h3: in
  h4: spare"
echo "$jobs" | cut -c1-120
lose 2 spare
wait $job || fail "the job with a spare did not finish: $(tail -5 "$tmp/spare.out"; cat "$tmp/spare.err")"
err=$(cat "$tmp/spare.err")
has "$err" "node h2 excluded: lost contact with it"
has "$err" "nodes now h1,h3,h4 (3 of 2-3; 3 ranks)"
grep -q "^\[h1:0\] restart 1: resumed from step [0-9]* on 3 ranks" "$tmp/spare.out" \
	|| fail "no resume on 3 ranks with the spare: $(grep restart "$tmp/spare.out")"
ranks=$(placed spare)
[[ $ranks == "h1 h3 h4 h1:in h2:out h3:in h4:in" ]] || fail "ranks and nodes with the spare in: $ranks"
echo "spare: h2 excluded, h4 taken in"
rm -f "$HERD_EXCLUDE_FILE"

# --- a link cut, then mended: the node answers again and is taken back
steps=100 elastic back 'h[1-3]' 2-3
wait_lines 1 "[h1:0] step 20:" "$tmp/back.out" 60
bash tests/harness/netns.sh cut "$cluster" 3
wait_lines 1 "nodes now h1,h2 (2 of 2-3; 2 ranks)" "$tmp/back.err" 60
has "$(cat "$tmp/back.err")" "node h3 excluded: lost contact with it"
bash tests/harness/netns.sh mend "$cluster" 3
wait_lines 1 "[h1:0] restart 1: first step done" "$tmp/back.out" 60
sleep 0.5
p=$(program_pids 1 "$train")
[[ -n $p ]] || fail "back: no rank on h1"
kill -9 $p
wait $job || fail "the job did not finish after h3 came back: $(tail -5 "$tmp/back.out"; cat "$tmp/back.err")"
err=$(cat "$tmp/back.err")
has "$err" "node h3 answers again: taken back"
has "$err" "nodes now h1,h2,h3 (3 of 2-3; 3 ranks)"
grep -q "^\[h1:0\] restart 2: resumed from step [0-9]* on 3 ranks" "$tmp/back.out" \
	|| fail "no resume on 3 ranks once h3 was back: $(grep restart "$tmp/back.out")"
grep -q "^h3	" "$HERD_EXCLUDE_FILE" 2>/dev/null && fail "h3 is still on the excluded nodes' list"
echo "back: h3 cut off and excluded, mended and taken back at the next restart"
rm -f "$HERD_EXCLUDE_FILE"

# --- below the minimum: the job stops and says why
elastic below 'h[1-3]' 3-4
wait_lines 1 "[h1:0] step 20:" "$tmp/below.out" 60
lose 2 below
wait $job; rc=$?
[[ $rc != 0 ]] || fail "the job below its minimum succeeded"
has "$(cat "$tmp/below.err")" "not restarted: 2 nodes left (h1,h3), fewer than the minimum of 3"
echo "below: stopped with exit $rc: $(grep -m1 'not restarted' "$tmp/below.err" | sed 's/.*not restarted/not restarted/')"
rm -f "$HERD_EXCLUDE_FILE"

# --- the health gate: h2's GPU has fallen off the bus; h2 never gets a rank
mock=$(cd "$(dirname "$HERD")/../tests/mock" && pwd)
cat >"$tmp/herd-node" <<SH
#!/bin/sh
export LD_LIBRARY_PATH=$mock HERD_KERNEL_LOG=\$HOME/kmsg
exec "$HERD" "\$@"
SH
chmod +x "$tmp/herd-node"
# gated HOSTS ARGS...: herd launch --health-check on HOSTS from h1, the
# nodes running the herd above; its stdout and stderr together.
gated() {
	local hosts=$1
	shift
	HERD_PROGRAM=$tmp/herd-node timeout 120 "$cluster/run" 1 "$HERD" launch --hosts "$hosts" \
		--health-check "$@" 2>&1
}
say='echo "rank $HERD_RANK of $HERD_WORLD_SIZE"'
echo "[  812.000001] NVRM: Xid (PCI:0000:5d:00): 79, pid=4242, name=python" >"$cluster/home/h2/kmsg"
out=$(gated 'h[1-3]' --nodes 2-3 -- sh -c "$say") \
	|| fail "the elastic job with h2 failing its health check failed: $out"
has "$out" "node h2 excluded: it did not come up: HERD_EUNAVAIL: the health check (level 1) failed: GPU 2"
has "$out" "nodes now h1,h3 (2 of 2-3; 2 ranks)"
has "$out" "[h3:1] rank 1 of 2"
grep -q "^\[h2:" <<<"$out" && fail "h2 got a rank: $out"
grep -q "^h2	" "$HERD_EXCLUDE_FILE" || fail "h2 is not on the excluded nodes' list"
echo "gate: h2 excluded before any rank started, the job ran on h1 and h3"
rm -f "$HERD_EXCLUDE_FILE" "$cluster/home/h2/kmsg"

# --- the gate's fabric check: h3's link shaped to 400 Mbit/s, every link of
# it is slow; a fixed job is refused, an elastic one runs without h3
bash tests/harness/netns.sh shape "$cluster" 3 400mbit
out=$(gated 'h[1-4]' -n 4 --per-node 1 -- touch "$tmp/fixed-ran"); rc=$?
[[ $rc == 125 ]] || fail "the fixed job with h3's slow link: exit $rc: $out"
has "$out" "herd launch: node h3: the fabric check: every link of it is slow"
has "$out" "warning: h3: every link of it is slow"
[[ ! -e $tmp/fixed-ran ]] || fail "a rank of the refused job ran"
grep -q "^h3	[0-9.]*	the fabric check: every link of it is slow" "$HERD_EXCLUDE_FILE" \
	|| fail "h3 is not on the excluded nodes' list: $(cat "$HERD_EXCLUDE_FILE")"
echo "fabric, fixed: $(grep -m1 'node h3:' <<<"$out")"
rm -f "$HERD_EXCLUDE_FILE"
out=$(gated 'h[1-4]' --nodes 3-4 -- sh -c "$say") \
	|| fail "the elastic job with h3's slow link failed: $out"
has "$out" "herd launch: node h3 excluded: the fabric check: every link of it is slow"
has "$out" "nodes left out of the job, as excluded: h3 (the fabric check"
has "$out" "[h4:2] rank 2 of 3"
grep -q "^\[h3:" <<<"$out" && fail "h3 got a rank: $out"
echo "fabric, elastic: h3 excluded, the job ran on h1, h2 and h4"

# --- the Lua example: a node lost on 4 hosts, the result checked by it
rm -f "$HERD_EXCLUDE_FILE"
bash tests/harness/netns.sh clear "$cluster" 3
out=$(timeout 200 "$cluster/run" 1 "$HERD" "$PWD/examples/lua/elastic_demo.lua" 'h[1-4]' "$tmp" 2>&1) \
	|| fail "examples/lua/elastic_demo.lua failed: $out"
has "$out" "elastic: 1 restart, lost h4 (lost contact with it"
has "$out" "resumed from step 10 on 3 ranks: h1,h2,h3"
has "$out" "the same weights and state, bit for bit"
grep "^elastic: \|^reference: " <<<"$out" | cut -c1-200
echo "elastic: ok"
