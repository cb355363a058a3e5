#!/usr/bin/env bash
# Every file herd reads is checked to be a regular file without blocking
# on open: a FIFO (nobody ever writes to it) or a device in place of a
# hostfile, an inventory, a safetensors file to import, a checkpoint's
# lock, manifest or data file is named in an error within seconds; a
# restore skips such a step with a warning, and `latest` is the newest
# committed step even when its manifest is such a file.
# Each command runs under timeout 20; 124 would be the hang.
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
mkfifo fifo

# quick CMD...: runs it bounded; sets rc and err, and fails if it hung.
quick() {
	local start=$SECONDS
	timeout 20 "$@" >out 2>err </dev/null; rc=$?
	err=$(cat err)
	[[ $rc != 124 ]] || fail "$* hung on a FIFO"
	(( SECONDS - start < 10 )) || fail "$* took $((SECONDS - start)) s"
}

quick "$HERD" launch --hostfile fifo -n 1 -- true
[[ $rc == 125 ]] || fail "--hostfile fifo exited $rc"
has "$err" "fifo is a FIFO, not a regular file"
quick "$HERD" discover --inventory fifo
[[ $rc == 2 ]] || fail "--inventory fifo exited $rc"
has "$err" "fifo is a FIFO, not a regular file"
quick "$HERD" alloc -g 1 --inventory /dev/zero
[[ $rc == 2 ]] || fail "--inventory /dev/zero exited $rc"
has "$err" "/dev/zero is a character device, not a regular file"

quick "$HERD" ckpt import fifo imported 0
[[ $rc == 2 ]] || fail "ckpt import fifo exited $rc"
has "$err" "herd ckpt: fifo is a FIFO, not a regular file"
[[ ! -e imported ]] || fail "ckpt import fifo created its directory"
mkdir locked && mkfifo locked/.lock
quick "$HERD" -e 'print(herd.checkpoint("locked"))'
has "$(cat out)" "locked/.lock is a FIFO, not a regular file"

# A checkpoint: step 1 intact, step 2's manifest a FIFO, step 3's data a
# FIFO, and the newest, step 4, with its manifest a FIFO.
"$HERD" -e 'local ck = assert(herd.checkpoint("c"))
  local w = { 1, 2, 3 }
  assert(ck:add("w", w))
  for s = 1, 4 do w[1] = s; assert(ck:save(s)) end
  ck:close()' || fail "writing the checkpoint"
rm c/step-000000000002/manifest.msgpack c/step-000000000003/rank-00000.data \
  c/step-000000000004/manifest.msgpack
mkfifo c/step-000000000002/manifest.msgpack c/step-000000000003/rank-00000.data \
  c/step-000000000004/manifest.msgpack

quick "$HERD" ckpt ls c
[[ $rc == 0 ]] || fail "ckpt ls exited $rc: $err"
has "$(cat out)" "2             corrupt"
has "$(cat out)" "4             corrupt"
has "$(cat out)" "  c/step-000000000004/manifest.msgpack: it is a FIFO, not a regular file"
# The manifest is said as a data file is: the file, what it is.
quick "$HERD" ckpt verify c 2
[[ $rc == 1 ]] || fail "verify of the FIFO manifest exited $rc"
has "$(cat out)" "c/step-000000000002/manifest.msgpack: it is a FIFO, not a regular file"
has "$err" "herd ckpt: c/step-000000000002: 1 problem"
quick "$HERD" ckpt verify c 3
[[ $rc == 1 ]] || fail "verify of the FIFO data exited $rc"
has "$(cat out)" "c/step-000000000003/rank-00000.data: it is a FIFO, not a regular file"
quick "$HERD" ckpt export c 3 out.safetensors
[[ $rc == 1 ]] || fail "export of the FIFO data exited $rc"
has "$err" "rank-00000.data: it is a FIFO, not a regular file"
quick "$HERD" ckpt inspect c 2
[[ $rc == 1 ]] || fail "inspect of the FIFO manifest exited $rc"
has "$err" "c/step-000000000002/manifest.msgpack: it is a FIFO, not a regular file"
# latest is the newest committed step, 4, whose manifest cannot be read:
# said, not passed over for an older step.
quick "$HERD" ckpt verify c
[[ $rc == 1 ]] || fail "verify of latest exited $rc"
has "$(cat out)" "c/step-000000000004/manifest.msgpack: it is a FIFO, not a regular file"
quick "$HERD" ckpt inspect c latest
[[ $rc == 1 ]] || fail "inspect latest exited $rc"
has "$err" "c/step-000000000004/manifest.msgpack: it is a FIFO, not a regular file"
quick "$HERD" ckpt export c latest out.safetensors
[[ $rc == 1 ]] || fail "export latest exited $rc"
has "$err" "c/step-000000000004/manifest.msgpack: it is a FIFO, not a regular file"

# A restore falls back past all three, to step 1, and says why for each.
quick "$HERD" -e 'local ck = assert(herd.checkpoint("c"))
  local w = { 0, 0, 0 }
  assert(ck:add("w", w))
  print(assert(ck:restore()), w[1])'
[[ $rc == 0 ]] || fail "restore exited $rc: $err"
[[ $(cat out) == $'1\t1.0' ]] || fail "restore: $(cat out)"
has "$err" "restoring checkpoint step 4: c/step-000000000004/manifest.msgpack: it is a FIFO, not a regular file; trying the step before"
has "$err" "rank-00000.data: it is a FIFO, not a regular file; trying the step before"
has "$err" "restoring checkpoint step 2: c/step-000000000002/manifest.msgpack: it is a FIFO, not a regular file; trying the step before"
# A manifest that is a symbolic link is said as a FIFO is, not failed on.
"$HERD" -e 'local ck = assert(herd.checkpoint("l")); assert(ck:add("w", { 1 }))
  assert(ck:save(1)); ck:close()' || fail "writing checkpoint l"
mv l/step-000000000001/manifest.msgpack l/real.msgpack
ln -s ../real.msgpack l/step-000000000001/manifest.msgpack
quick "$HERD" ckpt verify l 1
[[ $rc == 1 ]] || fail "verify of the linked manifest exited $rc: $err"
has "$(cat out)" "l/step-000000000001/manifest.msgpack: it is a symbolic link, not a regular file"
echo "fifo_inputs: ok"
