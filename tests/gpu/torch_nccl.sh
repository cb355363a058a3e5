#!/usr/bin/env bash
# A client herd did not write: PyTorch's torch.distributed with the NCCL
# backend, started by `herd launch -n 1 --gpus-per-rank 1` on a GPU that
# herd's discovery found and its allocator leased.  Skips without a python3
# whose torch sees a CUDA GPU.
set -euo pipefail
herd=$1
if ! python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null
then
  echo "skipped: no python3 with a torch that sees a CUDA GPU"
  exit 77
fi
out=$("$herd" launch -n 1 --gpus-per-rank 1 -- python3 tests/gpu/torch_allreduce.py 2>&1) || {
  echo "$out"
  echo "FAIL: herd launch of torch_allreduce.py"
  exit 1
}
echo "$out"
grep -q ', 0 wrong$' <<<"$out" || { echo "FAIL: no clean all_reduce line"; exit 1; }
echo "ok   torch.distributed NCCL all_reduce under herd launch"
