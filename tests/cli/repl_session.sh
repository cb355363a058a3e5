#!/usr/bin/env bash
# An experiment at the herd> prompt, driven through tmux: Tab completes a
# method of a Job, help(herd.launch) prints its entry, a job is launched
# and waited for, a collective that blocks on a peer is interrupted by
# Ctrl-C (it returns at once, the job the session started is stopped, a
# detached one is kept), and the shell quits cleanly.  Reported skipped
# (exit 77) without tmux.
set -u
HERD=${1:?usage: repl_session.sh /path/to/herd}
fail() { echo "FAIL: $*" >&2; echo "--- screen:" >&2; screen >&2; exit 1; }
if ! command -v tmux >/dev/null 2>&1; then
  echo "repl_session: SKIPPED (tmux not installed)"
  exit 77
fi
HERD=$(cd "$(dirname "$HERD")" && pwd)/$(basename "$HERD")
tmp=$(mktemp -d)
sock="herd-session-$$"
detached=
cleanup() {
  tmux -L "$sock" kill-server 2>/dev/null
  # the detached job is this test's: its rank's pid was written by it
  [[ -n $detached ]] && kill "$detached" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT

source "$(dirname "$0")/../harness/tmux.sh"
pid_of() { # the pid a rank wrote, within 15 s
  for _ in $(seq 150); do [[ -s $1 ]] && { cat "$1"; return 0; }; sleep 0.1; done
  fail "no pid in $1"
}

# the peer rank: joins a communicator of two with the shell, writes its
# pid, then sleeps instead of calling the collective the shell waits in
cat >"$tmp/peer.lua" <<'LUA'
local f = assert(io.open(arg[1], "w"))
f:write(io.open("/proc/self/stat"):read("n"))
f:close()
local s = assert(herd.store.connect(os.getenv("S"), os.getenv("K")))
local c = assert(herd.comm{ store = s, rank = 1, size = 2 })
os.execute("sleep 120")
LUA
cat >"$tmp/sleeper.lua" <<'LUA'
local f = assert(io.open(arg[1], "w"))
f:write(io.open("/proc/self/stat"):read("n"))
f:close()
os.execute("sleep 120")
LUA

tmux -L "$sock" -f /dev/null new-session -d -s repl -x 200 -y 60 -c "$tmp" \
  "env HERD_HISTORY='$tmp/history' TERM=xterm '$HERD'; echo EXITED=\$?; sleep 30"
for _ in $(seq 200); do [[ -n $(screen | grep -v '^$') ]] && break; sleep 0.1; done
wait_prompt

# help(herd.launch) prints the entry
type_text 'help(herd.launch)'
keys Enter
wait_for "herd.launch{...} -> herd.Job | nil, msg, status"
wait_for "Starts a job as \`herd launch\` does"
wait_prompt

# a job: launched, its method completed after the colon, waited for
type_text 'job = herd.launch{cmd = {"sh", "-c", "echo hello from $HERD_RANK"}, n = 2}; print(job:wait(30).ok)'
keys Enter
wait_for "] hello from 1"
wait_for "true"
wait_prompt
type_text 'job:wa'
keys Tab
wait_for "herd> job:wait("
type_text ')'
keys Enter
wait_for 'state = "succeeded",'
wait_prompt

# a detached job and a job whose rank the shell meets in a communicator
type_text "keep = herd.launch{cmd = {'sleeper.lua', 'keep.pid'}, n = 1, detach = true}"
keys Enter
wait_prompt
detached=$(pid_of "$tmp/keep.pid")
type_text 'srv = herd.store.serve{}; peer = herd.launch{cmd = {"peer.lua", "peer.pid"}, n = 1, env = {S = srv:address(), K = srv.secret}}'
keys Enter
wait_prompt
peer=$(pid_of "$tmp/peer.pid")
type_text 'c = herd.comm{store = herd.store.connect(srv:address(), srv.secret), rank = 0, size = 2}'
keys Enter
wait_prompt

# the collective blocks on the peer; Ctrl-C returns to the prompt at once
type_text 'print("before"); c:allreduce(herd.buffer("float32", 1024)); print("after")'
keys Enter
wait_for "before"
sleep 0.5
keys C-c
wait_for "interrupted!"
wait_prompt
screen | grep -qxF "after" && fail "the code went on after the interrupt"
for _ in $(seq 100); do kill -0 "$peer" 2>/dev/null || break; sleep 0.1; done
kill -0 "$peer" 2>/dev/null && fail "the session's job (rank pid $peer) was not stopped"
kill -0 "$detached" 2>/dev/null || fail "the detached job (rank pid $detached) was stopped"
type_text 'print(c:error())'
keys Enter
wait_for "HERD_EABORTED"
wait_prompt
type_text 'print(peer:status().state .. " " .. keep:status().state)'
keys Enter
wait_for "interrupted running"
wait_prompt

# quit: the detached job is stopped as the shell closes its objects
type_text 'os.exit(0, true)'
keys Enter
wait_for "EXITED=0"
for _ in $(seq 100); do kill -0 "$detached" 2>/dev/null || break; sleep 0.1; done
kill -0 "$detached" 2>/dev/null && fail "the detached job outlived the shell that held it"
detached=
echo "repl_session: ok"
