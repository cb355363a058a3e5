/*
 * herd/comm.h - collective operations between ranks, on host and device
 * memory.
 *
 * A communicator (herd_comm) joins `size` ranks, each in its own process,
 * that met through a rendezvous store (herd/store.h).  Ranks on the same
 * host talk through shared memory, ranks on different hosts through TCP;
 * HERD_TRANSPORT=tcp forces TCP everywhere.
 *
 * Device memory.  Where the NVIDIA driver is present, each call asks it
 * where its buffers are (cuPointerGetAttributes).  Every call on one GPU's
 * memory (device or managed) runs through NCCL (libnccl.so.2, loaded at
 * run time): allreduce, reduce, broadcast, allgather and reduce_scatter as
 * NCCL's collectives, alltoall, gather, scatter, send, recv and sendrecv
 * as groups of ncclSend and ncclRecv.  The NCCL communicator is made at
 * the communicator's first device collective on that GPU, which every rank
 * makes, with rank 0's unique id through the store, in NCCL's non-blocking
 * mode so that the call's deadline covers it (a split makes its own at its
 * first); a point-to-point call before it is HERD_EINVAL.
 * The call queues NCCL's kernel on a stream of the communicator's, which
 * runs after the work queued before on the legacy default stream (and on
 * streams created without cudaStreamNonBlocking; for others use the
 * stream-ordered forms below), and returns when it is done, with every guarantee below (on a timeout, a dead
 * peer, an abort or NCCL's own asynchronous error, the NCCL communicator is
 * aborted with ncclCommAbort; NCCL's failure is HERD_EIO with its text).
 * A call whose buffers are in host and device memory, or on two GPUs, is
 * HERD_EINVAL naming each; a device call where NCCL cannot be loaded or,
 * for the 8-bit floats, is older than 2.24, is HERD_EUNAVAIL.  Reductions map onto NCCL's; AVG
 * is ncclAvg, which for floating types scales each operand by 1/size
 * before summing (the same mean as herd's sum-then-divide, rounded
 * differently).  While the GPU runs a call, its fingerprint goes to the
 * next rank and comes from the previous one on the host transport, so that
 * calls that disagree return HERD_EMISMATCH naming both instead of waiting
 * in NCCL (HERD_DEVICE_CHECK=0 turns this off).  libherd uses the GPU's
 * primary context (the CUDA runtime's) and leaves the calling thread with
 * the context it had.  herd_comm_free finalizes and destroys a healthy
 * NCCL communicator (ncclCommFinalize, at most 2 s) and aborts a broken
 * one.
 *
 * Every call is collective in the MPI/NCCL sense: all ranks of the
 * communicator make the same calls in the same order.  Nothing hangs:
 *  - every call, init included, has the communicator's deadline (default
 *    5 minutes, HERD_TIMEOUT=seconds, or opts.timeout_ms) and then returns
 *    HERD_ETIMEDOUT naming the ranks that did not arrive and the last
 *    operation each completed;
 *  - a peer process that dies is noticed within about 2 seconds, and every
 *    pending and later operation returns HERD_EPEER naming the dead rank
 *    and its host;
 *  - calls that disagree between ranks (another operation, datatype, count
 *    or root) return HERD_EMISMATCH with both fingerprints;
 *  - herd_comm_abort() from any thread makes pending calls return
 *    HERD_EABORTED at once.
 * After any of these errors the communicator is broken: later calls fail
 * with the same status, and it can only be freed.
 *
 * Threads: one communicator is driven by one thread at a time (like an MPI
 * communicator or an NCCL stream), except herd_comm_abort, which any thread
 * may call at any time.  Different communicators are independent.
 */
#ifndef HERD_COMM_H
#define HERD_COMM_H

#include "common.h"
#include "dtype.h"
#include "redop.h"
#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A communicator: the ranks that call collectives together.  Opaque. */
typedef struct herd_comm herd_comm;

/* A nonblocking operation in flight (herd_comm_i*).  Opaque. */
typedef struct herd_comm_request herd_comm_request;

#define HERD_COMM_OPTS_VERSION 2

/* Options of herd_comm_init and herd_comm_init_env.  Zero means default;
 * HERD_* environment variables override the defaults, not explicit values. */
