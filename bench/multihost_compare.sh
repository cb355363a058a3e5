#!/usr/bin/env bash
# bench/multihost_compare.sh - allreduce between hosts, herd side by side
# with Open MPI and Gloo in one run, on the namespace cluster of the tests
# (tests/harness/netns.sh: each host a network namespace with its own
# sshd, veth links to a bridge, a docker0 and an unrouted lan1 as real
# hosts have), every host's link shaped with tc tbf to RATE both ways.
#
#   herd      herd launch --hosts h[1-H] -n N --per-node L, herd bench
#             allreduce (its default algorithm choice)
#   Open MPI  mpirun over the cluster's ssh, btl self,vader,tcp, its default
#             algorithm choice; btl_tcp_if_include and oob_tcp_if_include
#             eth0 (without them its ranks try the docker0 address that
#             every host carries and hang)
#   Gloo      bench_gloo_allreduce, one process per rank on its host, ring
#             chunked over TCP, meeting in a FileStore all hosts see
#   TCP       bench_tcp_pingpong between h1 and h2: the 8-byte round trip
#
# Shapes H x L (hosts x ranks per host): SHAPES, default "2x1 2x2 4x1".
# float32 sum, 8 B .. 128 MiB (x8); 8 B again with LAT_ITERS calls.  The
# link bound of an allreduce of S bytes over H hosts is the 2(H-1)/H * S
# bytes each host must send (and receive) over its link, divided by RATE.
# Every run is repeated REPEAT times (round-robin) and every figure is the
# median of its repeats.  Prints the machine, the commands, each first
# table, then the comparison with the targets of bench/RESULTS.md.
#
# Needs root (namespaces), iproute2, openssh-server, openmpi-bin and a
# build with the peers (bench_mpi_allreduce, bench_gloo_allreduce,
# bench_tcp_pingpong: .ci/deps, HERD_BUILD_BENCH).  Not in CI.
#
# usage: bench/multihost_compare.sh [BUILD_DIR]
#   environment: RATE (1gbit), SHAPES ("2x1 2x2 4x1"), REPEAT (3), ITERS (5),
#                WARMUP (1), LAT_ITERS (500), KEEP (a directory for every
#                run's output)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
HERD=$(cd "$BUILD/bin" && pwd)/herd
MPI=$(cd "$BUILD/bin" && pwd)/bench_mpi_allreduce
GLOO=$(cd "$BUILD/bin" && pwd)/bench_gloo_allreduce
PP=$(cd "$BUILD/bin" && pwd)/bench_tcp_pingpong
RATE=${RATE:-1gbit}
SHAPES=${SHAPES:-2x1 2x2 4x1}
REPEAT=${REPEAT:-3}
ITERS=${ITERS:-5}
WARMUP=${WARMUP:-1}
LAT_ITERS=${LAT_ITERS:-500}

for p in "$HERD" "$MPI" "$GLOO" "$PP"; do
	[[ -x $p ]] || { echo "multihost_compare.sh: $p is missing: build first" >&2; exit 2; }
done
command -v mpirun >/dev/null || { echo "multihost_compare.sh: mpirun not found (openmpi-bin)" >&2; exit 2; }
[[ $RATE =~ ^([0-9]+)([kmg]?)bit$ ]] || { echo "multihost_compare.sh: RATE like 1gbit, not $RATE" >&2; exit 2; }
case ${BASH_REMATCH[2]} in
k) rate_bps=$((BASH_REMATCH[1] * 1000)) ;;
m) rate_bps=$((BASH_REMATCH[1] * 1000000)) ;;
g) rate_bps=$((BASH_REMATCH[1] * 1000000000)) ;;
*) rate_bps=${BASH_REMATCH[1]} ;;
esac
maxhosts=0
for s in $SHAPES; do
	[[ $s =~ ^([0-9]+)x([0-9]+)$ ]] || { echo "multihost_compare.sh: a shape is HxL, not $s" >&2; exit 2; }
	((BASH_REMATCH[1] > maxhosts)) && maxhosts=${BASH_REMATCH[1]}
done

work=$(mktemp -d)
out=${KEEP:-$work/out}
mkdir -p "$out"
cluster=$work/cluster
trap 'bash tests/harness/netns.sh stop "$cluster" >/dev/null 2>&1; rm -rf "$work"' EXIT
bash tests/harness/netns.sh start "$cluster" "$maxhosts"
for ((i = 1; i <= maxhosts; i++)); do
	bash tests/harness/netns.sh shape "$cluster" "$i" "$RATE"
