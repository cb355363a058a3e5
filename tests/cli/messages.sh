#!/usr/bin/env bash
# No message of libherd (sdk/, kernels/) or of the herd program (shell/)
# names a C function: a person running herd reads what herd was doing
# ("cannot create a pipe for the ranks' output: Too many open files"), not
# which call failed ("pipe: ...", "herd_job_launch: ...").  The string
# literals of the sources are read, adjacent ones joined, and a message is
# refused when it holds
#   - one of herd's functions (declared in the headers of include/, sdk/
#     and kernels/) anywhere, but at the start of a HERD_EINVAL message
#     ("herd_ckpt_open: out and dir must not be NULL"): a C caller's own
#     misuse, named by the call it made (the Lua bindings strip it; a name
#     alone, handed to such a check, is that prefix too);
#   - a function of CUDA, NVML, NCCL or cuBLAS anywhere (cudaMalloc), but
#     after "lacks": a library without a function herd needs is named with
#     the function it lacks, as the dynamic loader does;
#   - another library's function (those the program calls: its undefined
#     symbols) where messages put a cause: "poll: %s", "(pipe)",
#     "malloc(";
#   - or is such a name alone, handed to a function that words an error
#     (herd__error_errno(HERD_ESYS, errno, "poll")).
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT
command -v nm >/dev/null || { echo "SKIP: nm (binutils) is not installed"; exit 77; }

nm -D --undefined-only "$HERD" >"$tmp/undefined" || fail "nm cannot read $HERD"
python3 - "$tmp/undefined" >"$tmp/found" <<'PY'
import os, re, sys

def literals(path):
    """(line, text, code before it) for each run of adjacent string literals."""
    s = open(path, encoding='utf-8', errors='replace').read()
    i, n, line = 0, len(s), 1
    out, cur, last_end, code = [], None, 0, []

    def flush():
        nonlocal cur
        if cur is not None:
            out.append(cur)
            cur = None
    while i < n:
        c = s[i]
        if c == '\n':
            line += 1
            i += 1
            continue
        if s.startswith('//', i):
            j = s.find('\n', i)
            i = n if j < 0 else j
            continue
        if s.startswith('/*', i):
            j = s.find('*/', i + 2)
            j = n if j < 0 else j + 2
            line += s.count('\n', i, j)
            i = j
            continue
        if c == "'":
            j = i + 1
            while j < n and s[j] != "'":
                j += 2 if s[j] == '\\' else 1
            flush()
            code.append(s[i:j + 1])
            i = j + 1
            continue
        if c == '#' and s[s.rfind('\n', 0, i) + 1:i].strip() == '':
            m = re.match(r'#\s*include[^\n]*', s[i:])
            if m:
                i += m.end()
                continue
        if c == '"':
            j, buf = i + 1, []
            while j < n and s[j] != '"':
                step = 2 if s[j] == '\\' else 1
                buf.append(s[j:j + step])
                j += step
            text = ''.join(buf)
            if cur is not None and s[last_end:i].strip() == '':
                cur = (cur[0], cur[1] + text, cur[2])
            else:
                flush()
                cur = (line, text, ''.join(code[-400:]))
            line += s.count('\n', i, j + 1)
            i = j + 1
            last_end = i
            continue
        if not c.isspace():
            flush()
            code.append(c)
        i += 1
    flush()
    return out

def callee(before):
    """The function whose argument list is still open at the end of before."""
    depth = 0
    for k in range(len(before) - 1, -1, -1):
        if before[k] == ')':
            depth += 1
        elif before[k] == '(':
            if depth == 0:
                m = re.search(r'([A-Za-z_][A-Za-z0-9_]*)$', before[:k])
                return m.group(1) if m else ''
            depth -= 1
        elif before[k] in ';{}' and depth == 0:
            return ''
    return ''

files = sorted(os.path.join(d, f) for top in ('sdk', 'shell', 'kernels')
               for d, _, fs in os.walk(top) for f in fs if f.endswith(('.c', '.h', '.cu')))
