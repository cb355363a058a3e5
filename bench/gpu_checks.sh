#!/usr/bin/env bash
# The checks that need a GPU, in one go, for a build made with CUDA:
#
#   bench/gpu_checks.sh BUILD_DIR [OUT_DIR]
#
# It prints the machine (GPU, driver, the NCCL PyTorch carries), runs
# `herd health --level 2`, the `gpu`-labelled tests, herd's discovery on the real GPU, bench_kernels
# twice (the second run shows the spread), `herd bench allreduce --device
# gpu` against bench_nccl_allreduce (raw NCCL) three times each,
# alternating, calls queued (-z 0, as nccl-tests) then waited for one by one
# (-z 1), with the ratios of the in-place medians, bench_ckpt --device gpu
# (save from and restore into GPU memory beside dd and read(2), on the
# disk under CKPT_DIR, default /var/tmp), and the kernel test under
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
step "herd bench allreduce --device gpu against raw NCCL, same sizes, alternating"
for z in 0 1; do
  for i in 1 2 3; do
    run bash -o pipefail -c '"$0" bench allreduce --device gpu -z "$2" -b 8 -e 1G -f 8 --iters 50 -w 10 -c 0 --json >"$1"' \
      "$bin/herd" "$out/herd_gpu.z$z.$i.json" "$z"
    run bash -o pipefail -c '"$0" 8 1073741824 8 50 10 "$2" >"$1"' "$bin/bench_nccl_allreduce" \
      "$out/nccl_raw.z$z.$i.json" "$z"
  done
done
python3 - "$out" <<'PY' || echo "FAILED: the comparison"
import json, statistics, sys, glob
d = sys.argv[1]
def load(pat):
    rows = {}
    for f in sorted(glob.glob(f"{d}/{pat}")):
        for line in open(f):
            r = json.loads(line)
            key = r["size"] if "size" in r else r["bytes"]
            rows.setdefault(key, []).append(r["in_place"]["time_us"])
    return rows
for z, how in (("0", "queued, one wait (nccl-tests)"), ("1", "each call waited for")):
    h, n = load(f"herd_gpu.z{z}.*.json"), load(f"nccl_raw.z{z}.*.json")
    print(f"-z {z}: {how}; in place, medians of 3")
    print("%12s %14s %14s %8s" % ("bytes", "herd us", "NCCL us", "herd/NCCL"))
    for b in sorted(h):
        if b in n:
            mh, mn = statistics.median(h[b]), statistics.median(n[b])
            print("%12d %14.2f %14.2f %8.3f" % (b, mh, mn, mh / mn))
PY
step "herd bench --device gpu, checked: allreduce in every datatype, then the other operations"
for d in float32 bfloat16 float16 float8_e4m3 int32; do
  run "$bin/herd" bench allreduce --device gpu -d "$d" -b 8 -e 64M -f 64 --iters 5 -w 2 -c 1
done
for op in reduce broadcast allgather reduce_scatter alltoall sendrecv; do
  run "$bin/herd" bench "$op" --device gpu -b 8 -e 64M -f 64 --iters 5 -w 2 -c 1
done
step "bench_ckpt --device gpu: a checkpoint of 1 GiB of GPU memory on disk"
ck=$(mktemp -d -p "${CKPT_DIR:-/var/tmp}")
run bash -o pipefail -c '"$0" "$1/b" --bytes 1G --repeats 3 --device gpu | tee "$2"' \
  "$bin/bench_ckpt" "$ck" "$out/bench_ckpt_gpu.txt"
rm -rf "$ck"
if command -v compute-sanitizer >/dev/null; then
  step "test_kernels under compute-sanitizer memcheck"
  run timeout 180 compute-sanitizer --tool memcheck --error-exitcode 9 "$bin/test_kernels" >"$out/memcheck.log" 2>&1
  tail -5 "$out/memcheck.log"
fi
step "done: $fails failed"
[[ $fails -eq 0 ]]