typedef struct herd_comm_opts {
	unsigned int version;      /* HERD_COMM_OPTS_VERSION */
	/* Deadline of every call in ms (default HERD_TIMEOUT seconds, else 300 s). */
	int timeout_ms;
	/* "auto" (shared memory within a host, TCP between), or "tcp"
	 * (default HERD_TRANSPORT, else "auto"). */
	const char *transport;
	/*
	 * Algorithm for allreduce and friends (default HERD_ALGO, else "auto").
	 * "auto" chooses by size and by where the ranks are.  On one host:
	 * latency algorithms (recursive doubling, Bruck, binomial trees, a
	 * one-step exchange) for small messages, bandwidth ones (rings,
	 * pipelined chains, halving-doubling) for large ones, and where every
	 * rank may read the others' memory the shared-memory transport's
	 * direct allreduce.  On several hosts: the algorithm of least
	 * estimated time from a cost model (steps, and the bytes the busiest
	 * link carries in each; the links between hosts as rank 0 sees them,
	 * on every rank: HERD_NET_LINK=LATENCY_US,GBIT_PER_S, or by default
	 * its interface's speed, or HERD_NET_LINK=measure at init), among them
	 * the two-level allreduce, reduce_scatter and allgather where hosts
	 * hold several ranks (inside each host over shared memory, between
	 * hosts by one rank per part of the data, every rank of a host at
	 * once), so that the data crosses each host's link once.  Trees and
	 * rings run host by host whatever the numbering.  `herd bench
	 * --explain` says which, the estimates and why.  docs/design.md
	 * ("sdk/comm") names the table that decides, and bench/RESULTS.md the
	 * measurements behind it.  "hier" takes the two-level algorithms at
	 * every size where the ranks are on several hosts, several on some,
	 * and "auto" elsewhere.  "ring" (bandwidth) and "rd" (latency) force
	 * that choice for every size and turn the direct and one-exchange
	 * paths off.  Every choice gives every rank the same bits.
	 */
	const char *algo;
	/* The network interfaces whose addresses peers connect to, in
	 * NCCL_SOCKET_IFNAME's syntax: name prefixes "eth,ib", exact names
	 * "=eth0", excluded with a leading '^' ("^docker,lo"); default
	 * HERD_SOCKET_IFNAME.  A value that matches no interface of a host
	 * fails there with the value named.  Unset, a rank listens (during
	 * init only) on the address it reaches the store from, as NCCL's
	 * bootstrap takes the interface on NCCL_COMM_ID's subnet; when that is
	 * loopback, on 127.0.0.1 if every rank is on its host, else on the
	 * address that routes toward a remote peer's; with a store that has no
	 * connection (a file store) and no remote peer address, on every
	 * interface, container and virtual bridges (docker*, veth*, virbr*,
	 * ...) and loopback published last.  Never on every interface when
	 * the value names one interface. */
	const char *socket_ifname;
	/* The calls the flight recorder keeps (version 2 on): 0, the default,
	 * HERD_TRACE_RING's count, else 1024; a negative count, none.  The
	 * recorder is in HERD_TRACE_DIR when set (herd launch sets it), else
	 * in memory (docs/reliability.md, "The flight recorder"). */
	int trace_ring;
} herd_comm_opts;

#define HERD_COMM_OPTS_INIT { HERD_COMM_OPTS_VERSION, 0, NULL, NULL, NULL, 0 }

/*
 * Joins the communicator described by the environment, tried in order:
 * herd's own (HERD_RANK, HERD_WORLD_SIZE, HERD_STORE, HERD_JOB_SECRET),
 * torchrun's (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), Slurm's
 * (SLURM_PROCID, SLURM_NTASKS, with HERD_STORE), Open MPI's
 * (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, with HERD_STORE).  With
 * torchrun's variables and no HERD_STORE, rank 0 hosts the store at
 * MASTER_ADDR:MASTER_PORT.  Blocks until all ranks have joined or the
 * deadline passes.  The communicator owns the store connection it makes.
 */
HERD_EXTERN herd_status herd_comm_init_env(herd_comm **out, const herd_comm_opts *opts);

/*
 * Joins a communicator of `size` ranks as `rank`, meeting the others in
 * `store` (borrowed: it must outlive the communicator; a prefixed store,
 * herd_store_prefix, keeps several communicators apart).  Blocks until all
 * ranks have joined or the deadline passes.
 */
HERD_EXTERN herd_status herd_comm_init(herd_comm **out, herd_store *store, int rank,
				       int size, const herd_comm_opts *opts);

/* Ranks that pass this color to herd_comm_split join no new communicator. */
#define HERD_COMM_SPLIT_NONE (-1)

/*
 * Splits comm into one communicator per color, ranks ordered by key then
 * by their rank in comm (MPI_Comm_split).  Collective over comm.  *out is
 * NULL for a rank whose color is HERD_COMM_SPLIT_NONE.  The new
 * communicator uses comm's store, which must outlive it.
 */
