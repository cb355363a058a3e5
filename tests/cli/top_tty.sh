#!/usr/bin/env bash
# herd top's live view on a terminal, driven through tmux, with the NVML
# stand-in's three GPUs: the view on the alternate screen with the cursor
# hidden; it refreshes (a figure the stand-in's state file changes, and the
# clock), writing again only the lines that changed; s changes the sort key in the header and the order of the GPU
# lines; / filters, Esc clears the filter; a narrower window drops
# columns; q ends it with exit status 0, the alternate screen left, the
# cursor shown and the terminal's settings as they were.  Then Ctrl-C and
# SIGTERM end it the same way.  Reported skipped (exit 77) without tmux.
set -u
HERD=${1:?usage: top_tty.sh /path/to/herd}
fail() { echo "FAIL: $*" >&2; echo "--- screen:" >&2; screen >&2; exit 1; }
if ! command -v tmux >/dev/null 2>&1; then
  echo "top_tty: SKIPPED (tmux not installed)"
  exit 77
fi
HERD=$(cd "$(dirname "$HERD")" && pwd)/$(basename "$HERD")
mock=$(cd "$(dirname "$HERD")/../tests/mock" && pwd)
[[ -f $mock/libnvidia-ml.so.1 ]] || { echo "FAIL: no NVML stand-in at $mock" >&2; exit 1; }
tmp=$(mktemp -d)
sock="herd-top-$$"
cleanup() {
  tmux -L "herd-top-$$" kill-server 2>/dev/null
  tmux -L "herd-top-$$-2" kill-server 2>/dev/null
  tmux -L "herd-top-$$-3" kill-server 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
source "$(dirname "$0")/../harness/tmux.sh"
host=$(hostname)
cat >"$tmp/state" <<EOF
gpu 0 util 10 temp 50
gpu 1 util 90 temp 71
gpu 2 util 50 temp 45
EOF
# The pane runs sh (no line editing of its own, so it leaves the terminal's
# settings as herd leaves them): the settings before and after herd top.
# Ctrl-C goes to the whole foreground group: sh waits it out, as an
# interactive shell does.
cat >"$tmp/run.sh" <<EOF
trap : INT
for i in \$(seq 100); do [ -e "$tmp/go" ] && break; sleep 0.05; done
stty -g >"$tmp/before"
echo \$\$ >"$tmp/pid"
env LD_LIBRARY_PATH='$mock' HERD_NVML_MOCK_STATE='$tmp/state' HERD_LEASE_DIR='$tmp/leases' \
	TERM=xterm '$HERD' top --period 200
echo EXITED=\$?
stty -g >"$tmp/after"
exec sleep 60
EOF
# What herd writes to the terminal is kept in $tmp/bytes.
start() {
  rm -f "$tmp/before" "$tmp/after" "$tmp/pid" "$tmp/go" "$tmp/bytes"
  tmux -L "$sock" -f /dev/null new-session -d -s repl -x 132 -y 30 "sh $tmp/run.sh"
  tmux -L "$sock" pipe-pane -o -t repl "cat >>'$tmp/bytes'"
  touch "$tmp/go"
}
pane() { tmux -L "$sock" display-message -p -t repl "$1"; }
# the order of the GPU lines on the screen, as their indices
order() { screen | grep -o '^    [0-9] H100' | cut -c5 | tr -d '\n'; }
# ends the view with KEYS (tmux key names) and checks the terminal is as it was
ends_restored() {
  wait_for "EXITED=0"
  [[ $(pane '#{alternate_on}') == 0 ]] || fail "$1: the alternate screen is still on"
  [[ $(pane '#{cursor_flag}') == 1 ]] || fail "$1: the cursor is still hidden"
  for _ in $(seq 50); do [[ -s $tmp/after ]] && break; sleep 0.1; done
  cmp -s "$tmp/before" "$tmp/after" || fail "$1: the terminal's settings changed: $(cat "$tmp/before") -> $(cat "$tmp/after")"
  screen | grep -q "sort: " && fail "$1: the view is still on the screen"
}

start
wait_for "herd top  $host  "
wait_for "sort: index"
wait_for "    2 H100 80GB HBM3"
[[ $(pane '#{alternate_on}') == 1 ]] || fail "the view is not on the alternate screen"
[[ $(pane '#{cursor_flag}') == 0 ]] || fail "the cursor is shown"
[[ $(order) == 012 ]] || fail "index order: $(order)"
grep -q "^$host *cpu \[" <(screen) || fail "no node line"

# It refreshes: the clock in the header moves, and a figure the stand-in
# gives changes on the screen.
first=$(screen | head -1)
for _ in $(seq 100); do [[ $(screen | head -1) != "$first" ]] && break; sleep 0.1; done
[[ $(screen | head -1) != "$first" ]] || fail "the header did not change in 10 s: $first"
# No flicker: the screen was cleared once, and of the lines only those
# that changed were written again (the header, the node's), not the GPUs'.
[[ $(grep -o $'\033\[2J' "$tmp/bytes" | wc -l) == 1 ]] || fail "the screen was cleared $(grep -o $'\033\[2J' "$tmp/bytes" | wc -l) times"
[[ $(grep -o "herd top  $host" "$tmp/bytes" | wc -l) -ge 2 ]] || fail "the header was written once"
[[ $(grep -o "    0 H100 80GB HBM3" "$tmp/bytes" | wc -l) == 1 ]] ||
  fail "an unchanged GPU line was written $(grep -o "    0 H100 80GB HBM3" "$tmp/bytes" | wc -l) times"
sed -i 's/^gpu 1 util 90 temp 71$/gpu 1 util 90 temp 83/' "$tmp/state"
wait_for " 83C "

# s: the next sort key, and the GPUs by it
keys s
wait_for "sort: util"
[[ $(order) == 120 ]] || fail "util order: $(order)"
keys s
wait_for "sort: memory"
keys s s
wait_for "sort: temp"
[[ $(order) == 102 ]] || fail "temp order: $(order)"

# / filters as it is typed; Enter keeps it; Esc clears it
keys /
wait_for "filter: _"
type_text "nothing-like"
wait_for 'no node or GPU matches "nothing-like"'
keys Enter
wait_for "filter: nothing-like  "
keys Escape
for _ in $(seq 100); do [[ $(order) == 102 ]] && break; sleep 0.1; done
[[ $(order) == 102 ]] || fail "Esc did not clear the filter"
screen | grep -q "filter:" && fail "Esc left the filter in the header"

# ? shows the keys; any key goes back
keys '?'
wait_for "  s         the next sort key"
keys x
for _ in $(seq 100); do [[ $(order) == 102 ]] && break; sleep 0.1; done
[[ $(order) == 102 ]] || fail "a key did not leave the help"

# A narrower window: drawn anew, the SM clock dropped, no line wider
wait_for "SM MHz"
tmux -L "$sock" resize-window -t repl -x 70 -y 30
for _ in $(seq 100); do ! screen | grep -q "SM MHz" && break; sleep 0.1; done
screen | grep -q "SM MHz" && fail "at 70 columns the SM clock is still there"
screen | awk 'length($0) > 70 { bad = 1 } END { exit bad }' || fail "a line wider than 70 columns"
[[ $(order) == 102 ]] || fail "after the resize: $(order)"

keys q
ends_restored "q"

# Ctrl-C ends it the same way
tmux -L "$sock" kill-server
sock="herd-top-$$-2"
start
wait_for "sort: index"
wait_for "    2 H100 80GB HBM3"
keys C-c
ends_restored "Ctrl-C"

# and SIGTERM to herd top (the child of the pane's sh)
tmux -L "$sock" kill-server
sock="herd-top-$$-3"
start
wait_for "sort: index"
for _ in $(seq 50); do [[ -s $tmp/pid ]] && break; sleep 0.1; done
top_pid=$(pgrep -P "$(cat "$tmp/pid")" -x herd) || fail "no herd top under the pane's sh"
kill -TERM "$top_pid"
ends_restored "SIGTERM"
echo "top_tty: ok"
