#!/usr/bin/env bash
# bench/ckpt_many_tensors.sh - herd ckpt on files of many small tensors: a
# safetensors file of N tensors of two float32 each is generated (with
# python3), then timed through `herd ckpt import`, `verify`, `inspect`,
# `export` and `diff` of the step with itself.  Work that grows with the
# square of N shows as times that quadruple when N doubles.
#
# usage: bench/ckpt_many_tensors.sh [BUILD_DIR]
#   environment: COUNTS ("20000 40000 200000"), DIR (where to work; default
#                /var/tmp; a fresh directory inside it, removed after),
#                LIMIT (seconds a command may take before it is stopped and
#                reported as over the limit; default 600)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
HERD=$BUILD/bin/herd
COUNTS=${COUNTS:-20000 40000 200000}
LIMIT=${LIMIT:-600}

[[ -x $HERD ]] || { echo "ckpt_many_tensors.sh: $HERD is missing: build first" >&2; exit 2; }
command -v python3 >/dev/null || { echo "ckpt_many_tensors.sh: python3 is needed" >&2; exit 2; }
work=${DIR:-/var/tmp}/herd-ckpt-many.$$
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT

# timed NAME CMD...: prints NAME and the seconds CMD took (or "> LIMIT s").
timed() {
	local name=$1 start end rc
	shift
	start=$EPOCHREALTIME
	timeout "$LIMIT" "$@" >/dev/null && rc=0 || rc=$?
	end=$EPOCHREALTIME
	if [[ $rc == 124 ]]; then
		printf '%-8s > %s s\n' "$name" "$LIMIT"
	elif [[ $rc != 0 && ! ( $name == diff && $rc == 1 ) ]]; then
		printf '%-8s failed (exit %s)\n' "$name" "$rc"
	else
		awk -v n="$name" -v a="$start" -v b="$end" 'BEGIN { printf "%-8s %6.2f s\n", n, b - a }'
	fi
}

echo "# herd ckpt on many tensors — $(date -u '+%Y-%m-%d %H:%M:%S UTC'), $(hostname), nproc $(nproc)"
echo "# $($HERD --version | head -1); load: $(cut -d' ' -f1-3 /proc/loadavg)"
for n in $COUNTS; do
	python3 - "$n" "$work/in.safetensors" <<'EOF'
import json, struct, sys
n, path = int(sys.argv[1]), sys.argv[2]
h = {"__metadata__": {"source": "bench"}}
for i in range(n):
    h["layers.%d.w" % i] = {"dtype": "F32", "shape": [2], "data_offsets": [8 * i, 8 * i + 8]}
j = json.dumps(h, separators=(",", ":")).encode()
j += b" " * (-len(j) % 8)
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(j)) + j)
    f.write(b"".join(struct.pack("<2f", i, -i) for i in range(n)))
EOF
	echo "## $n tensors ($(stat -c %s "$work/in.safetensors") bytes)"
	rm -rf "$work/ck" "$work/out.safetensors"
	timed import "$HERD" ckpt import "$work/in.safetensors" "$work/ck" 0
	[[ -d $work/ck/step-000000000000 ]] || continue
	timed verify "$HERD" ckpt verify "$work/ck" 0
	timed inspect "$HERD" ckpt inspect "$work/ck" 0
	timed export "$HERD" ckpt export "$work/ck" 0 "$work/out.safetensors"
	timed diff "$HERD" ckpt diff "$work/ck" 0 0
done
