#!/usr/bin/env bash
# herd discover: the summary of this machine (CPUs, memory, GPUs or why none,
# NICs, RDMA or why none), the summary and topology matrix of a fixture,
# --json that parses, and --save / --inventory round trips.
set -u
HERD=${1:?usage: discover.sh /path/to/herd}
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
fixtures=tests/fixtures/inventory
has() { grep -qF -- "$2" <<<"$1" || fail "output lacks '$2':
$1"; }
has_re() { grep -qE -- "$2" <<<"$1" || fail "output lacks /$2/:
$1"; }

# --- this machine
out=$("$HERD" discover) || fail "discover exited $?"
has "$out" "Host: $(cat /proc/sys/kernel/hostname)"
has_re "$out" '^CPU: .+'
has_re "$out" "^CPUs: $(getconf _NPROCESSORS_ONLN) \\([0-9]+ packages?, [0-9]+ cores?, [0-9]+ threads?\\)$"
has_re "$out" '^NUMA nodes: [1-9][0-9]*$'
has_re "$out" '^  node [0-9]+: [0-9]+\.[0-9] GiB, CPUs [0-9]'
has_re "$out" '^Memory: [0-9]+\.[0-9] GiB total, [0-9]+\.[0-9] GiB available$'
has_re "$out" '^NICs: [0-9]+$'
if grep -q '^GPUs: none' <<<"$out"; then
  # no GPU: the line says why
  has_re "$out" '^GPUs: none — .{8,}'
  grep -q '^Topology:' <<<"$out" && fail "a topology matrix without GPUs"
else
  has_re "$out" '^GPUs: [1-9][0-9]*$'
  has "$out" "Topology:"
fi
if grep -q '^RDMA: none' <<<"$out"; then
  has_re "$out" '^RDMA: none — .{8,}'
else
  has_re "$out" '^RDMA: [1-9][0-9]* devices?$'
fi

# --json is the JSON encoding, and parses
"$HERD" discover --json >"$tmp/local.json" || fail "discover --json exited $?"
python3 - "$tmp/local.json" "$(cat /proc/sys/kernel/hostname)" <<'PY' || fail "--json does not parse as an inventory"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["v"] == 1, d.get("v")
assert len(d["nodes"]) == 1
assert d["nodes"][0]["hostname"] == sys.argv[2], d["nodes"][0]["hostname"]
PY

# --save then --inventory: the same inventory, JSON and msgpack
out=$("$HERD" discover --save "$tmp/saved.json") || fail "discover --save exited $?"
has "$out" "Host: "
"$HERD" discover --inventory "$tmp/saved.json" --json >"$tmp/again.json" || fail "--inventory saved.json"
cmp -s "$tmp/saved.json" "$tmp/again.json" || fail "JSON round trip differs"
"$HERD" discover --inventory "$tmp/saved.json" --save "$tmp/saved.msgpack" >"$tmp/summary1" || fail "save msgpack"
head -c 1 "$tmp/saved.msgpack" | od -An -tx1 | grep -qv '7b' || fail "msgpack file is JSON"
"$HERD" discover --inventory "$tmp/saved.msgpack" --json >"$tmp/from-msgpack.json" || fail "--inventory msgpack"
cmp -s "$tmp/saved.json" "$tmp/from-msgpack.json" || fail "msgpack round trip differs"
"$HERD" discover --inventory="$tmp/saved.msgpack" >"$tmp/summary2" || fail "--inventory=FILE"
cmp -s "$tmp/summary1" "$tmp/summary2" || fail "summaries of the JSON and msgpack files differ"
# The name says the format, or --format does; a name that says nothing is refused.
"$HERD" discover --inventory "$tmp/saved.json" --save "$tmp/SAVED.JSON" >/dev/null || fail "save .JSON"
cmp -s "$tmp/saved.json" "$tmp/SAVED.JSON" || fail ".JSON was not written as JSON"
"$HERD" discover --inventory "$tmp/saved.json" --save "$tmp/inv.data" --format json >/dev/null \
  || fail "save --format json"
cmp -s "$tmp/saved.json" "$tmp/inv.data" || fail "--format json was not written as JSON"
"$HERD" discover --inventory "$tmp/saved.json" --save "$tmp/inv.mpk" >/dev/null || fail "save .mpk"
cmp -s "$tmp/saved.msgpack" "$tmp/inv.mpk" || fail ".mpk was not written as msgpack"
"$HERD" discover --inventory "$tmp/saved.json" --save "$tmp/inv.txt" >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 2 && ! -e $tmp/inv.txt ]] || fail "save inv.txt exited $rc"
grep -qF "herd discover: --save $tmp/inv.txt: its name does not say the format" "$tmp/err" \
  || fail "save inv.txt: $(cat "$tmp/err")"
