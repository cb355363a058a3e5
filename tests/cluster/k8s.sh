#!/usr/bin/env bash
# The pods of herd's Kubernetes Job, as the namespace cluster stands for
# them: each network namespace is a pod (its host name job-INDEX, its
# hosts file naming job-0.job and job-1.job as the headless Service's DNS
# would, JOB_COMPLETION_INDEX as Kubernetes sets it, the secret as a
# file) running the manifest's command, `herd k8s node --job job --nodes
# 2 --per-node 2 --secret-file F -- CMD`.
# Pod 0 launches, every pod's node joins it by name: an allreduce over
# the 4 ranks is exact and both pods exit 0; a rank killed on pod 1 is
# named by pod 0's launcher and both pods fail (so that the Job retries
# them); a pod with another secret is refused and pod 0 says which pod
# did not join; a pod without its variables says which.
# Needs root, iproute2 and openssh-server; exits 77 (skipped) without them.
source "$(dirname "$0")/../harness/common.sh" "$@"
netns_start 2
for i in 1 2; do
	for j in 1 2; do
		echo "10.77.0.$j job-$((j - 1)).job job-$((j - 1))" >>"/etc/netns/herd-$id-h$i/hosts"
	done
done
python3 -c 'import secrets; print(secrets.token_hex(32))' >"$tmp/secret"
python3 -c 'import secrets; print(secrets.token_hex(32))' >"$tmp/other"
chmod 400 "$tmp/secret" "$tmp/other"

# pod I SECRET ARGS...: the manifest's command in pod I (namespace I + 1)
pod() {
	local i=$1 secret=$2; shift 2
	timeout 120 "$cluster/run" $((i + 1)) env JOB_COMPLETION_INDEX="$i" \
		sh -c 'hostname "job-$0"; exec "$@"' "$i" "$HERD" k8s node --job job --nodes 2 \
		--per-node 2 --port 29400 --secret-file "$secret" "$@"
}

pod 1 "$tmp/secret" -- "$HERD" bench allreduce -b 8 -e 1M -f 32 --iters 3 -w 1 -c 1 >"$tmp/p1" 2>&1 &
p1=$!
pod 0 "$tmp/secret" -- "$HERD" bench allreduce -b 8 -e 1M -f 32 --iters 3 -w 1 -c 1 >"$tmp/p0" 2>&1 \
	|| fail "pod 0 exited $?: $(cat "$tmp/p0")"
wait "$p1" || fail "pod 1 exited $?: $(cat "$tmp/p1")"
out=$(cat "$tmp/p0")
has "$out" "[job-0.job:0] # herd bench allreduce: 4 ranks on 2 hosts"
[[ $(grep -cE '^\[job-0\.job:0\] +[0-9]+ +[0-9]+ +float32 +sum +-1 .* 0 +[0-9.]+ +[0-9.]+ +[0-9.]+ +0$' <<<"$out") == 4 ]] ||
	fail "allreduce rows with #wrong 0: $out"
has "$out" "# Out of bounds values : 0 OK"

# Rank 3 (pod 1) killed: pod 0's launcher names it; both pods fail.
kill3='if [ "$HERD_RANK" = 3 ]; then sleep 1; kill -9 $$; fi; exec "$0" bench allreduce -b 8 -e 8 --iters 1000000 -w 1 -c 0'
pod 1 "$tmp/secret" -- sh -c "$kill3" "$HERD" >"$tmp/p1" 2>&1 &
p1=$!
pod 0 "$tmp/secret" -- sh -c "$kill3" "$HERD" >"$tmp/p0" 2>&1; rc0=$?
wait "$p1"; rc1=$?
[[ $rc0 == 137 ]] || fail "pod 0 exited $rc0, not 137 (rank 3's SIGKILL): $(cat "$tmp/p0")"
[[ $rc1 == 1 ]] || fail "pod 1 exited $rc1, not 1: $(cat "$tmp/p1")"
has "$(cat "$tmp/p0")" "failed: rank 3 on job-1.job (pid "
has "$(cat "$tmp/p0")" ") was killed by signal 9 (Killed)"
has "$(cat "$tmp/p1")" "herd k8s node: job-1.job: the job failed (its launcher, in pod 0, says why)"

# A pod with another secret is refused; pod 0 names the pod that did not join.
pod 1 "$tmp/other" --start-timeout 4 -- true >"$tmp/p1" 2>&1 &
p1=$!
pod 0 "$tmp/secret" --start-timeout 4 -- true >"$tmp/p0" 2>&1 && fail "pod 0 ran without pod 1"
wait "$p1" && fail "pod 1 joined with another secret: $(cat "$tmp/p1")"
has "$(cat "$tmp/p0")" "1 of 2 nodes did not connect back within the start timeout: job-1.job"
has "$(cat "$tmp/p1")" "job-1.job cannot join the job at job-0.job:29400: launcher job-0.job:29400 refused node job-1.job"

# Outside such a pod
out=$(env -u JOB_COMPLETION_INDEX "$HERD" k8s node --job job --nodes 2 --per-node 2 \
	--secret-file "$tmp/secret" -- true 2>&1) && fail "no pod: $out"
has "$out" "herd k8s: JOB_COMPLETION_INDEX is not set: run this in a pod of herd k8s manifest's Job"
out=$(JOB_COMPLETION_INDEX=1 "$HERD" k8s node --job job --nodes 2 --per-node 2 \
	--secret-file "$tmp/none" -- true 2>&1) && fail "no secret: $out"
has "$out" "the job's secret (HERD_JOB_SECRET_FILE): "
out=$(JOB_COMPLETION_INDEX=1 "$HERD" k8s node --job job --nodes 2 -- true 2>&1) && fail "no options: $out"
has "$out" "herd k8s: node needs --job, --nodes, --per-node and --secret-file"
