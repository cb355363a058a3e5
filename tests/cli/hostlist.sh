#!/usr/bin/env bash
# herd hostlist expand|compress|count against Slurm's scontrol show
# hostnames / hostlist on the same expressions (where scontrol is
# installed: it reads a minimal slurm.conf written here and contacts no
# controller), herd's one extension, and the usage errors.
set -u
HERD=${1:?usage: hostlist.sh /path/to/herd}
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT

exprs=('node[01-03,7],gpu[1-2]' 'a[1-2]b[1-2]' 'rack[1-2]-node[01-02]' 'n[009-011]'
       'host[1,3-5]' 'x' 'n[1-3],n2' 'login,gpu[08-10],cpu[1-2]' 'n[98-101],n[008-011],n[09-10]'
       '10.0.0.[1-3]' 'a-[1-2]' 'a,b,,c' 'a[1-2],' ',a' ',,a,,' 'a[1-2],,b[3-4]')
# what the expansions must be, whatever scontrol is there or not
[[ $("$HERD" hostlist expand 'node[01-03,7],gpu[1-2]' | tr '\n' ' ') == "node01 node02 node03 node7 gpu1 gpu2 " ]] \
  || fail "expand: $("$HERD" hostlist expand 'node[01-03,7],gpu[1-2]')"
[[ $("$HERD" hostlist count 'a[1-2]b[1-3]') == 6 ]] || fail "count a[1-2]b[1-3]"
[[ $("$HERD" hostlist compress n1 n2,n3 gpu01,gpu02 node7) == 'n[1-3],gpu[01-02],node7' ]] \
  || fail "compress: $("$HERD" hostlist compress n1 n2,n3 gpu01,gpu02 node7)"
# empty items are dropped, as Slurm drops them (node lists are pasted from
# its output); an expression of separators only names no host
[[ $("$HERD" hostlist expand 'a,b,,c' | tr '\n' ' ') == "a b c " ]] || fail "a,b,,c"
[[ $("$HERD" hostlist expand 'a[1-2],' | tr '\n' ' ') == "a1 a2 " ]] || fail "a[1-2],"
[[ $("$HERD" hostlist expand ',a' | tr '\n' ' ') == "a " ]] || fail ",a"
[[ $("$HERD" hostlist count 'a[1-2],,b[3-4]') == 4 ]] || fail "count a[1-2],,b[3-4]"
# beyond Slurm: text after a bracket
[[ $("$HERD" hostlist expand 'node[1-2]-ib' | tr '\n' ' ') == "node1-ib node2-ib " ]] || fail "node[1-2]-ib"

if command -v scontrol >/dev/null; then
  printf 'ClusterName=herdtest\nSlurmctldHost=localhost\nNodeName=localhost\nPartitionName=p Nodes=localhost\n' \
    >"$tmp/slurm.conf"
  export SLURM_CONF=$tmp/slurm.conf
  for e in "${exprs[@]}"; do
    want=$(scontrol show hostnames "$e" 2>&1) || fail "scontrol show hostnames $e: $want"
    got=$("$HERD" hostlist expand "$e") || fail "herd hostlist expand $e exited $?"
    [[ $got == "$want" ]] || fail "expand $e: herd '$got', scontrol '$want'"
    [[ $("$HERD" hostlist count "$e") == $(wc -l <<<"$want") ]] || fail "count $e"
    joined=$(tr '\n' ',' <<<"$want"); joined=${joined%,}
    want=$(scontrol show hostlist "$joined" 2>&1) || fail "scontrol show hostlist $joined: $want"
    got=$("$HERD" hostlist compress "$joined")
    [[ $got == "$want" ]] || fail "compress $joined: herd '$got', scontrol '$want'"
  done
  # compress on 300 random lists (fixed seed): numbered names of a few
  # prefixes, padded and not, in and out of order, repeats
  python3 - "$tmp/lists" <<'PY'
import random, sys
random.seed(11)
out = open(sys.argv[1], "w")
for _ in range(300):
    names = []
    for _ in range(random.randint(1, 12)):
        p = random.choice(["n", "gpu", "a-", "r1n", "x.", "h"])
        v = random.randint(0, 120)
        w = random.choice([0, 0, 2, 3])
        names.append(p + (str(v).zfill(w) if w else str(v)))
    out.write(",".join(names) + "\n")
PY
  while read -r l; do
    want=$(scontrol show hostlist "$l" 2>&1)
    got=$("$HERD" hostlist compress "$l")
    [[ $got == "$want" ]] || fail "compress $l: herd '$got', scontrol '$want'"
  done <"$tmp/lists"
else
  echo "scontrol not installed: compared with the expected names only"
fi

# usage errors: exit 2, the message, the hint
for args in "" "bogus x" "expand" "expand a b" "count" "compress" "expand node[1-" "expand n[3-1]" \
  "expand ," "expand a[1,,2]"; do
  "$HERD" hostlist $args >"$tmp/out" 2>"$tmp/err"; rc=$?
  [[ $rc == 2 ]] || fail "hostlist $args: exit $rc, want 2"
  [[ ! -s $tmp/out ]] || fail "hostlist $args wrote to stdout"
  grep -q "^herd hostlist: " "$tmp/err" && grep -qF "Try 'herd hostlist --help'" "$tmp/err" \
    || fail "hostlist $args: $(cat "$tmp/err")"
done
"$HERD" hostlist --help | grep -q '^usage: herd hostlist expand EXPR' || fail "--help"
echo "hostlist: ok"
