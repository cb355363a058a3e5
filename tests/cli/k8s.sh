#!/usr/bin/env bash
# herd launch --k8s --dry-run and herd k8s manifest: the objects of a job
# (Secret, headless Service, Indexed Job) validated offline against the
# Kubernetes API's published schemas (kubernetes-validate, pinned, from
# .ci/k8s) for several shapes: 1 and 4 pods, with and without GPUs, with
# restarts, a node selector, a toleration, resources, a namespace; the
# secret only in the Secret, mounted as a file; bad input refused before
# any YAML is printed.  Skipped (77) where .ci/k8s has not installed the
# validator.
source "$(dirname "$0")/../harness/common.sh" "$@"
trap 'rm -rf "$tmp"' EXIT
kv=${HERD_K8S_VALIDATE:-/opt/herd-k8s/bin/kubernetes-validate}
py=$(dirname "$kv")/python
[[ -x $kv ]] || { echo "SKIP: $kv is not installed (bash .ci/k8s)"; exit 77; }

validate() {
	"$kv" -k 1.31.0 --strict "$1" >"$tmp/kv.out" 2>&1 || fail "kubernetes-validate refused $1: $(cat "$tmp/kv.out")
$(cat "$1")"
	[[ $(grep -c " passed for resource " "$tmp/kv.out") == 3 ]] || fail "not 3 objects: $(cat "$tmp/kv.out")"
}

# 1 pod, no GPU
"$HERD" launch --k8s --dry-run -n 1 --image ghcr.io/example/herd:1 --job-name one -- ./train \
	>"$tmp/one.yaml" || fail "one pod: $?"
validate "$tmp/one.yaml"
# 4 pods of 8 ranks with a GPU each, 2 restarts, placed and sized
"$HERD" k8s manifest --image registry.example.com/ml/herd:2.1 -n 32 --per-node 8 --gpus-per-rank 1 \
	--restarts 2 --job-name llm-ft --namespace training --env NCCL_DEBUG=INFO \
	--k8s-set nodeSelector.nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 \
	--k8s-set toleration=nvidia.com/gpu:NoSchedule --k8s-set toleration=pool=a100:NoExecute \
	--k8s-set requests.cpu=96 --k8s-set limits.memory=1500Gi \
	--k8s-set serviceAccountName=trainer --k8s-set label.team=ml -- python train.py --steps 100 \
	>"$tmp/four.yaml" || fail "four pods: $?"
validate "$tmp/four.yaml"
"$py" - "$tmp/four.yaml" "$tmp/one.yaml" <<'PY' || fail "the objects: $(cat "$tmp/four.yaml")"
import sys, yaml
secret, svc, job = list(yaml.safe_load_all(open(sys.argv[1])))
assert secret["kind"] == "Secret" and len(secret["stringData"]["secret"]) == 64, secret
assert svc["spec"]["clusterIP"] == "None" and svc["metadata"]["namespace"] == "training", svc
spec = job["spec"]
assert spec["completionMode"] == "Indexed" and spec["completions"] == spec["parallelism"] == 4
assert spec["backoffLimit"] == 8, spec["backoffLimit"]          # 2 restarts x 4 pods
rules = spec["podFailurePolicy"]["rules"]
assert rules[0]["onExitCodes"]["values"] == [126, 127] and rules[1]["action"] == "Ignore"
pod = spec["template"]["spec"]
assert pod["subdomain"] == "llm-ft" and pod["restartPolicy"] == "Never"
c = pod["containers"][0]
assert c["command"] == ["herd", "k8s", "node", "--job", "llm-ft", "--nodes", "4", "--per-node", "8",
                        "--gpus-per-rank", "1", "--port", "29400", "--secret-file", "/var/run/herd/secret",
                        "--", "python", "train.py", "--steps", "100"], c["command"]
assert c["env"] == [{"name": "NCCL_DEBUG", "value": "INFO"}], c["env"]
assert c["volumeMounts"] == [{"name": "herd-secret", "mountPath": "/var/run/herd", "readOnly": True}]
assert c["resources"]["limits"]["nvidia.com/gpu"] == "8" and c["resources"]["requests"]["nvidia.com/gpu"] == "8"
assert c["resources"]["requests"]["cpu"] == "96" and c["resources"]["limits"]["memory"] == "1500Gi"
assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                              {"key": "pool", "operator": "Equal", "value": "a100", "effect": "NoExecute"}]
assert pod["volumes"][0]["secret"]["secretName"] == "llm-ft-secret"
assert job["spec"]["template"]["metadata"]["labels"] == {"herd.dev/job": "llm-ft", "team": "ml"}
# the secret is in the Secret alone: not in an environment, not on a command line
text = open(sys.argv[1]).read()
assert text.count(secret["stringData"]["secret"]) == 1
one = list(yaml.safe_load_all(open(sys.argv[2])))[2]
assert "nvidia.com/gpu" not in str(one) and one["spec"]["backoffLimit"] == 0 and one["spec"]["completions"] == 1
PY

