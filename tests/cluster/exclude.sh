#!/usr/bin/env bash
# Excluded nodes over ssh on the namespace cluster (4 hosts, one rank
# each): h2 on the excluded nodes' list (herd exclude add) gets no rank and
# the launcher says why; herd launch --exclude h4 leaves h4 out of that job
# too; 4 ranks at one per node no longer fit and the launch is refused
# naming the count; taken back (herd exclude rm), h2 gets a rank again.
# Needs root, iproute2 and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
netns_start 4
export HERD_EXCLUDE_FILE=$tmp/exclude

# hosts OUT: the hosts of the ranks' lines in OUT, sorted, on one line.
hosts() { sed -n 's/^\[\([^:]*\):[0-9]*\] .*/\1/p' <<<"$1" | sort | tr '\n' ' '; }

out=$("$HERD" exclude add --reason "GPU 2 Xid 79" h2) || fail "herd exclude add: $out"
has "$out" "1 node excluded"
out=$(timeout 60 "$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' --per-node 1 -n 3 -- hostname 2>"$tmp/err") \
	|| fail "the launch with h2 excluded failed: $out $(cat "$tmp/err")"
[[ $(hosts "$out") == "h1 h3 h4 " ]] || fail "ranks with h2 excluded: $out"
has "$(cat "$tmp/err")" "nodes left out of the job, as excluded: h2 (GPU 2 Xid 79)"
echo "h2 excluded: ranks on $(hosts "$out")"

out=$(timeout 60 "$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' --exclude h4 --per-node 1 -n 2 \
	-- hostname 2>"$tmp/err") || fail "the launch with --exclude h4 failed: $(cat "$tmp/err")"
[[ $(hosts "$out") == "h1 h3 " ]] || fail "ranks with h2 and h4 excluded: $out"
has "$(cat "$tmp/err")" "h2 (GPU 2 Xid 79), h4 (excluded for this job)"

out=$(timeout 60 "$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' --per-node 1 -n 4 -- hostname 2>&1); rc=$?
[[ $rc == 125 ]] || fail "4 ranks on 3 nodes: exit $rc: $out"
has "$out" "4 ranks at 1 per node need 4 nodes; there are 3"

out=$("$HERD" exclude rm h2) || fail "herd exclude rm: $out"
has "$out" "1 node taken back"
out=$(timeout 60 "$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' --per-node 1 -n 4 -- hostname 2>"$tmp/err") \
	|| fail "the launch with none excluded failed: $(cat "$tmp/err")"
[[ $(hosts "$out") == "h1 h2 h3 h4 " ]] || fail "ranks with none excluded: $out"
grep -q "left out" "$tmp/err" && fail "nodes said left out with none excluded: $(cat "$tmp/err")"
echo "exclude: ok"
