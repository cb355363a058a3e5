#!/usr/bin/env bash
# Paths herd writes that are not what they seem: an output path that is a
# device, a FIFO or a symbolic link is refused, never replaced (discover
# --save, ckpt export); log files are never opened through a link or on a
# FIFO, are owner-only, and a log directory others can write to (without
# the sticky bit) is refused.  Each command is bounded (timeout 20).
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
echo "not yours" >victim
mkfifo fifo.json
ln -s "$tmp/victim" link.json
devices=()
if [[ $(id -u) == 0 ]]; then
	mknod -m 0666 full.json c 1 7 && devices=(full.json)   # a /dev/full of our own
fi

# refused PATH WHAT CMD...: CMD fails in time, names PATH as WHAT, and PATH is unchanged.
refused() {
	local path=$1 what=$2 before; shift 2
	before=$(stat -c '%F %i' "$path")
	timeout 20 "$@" >out 2>err </dev/null; local rc=$?
	[[ $rc != 0 && $rc != 124 ]] || fail "$* exited $rc"
	grep -qF "$path exists and is" err || fail "$*: $(cat err)"
	grep -qF "$what" err || fail "$*: does not say $what: $(cat err)"
	[[ $(stat -c '%F %i' "$path") == "$before" ]] || fail "$*: $path was replaced"
}
refused fifo.json "a FIFO" "$HERD" discover --save fifo.json
refused link.json "a symbolic link" "$HERD" discover --save link.json
for d in "${devices[@]}"; do refused "$d" "a character device" "$HERD" discover --save "$d"; done
[[ $(cat victim) == "not yours" ]] || fail "the link's target was written"

"$HERD" -e 'local ck = assert(herd.checkpoint("c")); assert(ck:add("w", { 1 })); assert(ck:save(1)); ck:close()' \
	|| fail "writing a checkpoint"
refused fifo.json "not a regular file" "$HERD" ckpt export c 1 fifo.json
refused link.json "not a regular file" "$HERD" ckpt export c 1 link.json
for d in "${devices[@]}"; do refused "$d" "not a regular file" "$HERD" ckpt export c 1 "$d"; done
ls | grep -q '\.tmp-' && fail "a refused export left its temporary file"
[[ $(cat victim) == "not yours" ]] || fail "the link's target was written"

# --- log files
mkdir -m 0700 logs
ln -s "$tmp/victim" logs/rank.0.out
timeout 20 "$HERD" launch -n 1 --log-dir logs -- echo hi >out 2>err; rc=$?
[[ $rc == 125 ]] || fail "a link as a log file: exit $rc"
has "$(cat err)" "log file logs/rank.0.out on"
has "$(cat err)" "(a symbolic link is not followed)"
[[ $(cat victim) == "not yours" ]] || fail "the log went through the link"
rm logs/rank.0.out
mkfifo logs/rank.0.out
timeout 20 "$HERD" launch -n 1 --log-dir logs -- echo hi >out 2>err; rc=$?
[[ $rc == 125 ]] || fail "a FIFO as a log file: exit $rc"
has "$(cat err)" "(a FIFO, not a regular file)"
rm logs/rank.0.out
chmod 0777 logs
timeout 20 "$HERD" launch -n 1 --log-dir logs -- echo hi >out 2>err; rc=$?
[[ $rc == 125 ]] || fail "a log directory writable by all: exit $rc"
has "$(cat err)" "log directory logs on"
has "$(cat err)" "is writable by other users (mode 0777) and not sticky"
chmod 1777 logs     # sticky, as /tmp: others cannot swap our files
timeout 20 "$HERD" launch -n 1 --log-dir logs -- echo hi >out 2>err || fail "sticky log dir: $(cat err)"
[[ $(cat logs/rank.0.out) == hi ]] || fail "log: $(cat logs/rank.0.out)"
[[ $(stat -c %a logs/rank.0.out) == 600 ]] || fail "log mode $(stat -c %a logs/rank.0.out)"
echo "unsafe_paths: ok"
