#!/usr/bin/env bash
# herd across separate network stacks: a cluster of four hosts, each a
# network and UTS namespace with its own sshd (tests/harness/netns.sh),
# every one also carrying a docker0 bridge with the same 172.17.0.1 and an
# unrouted second interface.  From host h1: herd launch places a rank on
# each host (its own host name), allreduces across the four (two ranks on
# each, and 2 + 2 + 1 on three: the two-level algorithm) give exact
# results (herd must connect through the addresses the hosts reach, not
# docker0's), also with HERD_SOCKET_IFNAME in NCCL's syntax (and a value
# that matches nothing named in the failure), herd discover groups the
# four, and the fabric check measures their six pairs.  After stop, nothing the harness made is left.
# Needs root, iproute2 and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
netns_start 4
on1() { timeout 120 "$cluster/run" 1 "$@"; }

out=$(on1 "$HERD" launch --hosts 'h[1-4]' -n 4 -- hostname) || fail "launch exited $?: $out"
[[ $(sort <<<"$out") == "[h1:0] h1
[h2:1] h2
[h3:2] h3
[h4:3] h4" ]] || fail "ranks on the four hosts: $out"

# Two ranks on each host, links between hosts given as 20 us and 1
# Gbit/s: the cost model takes the two-level allreduce (shared memory
# inside a host, TCP between) at 512 KiB, one-shot at 8 B; then 2 + 2 + 1
# ranks, uneven.  Without HERD_NET_LINK the figures are rank 0's
# interface's speed; with HERD_NET_LINK=measure, measured at init.
out=$(on1 "$HERD" launch --hosts 'h[1-4]' -n 8 --start-timeout 60 --env HERD_NET_LINK=20,1 -- "$HERD" bench allreduce -b 8 -e 4M -f 16 --iters 3 -w 1 -c 1 --explain 2>&1) \
	|| fail "allreduce across the hosts exited $?: $out"
rows=$(grep -cE '^\[h1:0\] +[0-9]+ +[0-9]+ +float32 +sum +-1 .* 0$' <<<"$out")
[[ $rows == 5 ]] || fail "allreduce rows with #wrong 0: $rows: $out"
has "$out" "# Out of bounds values : 0 OK"
has "$out" "# algorithm at 524288 B: 524288 bytes (sized as 524288) on 8 ranks, 4 hosts with at most 2 ranks, algo auto: two-level, estimated "
has "$out" " with links between hosts of 20.0 us and 0.125 GB/s (HERD_NET_LINK); passed over "
has "$out" "# algorithm at 8 B: 8 bytes (sized as 0) on 8 ranks, 4 hosts with at most 2 ranks, algo auto: one-shot"
out=$(on1 "$HERD" launch --hosts 'h[1-4]' -n 4 --start-timeout 60 --env HERD_LOG=debug --env HERD_NET_LINK=measure -- "$HERD" bench allgather -b 1M -e 1M --iters 2 -w 1 -c 1 --explain 2>&1) \
	|| fail "allgather with measured links exited $?: $out"
[[ $(grep -cE '^\[h1:0\] +[0-9]+ +[0-9]+ +float32 +none +-1 .* 0$' <<<"$out") == 1 ]] ||
	fail "allgather with measured links, rows with #wrong 0: $out"
[[ $(grep -cE 'links between hosts \(measured at init\): [0-9.]+ us one way, [0-9.]+ GB/s' <<<"$out") == 4 ]] ||
	fail "each rank's debug log names the measured links: $out"
has "$out" "(measured at init)"
out=$(on1 "$HERD" launch --hosts 'h[1-2]' -n 2 --start-timeout 60 -- "$HERD" bench allreduce -b 1M -e 1M --iters 1 -w 0 -c 1 --explain 2>&1) \
	|| fail "allreduce with the interface's figures exited $?: $out"
has "$out" "with links between hosts of 20.0 us and 1.250 GB/s (the speed of eth0)"
out=$(on1 "$HERD" launch --hosts 'h[1-2]' -n 2 --start-timeout 60 --env HERD_NET_LINK=fast -- "$HERD" bench allreduce -b 1K -e 1K --iters 1 -w 0 2>&1) &&
	fail "HERD_NET_LINK=fast was taken: $out"
has "$out" 'HERD_NET_LINK=fast: expected the links between hosts as LATENCY_US,GBIT_PER_S'
out=$(on1 "$HERD" launch --hosts 'h[1-4]' -n 8 --start-timeout 60 --env HERD_ALGO=hier -- "$HERD" bench allreduce -b 8 -e 8K -f 32 --iters 3 -w 1 -c 1 -d float16 -o avg --explain 2>&1) \
	|| fail "HERD_ALGO=hier across the hosts exited $?: $out"
has "$out" "# algorithm at 8 B: 8 bytes (sized as 0) on 8 ranks, 4 hosts with at most 2 ranks, algo hier: two-level"
[[ $(grep -cE '^\[h1:0\] +[0-9]+ +[0-9]+ +float16 +avg +-1 .* 0$' <<<"$out") == 3 ]] ||
	fail "HERD_ALGO=hier, rows with #wrong 0: $out"
out=$(on1 "$HERD" launch --hosts 'h[1-3]' -n 5 --start-timeout 60 --env HERD_NET_LINK=20,1 -- "$HERD" bench allreduce -b 1M -e 3M -f 3 --iters 3 -w 1 -c 1 -d bfloat16 --explain 2>&1) \
	|| fail "allreduce on 2 + 2 + 1 ranks exited $?: $out"
has "$out" "on 5 ranks, 3 hosts with at most 2 ranks, algo auto: two-level, estimated "
[[ $(grep -cE '^\[h1:0\] +[0-9]+ +[0-9]+ +bfloat16 +sum +-1 .* 0$' <<<"$out") == 2 ]] ||
	fail "allreduce on 2 + 2 + 1 ranks, rows with #wrong 0: $out"

# HERD_SOCKET_IFNAME in NCCL_SOCKET_IFNAME's syntax: a prefix, an exact
# name, an exclusion; one that matches nothing on a host fails there
# before the ranks start, naming the host and the value
for spec in eth "=eth0" "^docker,lan"; do
	out=$(on1 "$HERD" launch --hosts 'h[1-4]' -n 4 --start-timeout 60 --env "HERD_SOCKET_IFNAME=$spec" -- \
		"$HERD" bench allreduce -b 1K -e 1K --iters 2 -w 1 -c 1 2>&1) || fail "HERD_SOCKET_IFNAME=$spec: $out"
	grep -qE '^\[h1:0\] +1024 +256 +float32 +sum +-1 .* 0$' <<<"$out" || fail "HERD_SOCKET_IFNAME=$spec: $out"
done
# On h3 only, the value matches nothing: h3's supervisor refuses the spec
# before saying ready, naming the host, the value and the interfaces it
# has, and the launcher never says go: no rank runs on any host (each
# would leave a file).
out=$(on1 "$HERD" launch --hosts 'h[1-4]' -n 4 --start-timeout 60 --env "HERD_SOCKET_IFNAME=^nothing" -- \
	sh -c 'touch "$0/ran.$HERD_RANK"; exec "$1" bench allreduce -b 1K -e 1K --iters 2 -w 1' "$tmp" "$HERD" 2>&1) ||
	fail "the ranks did not run with HERD_SOCKET_IFNAME=^nothing: $out"
[[ $(ls "$tmp"/ran.* | wc -l) == 4 ]] || fail "the ranks left no trace: $(ls "$tmp")"
rm -f "$tmp"/ran.*
"$cluster/run" 3 sh -c 'ip link set lan1 down && ip link set lan1 name eth9 && ip link set eth9 up' ||
	fail "cannot rename h3's lan1"
out=$(on1 "$HERD" launch --hosts 'h[1-4]' -n 4 --start-timeout 60 --env "HERD_SOCKET_IFNAME==lan1" -- \
	sh -c 'touch "$0/ran.$HERD_RANK"; exec "$1" bench allreduce -b 1K -e 1K --iters 2 -w 1' "$tmp" "$HERD" 2>&1); rc=$?
"$cluster/run" 3 sh -c 'ip link set eth9 down && ip link set eth9 name lan1 && ip link set lan1 up'
[[ $rc != 0 ]] || fail "HERD_SOCKET_IFNAME==lan1 (none on h3) succeeded: $out"
grep -qE '^herd launch: node h3: HERD_EINVAL: HERD_SOCKET_IFNAME==lan1 matches no interface of h3 that is up with an IPv4 address \(it has: .*eth0.*\)$' <<<"$out" ||
	fail "HERD_SOCKET_IFNAME==lan1: $out"
! grep -q '^\[h' <<<"$out" || fail "ranks ran with HERD_SOCKET_IFNAME==lan1: $out"
[[ -z $(ls "$tmp"/ran.* 2>/dev/null) ]] || fail "ranks started though h3 refused: $(ls "$tmp"/ran.*)"

out=$(on1 "$HERD" discover --hosts 'h[1-4]') || fail "discover exited $?: $out"
grep -qE '^h\[1-4\] +4  ' <<<"$out" || fail "discover: $out"

out=$(on1 "$HERD" discover --hosts 'h[1-4]' --links --links-bytes 1M); rc=$?
[[ $(grep -cE '^h[1-4] +h[1-4] +[0-9.]+ +[0-9.]+ +[0-9]+%' <<<"$out") == 6 ]] || fail "links: $rc $out"

bash tests/harness/netns.sh stop "$cluster"
[[ -z $(ip netns list | grep "herd-$id-") ]] || fail "namespaces left: $(ip netns list)"
[[ -z $(ls /etc/netns 2>/dev/null | grep "herd-$id-") ]] || fail "/etc/netns left: $(ls /etc/netns)"
exit 0
