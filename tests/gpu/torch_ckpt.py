# CUDA tensors made by PyTorch, checkpointed by libherd (its C API through
# ctypes, the tensors' device pointers as they are), then:
#  - the asynchronous save has staged every device byte when it returns: the
#    tensors are overwritten on the GPU right after, before the save is done;
#  - a restore into fresh CUDA tensors gives the saved bytes back;
#  - `herd ckpt export` writes the step as a safetensors file, which the
#    safetensors package loads onto the GPU with the same bytes.
# The same on host tensors with DEVICE cpu (tests/cli/torch_ckpt.sh).
# usage: torch_ckpt.py HERD LIBHERD DIR [DEVICE]
import ctypes
import os
import subprocess
import sys

import torch
from safetensors.torch import load_file

herd, libpath, d = sys.argv[1:4]
dev = sys.argv[4] if len(sys.argv) > 4 else "cuda"
lib = ctypes.CDLL(libpath)
lib.herd_last_error.restype = ctypes.c_char_p
u64 = ctypes.c_uint64


def ok(st, what):
    if st != 0:
        sys.exit(f"torch_ckpt: {what}: status {st}: {lib.herd_last_error().decode()}")


herd_dtype = {torch.int64: 4, torch.uint8: 1, torch.float16: 6, torch.bfloat16: 7,
              torch.float32: 8, torch.float64: 9}
if hasattr(torch, "float8_e4m3fn"):
    herd_dtype[torch.float8_e4m3fn] = 10
    herd_dtype[torch.float8_e5m2] = 11

torch.manual_seed(7)
made = {
    "w.f32": torch.randn(1000, 4099, device=dev),                       # 16.4 MB, 2-D
    "w.bf16": torch.randn(3, 777, 1001, device=dev).to(torch.bfloat16),
    "b.f16": torch.randn(12345, device=dev).to(torch.float16),
    "step.i64": torch.arange(-5000, 5000, device=dev, dtype=torch.int64),
    "mask.u8": torch.randint(0, 256, (4096, 3), device=dev, dtype=torch.uint8),
}
if hasattr(torch, "float8_e4m3fn"):
    made["act.e4m3"] = torch.randn(65536, device=dev).to(torch.float8_e4m3fn)
    made["grad.e5m2"] = torch.randn(257, 129, device=dev).to(torch.float8_e5m2)
want = {k: t.clone() for k, t in made.items()}


def sync():
    if dev == "cuda":
        torch.cuda.synchronize()


sync()


def register(ck, tensors):
    for name, t in tensors.items():
        shape = (u64 * t.dim())(*t.shape)
        ok(lib.herd_ckpt_add_tensor(ck, name.encode(), ctypes.c_void_p(t.data_ptr()),
                                    herd_dtype[t.dtype], t.dim(), shape, None, None),
           f"herd_ckpt_add_tensor {name}")


def as_bytes(t):
    """t's bytes, as a uint8 tensor over the same memory (any dtype, the
    8-bit floats included, whose own kernels are few)."""
    return t.view(-1).view(torch.uint8)


def same(a, b):
    """Whether two tensors hold the same bytes (NaNs included)."""
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(
        as_bytes(a.contiguous()), as_bytes(b.contiguous()))


# Save step 1 asynchronously; overwrite the tensors once it returns.
ck = ctypes.c_void_p()
ok(lib.herd_ckpt_open(ctypes.byref(ck), d.encode(), None, None), "herd_ckpt_open")
register(ck, made)
ok(lib.herd_ckpt_save_async(ck, ctypes.c_int64(1)), "herd_ckpt_save_async")
for t in made.values():
    as_bytes(t).fill_(0x55)
ok(lib.herd_ckpt_wait(ck), "herd_ckpt_wait")
lib.herd_ckpt_free(ck)

# Restore into fresh CUDA tensors.
back = {k: torch.empty_like(t) for k, t in want.items()}
for t in back.values():
    as_bytes(t).zero_()
sync()
ck = ctypes.c_void_p()
restored = ctypes.c_int64(-1)
ok(lib.herd_ckpt_open(ctypes.byref(ck), d.encode(), None, None), "herd_ckpt_open")
register(ck, back)
ok(lib.herd_ckpt_restore(ck, ctypes.c_int64(1), ctypes.byref(restored)), "herd_ckpt_restore")
lib.herd_ckpt_free(ck)
bad = [k for k in want if not same(back[k], want[k])]
where = torch.cuda.get_device_name() if dev == "cuda" else "the host"
print(f"restore of step {restored.value} into {len(back)} {dev} tensors: "
      f"{len(bad)} differ{': ' + ', '.join(bad) if bad else ''}")

# Export, and load with the safetensors package onto the device.
out = os.path.join(d, "step1.safetensors")
r = subprocess.run([herd, "ckpt", "export", d, "1", out], capture_output=True, text=True)
if r.returncode != 0:
    sys.exit(f"torch_ckpt: herd ckpt export: exit {r.returncode}: {r.stderr.strip()}")
st = load_file(out, device=dev)
bad2 = [k for k in want if k not in st or not same(st[k], want[k])]
extra = sorted(set(st) - set(want))
print(f"safetensors.torch.load_file of herd's export: {len(st)} tensors on "
      f"{where}, {len(bad2)} differ{': ' + ', '.join(bad2) if bad2 else ''}"
      f"{', unexpected: ' + ', '.join(extra) if extra else ''}")
sys.exit(1 if bad or bad2 or extra else 0)