"$HERD" discover --format yaml --save "$tmp/x.json" >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 2 ]] || fail "--format yaml exited $rc"
"$HERD" discover --save "$tmp/no-such-dir/x.json" >/dev/null 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "save into a missing directory exited $rc"
grep -q "^herd discover: " "$tmp/err" && grep -qF "no-such-dir/x.json" "$tmp/err" || fail "save error: $(cat "$tmp/err")"

# --- the DGX H100 fixture: GPUs, RDMA and the topology matrix
out=$("$HERD" discover --inventory $fixtures/dgx-h100.json) || fail "dgx exited $?"
has "$out" "Host: dgx-h100"
has "$out" "CPU: Intel(R) Xeon(R) Platinum 8480C"
has "$out" "CPUs: 224 (2 packages, 112 cores, 224 threads)"
has "$out" "  node 0: 1024.0 GiB, CPUs 0-55,112-167"
has "$out" "Memory: 2048.0 GiB total"
has "$out" "GPUs: 8"
has_re "$out" '^  GPU0 +NVIDIA H100 80GB HBM3 +79\.6 GiB  cc 9\.0  0000:1b:00\.0  NUMA 0  GPU-79c8c292-6b94-45b5-b498-82321e35049e$'
has_re "$out" '^  ibp24s0 +up +400000 Mb/s  mtu 4092 +0000:18:00\.0$'
has "$out" "RDMA: 8 devices"
has "$out" "  mlx5_0 (ibp24s0)  0000:18:00.0  NUMA 0"
has "$out" "    port 1: active, infiniband, 400 Gb/s"
has "$out" "Topology:"
has_re "$out" '^ +GPU0 +GPU1 +GPU2 +GPU3 +GPU4 +GPU5 +GPU6 +GPU7 +NIC0 +NIC1 +NIC2 +NIC3 +NIC4 +NIC5 +NIC6 +NIC7 +CPU Affinity +NUMA Affinity$'
has_re "$out" '^GPU0 +X +NV18 +NV18 +NV18 +NV18 +NV18 +NV18 +NV18 +PIX +NODE +NODE +NODE +SYS +SYS +SYS +SYS +0-55,112-167 +0$'
has_re "$out" '^GPU7 +NV18 +NV18 +NV18 +NV18 +NV18 +NV18 +NV18 +X +SYS +SYS +SYS +SYS +NODE +NODE +NODE +PIX +56-111,168-223 +1$'
has "$out" "Legend:"
for code in "X    = Self" "SYS  = " "NODE = " "PHB  = " "PXB  = " "PIX  = " "NV#  = Connection traversing a bonded set of # NVLinks"; do
  has "$out" "  $code"
done
has "$out" "NIC Legend:"
has "$out" "  NIC0: mlx5_0"
has "$out" "  NIC7: mlx5_7"

# --- the PCIe fixture: no NVLink, one matrix NIC (a netdev), RDMA note
out=$("$HERD" discover --inventory $fixtures/pcie-4gpu.json) || fail "pcie exited $?"
has "$out" "GPUs: 4"
has "$out" "RDMA: none — no RDMA devices: libibverbs found none"
has_re "$out" '^ +GPU0 +GPU1 +GPU2 +GPU3 +NIC0 +CPU Affinity +NUMA Affinity$'
has_re "$out" '^GPU0 +X +PIX +SYS +SYS +NODE +0-31,64-95 +0$'
has_re "$out" '^GPU2 +SYS +SYS +X +NODE +SYS +32-63,96-127 +1$'
has "$out" "  NIC0: eno1"

