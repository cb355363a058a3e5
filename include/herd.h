/*
 * herd.h - libherd, an embeddable GPU cluster SDK.
 *
 * Include this one header to get the whole public API.  Each area has its
 * own header under herd/:
 *
 *   herd/common.h    status codes, herd_last_error(), versions, logging
 *   herd/dtype.h     element types
 *   herd/redop.h     reductions
 *   herd/node.h      one machine: CPUs, memory, GPUs, NICs, topology matrix
 *   herd/cluster.h   discovery: an inventory of nodes, probed, loaded, saved
 *   herd/hostlist.h  Slurm's hostlist expressions
 *   herd/plan.h      placement plans: ranks, their GPUs, CPUs and NIC, and why
 *   herd/lease.h     GPU leases: no two jobs on one GPU by accident
 *   herd/alloc.h     GPU allocation: the planner, Slurm's grant, this node
 *   herd/store.h     rendezvous key-value store: TCP server and client, file store
 *   herd/comm.h      collectives between ranks on host and device memory
 *   herd/grid.h      a parallel job's grid: named dimensions laid on nodes
 *   herd/device.h    GPU memory and nccl-tests' data, for device benchmarks
 *   herd/job.h       job launch: N ranks over nodes, watched and stopped cleanly
 *   herd/jobs.h      this user's running jobs and services here
 *   herd/k8s.h       a job as the Kubernetes objects that run it
 *   herd/serve.h     services: replicas behind HAProxy, restarted and scaled
 *   herd/bcast.h     a file to every node, as Slurm's sbcast
 *   herd/ckpt.h      checkpoints: sharded save, verified and resharded restore
 *   herd/health.h    per-GPU health checks in DCGM-style levels
 *   herd/telemetry.h GPU, CPU, memory, network and disk samples on a period
 *   herd/metrics.h   the Prometheus exposition of samples and herd's own counters
 *   herd/trace.h     the flight recorders of a job read back: the wavefront
 *
 * Each header declares the names of its own prefix (docs/api.md, "Names").
 *
 * herd/sys/agent.h, not included here, holds the node side of herd's own
 * protocols, for the herd program (as libgit2's git2/sys/).
 */
#ifndef HERD_H
#define HERD_H

#include "herd/common.h"
#include "herd/dtype.h"
#include "herd/redop.h"
#include "herd/node.h"
#include "herd/cluster.h"
#include "herd/hostlist.h"
#include "herd/plan.h"
#include "herd/lease.h"
#include "herd/alloc.h"
#include "herd/store.h"
#include "herd/comm.h"
#include "herd/grid.h"
#include "herd/device.h"
#include "herd/job.h"
#include "herd/k8s.h"
#include "herd/jobs.h"
#include "herd/serve.h"
#include "herd/exclude.h"
#include "herd/bcast.h"
#include "herd/ckpt.h"
#include "herd/health.h"
#include "herd/telemetry.h"
#include "herd/metrics.h"
#include "herd/trace.h"

#endif /* HERD_H */
