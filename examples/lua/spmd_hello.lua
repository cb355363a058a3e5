-- spmd_hello.lua: every rank of a job reports its host and GPUs, then the
-- ranks add up their numbers with an allreduce.
--
--   herd launch -n 4 examples/lua/spmd_hello.lua
local c = assert(herd.comm())
local gpus = os.getenv("CUDA_VISIBLE_DEVICES") or "none"
print(string.format("rank %d of %d on %s (local rank %d), GPUs: %s",
                    herd.rank, herd.size, herd.host, herd.local_rank, gpus))
local sum = assert(c:allreduce(herd.rank))
if herd.rank == 0 then
  print(string.format("allreduce of the ranks 0..%d: %d (expected %d)",
                      herd.size - 1, sum, herd.size * (herd.size - 1) // 2))
end
