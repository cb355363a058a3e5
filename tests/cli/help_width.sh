#!/usr/bin/env bash
# help() wraps its text to the terminal's width: the window's on a
# terminal (driven through tmux, 60 columns, whatever $COLUMNS says), else
# $COLUMNS, else 80 columns; each paragraph re-flowed to fill its lines.
# The terminal part is reported skipped (exit 77) without tmux.
set -u
HERD=${1:?usage: help_width.sh /path/to/herd}
fail() { echo "FAIL: $*" >&2; [[ -n ${sock:-} ]] && { echo "--- screen:" >&2; screen >&2; }; exit 1; }
tmp=$(mktemp -d)
sock=
cleanup() { [[ -n $sock ]] && tmux -L "$sock" kill-server 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

# widths: the longest line of a file, and whether it is at most $2 and
# at least $3 (filled: the text is re-flowed, not cut where it was written)
check_width() {
  local longest
  longest=$(awk '{ if (length > n) n = length } END { print n + 0 }' "$1")
  (( longest <= $2 )) || fail "$4: a line of $longest columns, over $2: $(cat "$1")"
  (( longest >= $3 )) || fail "$4: the longest line has $longest columns, under $3: $(cat "$1")"
}

# not a terminal: 80 columns, or $COLUMNS
env -u COLUMNS "$HERD" -e 'help(herd.launch)' >"$tmp/80" || fail "help exited $?"
check_width "$tmp/80" 80 70 "no terminal"
grep -qF 'herd.launch{...} -> herd.Job | nil, msg, status' "$tmp/80" || fail "entry: $(cat "$tmp/80")"
COLUMNS=50 "$HERD" -e 'help(herd.launch)' >"$tmp/50"
check_width "$tmp/50" 50 42 "COLUMNS=50"
COLUMNS=120 "$HERD" -e 'help("herd.Cluster")' >"$tmp/120"
check_width "$tmp/120" 120 100 "COLUMNS=120"
COLUMNS=50 "$HERD" -e 'help()' >"$tmp/list"
check_width "$tmp/list" 50 42 "help() at 50"
grep -qE '^    herd\.' "$tmp/list" || fail "the list's continued lines are not indented: $(cat "$tmp/list")"
# the words are the same, only the lines differ
[[ $(tr -s ' \n' '\n\n' <"$tmp/80") == "$(tr -s ' \n' '\n\n' <"$tmp/50")" ]] \
  || fail "wrapping changed the words"
COLUMNS=junk "$HERD" -e 'print(herd.columns())' >"$tmp/junk"
[[ $(cat "$tmp/junk") == 80 ]] || fail "COLUMNS=junk: $(cat "$tmp/junk")"

# a terminal 60 columns wide: its size wins over $COLUMNS
if ! command -v tmux >/dev/null 2>&1; then
  echo "help_width: SKIPPED (tmux not installed; the pipe checks passed)"
  exit 77
fi
HERD=$(cd "$(dirname "$HERD")" && pwd)/$(basename "$HERD")
sock="herd-width-$$"
source "$(dirname "$0")/../harness/tmux.sh"
tmux -L "$sock" -f /dev/null new-session -d -s repl -x 60 -y 50 \
  "env HERD_HISTORY= COLUMNS=200 TERM=xterm '$HERD'; echo EXITED=\$?; sleep 30"
for _ in $(seq 200); do [[ -n $(screen | grep -v '^$') ]] && break; sleep 0.1; done
wait_prompt
type_text 'help(herd.launch)'
keys Enter
wait_for "herd.launch{...} -> herd.Job | nil, msg, status"
wait_prompt
# -J joins the lines the terminal itself wrapped: what herd wrote
tmux -L "$sock" capture-pane -p -J -t repl -S -300 | sed -n '/^herd> help(herd.launch)$/,/^herd>$/p' \
  | sed '1d;$d' >"$tmp/tty"
[[ $(wc -l <"$tmp/tty") -ge 10 ]] || fail "help on the terminal: $(cat "$tmp/tty")"
check_width "$tmp/tty" 60 52 "a terminal of 60 columns"
keys C-d
wait_for "EXITED=0"
echo "help_width: ok"
