#!/usr/bin/env bash
# The file system of a job's checkpoints fills in the middle of a save: four
# ranks on four hosts of the namespace cluster share a 1.5 MiB tmpfs that
# holds step 1 (1 MiB) but not step 2.  Every rank's save of step 2 fails
# within 1 s with HERD_EIO naming the rank and host that could not write,
# the file and ENOSPC; no part of step 2 is left; a restore brings back
# step 1 exactly on every rank, and herd ckpt ls and verify show it
# committed and intact.  Needs root (mount, namespaces), iproute2 and
# openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
# The hosts share the mount only when it exists before their namespaces.
mkdir -p "$tmp/ckpt"
if ! mount -t tmpfs -o size=1536k,mode=0700 herd-ckpt-full "$tmp/ckpt" 2>"$tmp/mount.err"; then
	echo "skipped: cannot mount a tmpfs: $(cat "$tmp/mount.err")"
	rm -rf "$tmp"
	exit 77
fi
trap 'umount "$tmp/ckpt"; rm -rf "$tmp"' EXIT
netns_start 4
trap 'bash tests/harness/netns.sh stop "$cluster"; umount "$tmp/ckpt"; rm -rf "$tmp"' EXIT
prog=$PWD/tests/cluster/fault_ckpt_disk_full.lua

out=$(HERD_TIMEOUT=5 timeout 120 "$cluster/run" 1 "$HERD" launch --hosts 'h[1-4]' -n 4 -- \
	"$HERD" "$prog" "$tmp/ckpt" 2>&1) || fail "the job failed: $out"
for r in 0 1 2 3; do
	line=$(grep "^\[h$((r + 1)):$r\] SAVE 2 FAILED" <<<"$out") || fail "rank $r's save of step 2 did not fail: $out"
	secs=$(sed -E 's/.*FAILED after ([0-9.]+) s.*/\1/' <<<"$line")
	echo "rank $r: save failed after $secs s: ${line#*: }"
	within "$secs" 1 "rank $r's save failed"
	grep -qE "HERD_EIO: saving checkpoint step 2 in $tmp/ckpt: rank [0-3] \(host h[1-4]\): cannot write $tmp/ckpt/.*: No space left on device" <<<"$line" ||
		fail "rank $r's error does not name the rank, host, file and ENOSPC: $line"
	has "$out" "[h$((r + 1)):$r] restored step 1 exact"
done
ls=$("$HERD" ckpt ls "$tmp/ckpt") || fail "herd ckpt ls: $ls"
echo "$ls"
grep -qE '^1 +committed' <<<"$ls" || fail "step 1 is not committed: $ls"
[[ $(grep -cE '^[0-9]+ ' <<<"$ls") == 1 ]] || fail "a part of step 2 is left: $ls"
[[ -z $(find "$tmp/ckpt" -name '*step-000000000002*') ]] || fail "files of step 2 are left: $(find "$tmp/ckpt")"
"$HERD" ckpt verify "$tmp/ckpt" 1 >/dev/null || fail "step 1 does not verify"
exit 0
