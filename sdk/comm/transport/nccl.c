/*
 * sdk/comm/transport/nccl.c - collectives on device memory, through NCCL
 * (libnccl.so.2, loaded at run time), with herd's guarantees around it.
 *
 * A call whose buffers are on a GPU (ops.c asks sdk/base/device.c) runs
 * here (NCCL's collectives, or groups of ncclSend and ncclRecv for the
 * others), and so does a group of such calls (herd_comm_group_end, through
 * this transport's entry of the table, transport.h), numbered and timed by
 * the core like any call, so that the monitor's view of who entered what,
 * the timeout report and the failure rules are the host's:
 *  - the NCCL communicator is made at the communicator's first device
 *    collective, on the buffers' GPU: rank 0's unique id goes through the
 *    communicator's store, and ncclCommInitRankConfig runs in NCCL's
 *    non-blocking mode (blocking = 0) so that the call's deadline covers
 *    init too;
 *  - a collective is queued on the communicator's own stream and an event
 *    after it; the calling thread then polls the event, NCCL's
 *    asynchronous error and the communicator's status until the work is
 *    done, NCCL fails, a peer dies or aborts (the monitor breaks the
 *    communicator within seconds), or the deadline passes.  In the three
 *    last cases it aborts the NCCL communicator (ncclCommAbort) and the
 *    call returns the communicator's error: HERD_EPEER naming the dead
 *    rank, HERD_EABORTED, HERD_ETIMEDOUT naming the ranks that have not
 *    entered the call (herd__comm_timeout), or HERD_EIO with NCCL's text;
 *  - while the GPU runs it, the call's fingerprint goes to the next rank
 *    and comes from the previous one on the host transport (an empty
 *    message whose header carries it, as every host call's does): ranks
 *    that disagree fail with HERD_EMISMATCH naming both calls instead of
 *    waiting in NCCL, and so does every rank, each pair being compared.
 *    HERD_DEVICE_CHECK=0 turns this off.
 * Datatypes and reductions map one to one onto NCCL's; the 8-bit floats
 * need NCCL 2.24 or later and say so.  AVG is NCCL's ncclAvg, which for
 * floating types multiplies each operand by 1/nranks before summing (herd
 * divides the sum): the same mean, rounded differently.  NCCL has no
 * ncclAvg for the 8-bit floats (invalid argument): their AVG is ncclSum,
 * then herd's kernel divides the result by nranks on the same stream; a
 * one-rank AVG is NCCL's SUM, the data itself.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/core.h"
#include "device.h"
#include "herd_config.h"
#include "kernels.h"
#include "net.h"

#if HERD_HAVE_NCCL
#include <nccl.h>

struct nccl_api {
	ncclResult_t (*get_version)(int *);
	const char *(*error_string)(ncclResult_t);
	const char *(*last_error)(ncclComm_t);
	ncclResult_t (*get_unique_id)(ncclUniqueId *);
	ncclResult_t (*init_rank_config)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
	ncclResult_t (*async_error)(ncclComm_t, ncclResult_t *);
	ncclResult_t (*abort)(ncclComm_t);
	ncclResult_t (*finalize)(ncclComm_t);
	ncclResult_t (*destroy)(ncclComm_t);
	ncclResult_t (*allreduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
				  ncclComm_t, cudaStream_t);
	ncclResult_t (*reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t, int,
			       ncclComm_t, cudaStream_t);
	ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
				  cudaStream_t);
	ncclResult_t (*allgather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
				  cudaStream_t);
	ncclResult_t (*reduce_scatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
				       ncclComm_t, cudaStream_t);
	ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
	ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
	ncclResult_t (*group_start)(void);
	ncclResult_t (*group_end)(void);
};

#define NCCL_SYM(fn, field, req) HERD__DL_SYM(struct nccl_api, fn, field, req)

static const herd__dl_symbol nccl_symbols[] = {
	NCCL_SYM(ncclGetVersion, get_version, true),
	NCCL_SYM(ncclGetErrorString, error_string, true),
	NCCL_SYM(ncclGetLastError, last_error, false),
	NCCL_SYM(ncclGetUniqueId, get_unique_id, true),
	NCCL_SYM(ncclCommInitRankConfig, init_rank_config, true),
	NCCL_SYM(ncclCommGetAsyncError, async_error, true),
	NCCL_SYM(ncclCommAbort, abort, true),
	NCCL_SYM(ncclCommFinalize, finalize, true),
	NCCL_SYM(ncclCommDestroy, destroy, true),
	NCCL_SYM(ncclAllReduce, allreduce, true),
	NCCL_SYM(ncclReduce, reduce, true),
	NCCL_SYM(ncclBroadcast, broadcast, true),
	NCCL_SYM(ncclAllGather, allgather, true),
	NCCL_SYM(ncclReduceScatter, reduce_scatter, true),
	NCCL_SYM(ncclSend, send, true),
	NCCL_SYM(ncclRecv, recv, true),
	NCCL_SYM(ncclGroupStart, group_start, true),
	NCCL_SYM(ncclGroupEnd, group_end, true),
};

static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;
static struct nccl_api nccl;
static int nccl_version;      /* 0 when not loaded */
static char nccl_why[512];

