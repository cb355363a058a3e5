#!/usr/bin/env bash
# The checks that need a GPU, in one go, for a build made with CUDA:
#
#   bench/gpu_checks.sh BUILD_DIR [OUT_DIR]
#
# It prints the machine (GPU, driver, the NCCL PyTorch carries), runs
# `herd health --level 2`, the `gpu`-labelled tests, herd's discovery on the real GPU, bench_kernels
# twice (the second run shows the spread), and the kernel test under
# compute-sanitizer's memcheck when that tool is there.  Logs and
# `herd discover --json` go to OUT_DIR (default: the current directory).
# Every step runs whatever the one before it did; the exit status is 1 when
# any failed.
set -uo pipefail
b=${1:?usage: bench/gpu_checks.sh BUILD_DIR [OUT_DIR]}
out=${2:-.}
bin=$b/bin
fails=0
step() { echo; echo "## $*"; }
run() { "$@" || { echo "FAILED ($?): $*"; fails=$((fails + 1)); }; }

step "machine, $(date -u +%Y-%m-%dT%H:%MZ)"
run nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem,power.limit \
  --format=csv
python3 -c 'import torch; print("torch", torch.__version__, "NCCL", ".".join(map(str, torch.cuda.nccl.version())))' ||
  echo "no torch with CUDA"
ldd "$bin/herd" "$bin/test_kernels" | grep -E 'not found|nccl|cuda|lua|edit|hwloc|msgpack' | sort -u
step "herd on the GPU"
run "$bin/herd" --version
run "$bin/herd" discover
"$bin/herd" discover --json >"$out/discover.json" 2>&1 || echo "FAILED: herd discover --json"
run "$bin/herd" gpus
step "herd health --level 2"
run "$bin/herd" health --level 2 --seconds 5
"$bin/herd" health --level 2 --seconds 5 --json >"$out/health.json" 2>&1
echo "herd health --json exit status: $?"
step "gpu tests"
run ctest --test-dir "$b" -L gpu --output-on-failure -V
step "bench_kernels"
for i in 1 2; do
  run bash -o pipefail -c '"$0" --bytes 1G --repeats 20 | tee "$1"' "$bin/bench_kernels" \
    "$out/bench_kernels.$i.txt"
done
if command -v compute-sanitizer >/dev/null; then
  step "test_kernels under compute-sanitizer memcheck"
  run timeout 180 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/test_kernels" >"$out/memcheck.log" 2>&1
  tail -5 "$out/memcheck.log"
fi
step "done: $fails failed"
[[ $fails -eq 0 ]]
