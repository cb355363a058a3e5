#!/usr/bin/env bash
# bench/busy_compare.sh - small allreduce on a busy machine: herd and Open
# MPI side by side, in one run, under the same background load.
#
# The script starts HOGS busy loops (default: one per CPU) and keeps them
# running for the whole run, then runs, for 2 and 4 local ranks, float32
# sum, per-call median and 99th percentile (out of place):
#
#   herd shm           herd bench --np N (herd's own launch: ranks unbound)
#   herd shm, mpirun   the same herd bench ranks started by mpirun, so that
#                      they sit where Open MPI puts its own ranks
#   herd tcp           herd bench --np N with HERD_TRANSPORT=tcp
#   ompi               mpirun as users run it: its defaults, which on a
#                      node with more cores than ranks bind each rank to a
#                      core (2 ranks here) and, when the ranks outnumber the
#                      cores (4 ranks on 2), bind none and set
#                      mpi_yield_when_idle (Open MPI 4.x); --oversubscribe
#                      only lets 4 ranks start on 2 cores, btl self,vader
#   ompi unbound       the same with --bind-to none (placed like herd's own)
#   ompi yield         the same with --mca mpi_yield_when_idle 1 (yield
#                      whenever idle, however many ranks)
#
# herd's ranks and Open MPI's report each call's time (herd bench --json,
# bench_mpi_allreduce -j 1: every call timed from the end of the one
# before, each rank's median and 99th percentile, the slowest rank's).
# herd shm and herd tcp sweep 8 B to SWEEP_MAX (x8), and shared memory is
# compared with TCP at every size; the others run 8 B to 4 KiB.  Each run
# is repeated REPEAT times (round-robin over all the runs) and every figure
# is the median of its repeats.  The busy loops are stopped (by pid) when
# the script ends, however it ends.
#
# Builds nothing: it uses BUILD_DIR (default build) as built by
#   cmake -S . -B build && cmake --build build -j$(nproc)
# with openmpi-bin and libopenmpi-dev installed (.ci/deps).
#
# usage: bench/busy_compare.sh [BUILD_DIR]
#   environment: HOGS (busy loops, default nproc; 0 for an idle run),
#                ITERS (2000), WARMUP (100), REPEAT (3), NPS ("2 4"),
#                SWEEP_MAX (2M), OMPI_RUNS ("default unbound yield"),
#                RUN_TIMEOUT (seconds per run, 900), KEEP (a directory to
#                keep every run's output in; by default they are deleted)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
HERD=$BUILD/bin/herd
MPI=$BUILD/bin/bench_mpi_allreduce
HOGS=${HOGS:-$(nproc)}
ITERS=${ITERS:-2000}
WARMUP=${WARMUP:-100}
REPEAT=${REPEAT:-3}
NPS=${NPS:-2 4}
SWEEP_MAX=${SWEEP_MAX:-2M}
OMPI_RUNS=${OMPI_RUNS:-default unbound yield}
RUN_TIMEOUT=${RUN_TIMEOUT:-900}

for p in "$HERD" "$MPI"; do
	[[ -x $p ]] || { echo "busy_compare.sh: $p is missing: build first (see the top of $0)" >&2; exit 2; }
done
command -v mpirun >/dev/null || { echo "busy_compare.sh: mpirun not found (openmpi-bin)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "busy_compare.sh: python3 not found" >&2; exit 2; }
for r in $OMPI_RUNS; do
	case $r in default|unbound|yield) ;;
	*) echo "busy_compare.sh: OMPI_RUNS: '$r' is not one of default, unbound, yield" >&2; exit 2 ;;
	esac
done

# Open MPI refuses root without these; --oversubscribe lets 4 ranks start on 2 cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# shellcheck disable=SC2054  # self,vader is one argument
MPIRUN=(mpirun --oversubscribe --mca btl self,vader)
declare -A OMPI_FLAGS=([default]="" [unbound]="--bind-to none" [yield]="--mca mpi_yield_when_idle 1")

