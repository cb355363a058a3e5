#!/usr/bin/env bash
# The REPL on a terminal, driven through tmux: a banner saying how to get
# help and how to leave, quit typed alone leaving; tab completion of herd.*
# names and of methods, Ctrl-C interrupting running code and discarding a
# half-typed line without ending the shell, multi-line input, and history
# kept in $HERD_HISTORY across sessions (owner-only; a FIFO there is said
# and not waited on).  Reported skipped (exit 77) without tmux.
set -u
HERD=${1:?usage: repl_tty.sh /path/to/herd}
fail() { echo "FAIL: $*" >&2; echo "--- screen:" >&2; screen >&2; exit 1; }
if ! command -v tmux >/dev/null 2>&1; then
  echo "repl_tty: SKIPPED (tmux not installed)"
  exit 77
fi
HERD=$(cd "$(dirname "$HERD")" && pwd)/$(basename "$HERD")
tmp=$(mktemp -d)
sock="herd-test-$$"
cleanup() {
  tmux -L "herd-test-$$" kill-server 2>/dev/null
  tmux -L "herd-test-$$-2" kill-server 2>/dev/null
  tmux -L "herd-test-$$-3" kill-server 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
history="$tmp/state/deeper/history"   # directories are created by herd

start() {
  tmux -L "$sock" -f /dev/null new-session -d -s repl -x 160 -y 50 \
    "env HERD_HISTORY='$history' TERM=xterm '$HERD'; echo EXITED=\$?; sleep 30"
}
source "$(dirname "$0")/../harness/tmux.sh"

start
# The first prompt may take a while on a machine busy with other tests.
for _ in $(seq 200); do [[ -n $(screen | grep -v '^$') ]] && break; sleep 0.1; done
wait_prompt
wait_for "Type help() for help, help(name) for one entry, exit or Ctrl-D to leave."

# completion: herd.di<TAB> completes to herd.discover( ; a method after ':'
type_text 'herd.di'
keys Tab
wait_for "herd> herd.discover("
type_text ')'
keys Enter
wait_for "herd.Cluster (1 node)"
wait_prompt
type_text 'c = herd.discover()'
keys Enter
wait_prompt
type_text 'c:js'
keys Tab
wait_for "herd> c:json("
keys C-u
type_text 'c.nodes[1].host'
keys Tab
wait_for "herd> c.nodes[1].hostname"
keys C-u

# Ctrl-C interrupts running code and the shell goes on
wait_prompt
type_text 'while true do end'
keys Enter
sleep 0.5
keys C-c
wait_for "interrupted!"
wait_prompt
type_text 'print("alive" .. 1)'
keys Enter
wait_for "alive1"
wait_prompt

# Ctrl-C at the prompt discards the line, in a chunk too
type_text 'error("must not run")'
wait_for 'herd> error("must not run")'
keys C-c
wait_prompt
type_text 'for i = 1, 3 do'
keys Enter
wait_prompt ">>"
keys C-c
wait_prompt
type_text 'print(40 + 2)'
keys Enter
wait_for "42"
wait_prompt
[[ $(screen | grep -cF "must not run") == 1 ]] || fail "the discarded line ran"

# multi-line input
type_text 'function inc(n)'
keys Enter
wait_prompt ">>"
type_text 'return n + 1'
keys Enter
wait_prompt ">>"
type_text 'end'
keys Enter
wait_prompt
type_text 'inc(41)'
keys Enter
wait_for "42" 2
wait_prompt

# Ctrl-D ends the session with status 0 and the history is on disk
keys C-d
wait_for "EXITED=0"
[[ -f $history ]] || fail "no history file at $history"
grep -qF 'print(40' "$history" || fail "history lacks a line: $(cat "$history")"
grep -q 'must\\040not\\040run\|must not run' "$history" && fail "discarded line in history"
[[ $(stat -c %a "$history") == 600 ]] || fail "history file of mode $(stat -c %a "$history")"

# a new session recalls it (on a fresh tmux server: a killed one's socket
# can linger for a moment)
tmux -L "$sock" kill-server
sock="$sock-2"
start
# The first prompt may take a while on a machine busy with other tests.
for _ in $(seq 200); do [[ -n $(screen | grep -v '^$') ]] && break; sleep 0.1; done
wait_prompt
keys Up
wait_for "herd> inc(41)"
keys C-u
# quit typed alone leaves, on a line of its own
type_text 'quit'
keys Enter
wait_for "EXITED=0"
[[ $(screen | grep -v '^$' | tail -2 | head -1) == "herd> quit" ]] || fail "the line before the exit status"

# a FIFO as the history file: said, and neither read nor written
tmux -L "$sock" kill-server
sock="herd-test-$$-3"
history="$tmp/fifo-history"
mkfifo "$history"
start
for _ in $(seq 200); do [[ -n $(screen | grep -v '^$') ]] && break; sleep 0.1; done
wait_for "history file $history is not a regular file (a FIFO): no history is kept"
wait_prompt
type_text "print(6 * 7)"
keys Enter
wait_for "42"
wait_prompt
keys C-d
wait_for "EXITED=0"
[[ -p $history ]] || fail "the FIFO history file was replaced"
echo "repl_tty: ok"
