#!/usr/bin/env bash
# Each command's --help (herd help COMMAND) and docs/cli.md say the same:
#   - the options: those of the help's usage lines and option lines are the
#     options of the command's table under "## Options of every command"
#     in docs/cli.md (### herd COMMAND), no more and no fewer (-h and
#     --help, which every command takes, aside);
#   - the exit statuses: those listed under the help's "Exit status" are
#     the first column of the table after "`herd COMMAND`" under
#     "## Exit statuses";
#   - and the short forms agree with them: the options of a command's
#     synopsis in `herd --help` and in the first block of docs/cli.md are
#     options of its --help.
# The commands are those `herd --help` lists, and herd itself; nothing here
# names an option, so the lists may change as long as they change together.
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT

"$HERD" --help >"$tmp/herd.help" 2>"$tmp/err" || fail "herd --help exited $?: $(cat "$tmp/err")"
for cmd in $(sed -n '/^Commands:/,/^[^ C]/s/^  \([a-z][a-z]*\) .*/\1/p' "$tmp/herd.help"); do
	[[ $cmd == help ]] && continue
	"$HERD" help "$cmd" >"$tmp/$cmd.help" 2>"$tmp/err" \
		|| fail "herd help $cmd exited $?: $(cat "$tmp/err")"
	[[ -s $tmp/err ]] && fail "herd help $cmd wrote on stderr: $(cat "$tmp/err")"
	cmp -s "$tmp/$cmd.help" <("$HERD" "$cmd" --help 2>&1) \
		|| fail "herd help $cmd and herd $cmd --help differ"