texts = {f: open(f, encoding='utf-8', errors='replace').read() for f in files}
herd_fns = set()
for top in ('include', 'sdk', 'kernels'):
    for d, _, fs in os.walk(top):
        for f in fs:
            if f.endswith('.h'):
                herd_fns |= set(re.findall(r'\b(herd_{1,2}[a-z0-9_]+)\s*\(',
                                           open(os.path.join(d, f)).read()))
# Other libraries' functions: the program's undefined symbols (pipe2 is also
# "pipe"), and the GPU libraries' functions, called or looked up by name.
lib_fns = set()
for l in open(sys.argv[1]):
    if l.split():
        name = l.split()[-1].split('@')[0]
        if not name.startswith('_'):
            lib_fns |= {name, re.sub(r'\d+$', '', name)}
gpu = r'(?:nvml|cuda|cu|nccl|cublas)[A-Z][A-Za-z0-9_]*'
gpu_fns = set()
for t in texts.values():
    gpu_fns |= set(re.findall(r'\b(' + gpu + r')\s*\(', t))
    for args in re.findall(r'_SYM\(([^)]*)\)', t):
        gpu_fns |= set(re.findall(r'\b(' + gpu + r')\b', args))
    gpu_fns |= set(re.findall(r'"(' + gpu + r')"', t))
gpu_fns = {g for g in gpu_fns if not re.search(r'Error|Success|_t$', g)}

found = []
for f in files:
    for line, text, before in literals(f):
        bad = set()
        plain = re.sub(r'\s+', '', before)
        if re.fullmatch(r'[A-Za-z_][A-Za-z0-9_.]*', text):
            # A name alone: a message only when handed to what words errors.
            if ((text in lib_fns or text in gpu_fns)
                    and re.search(r'err|check|fail|unread|CUDA', callee(before), re.I)
                    and not plain.endswith(('?', ':'))):
                bad.add(text)
        else:
            text = re.sub(r'\blacks [A-Za-z0-9_]+(, [A-Za-z0-9_]+)*( or [A-Za-z0-9_]+)?', 'lacks',
                          text)
            for m in re.finditer(r'\bherd_{1,2}[a-z0-9_]+\b', text):
                if m.group(0) not in herd_fns:
                    continue
                if (m.start() == 0 and text[m.end():m.end() + 1] == ':'
                        and plain.endswith('herd__error(HERD_EINVAL,')):
                    continue
                bad.add(m.group(0))
            for m in re.finditer(r'\b(' + gpu + r')\b', text):
                if m.group(1) in gpu_fns:
                    bad.add(m.group(1))
            for m in re.finditer(r'(?:^|(?<=: )|(?<=\())([a-z_][a-z0-9_]*)(?=\(|\)|: |:$|:\\n)',
                                 text):
                if m.group(1) in lib_fns:
                    bad.add(m.group(1))
        if bad:
            found.append('%s:%d: %s in "%s"' % (f, line, ', '.join(sorted(bad)), text[:140]))
if found:
    print('\n'.join(found))
PY
[[ $? == 0 ]] || fail "the sources could not be read"
[[ -s $tmp/found ]] && fail "messages that name a C function (say what herd was doing instead):
$(cat "$tmp/found")"

# What the program prints of a misuse message leaves the C call out: a
# safetensors file whose tensor the library refuses (a dimension over
# 2^48, with no data to hold) is named with the tensor and the reason.
python3 - "$tmp/big.safetensors" <<'PY' || fail "cannot write the safetensors file"
import json, struct, sys
h = json.dumps({"x": {"dtype": "U8", "shape": [2**49, 0], "data_offsets": [0, 0]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h)
PY
"$HERD" ckpt import "$tmp/big.safetensors" "$tmp/ck" >/dev/null 2>"$tmp/err" \
	&& fail "herd ckpt import took a dimension over 2^48"
[[ $(cat "$tmp/err") == "herd ckpt: $tmp/big.safetensors: \"x\": dimension 0: the global size 562949953421312 is over the limit of 2^48 (281474976710656)" ]] \
	|| fail "herd ckpt import of a dimension over 2^48 said: $(cat "$tmp/err")"
echo "messages: no C function named"
