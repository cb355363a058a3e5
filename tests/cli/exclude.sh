#!/usr/bin/env bash
# herd exclude's list: add (a hostlist, a reason; a node already there
# keeps its first reason), ls (text and JSON), rm; two writers at once lose
# nothing (the lock); a malformed file is named with its line; a FIFO
# where the file belongs is refused, not read; usage errors.  The cluster
# tests (cluster_exclude, cli_launch_slurm) check that herd launch leaves
# the nodes out.
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT
export HERD_EXCLUDE_FILE=$tmp/state/exclude

out=$("$HERD" exclude ls) || fail "ls of no list: exit $?: $out"
[[ $out == "HOST"*"SINCE"*"REASON" ]] || fail "ls of no list: $out"
out=$("$HERD" exclude add --reason "GPU 2 Xid 79" 'gpu[01-03]') || fail "add: $out"
has "$out" "3 nodes excluded"
out=$("$HERD" exclude add --reason "another" 'gpu[03-04]') || fail "add again: $out"
has "$out" "1 node excluded"
"$HERD" exclude ls --json >"$tmp/json" || fail "ls --json: exit $?"
python3 - "$tmp/json" <<'PY' || fail "ls --json: $(cat "$tmp/json")"
import json, sys, time
a = json.load(open(sys.argv[1]))
assert [x["host"] for x in a] == ["gpu01", "gpu02", "gpu03", "gpu04"], a
assert [x["reason"] for x in a] == ["GPU 2 Xid 79"] * 3 + ["another"], a
assert all(abs(x["since"] - time.time()) < 60 for x in a), a
PY
out=$("$HERD" exclude ls)
grep -qE "^gpu03 +[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}  GPU 2 Xid 79$" <<<"$out" || fail "ls: $out"
out=$("$HERD" exclude rm 'gpu[02-03],gpu09') || fail "rm: $out"
has "$out" "2 nodes taken back"
[[ $("$HERD" exclude ls | awk 'NR > 1 { print $1 }' | tr '\n' ' ') == "gpu01 gpu04 " ]] \
	|| fail "after rm: $("$HERD" exclude ls)"
[[ $(stat -c %a "$HERD_EXCLUDE_FILE") == 600 ]] || fail "the list's mode: $(stat -c %a "$HERD_EXCLUDE_FILE")"

# two writers at once, 20 nodes each: all 40 (and the 2 before) are there
for w in a b; do
	( for i in $(seq 1 20); do "$HERD" exclude add "$w$i" >/dev/null || exit 1; done ) &
done
wait %1 && wait %2 || fail "a writer failed"
n=$("$HERD" exclude ls --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
[[ $n == 42 ]] || fail "two writers: $n nodes, not 42"

# a malformed line, named
printf 'n1\t1700000000\tok\nn2 1700000000 no tabs\n' >"$HERD_EXCLUDE_FILE"
out=$("$HERD" exclude ls 2>&1); rc=$?
[[ $rc == 1 ]] || fail "a malformed list: exit $rc: $out"
has "$out" "herd exclude: $HERD_EXCLUDE_FILE:2: expected HOST<TAB>SECONDS<TAB>REASON"
# a FIFO where the list belongs is refused, not read (which would block)
rm -f "$HERD_EXCLUDE_FILE"
mkfifo "$HERD_EXCLUDE_FILE"
out=$(timeout 10 "$HERD" exclude ls 2>&1); rc=$?
[[ $rc == 1 ]] || fail "a FIFO for the list: exit $rc: $out"
has "$out" "FIFO"
rm -f "$HERD_EXCLUDE_FILE"

# usage errors
out=$("$HERD" exclude 2>&1); rc=$?
[[ $rc == 2 ]] || fail "no subcommand: exit $rc: $out"
has "$out" "herd exclude: say ls, add EXPR or rm EXPR"
out=$("$HERD" exclude add 2>&1); rc=$?
[[ $rc == 2 ]] || fail "add without nodes: exit $rc: $out"
has "$out" "herd exclude: add: name the nodes"
out=$("$HERD" exclude add 'n[1-' 2>&1); rc=$?
[[ $rc == 2 ]] || fail "a malformed expression: exit $rc: $out"
has "$out" 'hostlist "n[1-": column 5'
out=$("$HERD" exclude rm --reason x n1 2>&1); rc=$?
[[ $rc == 2 ]] || fail "--reason with rm: exit $rc: $out"
has "$out" "--reason goes with add"
out=$("$HERD" exclude drain n1 2>&1); rc=$?
[[ $rc == 2 ]] || fail "an unknown subcommand: exit $rc: $out"
has "$out" "unknown subcommand 'drain' (ls, add, rm)"
echo "exclude: ok"