HERD_EXTERN herd_status herd_comm_split(herd_comm **out, herd_comm *comm, int color,
					int key);

/* This rank's number, 0..size-1. */
HERD_EXTERN int herd_comm_rank(const herd_comm *comm);

/* Number of ranks. */
HERD_EXTERN int herd_comm_size(const herd_comm *comm);

/*
 * The host name of rank as it reported it at init, into *host, borrowed
 * from the communicator.  HERD_EINVAL naming the rank and the size when it
 * is out of range (*host NULL then).
 */
HERD_EXTERN herd_status herd_comm_host(const herd_comm *comm, int rank, const char **host);

/*
 * Completes pending nonblocking operations and leaves the communicator in
 * step with its peers (a barrier), so that herd_comm_free closes no
 * connection a peer still reads.  Collective.  Does not free.
 */
HERD_EXTERN herd_status herd_comm_finalize(herd_comm *comm);

/* Frees the communicator and its connections.  Local; accepts NULL. */
HERD_EXTERN void herd_comm_free(herd_comm *comm);

/*
 * Makes every pending and later call on comm return HERD_EABORTED, and
 * closes its connections so that peers see HERD_EPEER.  Thread-safe and
 * async-signal-unsafe; returns at once.  HERD_OK, also when comm was
 * already broken or aborted; HERD_EINVAL when comm is NULL.
 * herd_comm_free is still needed.
 */
HERD_EXTERN herd_status herd_comm_abort(herd_comm *comm);

/*
 * The communicator's asynchronous error, without blocking and from any
 * thread, as NCCL's ncclCommGetAsyncError: HERD_OK while it works, else
 * the status it broke with (HERD_EPEER for a peer that died, even while
 * this rank makes no call; HERD_ETIMEDOUT, HERD_EMISMATCH from a call on
 * another thread; HERD_EABORTED), with its message as the last error.
 * HERD_EINVAL when comm is NULL.
 */
HERD_EXTERN herd_status herd_comm_async_error(herd_comm *comm);

/*
 * The operations.  Buffers are host memory; counts are in elements.
 * Out-of-place unless noted: sendbuf == recvbuf is in-place for allreduce,
 * reduce, broadcast; for allgather in-place means
 * sendbuf == recvbuf + rank * count elements, for reduce_scatter
 * recvbuf == sendbuf + rank * count elements (the NCCL convention).
 * A NULL buffer is allowed only with count 0.
 */

/* recvbuf[i] = op over ranks of sendbuf[i], on every rank. */
HERD_EXTERN herd_status herd_comm_allreduce(herd_comm *comm, const void *sendbuf,
					    void *recvbuf, size_t count, herd_dtype dtype,
					    herd_redop op);

/* As allreduce, with the result only on root (recvbuf ignored elsewhere). */
HERD_EXTERN herd_status herd_comm_reduce(herd_comm *comm, const void *sendbuf, void *recvbuf,
					 size_t count, herd_dtype dtype, herd_redop op,
					 int root);

/* recvbuf = root's sendbuf, on every rank (sendbuf ignored off root). */
HERD_EXTERN herd_status herd_comm_broadcast(herd_comm *comm, const void *sendbuf,
					    void *recvbuf, size_t count, herd_dtype dtype,
					    int root);

/* recvbuf (size * count elements) = every rank's sendbuf, in rank order. */
HERD_EXTERN herd_status herd_comm_allgather(herd_comm *comm, const void *sendbuf,
					    void *recvbuf, size_t count, herd_dtype dtype);

/* recvbuf (count elements) = block `rank` of the reduction of every rank's
 * sendbuf (size * count elements). */
HERD_EXTERN herd_status herd_comm_reduce_scatter(herd_comm *comm, const void *sendbuf,
						 void *recvbuf, size_t count,
						 herd_dtype dtype, herd_redop op);

/*
 * Stream-ordered forms, on device memory only (host buffers: HERD_EINVAL):
 * the call is queued on stream (a cudaStream_t; NULL is the legacy default
 * stream), after the work already queued there, and returns once NCCL has
 * queued it, as NCCL's own calls do; what reads its results is queued
 * after it on the same stream.  Each queued call still has the
 * communicator's deadline, counted from when it was queued: a watchdog
 * thread polls the queued work's completion and NCCL's asynchronous error,
 * and on the deadline, an error, a dead peer or an abort it aborts NCCL
 * (which ends the queued kernels) and breaks the communicator; the next
 * call, and herd_comm_async_error, return the error, naming the ranks and
 * hosts as a blocking call's would.  The fingerprint comparison with the
 * neighbouring ranks (above) is made before the call returns, so their
 * host threads meet at each call (HERD_DEVICE_CHECK=0 turns it off).
 * herd_stream is CUDA's cudaStream_t / CUstream.
 */
