#!/usr/bin/env bash
# herd help env prints the table of HERD_* variables (sdk/base/param.h), and
# the ```text block under "## Environment" in docs/cli.md is that output,
# byte for byte; the sources read no HERD_* variable around the table.
set -u
HERD=${1:?usage: help_env.sh /path/to/herd}
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT

"$HERD" help env >"$tmp/printed" 2>"$tmp/err" || fail "herd help env exited $?: $(cat "$tmp/err")"
[[ -s $tmp/err ]] && fail "herd help env wrote to stderr: $(cat "$tmp/err")"
grep -q '^HERD_TIMEOUT  *seconds  *300 ' "$tmp/printed" || fail "no HERD_TIMEOUT row: $(cat "$tmp/printed")"
grep -q '^HERD_RANK ' "$tmp/printed" || fail "no HERD_RANK row: $(cat "$tmp/printed")"

# The first ```text block after the heading, without its fences.
awk '/^## Environment$/ { section = 1; next }
     section && /^## / { exit }
     section && !inside && /^```text$/ { inside = 1; next }
     inside && /^```$/ { exit }
     inside { print }' docs/cli.md >"$tmp/documented"
[[ -s $tmp/documented ]] || fail "docs/cli.md has no \`\`\`text block under \"## Environment\""
diff -u "$tmp/documented" "$tmp/printed" >"$tmp/diff" \
	|| fail "docs/cli.md's table differs from herd help env (paste the output there):
$(cat "$tmp/diff")"

# One reader: getenv of a HERD_* variable only in sdk/base/param.c.
found=$(grep -rn 'getenv("HERD_' sdk shell | grep -v '^sdk/base/param\.c:')
[[ -z $found ]] || fail "HERD_* read around sdk/base/param.h:
$found"
echo "help env: the table and docs/cli.md agree"