done
export HERD_SSH_ARGS="-F $cluster/ssh_config" HERD_PROGRAM=$HERD
unset HERD_ALGO HERD_TRANSPORT HERD_SOCKET_IFNAME

echo "# allreduce across hosts: herd vs Open MPI vs Gloo — $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "## machine"
echo "host:    $(hostname), $(nproc) CPUs ($(lscpu | sed -n 's/^Model name: *//p' | head -1)), $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "kernel:  $(uname -sr); $(. /etc/os-release && echo "$PRETTY_NAME")"
echo "herd:    $("$HERD" --version | head -1)"
echo "openmpi: $(mpirun --version 2>/dev/null | head -1)"
echo "gloo:    libgloo-dev $(dpkg-query -W -f='${Version}' libgloo-dev 2>/dev/null || echo '?')"
echo "links:   $maxhosts namespaces on a bridge, each link tc tbf rate $RATE burst 256kb both ways"
echo "## settings"
echo "SHAPES=\"$SHAPES\" REPEAT=$REPEAT ITERS=$ITERS WARMUP=$WARMUP LAT_ITERS=$LAT_ITERS"

# run NAME K CMD...: a benchmark into $out/NAME.K.txt; its command and, for
# the first repeat, its table.
run() {
	local name=$1 k=$2
	shift 2
	if ! timeout 900 "$@" >"$out/$name.$k.txt" 2>"$out/$name.$k.err"; then
		echo "\$ $*"
		cat "$out/$name.$k.txt" "$out/$name.$k.err"
		echo "multihost_compare.sh: $name failed" >&2
		exit 1
	fi
	if [[ $k == 1 ]]; then
		echo
		echo "## $name (the first of $REPEAT runs)"
		echo "\$ $*"
		grep -v '^\[' "$out/$name.$k.txt" || true
	fi
}

# gloo N L K NAME ARGS...: N ranks, L per host, rank r on host r/L + 1.
gloo() {
	local n=$1 l=$2 k=$3 name=$4 store pids=() r rc=0
	shift 4
	store=$work/gloo.$name.$k
	mkdir -p "$store"
	for ((r = n - 1; r >= 0; r--)); do
		local i=$((r / l + 1))
		if ((r == 0)); then
			run "$name" "$k" "$cluster/run" "$i" "$GLOO" --rank 0 --np "$n" --store "$store" \
				--addr "10.77.0.$i" "$@" || rc=1
		else
			timeout 900 "$cluster/run" "$i" "$GLOO" --rank "$r" --np "$n" --store "$store" \
				--addr "10.77.0.$i" "$@" >/dev/null 2>"$out/$name.$k.r$r.err" &
			pids+=($!)
		fi
	done
	for p in "${pids[@]}"; do wait "$p" || rc=1; done
	rm -rf "$store"
	((rc == 0)) || { echo "multihost_compare.sh: a Gloo rank of $name failed" >&2; exit 1; }
}

pingpong() {
	local k=$1 port=$((40000 + k))
	"$cluster/run" 2 "$PP" serve 10.77.0.2 "$port" &
	local srv=$!
	run "tcp-pingpong" "$k" "$cluster/run" 1 "$PP" ping 10.77.0.2 "$port" 5000
	wait "$srv"
}

sweep=(-b 8 -e 128M -f 8 -n "$ITERS" -w "$WARMUP" -c 1)
lat=(-b 8 -e 8 -n "$LAT_ITERS" -w 50 -c 1)
mpi_common=(--allow-run-as-root --mca plm_rsh_agent "ssh -F $cluster/ssh_config"
	    --mca btl self,vader,tcp --mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0)
