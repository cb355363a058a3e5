-- grid_tp_dp.lua: examples/grid_tp_dp.c in Lua, one block. A residual MLP
-- block, h' = h + tanh(h A) B, trained on a grid of tensor (tp) times data
-- (dp) parallelism: A split by columns and B by rows over tp, one
-- allreduce over tp forward (the input is data: its gradient is not
-- needed, so backward needs none), the gradients summed over dp;
-- every rank also trains the whole model on the whole batch alone, and the
-- two must agree.
--
--   herd launch -n 4 examples/lua/grid_tp_dp.lua            (tp=2, dp=2)
--   herd launch -n 8 examples/lua/grid_tp_dp.lua 4          (tp=4, dp=2)
local D, H, N, LR, STEPS = 4, 8, 3, 0.2, 4
local TP = math.tointeger(tonumber(arg and arg[1]) or 2)
if not TP or TP < 1 or H % TP ~= 0 then error("tp must divide " .. H, 0) end

local c = assert(herd.comm())
local g = assert(c:grid{ tp = TP })
local tp, dp = g:group("tp"), g:group("dp")   -- dp nil: one replica
local ndp = dp and dp:size() or 1
if herd.rank == 0 then io.write(g:explain()) end

-- the same numbers on every rank
local seed = 7
local function rand(scale)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return (seed / 2147483648 * 2 - 1) * scale
end
local function matrix(rows, cols, f)
  local m = {}
  for i = 1, rows do
    m[i] = {}
    for j = 1, cols do m[i][j] = f(i, j) end
  end
  return m
end

local X = matrix(N * ndp, D, function() return rand(1) end)
local T = matrix(N * ndp, D, function(i) return math.sin(X[i][1]) * 0.5 end)
local A = matrix(D, H, function() return rand(0.5) end)
local B = matrix(H, D, function() return rand(0.5) end)

-- Sums the matrix m over comm in place (comm nil: one rank).
local function sum(comm, m)
  if not comm then return m end
  local flat = {}
  for i = 1, #m do for j = 1, #m[i] do flat[#flat + 1] = m[i][j] end end
  local out = assert(comm:allreduce(herd.buffer.from("float64", flat))):totable()
  local k = 0
  for i = 1, #m do for j = 1, #m[i] do k = k + 1; m[i][j] = out[k] end end
  return m
end

-- One step on rows r0..r0+n-1 of X, with columns c0..c0+hc-1 of the hidden
-- width; a (D x hc) and b (hc x D) are this rank's shards. Returns the loss.
local function step(a, b, r0, n, hc, tpc, dpc)
  local ntot = N * ndp
  local h, u, s = {}, {}, {}
  for i = 1, n do
    h[i], s[i] = {}, {}
    for k = 1, hc do
      local v = 0
      for j = 1, D do v = v + X[r0 + i][j] * a[j][k] end
      s[i][k] = math.tanh(v)
    end
  end
  local p = sum(tpc, matrix(n, D, function(i, j)
    local v = 0
    for k = 1, hc do v = v + s[i][k] * b[k][j] end
    return v
  end))
  local loss, grad = 0, {}
  for i = 1, n do
    grad[i] = {}
    for j = 1, D do
      local e = X[r0 + i][j] + p[i][j] - T[r0 + i][j]
      loss = loss + 0.5 * e * e / ntot
      grad[i][j] = e / ntot
    end
  end
  local db = matrix(hc, D, function(k, j)
    local v = 0
    for i = 1, n do v = v + s[i][k] * grad[i][j] end
    return v
  end)
  for i = 1, n do
    u[i] = {}
    for k = 1, hc do
      local v = 0
      for j = 1, D do v = v + grad[i][j] * b[k][j] end
      u[i][k] = v * (1 - s[i][k] * s[i][k])
    end
  end
  local da = matrix(D, hc, function(j, k)
    local v = 0
    for i = 1, n do v = v + X[r0 + i][j] * u[i][k] end
    return v
  end)
  sum(dpc, da)
  sum(dpc, db)
  for j = 1, D do for k = 1, hc do a[j][k] = a[j][k] - LR * da[j][k] end end
  for k = 1, hc do for j = 1, D do b[k][j] = b[k][j] - LR * db[k][j] end end
  return loss
end

local hc, coord = H // TP, g:coords().tp
local c0 = coord * hc
local a = matrix(D, hc, function(j, k) return A[j][c0 + k] end)
local b = matrix(hc, D, function(k, j) return B[c0 + k][j] end)
local r0 = (g:coords().dp or 0) * N
for k = 1, STEPS do
  local loss = step(a, b, r0, N, hc, tp, dp)
  if dp then loss = assert(dp:allreduce(loss)) end
  local ref = step(A, B, 0, N * ndp, H, nil, nil)
  if herd.rank == 0 then
    print(string.format("step %d: loss %.12f on the grid, %.12f on one rank", k, loss, ref))
  end
end
local worst = 0
for j = 1, D do for k = 1, hc do worst = math.max(worst, math.abs(a[j][k] - A[j][c0 + k])) end end
for k = 1, hc do for j = 1, D do worst = math.max(worst, math.abs(b[k][j] - B[c0 + k][j])) end end
worst = assert(c:allreduce(herd.buffer.from("float64", { worst }), nil, "max"))[1]
if herd.rank == 0 then
  print(string.format("tp=%d x dp=%d: after %d steps every weight is within %.3g of one rank's (%s)",
                      TP, ndp, STEPS, worst, worst <= 1e-9 and "match" or "MISMATCH"))
end
if worst > 1e-9 then os.exit(1) end
