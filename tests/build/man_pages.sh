#!/usr/bin/env bash
# The manual pages the build makes from herd's help (cmake/herd_man.lua):
# herd(1) and one herd-COMMAND(1) per command of `herd --help`, no other;
# each renders without a warning from man and groff (as lintian checks),
# has a NAME line whatis reads, and holds every option its command's
# --help names; herd(1) lists every command and every HERD_* variable of
# `herd help env`.
set -euo pipefail
herd=$1
man_dir=$2
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v man >/dev/null && command -v lexgrog >/dev/null \
	|| { echo "SKIP: man and lexgrog (Debian: man-db) are not installed"; exit 77; }

# render PAGE: the page as text, wide enough that no option is broken.
render() { MANWIDTH=250 man -E UTF-8 -l "$1" 2>&1 | col -b; }

commands=$("$herd" --help | awk '/^Commands:/ {on = 1; next} on && /^[^ ]/ {on = 0} on && /^  [a-z]/ {print $1}')
[[ -n $commands ]] || fail "herd --help lists no commands"
want="herd.1.gz"
for c in $commands; do
	[[ $c == help ]] || want+=" herd-$c.1.gz"
done
have=$(cd "$man_dir" && ls -- *.1.gz | sort | tr '\n' ' ')
want=$(tr ' ' '\n' <<<"$want" | sort | tr '\n' ' ')
[[ $have == "$want" ]] || fail "pages in $man_dir: $have; expected: $want"

for page in "$man_dir"/*.1.gz; do
	name=$(basename "$page" .1.gz)
	warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$page" 2>&1 >/dev/null)
	[[ -z $warnings ]] || fail "$name: man --warnings: $warnings"
	whatis=$(lexgrog "$page") || fail "$name: lexgrog cannot read its NAME line"
	[[ $whatis == *": \"$name - "?* ]] || fail "$name: whatis entry: $whatis"
done

main=$(render "$man_dir/herd.1.gz")
for c in $commands; do
	grep -qE "^ +herd $c\$" <<<"$main" || fail "herd(1) does not list the command $c"
done
for v in $("$herd" help env | awk '/^HERD_[A-Z_]+ / {print $1}'); do
	grep -qE "^ +$v=" <<<"$main" || fail "herd(1) lacks the variable $v"
done

for c in $commands; do
	[[ $c == help ]] && continue
	text=$(render "$man_dir/herd-$c.1.gz")
	for opt in $("$herd" "$c" --help | grep -oE '(^|[ [,|])--?[A-Za-z][A-Za-z0-9_-]*' \
			| sed 's/^[ [,|]//' | sort -u); do
		grep -qF -- "$opt" <<<"$text" || fail "herd-$c(1) lacks $opt, which herd $c --help names"
	done
done
# the help's headings ("Exit status:") start lines of their own, not the
# end of the paragraph before them
for c in $commands; do
	[[ $c == help ]] && continue
	"$herd" "$c" --help | grep -q "^Exit status" || continue
	grep -qE "^ *Exit status" <<<"$(render "$man_dir/herd-$c.1.gz")" \
		|| fail "herd-$c(1): 'Exit status' runs into the text before it"
done
echo "man pages: $(wc -w <<<"$want") pages, each rendered clean and holding its help's options"
