#!/usr/bin/env bash
# CUDA tensors that PyTorch made, saved and restored by libherd and
# exported to safetensors by `herd ckpt export`, which the safetensors
# package loads back onto the GPU (tests/cli/torch_ckpt.sh with cuda).
exec bash tests/cli/torch_ckpt.sh "$1" cuda