# Kubernetes expands $(NAME) and takes $$ for $ in a command and in values:
# every $ is doubled; keys YAML 1.1 reads as booleans are quoted.
"$HERD" k8s manifest -n 2 --image x --job-name dollars --env 'PRICE=$5' \
	--k8s-set nodeSelector.on=yes -- sh -c 'echo $HERD_RANK $(hostname)' >"$tmp/d.yaml" \
	|| fail "dollars: $?"
validate "$tmp/d.yaml"
"$py" - "$tmp/d.yaml" <<'PY' || fail "dollars: $(cat "$tmp/d.yaml")"
import sys, yaml
job = list(yaml.safe_load_all(open(sys.argv[1])))[2]
c = job["spec"]["template"]["spec"]["containers"][0]
assert c["command"][-1] == "echo $$HERD_RANK $$(hostname)", c["command"]
assert c["env"] == [{"name": "PRICE", "value": "$$5"}], c["env"]
assert job["spec"]["template"]["spec"]["nodeSelector"] == {"on": "yes"}
PY
grep -q '^        "on": "yes"$' "$tmp/d.yaml" || fail "the key on is not quoted: $(grep -n on: "$tmp/d.yaml")"

# Bad input: said before any YAML, exit 125 (herd launch) or 2 (herd k8s manifest)
bad() {
	local want=$1 rc=$2 got; shift 2
	out=$("$@" 2>&1); got=$?
	[[ $got == "$rc" ]] || fail "exit $got, not $rc: $*: $out"
	[[ $out != *apiVersion* ]] || fail "YAML printed for a bad job: $*: $out"
	has "$out" "$want"
}
bad "the job's name \"Train_1\": Kubernetes takes a name of 1 to 50 lower-case letters" 125 \
	"$HERD" launch --k8s --dry-run -n 2 --image x --job-name Train_1 -- ./t
bad "-n -2: expected a whole number from 1" 125 "$HERD" launch --k8s --dry-run -n -2 --image x -- ./t
bad "-n 6 is not a multiple of --per-node 4" 125 "$HERD" launch --k8s --dry-run -n 6 --per-node 4 --image x -- ./t
bad "--k8s needs --image IMAGE" 125 "$HERD" launch --k8s --dry-run -n 2 -- ./t
bad "--k8s prints the job's objects with --dry-run" 125 "$HERD" launch --k8s -n 2 --image x -- ./t
bad "--image goes with --k8s" 125 "$HERD" launch -n 2 --image x -- ./t
bad "--hosts, --hostfile, --slurm and --pods do not go with it" 125 \
	"$HERD" launch --k8s --dry-run --hosts 'h[1-2]' -n 2 --image x -- ./t
bad "\"gpu=h100\": gpu is not one herd sets" 2 "$HERD" k8s manifest -n 2 --image x --k8s-set gpu=h100 -- ./t
bad "the effect \"Never\" is not NoSchedule, PreferNoSchedule or NoExecute" 2 \
	"$HERD" k8s manifest -n 2 --image x --k8s-set toleration=a:Never -- ./t
bad "--k8s: --time is not carried into the Job's pods" 125 \
	"$HERD" launch --k8s --dry-run -n 2 --image x --time 60 -- ./t
bad "--k8s: --log-dir is not carried into the Job's pods" 125 \
	"$HERD" launch --k8s --dry-run -n 2 --image x --log-dir /tmp/l -- ./t
bad "herd sets limits.nvidia.com/gpu itself (--gpus-per-rank x --per-node)" 2 \
	"$HERD" k8s manifest -n 2 --image x --k8s-set limits.nvidia.com/gpu=2 -- ./t
bad "herd sets label.herd.dev/job itself (the Service selects the pods by it)" 2 \
	"$HERD" k8s manifest -n 2 --image x --k8s-set label.herd.dev/job=y -- ./t
bad "the namespace \"ML\"" 2 "$HERD" k8s manifest -n 2 --image x --namespace ML -- ./t
bad "--restarts -1: expected a whole number from 0" 2 "$HERD" k8s manifest -n 2 --image x --restarts -1 -- ./t
out=$("$HERD" k8s manifest -n 2 --image x -- ./t 2>&1; echo "rc=$?")
has "$out" "rc=0"
out=$("$HERD" k8s manifest -n 2 --image x --job-name Bad -- ./t 2>&1; echo "rc=$?")
has "$out" "rc=2"
echo "k8s.sh: ok"
