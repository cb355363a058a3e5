# tests/harness/tmux.sh - driving the herd> prompt in a tmux session, for the
# tests that need a terminal.  The caller sets $sock (the tmux server's
# name, its own), starts a session named "repl" on it, and defines fail.
#   screen              the pane's text (its last 300 lines)
#   keys K...           key names: Enter, Tab, C-c, C-u, C-d
#   type_text TEXT      literal text
#   wait_for TEXT [N]   until TEXT is on the screen N times (default 1), 15 s at most
#   wait_prompt [P]     until the last non-empty line is an empty prompt P (default herd>)
screen() { tmux -L "$sock" capture-pane -p -t repl -S -300 2>/dev/null; }
keys() { tmux -L "$sock" send-keys -t repl "$@"; }
type_text() { tmux -L "$sock" send-keys -t repl -l "$1"; }
wait_for() {
  local want=$1 n=${2:-1}
  for _ in $(seq 150); do
    [[ $(screen | grep -cF -- "$want") -ge $n ]] && return 0
    sleep 0.1
  done
  fail "timed out waiting for '$want' (x$n)"
}
wait_prompt() {
  local want=${1:-herd>}
  for _ in $(seq 150); do
    [[ $(screen | grep -v '^$' | tail -1) == "$want" ]] && return 0
    sleep 0.1
  done
  fail "timed out waiting for an empty '$want' prompt"
}