typedef struct CUstream_st *herd_stream;

HERD_EXTERN herd_status herd_comm_allreduce_stream(herd_comm *comm, const void *sendbuf,
						   void *recvbuf, size_t count, herd_dtype dtype,
						   herd_redop op, herd_stream stream);
HERD_EXTERN herd_status herd_comm_reduce_stream(herd_comm *comm, const void *sendbuf,
						void *recvbuf, size_t count, herd_dtype dtype,
						herd_redop op, int root, herd_stream stream);
HERD_EXTERN herd_status herd_comm_broadcast_stream(herd_comm *comm, const void *sendbuf,
						   void *recvbuf, size_t count, herd_dtype dtype,
						   int root, herd_stream stream);
HERD_EXTERN herd_status herd_comm_allgather_stream(herd_comm *comm, const void *sendbuf,
						   void *recvbuf, size_t count, herd_dtype dtype,
						   herd_stream stream);
HERD_EXTERN herd_status herd_comm_reduce_scatter_stream(herd_comm *comm, const void *sendbuf,
							void *recvbuf, size_t count,
							herd_dtype dtype, herd_redop op,
							herd_stream stream);

/*
 * Groups, as NCCL's ncclGroupStart/End: the device calls (blocking and
 * stream-ordered) made between herd_comm_group_start and the matching
 * herd_comm_group_end are kept, not run, and group_end runs them as one
 * NCCL group (NCCL may fuse them; sends and receives in one group cannot
 * deadlock on each other's order).  Groups nest; the outermost end runs.
 * A call returns HERD_OK when it is kept: its buffers must stay valid, and
 * its outcome is group_end's.  group_end is one call of the communicator,
 * with its deadline; it waits for the blocking calls' work, and queues the
 * stream-ordered ones.  A group that holds a collective is compared with
 * the neighbouring ranks' by the count and a digest of its calls; a group
 * of sends and receives only is not compared.  Inside a group, a call on
 * host memory, a nonblocking host call, barrier, split and finalize are
 * HERD_EINVAL.
 */
HERD_EXTERN herd_status herd_comm_group_start(herd_comm *comm);
HERD_EXTERN herd_status herd_comm_group_end(herd_comm *comm);

/* Block j of rank i's sendbuf lands in block i of rank j's recvbuf; blocks
 * of count elements, size blocks per buffer. */
HERD_EXTERN herd_status herd_comm_alltoall(herd_comm *comm, const void *sendbuf,
					   void *recvbuf, size_t count, herd_dtype dtype);

/* root's recvbuf (size * count elements) = every rank's sendbuf. */
HERD_EXTERN herd_status herd_comm_gather(herd_comm *comm, const void *sendbuf, void *recvbuf,
					 size_t count, herd_dtype dtype, int root);

/* recvbuf (count elements) = block `rank` of root's sendbuf. */
HERD_EXTERN herd_status herd_comm_scatter(herd_comm *comm, const void *sendbuf, void *recvbuf,
					  size_t count, herd_dtype dtype, int root);

/* Point to point: matched in order between a pair of ranks. */
HERD_EXTERN herd_status herd_comm_send(herd_comm *comm, const void *buf, size_t count,
				       herd_dtype dtype, int peer);
HERD_EXTERN herd_status herd_comm_recv(herd_comm *comm, void *buf, size_t count,
				       herd_dtype dtype, int peer);

/* Sends to dst and receives from src at once, so that a ring of ranks
 * each sending to its successor does not deadlock.  dst or src may be the
 * caller itself. */
HERD_EXTERN herd_status herd_comm_sendrecv(herd_comm *comm, const void *sendbuf,
					   size_t sendcount, int dst, void *recvbuf,
					   size_t recvcount, int src, herd_dtype dtype);

/* Returns once every rank has entered it. */
HERD_EXTERN herd_status herd_comm_barrier(herd_comm *comm);

/*
 * Nonblocking variants: start the operation, progressed by a background
 * thread, and return a request in *req.  Buffers must stay untouched until
 * the request completes.  Operations (blocking or not) run in the order
 * they were called.
 */
HERD_EXTERN herd_status herd_comm_iallreduce(herd_comm *comm, const void *sendbuf,
					     void *recvbuf, size_t count, herd_dtype dtype,
					     herd_redop op, herd_comm_request **req);
HERD_EXTERN herd_status herd_comm_ireduce(herd_comm *comm, const void *sendbuf,
					  void *recvbuf, size_t count, herd_dtype dtype,
					  herd_redop op, int root, herd_comm_request **req);
