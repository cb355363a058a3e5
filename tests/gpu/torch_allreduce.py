# PyTorch's NCCL backend started from the environment `herd launch` sets:
# RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT and, with
# --gpus-per-rank, CUDA_VISIBLE_DEVICES.  All-reduces a CUDA tensor and
# checks every element.
import os
import sys

import torch
import torch.distributed as dist

need = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES"]
missing = [k for k in need if k not in os.environ]
if missing:
    sys.exit("torch_allreduce: herd launch did not set " + ", ".join(missing))
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("nccl")
n = 16 << 20
t = torch.full((n,), float(rank + 1), device="cuda")
dist.all_reduce(t)
torch.cuda.synchronize()
want = world * (world + 1) / 2
wrong = int((t != want).sum().item())
print(f"rank {rank}/{world} on {torch.cuda.get_device_name()} "
      f"(CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']}), NCCL "
      f"{'.'.join(map(str, torch.cuda.nccl.version()))}: all_reduce of {n} float32, "
      f"{wrong} wrong")
dist.destroy_process_group()
sys.exit(1 if wrong else 0)
