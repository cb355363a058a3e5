#!/usr/bin/env bash
# libherd.so must export only public herd_* functions (those of herd.h and of
# herd/sys/agent.h, the node side the herd program runs): no internal herd__*
# names and nothing from the libraries it links.
set -euo pipefail
lib=$1
syms=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sort)
[ -n "$syms" ] || { echo "no exported symbols in $lib"; exit 1; }
bad=$(printf '%s\n' "$syms" | grep -v '^herd_' || true)
internal=$(printf '%s\n' "$syms" | grep '^herd__' || true)
if [ -n "$bad$internal" ]; then
	echo "unexpected exports from $lib:"; printf '%s\n' $bad $internal
	exit 1
fi
for want in herd_version herd_last_error herd_status_describe herd_cluster_discover \
	herd_store_connect herd_store_server_start herd_comm_explain herd_comm_nccl_runtime \
	herd_device_supported herd_device_fill herd_device_verify herd_agent_exec \
	herd_agent_connect herd_agent_discover_relay herd_agent_bcast_receive \
	herd_job_lines_create herd_job_lines_pop herd_job_output_lines herd_job_interrupt \
	herd_job_get_state herd_telemetry_create herd_telemetry_next herd_telemetry_pack \
	herd_telemetry_json herd_metrics_create herd_metrics_write; do
	# A here-string, not a pipe: grep -q leaves at the first match, and
	# under pipefail the writer's SIGPIPE would fail the check.
	grep -qx "$want" <<<"$syms" || { echo "missing export: $want"; exit 1; }
done
echo "$(printf '%s\n' "$syms" | wc -l) exports, all public herd_* names"
