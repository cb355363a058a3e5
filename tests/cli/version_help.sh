#!/usr/bin/env bash
# herd --version and --help print to stdout and exit 0; herd help and
# herd help COMMAND, and COMMAND --help for every command; a bad option is a
# usage error: one line and a hint to --help on stderr, exit status 2; a
# mistyped command is named with the nearest one.
set -u
HERD=${1:?usage: version_help.sh /path/to/herd}
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT

out=$("$HERD" --version) || fail "--version exited $?"
[[ $(head -1 <<<"$out") =~ ^herd\ [0-9]+\.[0-9]+\.[0-9]+\ \(libherd\ [0-9]+\.[0-9]+\.[0-9]+,\ Lua\ 5\.4\.[0-9]+\)$ ]] \
  || fail "--version printed: $out"
# the GPU software: what libherd was built with (CUDA, NCCL), and the driver
# or why there is none
[[ $(sed -n 2p <<<"$out") =~ ^GPU:\ built\ (with\ CUDA\ [0-9.]+|without\ CUDA)(\ and\ NCCL\ [0-9]+\.[0-9]+\.[0-9]+|,\ without\ NCCL)\;\ . ]] \
  || fail "--version's GPU line: $out"
# the NCCL device calls would load, or why none
[[ $(sed -n 3p <<<"$out") =~ ^NCCL\ for\ device\ calls:\ . ]] || fail "--version's NCCL line: $out"
[[ $(wc -l <<<"$out") == 3 ]] || fail "--version printed more than three lines: $out"
[[ $("$HERD" -v) == "$out" ]] || fail "-v differs from --version"

for opt in --help -h; do
  out=$("$HERD" $opt) || fail "$opt exited $?"
  for want in "usage: herd [options] [script [args]]" "-e stat" "-i " "discover [--json] [--save FILE] [--inventory FILE]" "HERD_HISTORY"; do
    grep -qF -- "$want" <<<"$out" || fail "$opt lacks '$want'"
  done
done

"$HERD" --bogus >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] || fail "bad option exited $rc, want 2"
grep -qF "herd: unrecognized option '--bogus'" "$tmp/err" || fail "bad option message: $(cat "$tmp/err")"
grep -qxF "Try 'herd --help' for more information." "$tmp/err" || fail "bad option gives no hint: $(cat "$tmp/err")"
[[ $(wc -l <"$tmp/err") == 2 ]] || fail "bad option printed more than the message and the hint: $(cat "$tmp/err")"
[[ ! -s $tmp/out ]] || fail "bad option wrote to stdout"

"$HERD" -e >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] || fail "-e without code exited $rc, want 2"
grep -qF "herd: '-e' needs an argument (the Lua code to run)" "$tmp/err" || fail "-e without code: $(cat "$tmp/err")"

out=$("$HERD" help) || fail "herd help exited $?"
grep -qF "usage: herd [options] [script [args]]" <<<"$out" || fail "herd help: $out"
for c in discover bench alloc gpus launch ckpt exec; do
  out=$("$HERD" help $c) || fail "herd help $c exited $?"
  grep -qF "usage: herd $c" <<<"$out" || fail "herd help $c: $out"
  [[ $("$HERD" $c --help) == "$out" ]] || fail "herd $c --help differs from herd help $c"
done
"$HERD" help bogus >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] || fail "herd help bogus exited $rc"
"$HERD" lauch -n 2 -- true >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 2 && ! -s $tmp/out ]] || fail "lauch exited $rc"
grep -qxF "herd: 'lauch' is not a command or a file; did you mean 'launch'?" "$tmp/err" \
  || fail "lauch: $(cat "$tmp/err")"
"$HERD" zzzzzz >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] || fail "zzzzzz exited $rc"
grep -qF "herd: 'zzzzzz' is not a command or a file" "$tmp/err" || fail "zzzzzz: $(cat "$tmp/err")"

out=$("$HERD" discover --help) || fail "discover --help exited $?"
grep -qF "usage: herd discover" <<<"$out" || fail "discover --help: $out"
"$HERD" discover --bogus >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] || fail "discover --bogus exited $rc, want 2"
grep -qF "herd discover: unrecognized option '--bogus'" "$tmp/err" || fail "discover --bogus: $(cat "$tmp/err")"
"$HERD" discover --save >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] || fail "discover --save without a file exited $rc, want 2"
"$HERD" discover extra >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] || fail "discover with an argument exited $rc, want 2"

# every command's failures, not only its usage errors, are "herd CMD: ...";
# a missing input file is bad input, exit status 2 (launch: its own 125)
mkfifo "$tmp/fifo"
for t in "2|discover --inventory $tmp/none" "2|discover --hostfile $tmp/none" \
	"2|discover --hostfile $tmp/fifo" "2|alloc -g 1 --inventory $tmp/none" \
	"2|gpus --inventory $tmp/none" "2|bcast --hostfile $tmp/none /etc/hostname /x" \
	"2|bcast --hostfile $tmp/fifo /etc/hostname /x" "2|hostlist expand a[" \
	"125|launch -n 1 --hostfile $tmp/none -- true" "*|ckpt verify $tmp/none"; do
  want=${t%%|*} args=${t#*|}
  timeout 20 "$HERD" $args >/dev/null 2>"$tmp/err" </dev/null; rc=$?
  [[ $want == "*" || $rc == "$want" ]] || fail "$args exited $rc, want $want: $(cat "$tmp/err")"
  grep -q "^herd ${args%% *}: " "$tmp/err" || fail "$args: not 'herd ${args%% *}: ': $(cat "$tmp/err")"
done
# whatever a command prints must reach its stdout: onto a full device each
# says so, naming itself, and exits 1 (or keeps a failure of its own)
for t in "1|discover --inventory tests/fixtures/inventory/dgx-h100.json" \
	"1|gpus --inventory tests/fixtures/inventory/dgx-h100.json" "1|probe" \
	"1|help launch" "1|launch --help" "1|hostlist expand a[1-3]" "1|ckpt ls $tmp" \
	"*|health --json" "1|bench allreduce --np 1 -b 8 -e 8 --iters 1 -w 0" "1|-e print(1)"; do
  want=${t%%|*} args=${t#*|}
  timeout 60 "$HERD" $args >/dev/full 2>"$tmp/err" </dev/null; rc=$?
  [[ $rc != 0 && ($want == "*" || $rc == "$want") ]] || fail "$args >/dev/full exited $rc, want $want: $(cat "$tmp/err")"
  grep -q "^herd[a-z ]*: cannot write to standard output" "$tmp/err" \
    || fail "$args >/dev/full: $(cat "$tmp/err")"
done
echo "version_help: ok"
