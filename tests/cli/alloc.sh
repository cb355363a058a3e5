#!/usr/bin/env bash
# herd alloc and herd gpus on the fixtures standing for this node
# (HERD_INVENTORY or --inventory), with leases in a temporary directory:
# the plans the issue asks to show, the tables, a GPU held by another
# process and freed by its death, and bad input (exit 2, one line on
# stderr, nothing on stdout, no crash).
set -u
HERD=${1:?usage: alloc.sh /path/to/herd}
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d)
holder_pid=
cleanup() { [[ -n $holder_pid ]] && kill -9 "$holder_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fixtures=tests/fixtures/inventory
export HERD_LEASE_DIR=$tmp/leases
unset HERD_INVENTORY SLURM_JOB_ID SLURM_STEP_GPUS SLURM_JOB_GPUS CUDA_VISIBLE_DEVICES
has() { grep -qF -- "$2" <<<"$1" || fail "output lacks '$2':
$1"; }
has_re() { grep -qE -- "$2" <<<"$1" || fail "output lacks /$2/:
$1"; }

# --- two GPUs on one socket, and it says so
out=$(HERD_INVENTORY=$fixtures/pcie-4gpu.json "$HERD" alloc -g 2 --link same-numa --explain) \
  || fail "alloc same-numa exited $?"
has "$out" "Plan: 2 GPUs, 2 ranks on 1 node (pcie-4gpu), score 60.0"
has_re "$out" '^rank +host +GPU +UUID +PCI bus id +NUMA +CPUs +NIC$'
has_re "$out" '^0 +pcie-4gpu +0 +GPU-b039ee16-9646-4718-8f3d-9a4de6cf02bb +0000:1a:00.0 +0 +0-31,64-95 +eno1 \(NODE\)$'
has_re "$out" '^1 +pcie-4gpu +1 +GPU-e085b021-e0d4-4f2b-935a-b03d8de49eb1 +0000:1b:00.0 +0 +0-31,64-95 +eno1 \(NODE\)$'
has_re "$out" '^GPU0 +X +PIX$'
has "$out" "chose on pcie-4gpu: GPU0, GPU1 - all on NUMA node 0, that is one socket"
has "$out" "chosen because its worst link is PIX where the runner-up's is NODE"

# --- all eight of a DGX H100: an all-NV18 matrix
out=$("$HERD" alloc -g 8 --per-node 8 --inventory $fixtures/dgx-h100.json) || fail "alloc 8 exited $?"
has "$out" "Plan: 8 GPUs, 8 ranks on 1 node (dgx-h100), score 100.0"
[[ $(grep -c '^GPU[0-7] ' <<<"$out") == 8 ]] || fail "matrix rows: $out"
[[ $(grep -o 'NV18' <<<"$out" | wc -l) == 56 ]] || fail "want 56 NV18 cells: $out"
has_re "$out" '^GPU7 +(NV18 +){7}X$'
has_re "$out" '^7 +dgx-h100 +7 +GPU-f2adcc0e-e683-4cdf-a060-d7c4400cb70f +0000:df:00.0 +1 +56-111,168-223 +mlx5_7 \(PIX\)$'

# --- nine on one node: a reason, exit 1
"$HERD" alloc -g 9 --per-node 9 --inventory $fixtures/dgx-h100.json >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "9 GPUs: exit $rc"
[[ ! -s $tmp/out ]] || fail "9 GPUs: wrote to stdout"
[[ $(cat "$tmp/err") == "herd alloc: need 9 GPUs on one node; node dgx-h100 has 8 free of 8" ]] \
  || fail "9 GPUs: $(cat "$tmp/err")"

# --- each rank's environment
out=$("$HERD" alloc -g 2 --env --inventory $fixtures/dgx-h100.json) || fail "--env exited $?"
has "$out" "rank 1: CUDA_VISIBLE_DEVICES=GPU-da60fb1c-eb7a-4995-9588-532d4242aadb CUDA_DEVICE_ORDER=PCI_BUS_ID NCCL_IB_HCA==mlx5_1:1 NCCL_SOCKET_IFNAME==eno3"

# --- inside a Slurm step only the granted GPUs (Slurm's 2,3 = PCI order) are candidates
out=$(SLURM_JOB_ID=5 SLURM_STEP_GPUS=2,3 CUDA_VISIBLE_DEVICES=0,1 "$HERD" alloc -g 2 \
        --inventory $fixtures/dgx-h100.json) || fail "alloc in Slurm exited $?"
has_re "$out" '^0 +dgx-h100 +2 +GPU-f4b1b646-33be-40f5-915c-61236c88c537 +0000:52:00.0 '
has_re "$out" '^1 +dgx-h100 +3 +GPU-13a5bf07-da1b-4950-a0c4-0eb788718c96 +0000:61:00.0 '
out=$(SLURM_JOB_ID=5 SLURM_STEP_GPUS=2,3 "$HERD" alloc -g 2 --ignore-slurm \
        --inventory $fixtures/dgx-h100.json) || fail "alloc --ignore-slurm exited $?"
has_re "$out" '^0 +dgx-h100 +0 '
SLURM_JOB_ID=5 SLURM_STEP_GPUS=2,3 "$HERD" alloc -g 3 --inventory $fixtures/dgx-h100.json \
  >/dev/null 2>"$tmp/err" && fail "3 GPUs out of Slurm's 2"
has "$(cat "$tmp/err")" "GPU0 not granted"

# --- herd gpus: all free, then two held by another process, then free again
out=$(HERD_INVENTORY=$fixtures/dgx-h100.json "$HERD" gpus) || fail "gpus exited $?"
has "$out" "Host: dgx-h100"
has "$out" "Leases: $tmp/leases"
[[ $(grep -cE '^[0-7] +GPU-.* free ' <<<"$out") == 8 ]] || fail "want 8 free: $out"
mkfifo "$tmp/hold"
HERD_INVENTORY=$fixtures/dgx-h100.json HERD_JOB_ID=job-42 "$HERD" -e '
  local p = assert(herd.alloc{ gpus = 2, link = "nvlink" })
  print("held") io.stdout:flush()
  io.read("a")' <"$tmp/hold" >"$tmp/holder.out" &
holder_pid=$!
exec 9>"$tmp/hold"
for _ in $(seq 100); do grep -q held "$tmp/holder.out" 2>/dev/null && break; sleep 0.05; done
grep -q held "$tmp/holder.out" || fail "the holder did not take its GPUs"
out=$(HERD_INVENTORY=$fixtures/dgx-h100.json "$HERD" gpus) || fail "gpus exited $?"
has_re "$out" "^0 +GPU-79c8c292-6b94-45b5-b498-82321e35049e +0000:1b:00.0 +0 +exclusive +job-42 +$holder_pid +[^ ]+ +20[0-9]{2}-"
has_re "$out" "^1 +GPU-da60fb1c-eb7a-4995-9588-532d4242aadb .* exclusive +job-42 +$holder_pid "
[[ $(grep -c ' free ' <<<"$out") == 6 ]] || fail "want 6 free: $out"
HERD_INVENTORY=$fixtures/dgx-h100.json "$HERD" gpus --json >"$tmp/gpus.json" || fail "gpus --json exited $?"
python3 - "$tmp/gpus.json" "$holder_pid" "$tmp/leases" <<'PY' || fail "gpus --json: $(cat "$tmp/gpus.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["v"] == 1 and d["host"] == "dgx-h100" and d["lease_dir"] == sys.argv[3], d
g = d["gpus"]
assert [x["index"] for x in g] == list(range(8)), g
assert g[0]["uuid"] == "GPU-79c8c292-6b94-45b5-b498-82321e35049e" and g[0]["pci_bus_id"] == "0000:1b:00.0"
held = [x for x in g if x["lease"] == "exclusive"]
assert len(held) == 2 and all(x["job"] == "job-42" and x["pid"] == int(sys.argv[2]) for x in held), held
assert all(x["lease"] == "free" and x["pid"] is None for x in g if x not in held)
PY
"$HERD" alloc -g 8 --per-node 8 --inventory $fixtures/dgx-h100.json >/dev/null 2>"$tmp/err" \
  && fail "8 GPUs while 2 are held"
has "$(cat "$tmp/err")" "need 8 GPUs on one node; node dgx-h100 has 6 free of 8; not available: GPU0 held by job job-42 (pid $holder_pid"
out=$("$HERD" alloc -g 4 --link nvlink --inventory $fixtures/dgx-h100.json --explain) || fail "alloc around held GPUs"
has_re "$out" '^0 +dgx-h100 +4 '
kill -9 "$holder_pid"; wait "$holder_pid" 2>/dev/null; holder_pid=
exec 9>&-
out=$(HERD_INVENTORY=$fixtures/dgx-h100.json "$HERD" gpus) || fail "gpus exited $?"
[[ $(grep -c ' free ' <<<"$out") == 8 ]] || fail "the killed holder's GPUs are not free: $out"

# --- alloc --json: the plan's facts, and that it holds no lease
"$HERD" alloc -g 2 --link nvlink --inventory $fixtures/dgx-h100.json --json --env --explain \
  >"$tmp/plan.json" || fail "alloc --json exited $?"
python3 - "$tmp/plan.json" <<'PY' || fail "alloc --json: $(cat "$tmp/plan.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["v"] == 1 and d["ngpus"] == 2 and d["nranks"] == 2 and d["nnodes"] == 1, d
assert d["holds_leases"] is False and d["warnings"] == [] and "explain" in d
r = d["ranks"]
assert [x["rank"] for x in r] == [0, 1] and all(x["host"] == "dgx-h100" for x in r)
assert [x["gpus"][0]["index"] for x in r] == [0, 1], r
assert r[0]["env"]["CUDA_VISIBLE_DEVICES"] == r[0]["gpus"][0]["uuid"], r[0]
assert r[0]["nic"] == "mlx5_0" and r[0]["nccl_ib_hca"] == "=mlx5_0:1", r[0]
PY

# --- no GPU at all
"$HERD" alloc -g 1 --inventory $fixtures/cpu-only.json >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "cpu-only: exit $rc"
has "$(cat "$tmp/err")" "node cpu-only has 0 free of 0 (no GPU: NVIDIA driver not found)"
out=$("$HERD" gpus --inventory $fixtures/cpu-only.json) || fail "gpus cpu-only exited $?"
has "$out" "GPUs: none — no GPU: NVIDIA driver not found"

# --- bad input: exit 2, one line, nothing on stdout
bad() {  # expected fragment, then the arguments
  local want=$1; shift
  "$HERD" "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  [[ $rc == 2 ]] || fail "$*: exit $rc, want 2; stderr: $(cat "$tmp/err")"
  [[ ! -s $tmp/out ]] || fail "$*: wrote to stdout"
  grep -qF -- "$want" "$tmp/err" || fail "$*: stderr lacks '$want': $(cat "$tmp/err")"
  grep -q "^herd $1: " "$tmp/err" || fail "$*: not prefixed 'herd $1: ': $(cat "$tmp/err")"
}
dgx=$fixtures/dgx-h100.json
bad "-g needs a whole number of 0 or more, not '-3'" alloc -g -3 --inventory $dgx
bad "-g needs a whole number of 0 or more, not 'many'" alloc -g many --inventory $dgx
bad "request: gpus is 0; ask for at least one GPU" alloc -g 0 --inventory $dgx
bad "request: gpus is 100000000; expected 0 to 65536" alloc -g 100000000 --inventory $dgx
bad "say how many GPUs" alloc --inventory $dgx
bad "--per-node 0: expected 1 or more GPUs on each node used" alloc -g 2 --per-node 0 --inventory $dgx
bad "--nodes 0: expected 1 or more nodes" alloc -g 2 --nodes 0 --inventory $dgx
bad "unknown link demand 'fast'" alloc -g 2 --link fast --inventory $dgx
bad "gpus (8) is not a multiple of gpus_per_node (3)" alloc -g 8 --per-node 3 --inventory $dgx
bad "unrecognized option '--bogus'" alloc -g 2 --bogus
bad "--min-memory needs a size" alloc -g 2 --min-memory lots --inventory $dgx
bad "exclude[0] 'GPU-nope' names no GPU" alloc -g 2 --exclude GPU-nope --inventory $dgx
bad "/no/such.json" alloc -g 2 --inventory /no/such.json
bad "unrecognized option '--bogus'" gpus --bogus

# --- a lease directory that cannot be used: a clear error, exit 1
: >"$tmp/not-a-dir"
HERD_LEASE_DIR=$tmp/not-a-dir "$HERD" gpus --inventory $dgx >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "lease dir is a file: exit $rc"
has "$(cat "$tmp/err")" "herd gpus: cannot use lease directory $tmp/not-a-dir (not a directory)"
"$HERD" alloc -g 1 --inventory $dgx --lease-dir "$tmp/not-a-dir" >"$tmp/out" 2>"$tmp/err"; rc=$?
[[ $rc == 1 ]] || fail "alloc with a bad lease dir: exit $rc"
# --- --grid: tp=8 inside each DGX H100 (NV18), dp and pp across (NET); a
# tp across nodes is a warning naming its groups; a grid that does not
# fit is a usage error before anything is printed
x4=$fixtures/dgx-h100-x4.json
out=$("$HERD" alloc --inventory "$x4" -g 32 --grid tp=8,pp=2 2>"$tmp/err") || fail "--grid: $?"
has "$out" "grid tp=8 x dp=2 x pp=2 over 32 ranks on 4 nodes (innermost first)"
has "$out" "  tp group 3: ranks 24-31 on dgx04: NV18"
has "$out" "  pp group 15: ranks 15,31 on dgx02,dgx04: NET"
grep -qE '^31 +dgx04 +7 +1 +1$' <<<"$out" || fail "rank 31's coordinates: $out"
# Megatron's order whatever the order written; another on request
out2=$("$HERD" alloc --inventory "$x4" -g 32 --grid pp=2,tp=8 2>&1) || fail "pp=2,tp=8: $?"
[[ $out2 == "$out" ]] || fail "pp=2,tp=8 is not tp=8,pp=2: $out2"
out2=$("$HERD" alloc --inventory "$x4" -g 32 --grid tp=8,pp=2 --grid-order pp-tp-dp 2>&1) \
	|| fail "--grid-order: $?"
grep -qE '^pp +2 +16 +NV18 +ranks 0,1 on dgx01$' <<<"$out2" || fail "pp innermost: $out2"
has "$out2" "warning: tp group 0 (ranks 0,2,4,6,8,10,12,14) spans dgx01,dgx02: its links are NET"
out2=$("$HERD" alloc --inventory "$x4" -g 32 --grid tp=8,sp=2,pp=2 2>&1) && fail "sp without an order: $out2"
has "$out2" "herd alloc: --grid: grid: sp is not a dimension of the order tp-cp-ep-dp-pp"
grep -qE '^tp +8 +4 +NV18 +ranks 0-7 on dgx01$' <<<"$out" || fail "tp row: $out"
grep -qE '^dp +2 +16 +NET +ranks 0,8 on dgx01,dgx02$' <<<"$out" || fail "dp row: $out"
grep -qE '^pp +2 +16 +NET +ranks 0,16 on dgx01,dgx03$' <<<"$out" || fail "pp row: $out"
[[ -s $tmp/err ]] && fail "--grid warned: $(cat "$tmp/err")"
"$HERD" alloc --inventory "$x4" -g 32 --grid tp=16 >/dev/null 2>"$tmp/err" || fail "tp=16: $?"
has "$(cat "$tmp/err")" "herd alloc: warning: tp group 0 (ranks 0-15) spans dgx01,dgx02: its links are NET, not a node's"
has "$(cat "$tmp/err")" "herd alloc: warning: tp group 1 (ranks 16-31) spans dgx03,dgx04"
out=$("$HERD" alloc --inventory $dgx -g 8 --grid tp=4,pp=2 --json) || fail "--grid --json: $?"
python3 - "$out" <<'EOF' || fail "--grid --json: $out"
import json, sys
g = json.loads(sys.argv[1])["grid"]
assert g["spec"] == "tp=4 x pp=2", g["spec"]
tp, pp = g["dims"]
assert tp["name"] == "tp" and tp["worst_link"] == "NV18", tp
assert [x["ranks"] for x in tp["groups"]] == [[0, 1, 2, 3], [4, 5, 6, 7]], tp
assert [x["ranks"] for x in pp["groups"]] == [[0, 4], [1, 5], [2, 6], [3, 7]], pp
EOF
out=$("$HERD" alloc --inventory $fixtures/pcie-4gpu.json -g 4 --grid tp=2) || fail "pcie grid: $?"
grep -qE '^dp +2 +2 +SYS ' <<<"$out" || fail "a PCIe node's dp across its NUMA nodes: $out"
out=$("$HERD" alloc --inventory $dgx -g 8 --grid tp=3 2>&1); rc=$?
[[ $rc == 2 ]] || fail "tp=3 of 8: exit $rc"
[[ $(wc -l <<<"$out") == 2 ]] || fail "tp=3 of 8 printed more than its error: $out"
has "$out" "herd alloc: --grid: grid tp=3 multiplies to 3 ranks; the job has 8"
out=$("$HERD" alloc --inventory $dgx -g 8 --grid tp=0 2>&1); rc=$?
[[ $rc == 2 ]] && has "$out" "the size of tp is \"0\"; expected a whole number from 1 to 16777216" \
	|| fail "tp=0: $rc: $out"
echo "alloc.sh: ok"
