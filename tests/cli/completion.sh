#!/usr/bin/env bash
# The bash completion installed with herd (shell/herd.bash): commands at
# the first word, a command's long options from its own --help, bench's
# operations, ckpt's verbs and top's sort keys; cmake --install puts it where
# bash-completion looks.
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT
source shell/herd.bash

# complete WORD...: COMPREPLY for the last word, sorted, one line.
complete_words() {
	COMP_WORDS=("$HERD" "$@")
	COMP_CWORD=$#
	COMPREPLY=()
	_herd
	printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' '
}
[[ $(complete_words la) == "launch " ]] || fail "la: $(complete_words la)"
[[ $(complete_words he) == "health help " ]] || fail "he: $(complete_words he)"
[[ $(complete_words hel) == "help " ]] || fail "hel: $(complete_words hel)"
[[ $(complete_words launch --nproc) == "--nproc-per-node " ]] || fail "launch --nproc: $(complete_words launch --nproc)"
[[ $(complete_words launch --un) == "--unbuffered " ]] || fail "launch --un: $(complete_words launch --un)"
[[ $(complete_words bench all) == "allgather allreduce alltoall " ]] || fail "bench all: $(complete_words bench all)"
[[ $(complete_words bench allreduce --dat) == "--datatype " ]] || fail "bench --dat: $(complete_words bench allreduce --dat)"
[[ $(complete_words to) == "top " ]] || fail "to: $(complete_words to)"
[[ $(complete_words top --) == "--count --filter --hostfile --hosts --json --once --period --slurm --sort " ]] || fail "top --: $(complete_words top --)"
[[ $(complete_words ckpt ve) == "verify " ]] || fail "ckpt ve: $(complete_words ckpt ve)"
[[ $(complete_words top --so) == "--sort " ]] || fail "top --so: $(complete_words top --so)"
[[ $(complete_words top --sort m) == "memory " ]] || fail "top --sort m: $(complete_words top --sort m)"
[[ $(complete_words help la) == "launch " ]] || fail "help la: $(complete_words help la)"
[[ $(complete_words ac) == "acct " ]] || fail "ac: $(complete_words ac)"
[[ $(complete_words acct --si) == "--since " ]] || fail "acct --si: $(complete_words acct --si)"
[[ $(complete_words acct --since now-1) == "now-1days now-1hours " ]] \
	|| fail "acct --since now-1: $(complete_words acct --since now-1)"
[[ $(complete_words launch --monitor-o) == "--monitor-out " ]] \
	|| fail "launch --monitor-o: $(complete_words launch --monitor-o)"
[[ $(complete_words help en) == "env " ]] || fail "help en: $(complete_words help en)"

cmake --install "$(dirname "$(dirname "$HERD")")" --prefix "$tmp/prefix" >/dev/null \
	|| fail "cmake --install failed"
[[ -f $tmp/prefix/share/bash-completion/completions/herd ]] \
	|| fail "no completion installed: $(find "$tmp/prefix" -name '*herd*' | head)"
echo "completion: ok"
