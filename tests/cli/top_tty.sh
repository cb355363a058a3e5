#!/usr/bin/env bash
# herd top on a terminal, driven through tmux, with the NVML stand-in's
# three GPUs (HERD_NVML_MOCK_DIR, set by tests/CMakeLists.txt): the view
# comes up on the alternate screen with the cursor hidden, refreshes (the
# sample number in the header changes) without writing the lines that did
# not change (what the pane received holds each GPU's unchanging line
# once), s moves the sort key on and reorders the GPUs, / with text and
# Enter filters and Esc clears, ? shows the keys, a narrower terminal
# gets lines that fit, and q leaves with status
# 0 and the terminal as it was (primary screen, cursor shown, the shell's
# line back); SIGTERM gives the terminal back too, with status 143.
# Reported skipped (exit 77) without tmux.
set -u
HERD=${1:?usage: top_tty.sh /path/to/herd}
fail() { echo "FAIL: $*" >&2; echo "--- screen:" >&2; screen >&2; exit 1; }
if ! command -v tmux >/dev/null 2>&1; then
	echo "top_tty: SKIPPED (tmux not installed)"
	exit 77
fi
HERD=$(cd "$(dirname "$HERD")" && pwd)/$(basename "$HERD")
mock=${HERD_NVML_MOCK_DIR:?HERD_NVML_MOCK_DIR: the directory of the NVML stand-in}
tmp=$(mktemp -d)
sock="herd-top-test-$$"
trap 'tmux -L "$sock" kill-server 2>/dev/null; rm -rf "$tmp"' EXIT
source "$(dirname "$0")/../harness/tmux.sh"
pane() { tmux -L "$sock" display-message -p -t repl "$1"; }
gpu_order() { screen | grep '^GPU' | cut -c1-4 | tr '\n' ' '; }

printf '%s\n' "gpu 0 util 87 mem_used 1073741824 power_mw 312000 temp 55" \
	"gpu 1 util 12 mem_used 42949672960 power_mw 98000 temp 47" \
	"gpu 2 util 50" >"$tmp/state"
# What the pane receives is logged from before herd starts (the sleep).
tmux -L "$sock" -f /dev/null new-session -d -s repl -x 160 -y 40 \
	"echo BEFORE; sleep 1; env TERM=xterm LD_LIBRARY_PATH='$mock' HERD_NVML_MOCK_STATE='$tmp/state' '$HERD' top --period 200; echo EXITED=\$?; sleep 30"
tmux -L "$sock" pipe-pane -o -t repl "cat >'$tmp/bytes'"
wait_for "herd top  $(hostname)  "
[[ $(pane '#{alternate_on}') == 1 ]] || fail "not on the alternate screen"
[[ $(pane '#{cursor_flag}') == 0 ]] || fail "the cursor is shown"
screen | grep -q '^CPU ' || fail "no node line"
wait_for "GPU2"
[[ $(gpu_order) == "GPU0 GPU1 GPU2 " ]] || fail "GPU lines by index: $(gpu_order)"

# refreshed: the sample number moves on, three frames at least
first=$(screen | grep -o ' #[0-9]*  ' | head -1)
for _ in $(seq 100); do
	[[ $(grep -ao ' #[0-9]*  ' "$tmp/bytes" | sort -u | wc -l) -ge 3 ]] && break
	sleep 0.1
done
now=$(screen | grep -o ' #[0-9]*  ' | head -1)
[[ -n $now && $now != "$first" ]] || fail "the header stayed at '$first'"
[[ $(grep -ao ' #[0-9]*  ' "$tmp/bytes" | sort -u | wc -l) -ge 3 ]] || fail "fewer than three frames"
[[ $(screen | grep -c 'herd top  ') == 1 ]] || fail "more than one header on the screen"
# each GPU's line, whose figures do not change, was written once
n=$(grep -ao 'GPU2   H100' "$tmp/bytes" | wc -l)
[[ $n == 1 ]] || fail "an unchanged line was written $n times"

wait_for "sort index"
keys s
wait_for "sort util"
[[ $(gpu_order) == "GPU0 GPU2 GPU1 " ]] || fail "GPU lines by util: $(gpu_order)"
keys s
wait_for "sort memory"
[[ $(gpu_order) == "GPU1 GPU0 GPU2 " ]] || fail "GPU lines by memory: $(gpu_order)"
keys '?'
wait_for "keys: q quit"
keys '/'
wait_for "filter: _"
type_text "nomatch"
wait_for "filter: nomatch_"
keys Enter
wait_for "filter nomatch"
wait_for 'no GPU matches "nomatch"'
screen | grep -q '^GPU' && fail "GPU lines shown through the filter"
keys '/'
wait_for "filter: nomatch_"
keys Escape
wait_for "filter none"
[[ $(screen | grep -c '^GPU') == 3 ]] || fail "Esc did not clear the filter"

# a narrower terminal (SIGWINCH): redrawn to fit, the bars left out
tmux -L "$sock" resize-window -t repl -x 60 -y 40
for _ in $(seq 150); do
	screen | grep -q '^GPU.*\[' || break
	sleep 0.1
done
screen | grep -q '^GPU.*\[' && fail "the GPU lines kept their bars at 60 columns"
[[ $(screen | grep -c '^GPU') == 3 ]] || fail "not three GPU lines at 60 columns"
screen | awk 'length > 59 { exit 1 }' || fail "a line of 60 columns or more"

keys q
wait_for "EXITED=0"
[[ $(pane '#{alternate_on}') == 0 ]] || fail "still on the alternate screen"
[[ $(pane '#{cursor_flag}') == 1 ]] || fail "the cursor is still hidden"
screen | grep -q 'herd top  ' && fail "the view is still on the screen"
screen | grep -q '^BEFORE$' || fail "the shell's screen did not come back"

# SIGTERM: the same terminal given back, status 128+15.
tmux -L "$sock" respawn-pane -k -t repl \
	"echo AGAIN; env TERM=xterm '$HERD' top --period 200; echo EXITED=\$?; sleep 30"
wait_for "herd top  $(hostname)  "
herd_pid=$(ps -o pid= --ppid "$(pane '#{pane_pid}')" | tr -d ' ')
[[ $herd_pid =~ ^[0-9]+$ ]] || fail "no herd process in the pane: '$herd_pid'"
kill -TERM "$herd_pid"
wait_for "EXITED=143"
[[ $(pane '#{alternate_on}') == 0 ]] || fail "SIGTERM: still on the alternate screen"
[[ $(pane '#{cursor_flag}') == 1 ]] || fail "SIGTERM: the cursor is still hidden"
screen | grep -q '^AGAIN$' || fail "SIGTERM: the shell's screen did not come back"
echo "top_tty: ok"