rounds=()
for k in $(seq 1 "$REPEAT"); do
	pingpong "$k"
	for s in $SHAPES; do
		h=${s%x*} l=${s#*x} n=$((${s%x*} * ${s#*x}))
		mhosts=$(for ((i = 1; i <= h; i++)); do printf 'h%d:%d,' "$i" "$l"; done)
		for what in sweep lat; do
			declare -n args=$what
			run "herd-$what-$s" "$k" "$cluster/run" 1 "$HERD" launch --hosts "h[1-$h]" -n "$n" \
				--per-node "$l" --no-prefix -- "$HERD" bench allreduce "${args[@]/#-n/--iters}"
			run "mpi-$what-$s" "$k" "$cluster/run" 1 mpirun "${mpi_common[@]}" \
				--host "${mhosts%,}" -n "$n" "$MPI" "${args[@]}"
			gloo "$n" "$l" "$k" "gloo-$what-$s" "${args[@]}"
		done
	done
	rounds+=("round $k of $REPEAT done at $(date -u +%H:%M:%S)")
done
echo
printf '%s\n' "${rounds[@]}"

echo
python3 - "$out" "$REPEAT" "$SHAPES" "$rate_bps" "$RATE" <<'PY'
import statistics, sys
out, repeat, shapes, rate_bps, rate = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), int(sys.argv[4]), sys.argv[5]

def table(name):
    """{size: (best time, busbw)} medians over repeats; best of out-of-place and in-place
    (Gloo has in-place only)."""
    per = {}
    for k in range(1, repeat + 1):
        for line in open(f"{out}/{name}.{k}.txt"):
            f = line.split()
            if not f or f[0].startswith("#") or not f[0].isdigit():
                continue
            num = lambda s: None if s == "N/A" else float(s)
            t = [x for x in (num(f[5]), num(f[9])) if x is not None]
            per.setdefault(int(f[0]), []).append(min(t))
    return {s: statistics.median(v) for s, v in per.items()}

rtt = statistics.median(float(open(f"{out}/tcp-pingpong.{k}.txt").read().split()[1])
                        for k in range(1, repeat + 1))
print(f"## 8-byte TCP round trip h1 <-> h2: {rtt:.1f} us (median of {repeat} runs of 5000)")
print()
print(f"## allreduce float32 sum, time per call (medians of {repeat} runs), links {rate}")
print()
print("| shape | size | herd | Open MPI | Gloo | link bound | herd / bound | herd vs Open MPI | herd vs Gloo |")
print("|---|---|---|---|---|---|---|---|---|")
verdicts = []
def human(n):
    for u, d in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= d and n % d == 0:
            return f"{n // d} {u}"
    return f"{n} B"
def fmt(us):
    return f"{us / 1e6:.3f} s" if us >= 1e5 else f"{us / 1e3:.2f} ms" if us >= 1e3 else f"{us:.1f} us"
for s in shapes:
    h, l = map(int, s.split("x"))
    H, M, G = table(f"herd-sweep-{s}"), table(f"mpi-sweep-{s}"), table(f"gloo-sweep-{s}")
    HL, ML, GL = table(f"herd-lat-{s}"), table(f"mpi-lat-{s}"), table(f"gloo-lat-{s}")
    for size in sorted(H):
        ht, mt, gt = (HL if size == 8 else H)[size], (ML if size == 8 else M).get(size), (GL if size == 8 else G).get(size)
        bound = 2 * (h - 1) / h * size * 8 / rate_bps * 1e6
        eff = bound / ht
        print(f"| {s} | {human(size)} | {fmt(ht)} | {fmt(mt) if mt else '-'} | {fmt(gt) if gt else '-'} | "
              f"{fmt(bound)} | {eff * 100:.0f}% | {mt / ht:.2f}x | {gt / ht:.2f}x |"
              if mt and gt else f"| {s} | {human(size)} | {fmt(ht)} | - | - | {fmt(bound)} | {eff * 100:.0f}% | - | - |")
        if size in (16 << 20, 128 << 20) and mt:
            verdicts.append((f"{s} {human(size)}: herd / link bound >= 85%", eff, 0.85))
            verdicts.append((f"{s} {human(size)}: herd vs Open MPI >= 1.5x", mt / ht, 1.5))
            if l >= 2 and size == 128 << 20 and gt:
                verdicts.append((f"{s} {human(size)}: herd vs Gloo >= 1.4x", gt / ht, 1.4))
        if size == 8:
            verdicts.append((f"{s} 8 B: herd <= 4 TCP round trips ({ht / rtt:.1f})", 4 * rtt / ht, 1.0))
            if gt:
                verdicts.append((f"{s} 8 B: herd vs Gloo >= 5x", gt / ht, 5.0))
print()
missed = [v for v in verdicts if v[1] < v[2] - 1e-12]
print(f"## targets: {len(verdicts) - len(missed)} of {len(verdicts)} met")
for what, got, want in verdicts:
    print(f"- {'met   ' if got >= want - 1e-12 else 'MISSED'} {what}: {got:.2f} (target {want:.2f})")
PY
