#!/usr/bin/env bash
# bench/compare.sh - `herd bench allreduce` side by side with its peers, in
# one run, on this machine:
#
#   herd (shared memory)        vs  Open MPI, btl self,vader (shared memory),
#                                   its default algorithm choice, and its ring
#   herd (HERD_TRANSPORT=tcp)   vs  Gloo's ring-chunked allreduce over TCP
#
# float32 sum, 2 and 4 local ranks: a sweep 8 B .. 128 MiB (x8) and a
# latency run at 8 B against Open MPI; 16 and 128 MiB against Gloo.  Each
# run is repeated REPEAT times (round-robin over all the runs) and every
# figure is the median of its repeats.  Prints the machine, the versions,
# the load, every command and its first table, then the pairs with their
# ratios and the targets of bench/RESULTS.md.
#
# Builds nothing: it uses BUILD_DIR (default build) as built by
#   cmake -S . -B build && cmake --build build -j$(nproc)
# with openmpi-bin, libopenmpi-dev and libgloo-dev installed (.ci/deps).
#
# usage: bench/compare.sh [BUILD_DIR]
#   environment: ITERS (20), WARMUP (5), LAT_ITERS (2000), LAT_WARMUP (200),
#                REPEAT (5), NPS ("2 4"), KEEP (a directory to keep every
#                run's output in; by default they are shown for the first
#                repeat and deleted)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
HERD=$BUILD/bin/herd
MPI=$BUILD/bin/bench_mpi_allreduce
GLOO=$BUILD/bin/bench_gloo_allreduce
ITERS=${ITERS:-20}
WARMUP=${WARMUP:-5}
LAT_ITERS=${LAT_ITERS:-2000}
LAT_WARMUP=${LAT_WARMUP:-200}
REPEAT=${REPEAT:-5}
NPS=${NPS:-2 4}

for p in "$HERD" "$MPI" "$GLOO"; do
	[[ -x $p ]] || { echo "compare.sh: $p is missing: build first (see the top of $0)" >&2; exit 2; }
