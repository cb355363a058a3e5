#!/usr/bin/env bash
# Paths herd writes that are not what they seem: an output path that is a
# device, a FIFO or a symbolic link is refused, never replaced (discover
# --save, ckpt export, launch --json-summary before the job runs, Lua's
# herd.write_file, a bcast receiver's DEST before it reads a byte), and a
# hard link's other name keeps its bytes; log files are created anew,
# owner-only, never through a link or on a FIFO, every name checked before
# any is replaced, and a log directory others can write to (without the
# sticky bit) or one that is not a directory is refused.  A bcast receiver
# stopped by SIGTERM or SIGHUP leaves no temporary file.  Each command is
# bounded (timeout 20).
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
echo "not yours" >victim
mkfifo fifo.json
ln -s "$tmp/victim" link.json
ln victim hard.json
devices=()
if [[ $(id -u) == 0 ]]; then
	mknod -m 0666 full.json c 1 7 && devices=(full.json)   # a /dev/full of our own
fi
# A FIFO that is never written, held open here (read-write, so that opening
# it does not wait): a stdin that stalls.
mkfifo stall
exec 7<>stall

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

# --- launch --json-summary: refused before the job runs; a hard link keeps its bytes
for p in fifo.json link.json "${devices[@]}"; do
	what="a FIFO"; [[ $p == link.json ]] && what="a symbolic link"; [[ $p == full.json ]] && what="a character device"
	refused "$p" "$what" "$HERD" launch -n 1 --json-summary "$p" -- touch ran
	has "$(cat err)" "herd launch: --json-summary $p exists and is $what"
	[[ ! -e ran ]] || fail "the job ran with --json-summary $p refused"
done
timeout 20 "$HERD" launch -n 1 --json-summary hard.json -- true >out 2>err || fail "summary through a hard link: $(cat err)"
[[ $(cat victim) == "not yours" ]] || fail "the summary was written into the hard link's other name"
python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["exit_status"] == 0' hard.json || fail "summary: $(cat hard.json)"
[[ $(stat -c %i hard.json) != $(stat -c %i victim) ]] || fail "the summary is still the victim's inode"
ls | grep -q '\.tmp\.' && fail "a summary left its temporary file: $(ls)"
rm hard.json && ln victim hard.json

# --- herd.write_file (plots and experiment tables go through it)
for p in fifo.json link.json "${devices[@]}"; do
	what="a FIFO"; [[ $p == link.json ]] && what="a symbolic link"; [[ $p == full.json ]] && what="a character device"
	refused "$p" "$what" "$HERD" -e "local ok, msg, st = herd.write_file('$p', 'x'); print(st); assert(ok, msg)"
	has "$(cat out)" "HERD_EINVAL"
done
timeout 20 "$HERD" -e 'assert(herd.write_file("hard.json", "new"))' || fail "write_file through a hard link"
[[ $(cat victim) == "not yours" && $(cat hard.json) == new ]] || fail "write_file wrote into the hard link's other name"
rm hard.json && ln victim hard.json
[[ $(cat victim) == "not yours" ]] || fail "the link's target was written"

# --- bcast --receive: DEST is checked before a byte is read (stdin stalls)
for p in fifo.json link.json "${devices[@]}"; do
	what="a FIFO"; [[ $p == link.json ]] && what="a symbolic link"; [[ $p == full.json ]] && what="a character device"
	before=$(stat -c '%F %i' "$p")
	timeout 20 "$HERD" bcast --receive "$tmp/$p" --bytes 3 --mode 644 --timeout 20 <stall >out 2>err; rc=$?
	[[ $rc != 124 ]] || fail "bcast --receive onto $p read its stdin"
	grep -qxF "herd-bcast fail . $tmp/$p exists and is $what: a new file replaces only a regular file (remove it first, or name another path)" out \
		|| fail "bcast --receive onto $p said: $(cat out err)"
	grep -q "herd-bcast ready" out && fail "bcast --receive onto $p asked for the file: $(cat out)"
	[[ $(stat -c '%F %i' "$p") == "$before" ]] || fail "bcast --receive replaced $p"
done
ls | grep -q 'herd-bcast' && fail "a refused receiver left its temporary file: $(ls)"

