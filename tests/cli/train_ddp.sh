#!/usr/bin/env bash
# examples/train_ddp.c under `herd launch`: an uninterrupted run gives the
# reference weights; a run in which rank 1 kills itself with SIGKILL after
# step 35 (first attempt only) is restarted by `--restarts 1`, resumes from
# the newest committed checkpoint (step 20 or 30: saves are asynchronous,
# and each waits for the one before) and ends with weights bit-identical
# to the reference.  On 2 and on 4 ranks.
set -u
HERD=${1:?usage: train_ddp.sh /path/to/herd}
TRAIN=$(dirname "$HERD")/example_train_ddp
fail() { echo "FAIL: $*" >&2; exit 1; }
[[ -x $TRAIN ]] || { echo "$TRAIN is not built"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
has() { grep -qF -- "$2" <<<"$1" || fail "output lacks '$2':
$1"; }
export HERD_TIMEOUT=60

for np in 2 4; do
  args=(--steps 60 --every 10 --seed 7)
  out=$(timeout 120 "$HERD" launch -n $np -- "$TRAIN" "${args[@]}" --dir "$tmp/ref$np" \
          --out "$tmp/ref$np.txt" 2>&1) || fail "$np ranks, uninterrupted: exit $?: $out"
  has "$out" "done: 60 steps on $np ranks"
  grep -q "restart" <<<"$out" && fail "$np ranks, uninterrupted: it restarted: $out"
  [[ $(wc -l <"$tmp/ref$np.txt") == 18 ]] || fail "$np ranks: 17 weights and the loss expected"

  out=$(timeout 120 "$HERD" launch -n $np --restarts 1 -- "$TRAIN" "${args[@]}" \
          --dir "$tmp/kill$np" --out "$tmp/kill$np.txt" --kill-rank 1 --kill-at 35 2>&1) \
    || fail "$np ranks, killed and restarted: exit $?: $out"
  # The launcher names the first failure it notices: rank 1's death, or a
  # peer's error that names rank 1's death.
  grep -qE "rank 1 on [^ ]+ \(pid [0-9]+\) was killed by signal 9|rank 1 \(host [^,]+, pid [0-9]+\) died" \
    <<<"$out" || fail "$np ranks: no word of rank 1's death: $out"
  # The restart is a line of its own, not appended to the rank's words.
  grep -qE "^herd\[[0-9]+\] warn: job [^ ]+: restarting every rank \(restart 1 of 1\)$" <<<"$out" \
    || fail "$np ranks: no restart line of its own: $out"
  grep -qE "restart 1: resumed from step (20|30) on $np ranks \(" <<<"$out" \
    || fail "$np ranks: the second attempt did not resume from step 20 or 30: $out"
  has "$out" "done: 60 steps on $np ranks"
  cmp "$tmp/ref$np.txt" "$tmp/kill$np.txt" \
    || fail "$np ranks: weights after the restart differ from the uninterrupted run:
$(diff "$tmp/ref$np.txt" "$tmp/kill$np.txt")"
  # The directory the job left verifies, and its newest step is the last.
  v=$("$HERD" ckpt verify "$tmp/kill$np") || fail "$np ranks: verify: $v"
  has "$v" "step-000000000060: ok: 1 tensors (136 bytes), 0 blobs, saved by $np ranks"
done
# Every step damaged: the restarted attempt stops, naming the steps, instead
# of starting over on top of them.
cp -r "$tmp/ref2" "$tmp/bad2"
for f in "$tmp"/bad2/step-*/rank-00000.data; do
  python3 -c 'import sys; f = open(sys.argv[1], "r+b"); b = f.read(1); f.seek(0); f.write(bytes([b[0] ^ 1]))' "$f"
done
out=$(timeout 120 "$HERD" launch -n 2 --restarts 1 -- "$TRAIN" --steps 60 --every 10 --seed 7 \
        --dir "$tmp/bad2" --kill-rank 1 --kill-at 5 2>&1)
[[ $? != 0 ]] || fail "every step damaged: the job succeeded: $out"
has "$out" "none of the 3 committed checkpoint steps in $tmp/bad2 verifies (steps 60, 50, 40)"
grep -q "starting over" <<<"$out" && fail "every step damaged: it started over: $out"
# 2 and 4 ranks train on different data (each rank makes its own samples):
# the weights compared above are the training's, not a constant.
cmp -s "$tmp/ref2.txt" "$tmp/ref4.txt" && fail "2 and 4 ranks gave the same weights"
echo "train_ddp: all checks passed"
