#!/usr/bin/env bash
# herd bench --device gpu on a machine without an NVIDIA driver says so once
# for the job, in the words herd discover uses ("no GPU: NVIDIA driver not
# found: ..."), not what the CUDA runtime makes of it ("driver version is
# insufficient"), and exits 1 having measured nothing: alone, with --np 2,
# and on the 2 ranks of herd launch (where the lowest rank without a GPU
# says it after every rank has looked).  Built with or without CUDA alike.
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT
if python3 -c 'import ctypes; ctypes.CDLL("libnvidia-ml.so.1")' 2>/dev/null; then
	echo "SKIP: this machine has an NVIDIA driver (libnvidia-ml.so.1 loads)"
	exit 77
fi
export HERD_TIMEOUT=60
unset HERD_RANK RANK SLURM_PROCID OMPI_COMM_WORLD_RANK HERD_TRANSPORT HERD_ALGO

# The words: herd discover's note on this machine, from its "no GPU: " on.
"$HERD" discover --json >"$tmp/inv.json" || fail "herd discover exited $?"
why=$(python3 -c 'import json, sys
note = json.load(open(sys.argv[1]))["nodes"][0]["gpu_note"]
print(note.split("; CUDA runtime:")[0])' "$tmp/inv.json") || fail "no gpu_note: $(cat "$tmp/inv.json")"
[[ $why == "no GPU: NVIDIA driver not found: "* ]] || fail "herd discover's note: $why"
want="--device gpu: $why"

for np in "" "--np 2"; do
	timeout 120 "$HERD" bench allreduce --device gpu -b 8 -e 8 $np >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[[ $rc == 1 ]] || fail "bench --device gpu $np exited $rc, want 1: $(cat "$tmp/err")"
	[[ $(cat "$tmp/err") == "herd bench: $want" ]] \
		|| fail "bench --device gpu $np said: $(cat "$tmp/err")"
	[[ -s $tmp/out ]] && fail "bench --device gpu $np printed: $(cat "$tmp/out")"
done

# Under herd launch: one line of the ranks' (prefixed [host:rank]) says it.
timeout 120 "$HERD" launch -n 2 -- "$HERD" bench allreduce --device gpu -b 8 -e 8 \
	>"$tmp/out" 2>"$tmp/err"
rc=$?
[[ $rc == 1 ]] || fail "herd launch -n 2 herd bench --device gpu exited $rc, want 1: $(cat "$tmp/err")"
grep '^\[[^]]*:[01]\] .*--device gpu' "$tmp/err" >"$tmp/said"
[[ $(wc -l <"$tmp/said") == 1 ]] || fail "the ranks said it $(wc -l <"$tmp/said") times: $(cat "$tmp/err")"
grep -qE '^\[[^]]*:0\] herd bench: rank 0 \([^)]*\): '"$(sed 's/[][\.*^$()|+?{}]/\\&/g' <<<"$want")"'$' "$tmp/said" \
	|| fail "rank 0 said: $(cat "$tmp/said")"
grep -qi 'insufficient\|cuda[A-Z]' "$tmp/err" && fail "CUDA's words: $(cat "$tmp/err")"
[[ -s $tmp/out ]] && fail "herd launch herd bench --device gpu printed: $(cat "$tmp/out")"
echo "bench: --device gpu without a driver is said once, as herd discover says it"
