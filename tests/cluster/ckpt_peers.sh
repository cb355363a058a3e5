#!/usr/bin/env bash
# Checkpoint copies in peers' memory (herd launch --ckpt-peers) on the
# namespace cluster, one rank per node, examples/train_ddp.c saving every
# step (16 MiB of state sharded over the ranks) to peers' memory and every
# 10th to storage, HERD_TIMEOUT=5:
#   - 4 hosts, --nodes 3-4 --ckpt-peers 1: h3 lost (its `herd exec`, rank
#     and checkpoint holder killed) after step 23; the restart on h1, h2
#     and h4 restores from peers' memory a step newer than storage's 20,
#     at most one before the last step done, every rank saying so; the final
#     weights and state equal those of 4 ranks to that step and 3 from it;
#   - the holders end with the job: none is left on any host;
#   - 4 hosts, --nodes 2-4: h2 and h3 lost at once, so the copies of h2's
#     rank (on h3) are gone too: the restart restores from storage,
#     saying that peers' memory lacks that rank's data;
#   - a holder over its budget (HERD_CKPT_PEER_BYTES where herd launch
#     runs) refuses the copy: a step that goes to storage goes there
#     alone, with a warning; one for memory only fails, naming the budget.
# Needs root, iproute2 and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
netns_start 4
train=$(cd "$(dirname "$HERD")" && pwd)/example_train_ddp
[[ -x $train ]] || fail "no $train"
export HERD_TIMEOUT=5

# peers NAME HOSTS NODES [herd launch options...]: the training job NAME in
# the background from h1 (its output in $tmp/NAME.out and .err): 50 steps
# of at least 80 ms, a save every step, every 10th to storage.
peers() {
	local name=$1 hosts=$2 nodes=$3
	shift 3
	timeout 150 "$cluster/run" 1 "$HERD" launch --hosts "$hosts" --nodes "$nodes" --restarts 2 \
		--ckpt-peers 1 "$@" -- "$train" --dir "$tmp/$name.ck" --steps 50 --every 1 \
		--storage-every 10 --pace 80 --state-mib 16 --out "$tmp/$name.w" \
		>"$tmp/$name.out" 2>"$tmp/$name.err" &
	job=$!
}

# lose I...: kills each host's node supervisor, rank and holder at once.
lose() {
	local p="" i
	for i in "$@"; do
		p+=" $(host_pids $i "exec --stdio"; program_pids $i "$train"; host_pids $i "ckpt hold")"
	done
	[[ -n ${p// /} ]] || fail "nothing of the job on h$*"
	kill -9 $p
}

# --- h3 lost: every rank restores from peers' memory, weights as undisturbed
peers mem 'h[1-4]' 3-4
wait_lines 1 "[h1:0] step 23:" "$tmp/mem.out" 60
[[ $(host_pids 3 "ckpt hold" | wc -l) -eq 1 ]] || fail "no checkpoint holder on h3"
lose 3
last=$(sed -n 's/^\[h1:0\] step \([0-9]*\):.*/\1/p' "$tmp/mem.out" | tail -1)
wait $job || fail "the job did not finish on 3 nodes: $(tail -5 "$tmp/mem.out"; cat "$tmp/mem.err")"
has "$(cat "$tmp/mem.err")" "node h3 excluded: lost contact with it"
resumed=$(sed -n 's/^\[h1:0\] restart 1: resumed from step \([0-9]*\) on 3 ranks .*/\1/p' "$tmp/mem.out")
[[ -n $resumed ]] || fail "no resume on 3 ranks: $(grep restart "$tmp/mem.out")"
((resumed >= last - 1 && resumed > 20)) || fail "resumed from step $resumed; the loss came after step $last"
tiers=$(grep -c "restore.* step $resumed from peers' memory (h[0-9, h]*, [0-9.]* MiB) in [0-9.]* s: step $resumed in peers' memory is newer than storage's newest, step 20" "$tmp/mem.out")
[[ $tiers -eq 3 ]] || fail "not every rank restored from peers' memory: $(grep 'restored' "$tmp/mem.out")"
grep "restart 1: rank 0 restored" "$tmp/mem.out"
"$HERD" launch -n 4 -- "$train" --dir "$tmp/ref.ck" --steps "$resumed" --every "$resumed" \
	--state-mib 16 >/dev/null 2>&1 || fail "the reference run to step $resumed failed"
"$HERD" launch -n 3 -- "$train" --dir "$tmp/ref.ck" --steps 50 --every 10 --state-mib 16 --resume \
	--out "$tmp/ref.w" >/dev/null 2>&1 || fail "the reference run on 3 ranks failed"
cmp "$tmp/mem.w" "$tmp/ref.w" || fail "weights differ from the run on 3 ranks from step $resumed"
echo "mem: h3 lost after step $last, resumed from step $resumed in peers' memory, weights equal"
# The holders ended with the job.
for i in 1 2 4; do
	[[ -z $(host_pids $i "ckpt hold") ]] || fail "a checkpoint holder outlived the job on h$i"
done
rm -f "$HERD_EXCLUDE_FILE"

# --- h2 and h3 lost at once: h2's rank's copies were on h3: from storage
peers two 'h[1-4]' 2-4
wait_lines 1 "[h1:0] step 23:" "$tmp/two.out" 60
lose 2 3
wait $job || fail "the job did not finish on 2 nodes: $(tail -5 "$tmp/two.out"; cat "$tmp/two.err")"
resumed=$(sed -n 's/^\[h1:0\] restart 1: resumed from step \([0-9]*\) on 2 ranks .*/\1/p' "$tmp/two.out")
[[ $resumed == 20 ]] || fail "resumed from step '$resumed', not storage's 20: $(grep restart "$tmp/two.out")"
has "$(cat "$tmp/two.out")" "[h1:0] restart 1: rank 0 restored step 20 from storage in "
grep -q "rank 0 restored step 20 from storage .*: peers' memory holds no complete step (step [0-9]* in peers' memory lacks saved rank 1's data)" "$tmp/two.out" \
	|| fail "the fall-back to storage does not say why: $(grep restored "$tmp/two.out")"
echo "two: h2 and h3 lost, restored from storage: $(grep -o "peers' memory holds.*" "$tmp/two.out" | head -1)"
rm -f "$HERD_EXCLUDE_FILE"

# --- a holder's budget: 1 MiB is less than a rank's 4 MiB of state.  A step
# that goes to storage goes there alone, with a warning; one that goes to
# peers' memory only fails, naming the budget.
budget() {
	timeout 60 "$cluster/run" 1 env HERD_CKPT_PEER_BYTES=1M "$HERD" launch --hosts 'h[1-2]' \
		--ckpt-peers 1 -n 2 -- "$train" --dir "$tmp/$1.ck" --steps 3 --every 1 --state-mib 8 \
		--storage-every "$2" >"$tmp/$1.out" 2>&1
}
budget stored 1 || fail "the saves to storage failed: $(cat "$tmp/stored.out")"
has "$(cat "$tmp/stored.out")" "over this holder's budget of 1048576 (HERD_CKPT_PEER_BYTES); step 1 goes to storage alone"
[[ $("$HERD" ckpt ls "$tmp/stored.ck" | grep -c committed) == 3 ]] || fail "not 3 steps in storage"
budget memory 10 && fail "the save to memory over the budget succeeded"
has "$(cat "$tmp/memory.out")" "over this holder's budget of 1048576 (HERD_CKPT_PEER_BYTES)"
echo "budget: $(grep -o "holding [0-9]* more bytes.*" "$tmp/memory.out" | head -1)"