done
command -v mpirun >/dev/null || { echo "compare.sh: mpirun not found (openmpi-bin)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "compare.sh: python3 not found" >&2; exit 2; }

# Open MPI refuses root without these; --oversubscribe lets 4 ranks share 2 cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --oversubscribe --mca btl self,vader)

if [[ -n ${KEEP:-} ]]; then
	out=$KEEP
	mkdir -p "$out"
else
	out=$(mktemp -d)
	trap 'rm -rf "$out"' EXIT
fi

echo "# herd bench vs Open MPI and Gloo — $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "## machine"
echo "host:    $(hostname)"
echo "nproc:   $(nproc)"
echo "cpu:     $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
echo "caches:  $(lscpu | sed -n 's/^L\([23]\) cache: *\(.*\)/L\1 \2/p' | paste -sd, -)"
echo "memory:  $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "kernel:  $(uname -sr)"
echo "os:      $(. /etc/os-release && echo "$PRETTY_NAME")"
echo "virt:    $(lscpu | sed -n 's/^Hypervisor vendor: *//p' | head -1)"
echo "## versions"
echo "herd:    $("$HERD" --version)"
echo "openmpi: $(mpirun --version 2>/dev/null | head -1)"
echo "gloo:    libgloo-dev $(dpkg-query -W -f='${Version}' libgloo-dev 2>/dev/null || echo '?')"
echo "cc:      $(cc --version | head -1)"
echo "## settings"
echo "ITERS=$ITERS WARMUP=$WARMUP LAT_ITERS=$LAT_ITERS LAT_WARMUP=$LAT_WARMUP REPEAT=$REPEAT NPS=\"$NPS\""
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "load average at start: $(load)"
if awk '{ exit !($1 > 0.5) }' /proc/loadavg; then
	echo "WARNING: this machine is busy (load $(load)): the figures will be noisy" \
	     "— busiest processes:"
	ps -eo pcpu,comm --sort=-pcpu | sed -n '2,6p'
fi

# run NAME K CMD...: runs a benchmark, keeps its output as $out/NAME.K.txt,
# shows the command, and the table of the first repeat.
run() {
	local name=$1 k=$2
	shift 2
	if ! "$@" >"$out/$name.$k.txt" 2>"$out/$name.$k.err"; then
		echo "\$ $*"
		cat "$out/$name.$k.txt" "$out/$name.$k.err"
		echo "compare.sh: $name failed" >&2
		exit 1
	fi
	if [[ $k == 1 ]]; then
		echo
		echo "## $name (the first of $REPEAT runs)"
		echo "\$ $*"
		cat "$out/$name.$k.txt"
	fi
}

sweep=(-b 8 -e 128M -f 8 -n "$ITERS" -w "$WARMUP" -c 1)
lat=(-b 8 -e 8 -n "$LAT_ITERS" -w "$LAT_WARMUP" -c 1)
big=(-b 16M -e 128M -f 8 -n "$ITERS" -w "$WARMUP" -c 1)
# herd bench's -n is its number of ranks: the same arguments with --iters.
herd_sweep=("${sweep[@]/#-n/--iters}") herd_lat=("${lat[@]/#-n/--iters}") herd_big=("${big[@]/#-n/--iters}")
# Open MPI's own ring (coll/tuned algorithm 4), for reference next to its default choice.
ring=(--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4)
rounds=()
# The repeats go round all the runs, so that a disturbance spreads over
# herd and its peers alike.
for k in $(seq 1 "$REPEAT"); do
	for np in $NPS; do
		run "herd-shm-sweep-$np" "$k" env -u HERD_TRANSPORT "$HERD" bench allreduce "${herd_sweep[@]}" -n "$np"
		run "mpi-sweep-$np" "$k" "${MPIRUN[@]}" -n "$np" "$MPI" "${sweep[@]}"
		run "mpi-ring-sweep-$np" "$k" "${MPIRUN[@]}" "${ring[@]}" -n "$np" "$MPI" "${sweep[@]}"
		run "herd-shm-lat-$np" "$k" env -u HERD_TRANSPORT "$HERD" bench allreduce "${herd_lat[@]}" -n "$np"
		run "mpi-lat-$np" "$k" "${MPIRUN[@]}" -n "$np" "$MPI" "${lat[@]}"
		run "herd-tcp-$np" "$k" env HERD_TRANSPORT=tcp "$HERD" bench allreduce "${herd_big[@]}" -n "$np"
		run "gloo-tcp-$np" "$k" "$GLOO" --np "$np" "${big[@]}"
	done
	rounds+=("round $k of $REPEAT done at $(date -u +%H:%M:%S), load $(load)")
done
echo
printf '%s\n' "${rounds[@]}"
echo
echo "load average at the end: $(load)"
[[ -n ${KEEP:-} ]] && echo "every run's output is in $KEEP"

echo
python3 - "$out" "$REPEAT" "$NPS" <<'PY'
import statistics, sys
out, repeat, nps = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()

def table(name):
    """{size: [oop_time, oop_busbw, ip_time, ip_busbw]} medians over repeats."""
    runs = []
    for k in range(1, repeat + 1):
        rows = {}
        for line in open(f"{out}/{name}.{k}.txt"):
            f = line.split()
            if not f or f[0].startswith("#"):
                continue
            num = lambda s: None if s == "N/A" else float(s)
            rows[int(f[0])] = [num(f[5]), num(f[7]), num(f[9]), num(f[11])]
        runs.append(rows)
    med = {}
    for size in runs[0]:
        cols = []
        for c in range(4):
            vals = [r[size][c] for r in runs if size in r and r[size][c] is not None]
            cols.append(statistics.median(vals) if vals else None)
        med[size] = cols
    return med

def human(n):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"

OOP_T, OOP_BW, IP_T, IP_BW = range(4)
print(f"## pairs (medians of {repeat} runs; ratio > 1 means herd is better)")
print()
print("| pair | ranks | size | metric | herd | peer | ratio | target | met |")
print("|---|---|---|---|---|---|---|---|---|")
verdicts = []

def row(pair, np, size, metric, h, p, higher_better, target):
    if h is None or p is None or h == 0 or p == 0:
        print(f"| {pair} | {np} | {human(size)} | {metric} | {h} | {p} | - | {target or ''} | - |")
        return
    ratio = h / p if higher_better else p / h
    met = ""
    if target:
        ok = ratio >= target - 1e-12
        met = "yes" if ok else f"NO ({ratio / target * 100:.0f}% of target)"
        verdicts.append((pair, np, size, metric, ratio, target, ok))
    unit = "GB/s" if higher_better else "us"
    print(f"| {pair} | {np} | {human(size)} | {metric} | {h:.2f} {unit} | {p:.2f} {unit} "
          f"| {ratio:.2f}x | {'>= %.1fx' % target if target else ''} | {met} |")

for np in nps:
    hs, ms = table(f"herd-shm-sweep-{np}"), table(f"mpi-sweep-{np}")
    hl, ml = table(f"herd-shm-lat-{np}"), table(f"mpi-lat-{np}")
    ht, gt = table(f"herd-tcp-{np}"), table(f"gloo-tcp-{np}")
    row("herd shm / Open MPI vader", np, 8, "time, out-of-place", hl[8][OOP_T], ml[8][OOP_T], False, 1.0)
    row("herd shm / Open MPI vader", np, 8, "time, in-place", hl[8][IP_T], ml[8][IP_T], False, None)
    mr = table(f"mpi-ring-sweep-{np}")
    for size, target in ((16 << 20, 1.5), (128 << 20, 2.0)):
        row("herd shm / Open MPI vader", np, size, "busbw, out-of-place", hs[size][OOP_BW], ms[size][OOP_BW], True, target)
        row("herd shm / Open MPI vader", np, size, "busbw, in-place", hs[size][IP_BW], ms[size][IP_BW], True, None)
        row("herd shm / Open MPI vader, ring forced", np, size, "busbw, out-of-place", hs[size][OOP_BW], mr[size][OOP_BW], True, None)
    for size, target in ((16 << 20, None), (128 << 20, 1.5)):
        # Gloo's ring-chunked allreduce works in place only.
        row("herd tcp / Gloo ring-chunked tcp", np, size, "busbw, in-place", ht[size][IP_BW], gt[size][IP_BW], True, target)
        row("herd tcp / Gloo ring-chunked tcp", np, size, "busbw, herd out-of-place", ht[size][OOP_BW], gt[size][IP_BW], True, None)

print()
print("## sweep, busbw out-of-place (GB/s), herd shm vs Open MPI vader")
print()
print("| size | " + " | ".join(f"herd {np} | ompi {np} | ratio {np}" for np in nps) + " |")
print("|---|" + "---|---|---|" * len(nps))
sweeps = {np: (table(f"herd-shm-sweep-{np}"), table(f"mpi-sweep-{np}")) for np in nps}
for size in sorted(sweeps[nps[0]][0]):
    cells = []
    for np in nps:
        h, m = sweeps[np][0].get(size), sweeps[np][1].get(size)
        hb, mb = (h[OOP_BW] if h else None), (m[OOP_BW] if m else None)
        ht_, mt = (h[OOP_T] if h else None), (m[OOP_T] if m else None)
        ratio = f"{mt / ht_:.2f}x" if ht_ and mt else "-"
        cells.append(f"{hb:.2f} ({ht_:.1f} us) | {mb:.2f} ({mt:.1f} us) | {ratio}")
    print(f"| {human(size)} | " + " | ".join(cells) + " |")

print()
missed = [v for v in verdicts if not v[6]]
print(f"## targets: {len(verdicts) - len(missed)} of {len(verdicts)} met")
for pair, np, size, metric, ratio, target, ok in verdicts:
    print(f"- {'met   ' if ok else 'MISSED'} {pair}, {np} ranks, {human(size)}, {metric}: "
          f"{ratio:.2f}x (target {target:.1f}x)")
PY
