#!/usr/bin/env bash
# herd bench warns that the machine is busy once for the job, not once per
# rank: with --np 2 (its launcher says it) and on the 2 ranks of herd
# launch (rank 0 says it); on an idle machine it says nothing.  The load
# average is a file of the test's own bound over /proc/loadavg in a mount
# namespace of its own (unshare), so that "busy" and "idle" do not depend
# on what else this machine runs.
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT
export HERD_TIMEOUT=60
unset HERD_RANK RANK SLURM_PROCID OMPI_COMM_WORLD_RANK HERD_TRANSPORT HERD_ALGO

ns=(unshare -m)
[[ $(id -u) == 0 ]] || ns=(unshare -rm)
echo "0.00 0.00 0.00 1/1 1" >"$tmp/probe"
"${ns[@]}" sh -c 'mount --bind "$1" /proc/loadavg && cat /proc/loadavg' sh "$tmp/probe" \
	>"$tmp/seen" 2>&1 && grep -q '^0.00 ' "$tmp/seen" \
	|| { echo "SKIP: no mount namespace to stand a load average in: $(cat "$tmp/seen")"; exit 77; }

# in_load LOAD CMD...: CMD with /proc/loadavg saying LOAD.
in_load() {
	local load=$1
	shift
	echo "$load $load $load 1/100 1" >"$tmp/loadavg"
	timeout 120 "${ns[@]}" sh -c 'mount --bind "$1" /proc/loadavg && shift && exec "$@"' sh \
		"$tmp/loadavg" "$@"
}

sweep=(bench allreduce -b 8 -e 8 --iters 1 -w 0)
for load in 500.00 0.00; do
	want=$([[ $load == 0.00 ]] && echo 0 || echo 1)
	in_load $load "$HERD" "${sweep[@]}" --np 2 >"$tmp/out" 2>"$tmp/err" \
		|| fail "--np 2 at load $load exited $?: $(cat "$tmp/err")"
	n=$(grep -c 'warning: this machine is busy' "$tmp/err")
	[[ $n == "$want" ]] || fail "--np 2 at load $load: $n warnings, want $want: $(cat "$tmp/err")"
	[[ $want == 0 ]] || grep -qx "herd bench: warning: this machine is busy (load average $load on [0-9]* CPUs): the figures will be noisy" "$tmp/err" \
		|| fail "--np 2 at load $load: $(cat "$tmp/err")"

	in_load $load "$HERD" launch -n 2 -- "$HERD" "${sweep[@]}" >"$tmp/out" 2>"$tmp/err" \
		|| fail "herd launch -n 2 herd bench at load $load exited $?: $(cat "$tmp/err")"
	n=$(grep -c 'warning: this machine is busy' "$tmp/err")
	[[ $n == "$want" ]] || fail "herd launch -n 2 at load $load: $n warnings, want $want: $(cat "$tmp/err")"
	[[ $want == 0 ]] || grep -q '^\[[^]]*:0\] herd bench: warning: this machine is busy' "$tmp/err" \
		|| fail "herd launch -n 2 at load $load: not rank 0's: $(cat "$tmp/err")"
done
echo "bench: the busy machine is said once for the job"
