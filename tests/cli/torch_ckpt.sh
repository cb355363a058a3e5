#!/usr/bin/env bash
# PyTorch's tensors, saved and restored by libherd through its C API
# (ctypes) and exported by `herd ckpt export` to safetensors, which the
# safetensors package loads back: tests/gpu/torch_ckpt.py.
#
#   torch_ckpt.sh HERD [DEVICE]     DEVICE cpu (default) or cuda
#
# tests/gpu/torch_ckpt.sh runs it on CUDA tensors.  Uses python3, else the
# environment .ci/torch makes; skips without torch and safetensors (and,
# for cuda, a GPU that torch sees).
set -euo pipefail
herd=$1
dev=${2:-cpu}
lib=$(dirname "$herd")/../lib/libherd.so
py=
for p in python3 /opt/herd-torch/bin/python; do
  if "$p" -c "import sys, torch, safetensors; sys.exit('$dev' == 'cuda' and not torch.cuda.is_available())" \
    2>/dev/null; then
    py=$p
    break
  fi
done
if [[ -z $py ]]; then
  echo "skipped: no python with torch and safetensors$([[ $dev == cuda ]] && echo ' that sees a CUDA GPU') (bash .ci/torch installs them)"
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
HERD_CKPT_STAGING_BYTES=8M "$py" tests/gpu/torch_ckpt.py "$herd" "$lib" "$d/ck" "$dev"
echo "ok   $dev tensors of torch through herd's checkpoint and safetensors"
