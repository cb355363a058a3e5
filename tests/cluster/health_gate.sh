#!/usr/bin/env bash
# herd launch --health-check on the namespace cluster (4 hosts, one rank
# each): every node runs herd health before any rank starts, with the NVML
# stand-in and, on h3 alone, a kernel log holding an Xid 79 of one GPU
# (each host has a home directory of its own, where HERD_KERNEL_LOG
# points).  The launch is refused naming h3 and the failed check, and no
# rank ran anywhere; with h3 left out (--exclude h3) the job runs.
# Needs root, iproute2 and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
netns_start 4
mock=$(cd "$(dirname "$HERD")/../tests/mock" && pwd)
[[ -f $mock/libnvidia-ml.so.1 ]] || fail "no NVML stand-in at $mock"
# The herd the nodes run: the NVML stand-in, the kernel log of the node's home.
cat >"$tmp/herd-node" <<SH
#!/bin/sh
export LD_LIBRARY_PATH=$mock HERD_KERNEL_LOG=\$HOME/kmsg
exec "$HERD" "\$@"
SH
chmod +x "$tmp/herd-node"
export HERD_PROGRAM=$tmp/herd-node
echo "[  812.000001] NVRM: Xid (PCI:0000:5d:00): 79, pid=4242, name=python" >"$cluster/home/h3/kmsg"

t0=$(date +%s%N)
out=$(timeout 120 "$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' --per-node 1 -n 4 --health-check \
	-- sh -c "touch $tmp/ran.\$HERD_RANK" 2>&1); rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
[[ $rc == 125 ]] || fail "the launch with a failing GPU on h3: exit $rc: $out"
has "$out" "herd launch: node h3: HERD_EUNAVAIL: the health check (level 1) failed: GPU 2 (0000:5d:00.0) xid: Xid 79 x1 (GPU has fallen off the bus)"
ran=$(ls "$tmp" | grep -c '^ran\.')
[[ $ran == 0 ]] || fail "$ran ranks ran though h3 failed its health check"
echo "refused in $ms ms: ${out%%$'\n'*}" | cut -c1-200
# The refused node is on the excluded nodes' list, with the reason.
grep -q "^h3	[0-9.]*	job .*: it did not come up: HERD_EUNAVAIL: the health check (level 1) failed: GPU 2" \
	"$HERD_EXCLUDE_FILE" || fail "h3 is not on the excluded nodes' list: $(cat "$HERD_EXCLUDE_FILE" 2>&1)"

out=$(timeout 120 "$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' --exclude h3 --per-node 1 -n 3 \
	--health-check -- sh -c "touch $tmp/ran.\$HERD_RANK; hostname" 2>"$tmp/err") \
	|| fail "the launch without h3 failed: $out $(cat "$tmp/err")"
[[ $(ls "$tmp" | grep -c '^ran\.') == 3 ]] || fail "not 3 ranks ran: $out"
has "$out" "[h4:2] h4"
echo "health_gate: ok"