hogs=()
stop_hogs() {
	local p
	for p in "${hogs[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	for p in "${hogs[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	hogs=()
}
if [[ -n ${KEEP:-} ]]; then
	out=$KEEP
	mkdir -p "$out"
	trap 'stop_hogs' EXIT
else
	out=$(mktemp -d)
	trap 'stop_hogs; rm -rf "$out"' EXIT
fi
trap 'exit 130' INT
trap 'exit 143' TERM

echo "# herd vs Open MPI, small allreduce on a busy machine — $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "## machine"
echo "host:    $(hostname)"
echo "nproc:   $(nproc)"
echo "cpu:     $(lscpu | sed -n 's/^Model name: *//p' | head -1)"
echo "kernel:  $(uname -sr)"
echo "os:      $(. /etc/os-release && echo "$PRETTY_NAME")"
echo "virt:    $(lscpu | sed -n 's/^Hypervisor vendor: *//p' | head -1)"
echo "## versions"
echo "herd:    $("$HERD" --version | head -1)"
echo "openmpi: $(mpirun --version 2>/dev/null | head -1)"
echo "## settings"
echo "HOGS=$HOGS ITERS=$ITERS WARMUP=$WARMUP REPEAT=$REPEAT NPS=\"$NPS\" SWEEP_MAX=$SWEEP_MAX" \
     "OMPI_RUNS=\"$OMPI_RUNS\""
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "load average before the busy loops: $(load)"
if awk '{ exit !($1 > 0.5) }' /proc/loadavg; then
	echo "WARNING: this machine is already busy (load $(load)) before the busy loops:" \
	     "the figures will be noisier — busiest processes:"
	ps -eo pcpu,comm --sort=-pcpu | sed -n '2,6p'
fi

for _ in $(seq 1 "$HOGS"); do
	(exec sh -c 'while :; do :; done') &
	hogs+=($!)
done
echo "busy loops: $HOGS, pids ${hogs[*]:-none}"

# run NAME K CMD...: runs a benchmark with a time limit, keeps its JSON
# lines as $out/NAME.K.json, and shows the command of the first repeat.
run() {
	local name=$1 k=$2
	shift 2
	if ! timeout "$RUN_TIMEOUT" "$@" >"$out/$name.$k.json" 2>"$out/$name.$k.err"; then
		echo "\$ $*"
		cat "$out/$name.$k.json" "$out/$name.$k.err"
		echo "busy_compare.sh: $name failed (or ran past ${RUN_TIMEOUT} s)" >&2
		exit 1
	fi
	if [[ $k == 1 ]]; then
		echo "\$ $*"
	fi
}

# herd bench's timed calls are --iters (its -n is the rank count); the MPI
# program's are nccl-tests' -n
common=(-w "$WARMUP" -c 1)
small=(-b 8 -e 4K -f 8 "${common[@]}")
sweep=(-b 8 -e "$SWEEP_MAX" -f 8 "${common[@]}")
echo
echo "## commands (the first repeat)"
rounds=()
for k in $(seq 1 "$REPEAT"); do
	for np in $NPS; do
		run "herd-shm-$np" "$k" env -u HERD_TRANSPORT "$HERD" bench allreduce "${sweep[@]}" --iters "$ITERS" -n "$np" --json
		run "herd-tcp-$np" "$k" env HERD_TRANSPORT=tcp "$HERD" bench allreduce "${sweep[@]}" --iters "$ITERS" -n "$np" --json
		run "herd-shm-mpirun-$np" "$k" "${MPIRUN[@]}" -x HERD_TRANSPORT=auto -n "$np" "$HERD" bench allreduce "${small[@]}" --iters "$ITERS" --json
		for r in $OMPI_RUNS; do
			# shellcheck disable=SC2086  # the flags are words
			run "ompi-$r-$np" "$k" "${MPIRUN[@]}" ${OMPI_FLAGS[$r]} -n "$np" "$MPI" "${small[@]}" -n "$ITERS" -j 1
		done
	done
	rounds+=("round $k of $REPEAT done at $(date -u +%H:%M:%S), load $(load)")
done
stop_hogs
echo
printf '%s\n' "${rounds[@]}"
echo "busy loops stopped; load average at the end: $(load)"
[[ -n ${KEEP:-} ]] && echo "every run's output is in $KEEP"

echo
python3 - "$out" "$REPEAT" "$NPS" "$OMPI_RUNS" <<'PY'
import json, statistics, sys
out, repeat, nps, ompi_runs = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()

def table(name):
    """{size: (median_us, p99_us, wrong)}: medians over the repeats, out of place."""
    runs = []
    for k in range(1, repeat + 1):
        rows = {}
        for line in open(f"{out}/{name}.{k}.json"):
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            o = r["out_of_place"]
            rows[r["size"]] = (o["median_us"], o["p99_us"], (o["wrong"] or 0) + ((r.get("in_place") or {}).get("wrong") or 0))
        runs.append(rows)
    med = {}
    for size in runs[0]:
        got = [r[size] for r in runs if size in r]
        med[size] = (statistics.median(g[0] for g in got), statistics.median(g[1] for g in got),
                     sum(g[2] for g in got))
    return med

def human(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"

def cell(t, size):
    return f"{t[size][0]:.2f} / {t[size][1]:.1f}" if size in t else "-"

cols = [("herd shm", "herd-shm"), ("herd shm, mpirun", "herd-shm-mpirun"), ("herd tcp", "herd-tcp")]
cols += [(f"ompi {r}", f"ompi-{r}") for r in ompi_runs]
small = (8, 512, 4096)
print(f"## per-call median / 99th percentile (us), out of place, medians of {repeat} runs")
print()
print("| ranks | size | " + " | ".join(c for c, _ in cols) + " |")
print("|---|---|" + "---|" * len(cols))
tables = {np: {key: table(f"{key}-{np}") for _, key in cols} for np in nps}
wrong = sum(v[2] for np in nps for t in tables[np].values() for v in t.values())
for np in nps:
    for size in small:
        print(f"| {np} | {human(size)} | " +
              " | ".join(cell(tables[np][key], size) for _, key in cols) + " |")

verdicts = []
def target(what, h, p):
    ok = h <= p
    verdicts.append(ok)
    print(f"- {'met   ' if ok else 'MISSED'} {what}: {h:.2f} against {p:.2f} us"
          f"{'' if ok else f' ({h / p:.2f}x)'}")

print()
print("## targets: herd shm no worse than Open MPI as users run it (ompi default)")
for np in nps:
    h, o = tables[np]["herd-shm"], tables[np].get("ompi-default")
    for size in small:
        if o is None or size not in o or size not in h:
            continue
        target(f"{np} ranks, {human(size)}, median", h[size][0], o[size][0])
        target(f"{np} ranks, {human(size)}, p99", h[size][1], o[size][1])

print()
print("## targets: shared memory never slower than TCP (herd shm against herd tcp)")
for np in nps:
    s, t = tables[np]["herd-shm"], tables[np]["herd-tcp"]
    for size in sorted(s):
        if size in t:
            target(f"{np} ranks, {human(size)}, median", s[size][0], t[size][0])
            target(f"{np} ranks, {human(size)}, p99", s[size][1], t[size][1])

print()
print(f"## {sum(verdicts)} of {len(verdicts)} targets met; wrong elements: {wrong}")
PY