static void nccl_load(void)
{
	if (herd__dl_open(HERD_NCCL_LIBRARY, nccl_symbols,
			  sizeof(nccl_symbols) / sizeof(nccl_symbols[0]), &nccl, nccl_why,
			  sizeof(nccl_why)) == NULL)
		return;
	if (nccl.get_version(&nccl_version) != ncclSuccess || nccl_version <= 0) {
		snprintf(nccl_why, sizeof(nccl_why), "%s does not say its version",
			 HERD_NCCL_LIBRARY);
		nccl_version = 0;
	}
}

/* A version code (22800) as "2.28.0". */
static void version_text(int v, char *buf, size_t cap)
{
	snprintf(buf, cap, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
}

/* A collective queued on a caller's stream, until its event says done. */
typedef struct nccl_pending {
	void *event;
	herd__fp fp;
	uint64_t cseq;
	int64_t start_ms, deadline;
} nccl_pending;

#define PENDING_MAX 1024

/*
 * The communicator's NCCL side.  mu guards comm (the watchdog may abort it
 * while the calling thread uses it: every NCCL call on it is made under
 * mu, and none of them blocks) and the queue of stream-ordered work.
 */
struct herd__nccl {
	pthread_mutex_t mu;
	pthread_cond_t cv;      /* work queued, or stop */
	ncclComm_t comm;        /* NULL once aborted */
	int device;
	void *stream, *event;   /* the blocking calls' */
	nccl_pending pending[PENDING_MAX];
	size_t head, npending;  /* a ring */
	void *spare[PENDING_MAX];
	size_t nspare;
	pthread_t watchdog;
	bool watchdog_started, stop;
};

/* "what: NCCL's text (NCCL result N): its last error". */
static herd_status nccl_error(const char *last, ncclResult_t rc, const char *what)
{
	return herd__error(HERD_EIO, "%s: %s (NCCL result %d)%s%s", what, nccl.error_string(rc),
			   (int)rc, last != NULL && last[0] != '\0' ? ": " : "",
			   last != NULL ? last : "");
}

/* What the state of an NCCL communicator herd has aborted reads as (no
 * ncclResult_t has this value). */
#define NCCL_ABORTED ((ncclResult_t)-1)

/* An error of NCCL's: neither success, nor in progress, nor herd's abort. */
static bool nccl_failed(ncclResult_t rc)
{
	return rc != ncclSuccess && rc != ncclInProgress && rc != NCCL_ABORTED;
}

/* NCCL's asynchronous state, and its last error's text when it failed;
 * NCCL_ABORTED once the NCCL communicator is aborted.  With n->mu held
 * (nccl_state takes it). */
static ncclResult_t state_locked(herd__nccl *n, char *last, size_t cap)
{
	ncclResult_t async = NCCL_ABORTED;

	last[0] = '\0';
	if (n->comm != NULL && nccl.async_error(n->comm, &async) != ncclSuccess)
		async = ncclInternalError;
	if (n->comm != NULL && nccl_failed(async) && nccl.last_error != NULL)
		herd__strlcpy(last, nccl.last_error(n->comm), cap);
	return async;
}

static ncclResult_t nccl_state(herd__nccl *n, char *last, size_t cap)
{
	ncclResult_t async;

	pthread_mutex_lock(&n->mu);
	async = state_locked(n, last, cap);
	pthread_mutex_unlock(&n->mu);
	return async;
}

static void nccl_drop(herd__nccl *n)
{
	pthread_mutex_lock(&n->mu);
	if (n->comm != NULL)
		(void)nccl.abort(n->comm);
	n->comm = NULL;
	pthread_mutex_unlock(&n->mu);
}

/*
 * Waits until done() holds, NCCL fails, the communicator breaks or the
 * call's deadline passes; aborts the NCCL communicator in the three last
 * cases.  An NCCL communicator the watchdog aborted is waited on until
 * the watchdog has broken the communicator too (it does right after,
 * without n->mu) or the deadline.  Polls: a spin, then sleeps growing to
 * 1 ms.
 */
typedef herd_status (*nccl_done_fn)(herd__nccl *n, bool *done);

static herd_status nccl_wait(herd_comm *comm, herd__nccl *n, nccl_done_fn done_fn,
			     const char *what)
{
	long sleep_ns = 0;

	for (unsigned int pass = 0;; pass++) {
		char last[256];
		bool done = false;
		herd_status st = done_fn(n, &done);
		ncclResult_t async;

		if (st == HERD_OK && done)
			return HERD_OK;
		async = nccl_state(n, last, sizeof(last));
		if (st == HERD_OK && nccl_failed(async))
			st = nccl_error(last, async, what);
		if (st != HERD_OK) {
			nccl_drop(n);
			return herd__comm_fail(comm, st, true);
		}
		if (atomic_load_explicit(&comm->status, memory_order_relaxed) != HERD_OK) {
			nccl_drop(n);
			return herd__comm_broken(comm);
		}
		if (herd__net_now_ms() >= comm->op_deadline) {
			nccl_drop(n);
			return herd__comm_timeout(comm, NULL, 0);
		}
		if (pass < 64)
			continue;
		sleep_ns = sleep_ns == 0 ? 20000 : sleep_ns < 1000000 ? sleep_ns * 2 : 1000000;
		nanosleep(&(struct timespec){ 0, sleep_ns }, NULL);
	}
}

/* Init (or a non-blocking enqueue or finalize) is done when NCCL's
 * asynchronous state is no longer in progress (an error there is
 * nccl_wait's; an aborted communicator is never done). */
static herd_status state_done(herd__nccl *n, bool *done)
{
	char last[8];

	*done = nccl_state(n, last, sizeof(last)) == ncclSuccess;
	return HERD_OK;
}

static herd_status work_done(herd__nccl *n, bool *done)
{
	return herd__dev_event_query(n->event, done);
}

/* Rank 0's unique id, through the store, in slices so that a broken
 * communicator (rank 0 died) is noticed before the deadline. */
static herd_status share_id(herd_comm *comm, ncclUniqueId *id)
{
	char key[64];
	void *val = NULL;
	size_t len = 0;
	herd_status st;

	snprintf(key, sizeof(key), "nccl-id/%" PRIu64, comm->op_cseq);
	if (comm->rank == 0) {
		ncclResult_t rc = nccl.get_unique_id(id);

		if (rc != ncclSuccess)
			return nccl_error(NULL, rc, "making the NCCL communicator's id");
		return herd_store_set(comm->store, key, id, sizeof(*id));
	}
	for (;;) {
		int left = herd__net_remaining_ms(comm->op_deadline);

		st = herd_store_get(comm->store, key, left < 200 ? left : 200, &val, &len);
		if (st != HERD_ETIMEDOUT || left <= 0)
			break;
		HERD_CHECK(herd__comm_broken(comm));
	}
	if (st == HERD_ETIMEDOUT)
		return herd__comm_timeout(comm, NULL, 0);
	HERD_CHECK(st);
	if (len != sizeof(*id)) {
		free(val);
		return herd__error(HERD_EFORMAT, "the NCCL unique id in the store has %zu bytes, "
				   "not %zu", len, sizeof(*id));
	}
	memcpy(id, val, sizeof(*id));
	free(val);
	return HERD_OK;
}

static void nccl_destroy(herd__nccl *n)
{
	nccl_drop(n);
	herd__dev_event_destroy(n->event);
	herd__dev_stream_destroy(n->stream);
	for (size_t i = 0; i < n->npending; i++)
		herd__dev_event_destroy(n->pending[(n->head + i) % PENDING_MAX].event);
	for (size_t i = 0; i < n->nspare; i++)
		herd__dev_event_destroy(n->spare[i]);
	pthread_mutex_destroy(&n->mu);
	pthread_cond_destroy(&n->cv);
	free(n);
}

/* Makes the NCCL communicator on device, within the call's deadline. */
static herd_status nccl_open(herd_comm *comm, int device)
{
	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	ncclUniqueId id;
	ncclComm_t c = NULL;
	herd__nccl *n;
	ncclResult_t rc;
	herd_status st;

	HERD_CHECK(herd__calloc(&n, 1, sizeof(*n), "the NCCL communicator"));
	pthread_mutex_init(&n->mu, NULL);
	pthread_cond_init(&n->cv, NULL);
	n->device = device;
	st = herd__dev_stream_create(&n->stream);
	if (st == HERD_OK)
		st = herd__dev_event_create(&n->event);
	if (st == HERD_OK)
		st = share_id(comm, &id);
	if (st != HERD_OK)
		goto fail;
	config.blocking = 0;
	rc = nccl.init_rank_config(&c, comm->size, id, comm->rank, &config);
	n->comm = c;
	if (rc != ncclSuccess && rc != ncclInProgress) {
		st = nccl_error(NULL, rc, "making the NCCL communicator");
		goto fail;
	}
	st = nccl_wait(comm, n, state_done, "making the NCCL communicator");
	if (st != HERD_OK)
		goto fail;
	comm->nccl = n;
	return HERD_OK;
fail:
	nccl_destroy(n);
	return st;
}

static herd_status map_dtype(herd_dtype t, ncclDataType_t *out)
{
	static const ncclDataType_t map[HERD_DTYPE_COUNT] = {
		[HERD_INT8] = ncclInt8,         [HERD_UINT8] = ncclUint8,
		[HERD_INT32] = ncclInt32,       [HERD_UINT32] = ncclUint32,
		[HERD_INT64] = ncclInt64,       [HERD_UINT64] = ncclUint64,
		[HERD_FLOAT16] = ncclFloat16,   [HERD_BFLOAT16] = ncclBfloat16,
		[HERD_FLOAT32] = ncclFloat32,   [HERD_FLOAT64] = ncclFloat64,
		[HERD_FLOAT8_E4M3] = ncclFloat8e4m3, [HERD_FLOAT8_E5M2] = ncclFloat8e5m2,
	};
	char v[32];

	if ((t == HERD_FLOAT8_E4M3 || t == HERD_FLOAT8_E5M2) && nccl_version < 22400) {
		version_text(nccl_version, v, sizeof(v));
		return herd__error(HERD_EUNAVAIL, "%s on device memory needs NCCL 2.24 or later; "
				   "this process has NCCL %s", herd_dtype_name(t), v);
	}
	*out = map[t];
	return HERD_OK;
}

static const ncclRedOp_t redops[HERD_REDOP_COUNT] = {
	[HERD_SUM] = ncclSum, [HERD_PROD] = ncclProd, [HERD_MIN] = ncclMin,
	[HERD_MAX] = ncclMax, [HERD_AVG] = ncclAvg,
};

/* An AVG NCCL cannot do: the 8-bit floats'. */
static bool avg_by_division(const herd__op *op)
{
	herd_dtype t = (herd_dtype)op->fp.dtype;

	return op->fp.redop == HERD_AVG && herd_dtype_size(t) == 1 && herd_dtype_is_float(t);
}

/*
 * The reduction NCCL is asked for: SUM where herd divides afterwards, and
 * for the AVG of one rank, which is its own data (NCCL 2.28's one-rank
 * ncclAvg left the last elements of a float64 result unwritten).
 */
static ncclRedOp_t nccl_redop(const herd__op *op, int size)
{
	if (op->fp.redop == HERD_AVG && size == 1)
		return ncclSum;
	return avg_by_division(op) ? ncclSum : redops[op->fp.redop];
}

/* The NCCL call, as messages name it. */
static const char *nccl_call_name(herd__op_kind kind)
{
	switch (kind) {
	case HERD__OP_ALLREDUCE: return "NCCL allreduce";
	case HERD__OP_REDUCE: return "NCCL reduce";
	case HERD__OP_BROADCAST: return "NCCL broadcast";
	case HERD__OP_ALLGATHER: return "NCCL allgather";
	case HERD__OP_REDUCE_SCATTER: return "NCCL reduce_scatter";
	case HERD__OP_SEND: return "NCCL send";
	case HERD__OP_RECV: return "NCCL recv";
	default: return "NCCL sends and receives";
	}
}

/*
 * The calls NCCL has no collective for, as a group of sends and receives
 * (ncclGroupStart/End): alltoall, gather, scatter, sendrecv, and send and
 * recv alone.  A rank's messages to itself are sends and receives too.
 */
static ncclResult_t enqueue_p2p(ncclComm_t c, const herd__op *op, ncclDataType_t t,
				cudaStream_t s, int rank, int size)
{
	size_t b = op->count * herd_dtype_size((herd_dtype)op->fp.dtype);
	const char *sb = op->sendbuf;
	char *rb = op->recvbuf;
	ncclResult_t rc = nccl.group_start(), rc2;
	int root = op->fp.root;

	for (int j = 0; j < size && rc == ncclSuccess; j++) {
		switch ((herd__op_kind)op->fp.kind) {
		case HERD__OP_ALLTOALL:
			rc = nccl.send(sb + (size_t)j * b, op->count, t, j, c, s);
			if (rc == ncclSuccess)
				rc = nccl.recv(rb + (size_t)j * b, op->count, t, j, c, s);
			break;
		case HERD__OP_GATHER:
			if (j == 0)
				rc = nccl.send(sb, op->count, t, root, c, s);
			if (rc == ncclSuccess && rank == root)
				rc = nccl.recv(rb + (size_t)j * b, op->count, t, j, c, s);
			break;
		case HERD__OP_SCATTER:
			if (rank == root)
				rc = nccl.send(sb + (size_t)j * b, op->count, t, j, c, s);
			if (rc == ncclSuccess && j == 0)
				rc = nccl.recv(rb, op->count, t, root, c, s);
			break;
		default:
			if (j > 0)
				break;
			if (op->fp.kind != HERD__OP_RECV)
				rc = nccl.send(sb, op->count, t, op->peer, c, s);
			if (rc == ncclSuccess && op->fp.kind == HERD__OP_RECV)
				rc = nccl.recv(rb, op->count, t, op->peer, c, s);
			if (rc == ncclSuccess && op->fp.kind == HERD__OP_SENDRECV)
				rc = nccl.recv(rb, op->recvcount, t, op->peer2, c, s);
			break;
		}
	}
	rc2 = nccl.group_end();
	return rc != ncclSuccess ? rc : rc2;
}

/* Queues op on stream s, with n->mu held; NCCL_ABORTED once aborted. */
static ncclResult_t enqueue_locked(herd__nccl *n, const herd__op *op, ncclDataType_t t,
				   cudaStream_t s, int rank, int size)
{
	ncclRedOp_t r = nccl_redop(op, size);
	ncclResult_t rc = NCCL_ABORTED;
	ncclComm_t c = n->comm;

	switch (c == NULL ? 0 : (herd__op_kind)op->fp.kind) {
	case 0:
		break;
	case HERD__OP_ALLREDUCE:
		rc = nccl.allreduce(op->sendbuf, op->recvbuf, op->count, t, r, c, s);
		break;
	case HERD__OP_REDUCE:
		rc = nccl.reduce(op->sendbuf, op->recvbuf, op->count, t, r, op->fp.root, c, s);
		break;
	case HERD__OP_BROADCAST:
		rc = nccl.broadcast(op->sendbuf, op->recvbuf, op->count, t, op->fp.root, c, s);
		break;
	case HERD__OP_ALLGATHER:
		rc = nccl.allgather(op->sendbuf, op->recvbuf, op->count, t, c, s);
		break;
	case HERD__OP_REDUCE_SCATTER:
		rc = nccl.reduce_scatter(op->sendbuf, op->recvbuf, op->count, t, r, c, s);
		break;
	default:
		rc = enqueue_p2p(c, op, t, s, rank, size);
		break;
	}
	return rc;
}

/* The stream a call runs on: its caller's, or the communicator's. */
static cudaStream_t stream_of(const herd__nccl *n, const herd__op *op)
{
	return (cudaStream_t)(op->queued ? op->stream : n->stream);
}

/*
 * An AVG NCCL summed (avg_by_division): the result divided by the ranks,
 * queued on the call's stream after NCCL's work, where the result is (the
 * root's of a reduce).
 */
static herd_status divide_avg(const herd_comm *comm, const herd__nccl *n, const herd__op *op)
{
	herd__op_kind kind = (herd__op_kind)op->fp.kind;

	if (!avg_by_division(op) || (kind == HERD__OP_REDUCE && comm->rank != op->fp.root))
		return HERD_OK;
	if (kind != HERD__OP_ALLREDUCE && kind != HERD__OP_REDUCE &&
	    kind != HERD__OP_REDUCE_SCATTER)
		return HERD_OK;
	return herd__k_divide(op->recvbuf, op->count, (herd_dtype)op->fp.dtype, comm->size,
			      (herd__kstream)stream_of(n, op));
}

/* Queues ops[0..count) as one NCCL group (one call: a group of one). */
static ncclResult_t enqueue(herd_comm *comm, herd__nccl *n, const herd__op *ops, size_t count)
{
	ncclResult_t rc, rc2;

	pthread_mutex_lock(&n->mu);
	if (n->comm == NULL) {
		pthread_mutex_unlock(&n->mu);
		return NCCL_ABORTED;
	}
	rc = count > 1 ? nccl.group_start() : ncclSuccess;
	for (size_t i = 0; i < count && rc == ncclSuccess; i++) {
		ncclDataType_t t = ncclInt8;

		/* herd__nccl_check made sure of the datatype */
		(void)map_dtype((herd_dtype)ops[i].fp.dtype, &t);
		rc = enqueue_locked(n, &ops[i], t, stream_of(n, &ops[i]), comm->rank, comm->size);
	}
	if (count > 1) {
		rc2 = nccl.group_end();
		if (rc == ncclSuccess)
			rc = rc2;
	}
	pthread_mutex_unlock(&n->mu);
	return rc;
}

/* The call's fingerprint to the next rank and from the previous one (a
 * point-to-point call's: to its destination, from its source):
 * herd__p2p_exchange compares the headers (HERD_EMISMATCH), and has the
 * call's deadline and the communicator's failures. */
static herd_status check_neighbours(herd_comm *comm, const herd__op *op)
{
	herd__xfer to = { 0 }, from = { 0 };
	bool sends = op->fp.kind != HERD__OP_RECV, recvs = op->fp.kind != HERD__OP_SEND;

	to.peer = (comm->rank + 1) % comm->size;
	from.peer = (comm->rank + comm->size - 1) % comm->size;
	if (herd__op_is_p2p(op->fp.kind)) {
		to.peer = op->peer;
		from.peer = op->fp.kind == HERD__OP_SENDRECV ? op->peer2 : op->peer;
	}
	return herd__p2p_exchange(comm, &to, sends ? 1 : 0, &from, recvs ? 1 : 0);
}

/* ---- the watchdog of stream-ordered work ----------------------------------- */

/*
 * Polls the work queued on callers' streams, oldest first: drops what is
 * done; on NCCL's asynchronous error, a broken communicator (a dead peer,
 * an abort) or the oldest work's deadline, breaks the communicator as a
 * blocking call would and aborts NCCL, which ends the queued kernels.
 * Every millisecond while work is queued.
 */
static void *watchdog_main(void *arg)
{
	herd_comm *comm = arg;
	herd__nccl *n = comm->nccl;

	/* the events' context, current on this thread too */
	if (herd__dev_use(n->device) != HERD_OK)
		herd__log_warn("the NCCL watchdog of rank %d: %s", comm->rank, herd_last_error());
	pthread_mutex_lock(&n->mu);
	while (!n->stop) {
		struct timespec ts;
		herd_status st = HERD_OK;
		nccl_pending front;
		ncclResult_t async;
		char last[256];
		bool late;

		while (n->npending > 0) {
			nccl_pending *p = &n->pending[n->head];
			bool done = false;

			if (herd__dev_event_query(p->event, &done) != HERD_OK || !done)
				break;
			n->spare[n->nspare++] = p->event;
			n->head = (n->head + 1) % PENDING_MAX;
			n->npending--;
		}
		if (n->npending == 0) {
			pthread_cond_wait(&n->cv, &n->mu);
			continue;
		}
		front = n->pending[n->head];
		late = herd__net_now_ms() >= front.deadline;
		async = state_locked(n, last, sizeof(last));
		if (nccl_failed(async))
			st = nccl_error(last, async, nccl_call_name((herd__op_kind)front.fp.kind));
		if (st != HERD_OK || late || atomic_load(&comm->status) != HERD_OK) {
			if (n->comm != NULL)
				(void)nccl.abort(n->comm);
			n->comm = NULL;
			pthread_mutex_unlock(&n->mu);
			if (st != HERD_OK)
				(void)herd__comm_fail(comm, st, true);
			else if (late)
				(void)herd__comm_timeout_call(comm, &front.fp, front.cseq, front.start_ms,
							      true, NULL, 0);
			pthread_mutex_lock(&n->mu);
			/* the queued work ends with NCCL; its events are not waited for */
			while (n->npending > 0) {
				herd__dev_event_destroy(n->pending[n->head].event);
				n->head = (n->head + 1) % PENDING_MAX;
				n->npending--;
			}
			continue;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&n->cv, &n->mu, &ts);
	}
	pthread_mutex_unlock(&n->mu);
	return NULL;
}

/* Hands the work just queued on op's stream to the watchdog. */
static herd_status watch(herd_comm *comm, herd__nccl *n, const herd__op *op)
{
	void *ev = NULL;
	herd_status st = HERD_OK;

	pthread_mutex_lock(&n->mu);
	if (n->npending == PENDING_MAX)
		st = herd__error(HERD_EBUSY, "%s: %d stream-ordered calls are already queued and "
				 "not done", herd__op_name((herd__op_kind)op->fp.kind), PENDING_MAX);
	else if (n->nspare > 0)
		ev = n->spare[--n->nspare];
	pthread_mutex_unlock(&n->mu);
	HERD_CHECK(st);
	if (ev == NULL)
		HERD_CHECK(herd__dev_event_create(&ev));
	st = herd__dev_event_record(ev, op->stream);
	if (st == HERD_OK && !n->watchdog_started) {
		st = herd__comm_thread_start(&n->watchdog, watchdog_main, comm, "the NCCL watchdog");
		n->watchdog_started = st == HERD_OK;
	}
	if (st != HERD_OK) {
		herd__dev_event_destroy(ev);
		return st;
	}
	pthread_mutex_lock(&n->mu);
	n->pending[(n->head + n->npending) % PENDING_MAX] = (nccl_pending){
		ev, op->fp, comm->op_cseq, comm->op_start_ms, comm->op_start_ms + comm->cfg.timeout_ms
	};
	n->npending++;
	pthread_cond_signal(&n->cv);
	pthread_mutex_unlock(&n->mu);
	return HERD_OK;
}

/* ---- the calls --------------------------------------------------------------- */

const char *herd_comm_nccl_runtime(char buf[HERD_COMM_NCCL_RUNTIME_LEN])
{
	char v[32];

	pthread_once(&nccl_once, nccl_load);
	if (nccl_version == 0) {
		snprintf(buf, HERD_COMM_NCCL_RUNTIME_LEN, "%s", nccl_why);
		return buf;
	}
	version_text(nccl_version, v, sizeof(v));
	snprintf(buf, HERD_COMM_NCCL_RUNTIME_LEN, "NCCL %s (%s)", v, HERD_NCCL_LIBRARY);
	return buf;
}

herd_status herd__nccl_check(const herd_comm *comm, const herd__op *op)
{
	const char *name = herd__op_name((herd__op_kind)op->fp.kind);
	ncclDataType_t t;

	pthread_once(&nccl_once, nccl_load);
	if (nccl_version == 0)
		return herd__error(HERD_EUNAVAIL, "%s on device memory needs NCCL: %s", name,
				   nccl_why);
	if (comm->nccl == NULL && herd__op_is_p2p(op->fp.kind))
		return herd__error(HERD_EINVAL, "%s on device memory: this communicator has no NCCL "
				   "communicator yet; every rank makes it at its first device "
				   "collective, which must come first", name);
	if (comm->nccl != NULL && op->device != comm->nccl->device)
		return herd__error(HERD_EINVAL, "%s: the buffers are on GPU %d; this "
				   "communicator's device collectives run on GPU %d", name,
				   op->device, comm->nccl->device);
	return map_dtype((herd_dtype)op->fp.dtype, &t);
}

/*
 * Runs ops[0..count) (one call, or a group's) described by op, with their
 * GPU's context current: makes the NCCL communicator at the first (op is
 * then a collective), queues them, compares op's fingerprint with the
 * neighbours', hands the stream-ordered ones to the watchdog and waits for
 * the blocking ones.
 */
static herd_status run_ops_on(herd_comm *comm, const herd__op *op, const herd__op *ops,
			      size_t count)
{
	const char *what = count > 1 ? "a group of NCCL calls"
				     : nccl_call_name((herd__op_kind)ops[0].fp.kind);
	herd__nccl *n = comm->nccl;
	bool blocking = false;
	ncclResult_t rc;
	herd_status st = HERD_OK;

	if (n == NULL) {
		HERD_CHECK(nccl_open(comm, ops[0].device));
		n = comm->nccl;
	}
	rc = enqueue(comm, n, ops, count);
	if (nccl_failed(rc))
		return nccl_error(NULL, rc, what);
	/* Non-blocking NCCL may still be queueing: the events go after.  An
	 * NCCL communicator the watchdog aborted waits for the report. */
	if (rc != ncclSuccess)
		HERD_CHECK(nccl_wait(comm, n, state_done, what));
	for (size_t i = 0; i < count && st == HERD_OK; i++) {
		st = divide_avg(comm, n, &ops[i]);
		if (st == HERD_OK && ops[i].queued)
			st = watch(comm, n, &ops[i]);
		blocking = blocking || !ops[i].queued;
	}
	if (st == HERD_OK && blocking)
		st = herd__dev_event_record(n->event, n->stream);
	/* A group of sends and receives only is not compared (no collective
	 * order to check it against). */
	if (st == HERD_OK && comm->cfg.device_check && comm->size > 1 &&
	    op->fp.kind != HERD__OP_GROUP_P2P)
		st = check_neighbours(comm, op);
	if (st != HERD_OK) {
		nccl_drop(n);
		return st;
	}
	return blocking ? nccl_wait(comm, n, work_done, what) : HERD_OK;
}

/* run_ops_on, leaving the caller's thread with the context it had. */
static herd_status run_ops(herd_comm *comm, const herd__op *op, const herd__op *ops,
			   size_t count)
{
	void *saved;
	herd_status st = herd__dev_enter(ops[0].device, &saved);

	if (st == HERD_OK)
		st = run_ops_on(comm, op, ops, count);
	herd__dev_leave(saved);
	return st;
}

herd_status herd__nccl_run(herd_comm *comm, const herd__op *op)
{
	return run_ops(comm, op, op, 1);
}

/* The transport's run_group: the calls of herd_comm_group_end's group. */
static herd_status nccl_run_group(herd_comm *comm, const herd__op *op)
{
	const herd__op *ops = op->sendbuf;

	if (comm->nccl == NULL && op->fp.kind == HERD__OP_GROUP_P2P)
		return herd__error(HERD_EINVAL, "a group of sends and receives on device memory: "
				   "this communicator has no NCCL communicator yet; every rank "
				   "makes it at its first device collective, which must come first");
	for (size_t i = 0; i < op->count; i++)
		if (ops[i].device != ops[0].device)
			return herd__error(HERD_EINVAL, "a group's calls are on GPU %d and GPU %d: "
					   "one GPU per communicator", ops[0].device,
					   ops[i].device);
	return run_ops(comm, op, ops, op->count);
}

/* The transport's free: the communicator's NCCL side, if any. */
static void nccl_free(herd_comm *comm)
{
	herd__nccl *n = comm->nccl;
	void *saved;

	if (n == NULL)
		return;
	/* its streams and events are the GPU's context's */
	(void)herd__dev_enter(n->device, &saved);
	if (n->watchdog_started) {
		pthread_mutex_lock(&n->mu);
		n->stop = true;
		pthread_cond_signal(&n->cv);
		pthread_mutex_unlock(&n->mu);
		pthread_join(n->watchdog, NULL);
	}
	/* A healthy communicator finalizes (non-blocking: in progress until
	 * every rank's is, bounded here as every wait) and is destroyed; a
	 * broken one, or one whose finalize fails or does not end within 2 s,
	 * is aborted. */
	if (n->comm != NULL && atomic_load(&comm->status) == HERD_OK) {
		int64_t end = herd__net_now_ms() + 2000;
		ncclResult_t async = nccl.finalize(n->comm);

		while (async == ncclInProgress && herd__net_now_ms() < end) {
			nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
			if (nccl.async_error(n->comm, &async) != ncclSuccess)
				async = ncclInternalError;
		}
		if (async == ncclSuccess) {
			(void)nccl.destroy(n->comm);
			n->comm = NULL;
		}
	}
	nccl_destroy(n);
	comm->nccl = NULL;
	herd__dev_leave(saved);
}

#else /* !HERD_HAVE_NCCL */

const char *herd_comm_nccl_runtime(char buf[HERD_COMM_NCCL_RUNTIME_LEN])
{
	snprintf(buf, HERD_COMM_NCCL_RUNTIME_LEN, "this libherd was built without NCCL");
	return buf;
}

herd_status herd__nccl_check(const herd_comm *comm, const herd__op *op)
{
	(void)comm;
	return herd__error(HERD_EUNAVAIL, "%s on device memory: this libherd was built without "
			   "NCCL", herd__op_name((herd__op_kind)op->fp.kind));
}

herd_status herd__nccl_run(herd_comm *comm, const herd__op *op)
{
	return herd__nccl_check(comm, op);
}

static herd_status nccl_run_group(herd_comm *comm, const herd__op *op)
{
	return herd__nccl_check(comm, op);
}

static void nccl_free(herd_comm *comm)
{
	(void)comm;
}

#endif

/* ---- the transport ------------------------------------------------------ */

/* Every device call runs here (ops.c), and a group gathers only those. */
static bool nccl_groups(const herd__op *op)
{
	return op->run == herd__nccl_run;
}

/* It joins no pair of the host's links: its NCCL communicator has its own,
 * made at the first device collective. */
const herd__transport herd__nccl_transport = {
	.name = "nccl",
	.groups = nccl_groups,
	.run_group = nccl_run_group,
	.free = nccl_free,
};
