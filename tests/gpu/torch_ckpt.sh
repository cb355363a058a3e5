#!/usr/bin/env bash
# A checkpoint of CUDA tensors that PyTorch made, saved and restored by
# libherd and exported to safetensors by `herd ckpt export`, which the
# safetensors package loads back (tests/gpu/torch_ckpt.py says how).
# Skips without a python3 whose torch sees a CUDA GPU and has safetensors.
set -euo pipefail
herd=$1
lib=$(dirname "$herd")/../lib/libherd.so
if ! python3 -c 'import sys, torch, safetensors; sys.exit(0 if torch.cuda.is_available() else 1)' \
  2>/dev/null; then
  echo "skipped: no python3 with safetensors and a torch that sees a CUDA GPU"
  exit 77
fi
# A libherd built with the sanitizers needs their runtimes loaded first
# (python is not built with them); python's own allocations at exit are
# not libherd's leaks.
pre=$(ldd "$lib" | awk '/lib(asan|ubsan)\.so/ {printf "%s%s", s, $3; s=":"}')
if [[ -n $pre ]]; then
  export LD_PRELOAD=$pre ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0
fi
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
# staging of 8 MiB: the 16 MB tensor is staged and restored in pieces
HERD_CKPT_STAGING_BYTES=8M python3 tests/gpu/torch_ckpt.py "$herd" "$lib" "$d/ck"
echo "ok   CUDA tensors through herd's checkpoint and safetensors"