HERD_EXTERN herd_status herd_comm_ibroadcast(herd_comm *comm, const void *sendbuf,
					     void *recvbuf, size_t count, herd_dtype dtype,
					     int root, herd_comm_request **req);
HERD_EXTERN herd_status herd_comm_iallgather(herd_comm *comm, const void *sendbuf,
					     void *recvbuf, size_t count, herd_dtype dtype,
					     herd_comm_request **req);
HERD_EXTERN herd_status herd_comm_ireduce_scatter(herd_comm *comm, const void *sendbuf,
						  void *recvbuf, size_t count,
						  herd_dtype dtype, herd_redop op,
						  herd_comm_request **req);
HERD_EXTERN herd_status herd_comm_ialltoall(herd_comm *comm, const void *sendbuf,
					    void *recvbuf, size_t count, herd_dtype dtype,
					    herd_comm_request **req);
HERD_EXTERN herd_status herd_comm_igather(herd_comm *comm, const void *sendbuf,
					  void *recvbuf, size_t count, herd_dtype dtype,
					  int root, herd_comm_request **req);
HERD_EXTERN herd_status herd_comm_iscatter(herd_comm *comm, const void *sendbuf,
					   void *recvbuf, size_t count, herd_dtype dtype,
					   int root, herd_comm_request **req);
HERD_EXTERN herd_status herd_comm_ibarrier(herd_comm *comm, herd_comm_request **req);

/*
 * Whether a request has completed.  While it runs: HERD_OK and *done false.
 * Once complete: *done true, the operation's status is returned (its
 * message in herd_last_error()), and the request is freed.
 */
HERD_EXTERN herd_status herd_comm_request_test(herd_comm_request *req, bool *done);

/* Waits for a request (within the communicator's deadline), frees it and
 * returns the operation's status. */
HERD_EXTERN herd_status herd_comm_request_wait(herd_comm_request *req);

/* The calls of this header, as herd_comm_explain names them. */
typedef enum herd_comm_op {
	HERD_COMM_OP_ALLREDUCE = 1,
	HERD_COMM_OP_REDUCE,
	HERD_COMM_OP_BROADCAST,
	HERD_COMM_OP_ALLGATHER,
	HERD_COMM_OP_REDUCE_SCATTER,
	HERD_COMM_OP_ALLTOALL,
	HERD_COMM_OP_GATHER,
	HERD_COMM_OP_SCATTER,
	HERD_COMM_OP_SEND,
	HERD_COMM_OP_RECV,
	HERD_COMM_OP_SENDRECV,
	HERD_COMM_OP_BARRIER
} herd_comm_op;

/*
 * Which algorithm a call on host memory would run on comm, and why, as
 * one line of text in buf (cap bytes, always terminated, cut short when it
 * does not fit): the call's size and the size it is compared by, the
 * ranks and hosts, the "algo" setting, the algorithm's name, and each one
 * passed over with its reason or estimate ("4096 bytes (sized as 4096) on
 * 2 ranks, 1 host with at most 2 ranks, algo auto: recursive doubling;
 * passed over ...").  `herd bench --explain` prints it.  count is what the
 * call would be given (the per-rank block of allgather, reduce_scatter,
 * alltoall, gather and scatter; sendcount for sendrecv); redop counts for
 * allreduce, reduce and reduce_scatter, root for reduce, broadcast,
 * gather and scatter, and each is ignored elsewhere.  Every rank gets the
 * same text.  Local: no call is made, nothing is sent.  On device memory
 * NCCL chooses, and this does not say how.  HERD_EINVAL naming the
 * argument for a NULL comm or buf, cap 0, an unknown op, dtype or redop,
 * a root out of range.
 */
HERD_EXTERN herd_status herd_comm_explain(const herd_comm *comm, herd_comm_op op, size_t count,
					  herd_dtype dtype, herd_redop redop, int root, char *buf,
					  size_t cap);

#define HERD_COMM_NCCL_RUNTIME_LEN 512

/*
 * The NCCL that device calls use, one line for people: "NCCL 2.28.9
 * (libnccl.so.2)", or why there is none ("libnccl.so.2: cannot open
 * shared object file: ...", "this libherd was built without NCCL").
 * Loads NCCL if it is not yet.  Writes into buf and returns it.
 * Thread-safe.
 */
HERD_EXTERN const char *herd_comm_nccl_runtime(char buf[HERD_COMM_NCCL_RUNTIME_LEN]);

#ifdef __cplusplus
}
#endif

#endif /* HERD_COMM_H */