# --- the CPU-only fixture: no GPUs and why, no matrix
out=$("$HERD" discover --inventory $fixtures/cpu-only.json) || fail "cpu-only exited $?"
has "$out" "GPUs: none — no GPU: NVIDIA driver not found"
has_re "$out" '^  eno1 +up +25000 Mb/s  mtu 1500 +0000:c1:00\.0  10\.1\.4\.17/22, fe80::be97:e1ff:fe68:2c30/64$'
has_re "$out" '^  eno2 +down +speed \? +mtu 1500 +0000:c1:00\.1$'
grep -q "Topology:" <<<"$out" && fail "cpu-only has a topology matrix"
# what libherd was built with is this machine's, not an inventory's
grep -q "^GPU software:" <<<"$out" && fail "an inventory file's summary names this machine's GPU software"
out=$(unset HERD_INVENTORY; "$HERD" discover) || fail "discover exited $?"
has_re "$out" '^GPU software: built (with CUDA [0-9.]+|without CUDA)( and NCCL [0-9.]+|, without NCCL); '
# --- four DGX nodes: one line, no warning; plans across the nodes
out=$("$HERD" discover --inventory $fixtures/dgx-h100-x4.json) || fail "x4 exited $?"
[[ $out == "NODES       COUNT  SHAPE
dgx[01-04]      4  2x Intel(R) Xeon(R) Platinum 8480C 112 cores  2.0 TiB  8x NVIDIA H100 80GB HBM3 NV18 all-to-all  8x RDMA 400 Gb/s InfiniBand" ]] \
	|| fail "x4 summary: $out"
out=$("$HERD" alloc -g 32 --per-node 8 --inventory $fixtures/dgx-h100-x4.json) || fail "alloc x4 exited $?"
has "$out" "Plan: 32 GPUs, 32 ranks on 4 nodes"
has_re "$out" '^31 +dgx04 +7 '

# --- the same with one node of each kind of difference: each warning names
# the odd node; the alike stay grouped
python3 - "$fixtures/dgx-h100-x4.json" "$tmp/odd.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
n = c["nodes"]
del n[1]["gpus"][7]                       # dgx02: a GPU missing
n[2]["gpu_driver"] = "565.57.01"          # dgx03: another driver
n[2]["gpus"][3]["pcie_width"] = 8         # dgx03: a GPU on x8
n[3]["gpus"][0]["ecc"] = 0                # dgx04: ECC off on a GPU
n[1]["nccl"] = "2.21.5"                   # dgx02: another NCCL
for d in n[3]["netdevs"]:
    d["mtu"] = 2044 if d["name"].startswith("ib") else d["mtu"]
json.dump(c, open(sys.argv[2], "w"))
PY
out=$("$HERD" discover --inventory "$tmp/odd.json") || fail "odd exited $?"
has_re "$out" '^dgx\[01,03-04\] +3  '
has_re "$out" '^dgx02 +1  .* 7x NVIDIA H100'
has "$out" "warning: dgx02: GPU count differs: 7 GPUs on 1 node, 8 GPUs on 3 others"
has "$out" "warning: dgx03: GPU driver differs: driver 565.57.01 on 1 node, driver 570.124.06 on 3 others"
has "$out" "warning: dgx04: NIC MTU differs: MTU 2044 x8, 1500 on 1 node, MTU 4092 x8, 1500 on 3 others"
has "$out" "warning: dgx04: ECC is off on some GPUs"
has "$out" "warning: dgx03: GPU 0000:61:00.0 (NVIDIA H100 80GB HBM3) runs a PCIe x8 link, its siblings x16"
has "$out" "warning: dgx02: NCCL differs: NCCL 2.21.5 on 1 node, NCCL 2.26.2 on 3 others"
[[ $(grep -c "^warning:" <<<"$out") == 6 ]] || fail "warnings: $out"
echo "discover: ok"
