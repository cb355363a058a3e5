#!/usr/bin/env bash
# herd --version and --help print to stdout and exit 0; a bad option is a
# usage error: a message and the usage on stderr, exit status 2.
set -u
HERD=${1:?usage: version_help.sh /path/to/herd}
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT

out=$("$HERD" --version) || fail "--version exited $?"
[[ $out =~ ^herd\ [0-9]+\.[0-9]+\.[0-9]+\ \(libherd\ [0-9]+\.[0-9]+\.[0-9]+,\ Lua\ 5\.4\.[0-9]+\)$ ]] \
  || fail "--version printed: $out"
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
grep -qF "usage: herd" "$tmp/err" || fail "bad option does not show usage on stderr"
[[ ! -s $tmp/out ]] || fail "bad option wrote to stdout"

"$HERD" -e >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] || fail "-e without code exited $rc, want 2"

out=$("$HERD" discover --help) || fail "discover --help exited $?"
grep -qF "usage: herd discover" <<<"$out" || fail "discover --help: $out"
"$HERD" discover --bogus >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] || fail "discover --bogus exited $rc, want 2"
grep -qF "herd discover: unrecognized option '--bogus'" "$tmp/err" || fail "discover --bogus: $(cat "$tmp/err")"
"$HERD" discover --save >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] || fail "discover --save without a file exited $rc, want 2"
"$HERD" discover extra >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] || fail "discover with an argument exited $rc, want 2"
echo "version_help: ok"