done
ls "$tmp"/*.help | grep -q '/launch\.help$' || fail "no command found in herd --help"

python3 - "$tmp" docs/cli.md >"$tmp/diff" <<'PY' || fail "cannot compare the help and docs/cli.md"
import os, re, sys

tmp, page = sys.argv[1], sys.argv[2]
OPT = r'(?<![\w-])(--?[A-Za-z][A-Za-z0-9_-]*)'
IGNORED = {'-h', '--help'}

def indent(line):
    return len(line) - len(line.lstrip(' '))

def help_options(text, cmd):
    """Options of a --help: its usage lines and its option lines."""
    opts, lines, in_usage = set(), text.split('\n'), False
    for line in lines:
        if cmd != 'herd' and line.startswith('Commands:'):
            break
        if cmd == 'herd' and line.startswith('Commands:'):
            break
        if line.startswith('usage: '):
            in_usage = True
            opts |= set(re.findall(OPT, line[7:]))
            continue
        if in_usage and line.strip() and indent(line) >= 7:
            opts |= set(re.findall(OPT, line))
            continue
        in_usage = False
        if 1 <= indent(line) <= 6 and re.match(r'\s*--?[A-Za-z]', line):
            first = re.split(r'\s{2,}', line.strip())[0]
            opts |= set(re.findall(OPT, first))
    return opts - IGNORED

def help_statuses(text):
    out, inside = set(), False
    for line in text.split('\n'):
        if line.startswith('Exit status'):
            inside = True
            continue
        if inside and line.strip() and indent(line) == 0:
            break
        m = re.match(r'\s{1,4}((?:\d+(?:\+S)?|N)(?:/\d+)*)\s', line) if inside else None
        if m:
            out |= set(m.group(1).split('/'))
    return out

def section(lines, heading):
    """The lines under heading, to the next heading of its level or above."""
    level = heading.split(' ')[0]
    out, inside = [], False
    for line in lines:
        if line == heading:
            inside = True
            continue
        if inside and re.match(r'#{1,%d} ' % len(level), line):
            break
        if inside:
            out.append(line)
    return out if inside else None

def cells(line):
    """A table row's cells; "\\|" is a bar inside a cell."""
    return [c.strip() for c in re.split(r'(?<!\\)\|', line.strip().strip('|'))]

def table_after(lines, start):
    """First cells of the first table at or after lines[start]."""
    rows, i = [], start
    while i < len(lines) and not lines[i].startswith('|'):
        i += 1
    while i < len(lines) and lines[i].startswith('|'):
        if not re.match(r'\|\s*-', lines[i]):
            rows.append(cells(lines[i])[0])
        i += 1
    return rows[1:]   # the header row aside

page_lines = open(page).read().split('\n')
helps = {f[:-5]: open(os.path.join(tmp, f)).read() for f in os.listdir(tmp) if f.endswith('.help')}
problems = []
options = section(page_lines, '## Options of every command')
statuses = section(page_lines, '## Exit statuses')
if options is None:
    problems.append('docs/cli.md has no "## Options of every command" section')
if statuses is None:
    problems.append('docs/cli.md has no "## Exit statuses" section')

for cmd in sorted(helps):
    name = 'herd' if cmd == 'herd' else 'herd ' + cmd
    text = helps[cmd]
    have = help_options(text, cmd)
    sub = section(options or [], '### ' + name)
    if sub is None:
        problems.append('docs/cli.md: no "### %s" under "## Options of every command"' % name)
    else:
        doc = set()
        for row in table_after(sub, 0):
            doc |= set(re.findall(OPT, ' '.join(re.findall(r'`([^`]*)`', row))))
        doc -= IGNORED
        if doc != have:
            problems.append('%s: in --help only: %s; in docs/cli.md only: %s' % (
                name, ' '.join(sorted(have - doc)) or '-', ' '.join(sorted(doc - have)) or '-'))
    said = help_statuses(text)
    if not said:
        problems.append('%s --help lists no exit status (an "Exit status:" block)' % name)
    at = [i for i, l in enumerate(statuses or []) if l.startswith('`%s`' % name)]
    if not at:
        problems.append('docs/cli.md: no "`%s` ..." paragraph and table under "## Exit statuses"'
                        % name)
    else:
        doc = set()
        for first in table_after(statuses, at[0]):
            doc |= set(re.split(r'\s*[,/]\s*', first))
        if doc != said:
            problems.append('%s exit statuses: --help %s, docs/cli.md %s' % (
                name, ' '.join(sorted(said)), ' '.join(sorted(doc))))

# The short forms: herd --help's synopsis of each command, and the first
# block of docs/cli.md (comments in parentheses aside).
short = {}
cur = None
for line in helps['herd'].split('\n')[helps['herd'].split('\n').index('Commands:') + 1:]:
    m = re.match(r'  ([a-z][a-z0-9]*)\b(.*)', line)
    if m:
        cur = m.group(1)
        short.setdefault(('herd --help', cur), set()).update(re.findall(OPT, m.group(2).split('  ')[0]))
    elif cur and line.strip().startswith('['):
        short[('herd --help', cur)].update(re.findall(OPT, line))
    elif indent(line) == 0:
        cur = None
i = page_lines.index('```') if '```' in page_lines else len(page_lines)
cur = None
for line in page_lines[i + 1:]:
    if line.startswith('```'):
        break
    line = re.sub(r'\([^)]*\)', '', line)
    m = re.match(r'herd ([a-z][a-z0-9]*)\b(.*)', line)
    if m:
        cur = m.group(1)
        short.setdefault(('docs/cli.md', cur), set()).update(re.findall(OPT, m.group(2)))
    elif line.startswith('herd '):
        cur = 'herd'
        short.setdefault(('docs/cli.md', cur), set()).update(re.findall(OPT, line))
    elif cur and indent(line) > 0:
        short[('docs/cli.md', cur)].update(re.findall(OPT, line))
for (where, cmd), opts in sorted(short.items()):
    if cmd == 'help' or cmd not in helps:
        continue
    extra = opts - IGNORED - help_options(helps[cmd], cmd)
    if extra:
        problems.append('%s: the synopsis of %s has %s, which %s --help has not' % (
            where, cmd, ' '.join(sorted(extra)), 'herd' if cmd == 'herd' else 'herd ' + cmd))
if problems:
    print('\n'.join(problems))
PY
[[ -s $tmp/diff ]] && fail "the help and docs/cli.md disagree:
$(cat "$tmp/diff")"
echo "help: $(ls "$tmp"/*.help | wc -l) commands' options and exit statuses agree with docs/cli.md"
