#!/usr/bin/env bash
# Every command shown in README.md and docs/*.md runs, as written, and
# exits 0: each "$ " line of a fenced block (with its "\" continuation
# lines), in the order of the page, in a scratch directory where build/,
# tests/ and examples/ are the tree's; every ```lua block runs twice in a
# row on 2 ranks (herd launch -n 2 -- herd BLOCK.lua), as a user who runs
# a snippet again would.  Blocks marked ```text (cluster templates with
# node names of their own) and ```c are not commands.
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT
src=$PWD
bin=$(dirname "$HERD")
mkdir -p "$tmp/build"
ln -s "$bin" "$tmp/build/bin"
for d in tests examples shell; do ln -s "$src/$d" "$tmp/$d"; done
unset $(env | sed -n 's/^\(HERD_[A-Z_]*\)=.*/\1/p') SLURM_JOB_ID RANK WORLD_SIZE MASTER_ADDR MASTER_PORT
export HERD_LEASE_DIR=$tmp/leases HERD_TIMEOUT=60
# the pages' jobs are recorded in an accounting log of the run's own
export HERD_ACCT_LOG=$tmp/acct.jsonl

# The pages' commands and Lua blocks, one record each: "cmd<TAB>file:line<TAB>text" or
# "lua<TAB>file:line<TAB>path of the block's file".
python3 - "$tmp" README.md docs/*.md >"$tmp/plan" <<'PY' || fail "cannot read the pages"
import sys, os
tmp, pages = sys.argv[1], sys.argv[2:]
n = 0
for page in pages:
    lines = open(page).read().split("\n")
    i = 0
    while i < len(lines):
        if not lines[i].startswith("```"):
            i += 1
            continue
        info, start, i = lines[i][3:].strip(), i + 1, i + 1
        body = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i]); i += 1
        i += 1
        if info == "lua":
            n += 1
            path = os.path.join(tmp, "block%d.lua" % n)
            open(path, "w").write("\n".join(body) + "\n")
            print("lua\t%s:%d\t%s" % (page, start, path))
        elif info in ("", "sh", "console"):
            k = 0
            while k < len(body):
                if body[k].startswith("$ "):
                    at, cmd = start + k, body[k][2:]
                    while cmd.endswith("\\") and k + 1 < len(body):
                        k += 1
                        cmd = cmd[:-1] + " " + body[k].strip()
                    print("cmd\t%s:%d\t%s" % (page, at, cmd))
                k += 1
PY
[[ -s $tmp/plan ]] || fail "no command found in the pages"
ran=0
while IFS=$'\t' read -r kind where text; do
	if [[ $kind == lua ]]; then
		for run in 1 2; do
			out=$(cd "$tmp" && timeout 120 build/bin/herd launch -n 2 -- build/bin/herd "$text" 2>&1 </dev/null) \
				|| fail "$where: the Lua block, run $run of 2, exited $?:
$(cat "$text")
$out"
		done
	else
		out=$(cd "$tmp" && timeout 120 bash -c "$text" 2>&1 </dev/null) \
			|| fail "$where: \`$text\` exited $?:
$out"
	fi
	ran=$((ran + 1))
done <"$tmp/plan"
echo "docs: $ran commands and Lua blocks ran"
