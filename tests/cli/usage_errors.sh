#!/usr/bin/env bash
# A usage error of every command (those `herd --help` lists, ckpt's and
# hostlist's verbs, and herd itself) is one line that starts with
# "herd COMMAND: ", then the hint "Try 'herd COMMAND --help' for more
# information.", nothing on stdout, and the exit status the command's --help
# gives a usage error.
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT
unset HERD_RANK RANK SLURM_PROCID OMPI_COMM_WORLD_RANK SLURM_JOB_ID

# usage_status CMD: the status CMD's --help lists for a usage error.
usage_status() {
	"$HERD" help "$1" | sed -n '/^Exit status/,/^[^ ]/p' |
		awk '/^ +[0-9]+ / { s = $1 } /usage error/ { print s; exit }'
}

# check NAME STATUS ARGS...: herd ARGS... is a usage error of "herd NAME".
check() {
	local name=$1 want=$2 rc
	shift 2
	timeout 60 "$HERD" "$@" </dev/null >"$tmp/out" 2>"$tmp/err"
	rc=$?
	[[ $rc == "$want" ]] || fail "herd $* exited $rc, want $want: $(cat "$tmp/err")"
	[[ -s $tmp/out ]] && fail "herd $* printed on stdout: $(cat "$tmp/out")"
	[[ $(wc -l <"$tmp/err") == 2 ]] || fail "herd $*: not one line and a hint: $(cat "$tmp/err")"
	[[ $(head -1 "$tmp/err") == "$name: "* ]] || fail "herd $*: $(head -1 "$tmp/err")"
	[[ $(tail -1 "$tmp/err") == "Try '$name --help' for more information." ]] \
		|| fail "herd $*: the hint is $(tail -1 "$tmp/err")"
}

n=0
for cmd in $(sed -n '/^Commands:/,/^[^ C]/s/^  \([a-z][a-z]*\) .*/\1/p' <("$HERD" --help)); do
	[[ $cmd == help ]] && continue
	want=$(usage_status "$cmd")
	[[ -n $want ]] || fail "herd help $cmd gives no exit status for a usage error"
	check "herd $cmd" "$want" "$cmd" --no-such-option
	n=$((n + 1))
done
[[ $n -ge 10 ]] || fail "only $n commands in herd --help"
for verb in ls verify inspect diff export import; do
	check "herd ckpt" "$(usage_status ckpt)" ckpt "$verb" --no-such-option
	check "herd ckpt" "$(usage_status ckpt)" ckpt "$verb"
done
for verb in expand count; do
	check "herd hostlist" "$(usage_status hostlist)" hostlist "$verb"
done
check "herd hostlist" "$(usage_status hostlist)" hostlist compress
check "herd bench" "$(usage_status bench)" bench allreduce --device
check "herd exec" "$(usage_status exec)" exec --connect

# herd itself: a bad option, an option without its value, a mistyped command.
want=$("$HERD" --help | sed -n '/^Exit status/,$p' | awk '/^ +[0-9]+ / { s = $1 } /usage error/ { print s; exit }')
[[ $want == 2 ]] || fail "herd --help gives $want for a usage error"
check herd 2 --no-such-option
check herd 2 -e
timeout 60 "$HERD" lauch </dev/null >/dev/null 2>"$tmp/err"
[[ $? == 2 && $(cat "$tmp/err") == "herd: 'lauch' is not a command or a file; did you mean 'launch'?" ]] \
	|| fail "herd lauch: $(cat "$tmp/err")"
timeout 60 "$HERD" help lauch </dev/null >/dev/null 2>"$tmp/err"
[[ $? == 2 && $(cat "$tmp/err") == "herd help: 'lauch' is not a command; did you mean 'launch'?" ]] \
	|| fail "herd help lauch: $(cat "$tmp/err")"
# A mistyped operation of herd bench is answered as a mistyped command.
check "herd bench" "$(usage_status bench)" bench allreduc
grep -qx "herd bench: unknown operation 'allreduc'; did you mean 'allreduce'?" "$tmp/err" \
	|| fail "herd bench allreduc: $(cat "$tmp/err")"
echo "usage errors: $n commands and herd itself say whose they are"
