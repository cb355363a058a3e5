#!/usr/bin/env bash
# herd probe --watch, the node side of a telemetry watch: --count 3 prints
# three records (a 4-byte big-endian length, then the msgpack sample) that
# decode to seq 1, 2, 3 of this host, with the format version; --text
# prints the same samples as base64 lines and --json as JSON lines.  The
# stream ends with exit status 0 when its stdin ends, when its stdout
# breaks, on SIGTERM and on SIGHUP; with stdin at /dev/null it streams
# until --count or a signal, and --json into a file ends on a whole line
# when stopped; --period under 100 ms is a usage
# error.  A reader that never reads (a FIFO of one page that nobody
# drains) neither makes it hold more nor keeps it: it drops samples, then
# gives up with exit status 1, saying so.
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT
host=$(hostname -s)

# The records of a file: "v seq host" a line; text records (base64 lines
# between "herd-telemetry 1" and "end") with "text" as arg[2].
cat >"$tmp/decode.lua" <<'LUA'
local f = assert(io.open(arg[1], "rb"))
local d = f:read("a")
f:close()
local b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function unbase64(s)
	local bits, out = 0, {}
	local acc = 0
	for c in s:gmatch("[^=]") do
		acc = acc * 64 + (b64:find(c, 1, true) - 1)
		bits = bits + 6
		if bits >= 8 then
			bits = bits - 8
			out[#out + 1] = string.char((acc >> bits) & 255)
		end
	end
	return table.concat(out)
end
local function show(s)
	print(s.v, s.seq, s.host)
end
if arg[2] == "text" then
	local lines, rec = {}, nil
	for line in d:gmatch("([^\n]*)\n") do
		if line == "herd-telemetry 1" then
			rec = {}
		elseif line == "end" then
			show(herd.msgpack.unpack(unbase64(table.concat(rec))))
			rec = nil
		else
			assert(rec and #line <= 76, "not a text record: " .. line)
			rec[#rec + 1] = line
		end
	end
	assert(rec == nil, "a text record cut short")
	return
end
local at = 1
while at <= #d do
	assert(at + 3 <= #d, "a length cut short")
	local len = string.unpack(">I4", d, at)
	assert(len > 0 and at + 3 + len <= #d, "a record cut short")
	show(herd.msgpack.unpack(d:sub(at + 4, at + 3 + len)))
	at = at + 4 + len
end
LUA

# waits (at most 10 s) for process $1 to end; its exit status in $rc
wait_end() {
	local k
	for ((k = 0; k < 100; k++)); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -0 "$1" 2>/dev/null && { kill -KILL "$1"; fail "$2: still running 10 s on"; }
	wait "$1"
	rc=$?
}

# --- three samples, decoded
timeout 20 "$HERD" probe --watch --period 100 --count 3 < <(sleep 30) >"$tmp/frames" 2>"$tmp/err"
rc=$?
[[ $rc == 0 ]] || fail "--count 3 exited $rc: $(cat "$tmp/err")"
[[ ! -s $tmp/err ]] || fail "--count 3 said: $(cat "$tmp/err")"
"$HERD" "$tmp/decode.lua" "$tmp/frames" >"$tmp/decoded" 2>&1 || fail "the records do not decode: $(cat "$tmp/decoded")"
want=$(printf '1\t1\t%s\n1\t2\t%s\n1\t3\t%s' "$host" "$host" "$host")
[[ $(cat "$tmp/decoded") == "$want" ]] || fail "records: $(cat "$tmp/decoded"), want: $want"

timeout 20 "$HERD" probe --watch --period 100 --count 2 --text < <(sleep 30) >"$tmp/text" 2>"$tmp/err" \
	|| fail "--text exited $?: $(cat "$tmp/err")"
awk 'length($0) > 76 { exit 1 }' "$tmp/text" || fail "--text has lines over 76 characters"
"$HERD" "$tmp/decode.lua" "$tmp/text" text >"$tmp/decoded" 2>&1 || fail "the text records do not decode: $(cat "$tmp/decoded")"
want=$(printf '1\t1\t%s\n1\t2\t%s' "$host" "$host")
[[ $(cat "$tmp/decoded") == "$want" ]] || fail "text records: $(cat "$tmp/decoded"), want: $want"

timeout 20 "$HERD" probe --watch --period 100 --count 2 --json < <(sleep 30) >"$tmp/json" 2>"$tmp/err" \
	|| fail "--json exited $?: $(cat "$tmp/err")"
python3 - "$tmp/json" "$host" <<'PY' || fail "--json: $(cat "$tmp/json")"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
docs = [json.loads(l) for l in lines]
assert [d["seq"] for d in docs] == [1, 2], docs
assert all(d["host"] == sys.argv[2] and d["v"] == 1 for d in docs), docs
PY

# --- stdin's end stops it: a FIFO whose writer closes
# (A file of its own: the shell creates it only once the FIFO's open
# returns, and the file of an earlier case would be seen full before.)
mkfifo "$tmp/in"
"$HERD" probe --watch --period 100 <"$tmp/in" >"$tmp/fifo_frames" 2>"$tmp/err" &
pid=$!
exec 4>"$tmp/in"
# (30 s: the first record waits for a sampler under the sanitizers on a
# machine the other tests keep busy; once, 10 s was not enough there)
for ((k = 0; k < 300; k++)); do
	[[ $(stat -c %s "$tmp/fifo_frames" 2>/dev/null) -gt 0 ]] && break
	sleep 0.1
done
[[ $(stat -c %s "$tmp/fifo_frames" 2>/dev/null) -gt 0 ]] \
	|| fail "no record within 30 s: $(cat "$tmp/err"; ps -o pid,stat,wchan:32,etime,args -p $pid)"
echo "input is read and dropped" >&4
exec 4>&-
wait_end $pid "after its stdin ended"
[[ $rc == 0 ]] || fail "its stdin's end: exit $rc, want 0: $(cat "$tmp/err")"
[[ ! -s $tmp/err ]] || fail "its stdin's end: it said: $(cat "$tmp/err")"
"$HERD" "$tmp/decode.lua" "$tmp/fifo_frames" >"$tmp/decoded" 2>&1 || fail "cut short at the end: $(cat "$tmp/decoded")"

# --- SIGTERM and SIGHUP stop it, exit status 0, whole records
for sig in TERM HUP; do
	"$HERD" probe --watch --period 100 < <(sleep 30) >"$tmp/frames" 2>"$tmp/err" &
	pid=$!
	sleep 0.5
	kill -$sig $pid
	wait_end $pid "after SIG$sig"
	[[ $rc == 0 ]] || fail "SIG$sig: exit $rc, want 0: $(cat "$tmp/err")"
	"$HERD" "$tmp/decode.lua" "$tmp/frames" >"$tmp/decoded" 2>&1 || fail "SIG$sig: $(cat "$tmp/decoded")"
	[[ -s $tmp/decoded ]] || fail "SIG$sig: no record in 0.5 s"
done

# --- stdin at /dev/null (srun's other tasks, nohup, a batch script): it
# cannot tell the watcher's end, so it streams until --count records are
# written, or a signal; --json into a file ends on a whole line
timeout 20 "$HERD" probe --watch --period 100 --count 3 --json </dev/null >"$tmp/json" 2>"$tmp/err" \
	|| fail "stdin at /dev/null: exit $?: $(cat "$tmp/err")"
[[ $(wc -l <"$tmp/json") == 3 ]] || fail "stdin at /dev/null: $(cat "$tmp/json")"
"$HERD" probe --watch --period 100 --json </dev/null >"$tmp/json" 2>"$tmp/err" &
pid=$!
for ((k = 0; k < 100; k++)); do
	[[ $(wc -l <"$tmp/json") -ge 2 ]] && break
	sleep 0.1
done
kill -TERM $pid
wait_end $pid "SIGTERM, stdin at /dev/null"
[[ $rc == 0 ]] || fail "SIGTERM, stdin at /dev/null: exit $rc: $(cat "$tmp/err")"
python3 - "$tmp/json" <<'PY' || fail "--json into a file, stopped: $(cat "$tmp/json")"
import json, sys
text = open(sys.argv[1]).read()
assert text.endswith("\n"), "a cut line at the end"
seqs = [json.loads(l)["seq"] for l in text.splitlines()]
assert len(seqs) >= 2 and seqs == list(range(1, len(seqs) + 1)), seqs
PY

# --- a reader gone (EPIPE): exit status 0
timeout 20 "$HERD" probe --watch --period 100 < <(sleep 30) 2>"$tmp/err" | head -c 3 >/dev/null
rc=${PIPESTATUS[0]}
[[ $rc == 0 ]] || fail "a reader gone: exit $rc, want 0: $(cat "$tmp/err")"

# --- usage errors
out=$("$HERD" probe --watch --period 10 2>&1 </dev/null)
rc=$?
[[ $rc == 2 ]] || fail "--period 10: exit $rc, want 2: $out"
has "$out" "herd probe: --period 10: "
out=$("$HERD" probe --watch --count 0 2>&1 </dev/null)
[[ $? == 2 ]] || fail "--count 0: not a usage error: $out"
has "$out" "herd probe: --count 0: "
out=$("$HERD" probe --period 500 2>&1 </dev/null)
[[ $? == 2 ]] || fail "--period without --watch: not a usage error: $out"
has "$out" "herd probe: --period is for a stream of samples: add --watch"

# --- a reader that never reads: a FIFO of one page, held open and never
# drained.  Samples are dropped, not held (counted: at least 50 of the
# 10 s), and after 10 s of nothing taken it gives up.
python3 - "$HERD" "$tmp" <<'PY' || fail "a reader that never reads"
import fcntl, os, re, subprocess, sys, time
herd, tmp = sys.argv[1], sys.argv[2]
fifo = os.path.join(tmp, "stuck")
os.mkfifo(fifo)
fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
fcntl.fcntl(fd, 1031, 4096)  # F_SETPIPE_SZ: one page
stdin_r, stdin_w = os.pipe()
with open(fifo, "wb") as out:
    t0 = time.monotonic()
    p = subprocess.Popen([herd, "probe", "--watch", "--period", "100"], stdin=stdin_r,
                         stdout=out, stderr=subprocess.PIPE)
os.close(stdin_r)
while p.poll() is None and time.monotonic() - t0 < 40:
    time.sleep(0.1)
if p.poll() is None:
    p.kill()
    sys.exit("still running 40 s on")
err = p.stderr.read().decode()
held = len(os.read(fd, 1 << 20))
print("exit %d after %.1f s, %d bytes in the FIFO: %s" % (
    p.returncode, time.monotonic() - t0, held, err.strip()))
assert p.returncode == 1, p.returncode
m = re.match(r"herd probe: the reader took nothing for 10 s \((\d+) samples dropped meanwhile\)\n$", err)
assert m and int(m.group(1)) >= 50, err
assert 0 < held <= 4096, held
PY
exit 0