# --- bcast --receive stopped by a signal removes its temporary file
mkdir recv
for sig in TERM HUP; do
	"$HERD" bcast --receive "$tmp/recv/f" --bytes 1000000 --mode 644 --timeout 60 <stall >"out.$sig" 2>err &
	pid=$!
	for ((k = 0; k < 200; k++)); do grep -qs "herd-bcast ready" "out.$sig" && break; sleep 0.1; done
	grep -qs "herd-bcast ready" "out.$sig" || fail "the receiver did not start: $(cat "out.$sig" err)"
	ls recv | grep -q '^f\.herd-bcast\.' || fail "no temporary file while it receives: $(ls recv)"
	# (stderr: not bash's notice of a job killed by a signal)
	{ kill -"$sig" "$pid"; timeout 20 tail --pid="$pid" -f /dev/null; gone=$?; wait "$pid"; rc=$?; } 2>/dev/null
	[[ $gone == 0 ]] || fail "the receiver outlived SIG$sig by 20 s"
	[[ $rc == $((128 + $(kill -l "$sig"))) ]] || fail "SIG$sig: the receiver exited $rc: $(cat err)"
	[[ -z $(ls recv) ]] || fail "SIG$sig left $(ls recv)"
done

# --- log files
mkdir -m 0700 logs
ln -s "$tmp/victim" logs/rank.0.out
timeout 20 "$HERD" launch -n 1 --log-dir logs -- echo hi >out 2>err; rc=$?
[[ $rc == 125 ]] || fail "a link as a log file: exit $rc"
has "$(cat err)" "log file logs/rank.0.out on"
has "$(cat err)" "is a symbolic link"
[[ $(cat victim) == "not yours" ]] || fail "the log went through the link"
rm logs/rank.0.out
mkfifo logs/rank.0.out
timeout 20 "$HERD" launch -n 1 --log-dir logs -- echo hi >out 2>err; rc=$?
[[ $rc == 125 ]] || fail "a FIFO as a log file: exit $rc"
has "$(cat err)" "log file logs/rank.0.out on"
has "$(cat err)" "is a FIFO"
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
chmod 0700 logs
# an old log of mode 0666: the new one is owner-only
rm logs/*; echo old >logs/rank.0.out; chmod 0666 logs/rank.0.out
timeout 20 "$HERD" launch -n 1 --log-dir logs -- echo hi >out 2>err || fail "over an old log: $(cat err)"
[[ $(cat logs/rank.0.out) == hi ]] || fail "log: $(cat logs/rank.0.out)"
[[ $(stat -c %a logs/rank.0.out) == 600 ]] || fail "a log over one of mode 0666 has mode $(stat -c %a logs/rank.0.out)"
# a hard link as a log file: its other name keeps its bytes
rm logs/*; ln victim logs/rank.0.out
timeout 20 "$HERD" launch -n 1 --log-dir logs -- echo hi >out 2>err || fail "over a hard link: $(cat err)"
[[ $(cat victim) == "not yours" ]] || fail "the log was written into the hard link's other name"
[[ $(cat logs/rank.0.out) == hi ]] || fail "log: $(cat logs/rank.0.out)"
# a name refused: no log of the job replaced (every name is checked first), no rank started
rm logs/*; for f in rank.0.out rank.0.err rank.1.out; do echo old >"logs/$f"; done
mkfifo logs/rank.1.err
timeout 20 "$HERD" launch -n 2 --log-dir logs -- touch ran >out 2>err; rc=$?
[[ $rc == 125 ]] || fail "a FIFO as rank 1's log: exit $rc"
has "$(cat err)" "log file logs/rank.1.err on"
has "$(cat err)" "is a FIFO"
for f in rank.0.out rank.0.err rank.1.out; do
	[[ $(cat "logs/$f") == old ]] || fail "logs/$f was replaced before logs/rank.1.err was refused"
done
[[ ! -e ran ]] || fail "a rank ran with its log refused"
ls logs | grep -vqx 'rank\.[01]\.\(out\|err\)' && fail "temporary files left: $(ls logs)"
# a restart appends to its run's logs
rm -f logs/*
timeout 60 "$HERD" launch -n 1 --restarts 1 --log-dir logs -- \
	sh -c 'echo run$HERD_RESTART_COUNT; exit $((HERD_RESTART_COUNT == 0 ? 3 : 0))' >out 2>err \
	|| fail "a restarted job: $(cat err)"
[[ $(cat logs/rank.0.out) == $'run0\nrun1' ]] || fail "restart's log: $(cat logs/rank.0.out)"
[[ $(stat -c %a logs/rank.0.out) == 600 ]] || fail "restart's log mode $(stat -c %a logs/rank.0.out)"
# a log directory that is not a directory
timeout 20 "$HERD" launch -n 1 --log-dir /dev/null -- true >out 2>err; rc=$?
[[ $rc == 125 ]] || fail "--log-dir /dev/null: exit $rc"
has "$(cat err)" "log directory /dev/null on"
has "$(cat err)" "is a character device, not a directory"
exec 7>&-
echo "unsafe_paths: ok"
