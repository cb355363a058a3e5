/*
 * sdk/comm/transport/nccl.c - collectives on device memory, through NCCL
 * (libnccl.so.2, loaded at run time), with herd's guarantees around it.
 *
 * A call whose buffers are on a GPU (ops.c asks sdk/base/device.c) runs
 * here, numbered and timed by the core like any call, so that the
 * monitor's view of who entered what, the timeout report and the failure
 * rules are the host's:
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
 * divides the sum): the same mean, rounded differently.
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
#include "net.h"

#if HERD_HAVE_NCCL
#include <nccl.h>

#define HERD_NCCL_LIBRARY "libnccl.so.2"

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
		snprintf(nccl_why, sizeof(nccl_why), "%s: ncclGetVersion failed",
			 HERD_NCCL_LIBRARY);
		nccl_version = 0;
	}
}

/* A version code (22800) as "2.28.0". */
static void version_text(int v, char *buf, size_t cap)
{
	snprintf(buf, cap, "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
}

/* The communicator's NCCL side. */
struct herd__nccl {
	ncclComm_t comm;        /* NULL once aborted */
	int device;
	void *stream, *event;
	uint64_t init_cseq;     /* the collective that made it */
};

/* "what: NCCL's text (code N)", and NCCL's last error where it has one. */
static herd_status nccl_error(ncclComm_t c, ncclResult_t rc, const char *what)
{
	const char *last = nccl.last_error != NULL ? nccl.last_error(c) : NULL;

	return herd__error(HERD_EIO, "%s: %s (NCCL result %d)%s%s", what, nccl.error_string(rc),
			   (int)rc, last != NULL && last[0] != '\0' ? ": " : "",
			   last != NULL ? last : "");
}

static void nccl_drop(herd__nccl *n)
{
	if (n->comm != NULL)
		(void)nccl.abort(n->comm);
	n->comm = NULL;
}

/*
 * Waits until done() holds, NCCL fails, the communicator breaks or the
 * call's deadline passes; aborts the NCCL communicator in the three last
 * cases.  Polls: a spin, then sleeps growing to 1 ms.
 */
typedef herd_status (*nccl_done_fn)(herd__nccl *n, bool *done);

static herd_status nccl_wait(herd_comm *comm, herd__nccl *n, nccl_done_fn done_fn,
			     const char *what)
{
	long sleep_ns = 0;

	for (unsigned int pass = 0;; pass++) {
		ncclResult_t async = ncclSuccess;
		bool done = false;
		herd_status st = done_fn(n, &done);

		if (st == HERD_OK && done)
			return HERD_OK;
		if (st == HERD_OK && nccl.async_error(n->comm, &async) != ncclSuccess)
			async = ncclInternalError;
		if (st == HERD_OK && async != ncclSuccess && async != ncclInProgress)
			st = nccl_error(n->comm, async, what);
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

/* Init is done when NCCL's asynchronous state is no longer in progress
 * (an error there is nccl_wait's). */
static herd_status init_done(herd__nccl *n, bool *done)
{
	ncclResult_t async = ncclInProgress;

	*done = nccl.async_error(n->comm, &async) == ncclSuccess && async == ncclSuccess;
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
			return nccl_error(NULL, rc, "ncclGetUniqueId");
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

/* Makes the NCCL communicator on device, within the call's deadline. */
static herd_status nccl_open(herd_comm *comm, int device)
{
	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	ncclUniqueId id;
	herd__nccl *n;
	ncclResult_t rc;
	herd_status st;

	pthread_once(&nccl_once, nccl_load);
	if (nccl_version == 0)
		return herd__error(HERD_EUNAVAIL, "device buffers need NCCL: %s", nccl_why);
	HERD_CHECK(herd__dev_use(device));
	HERD_CHECK(herd__calloc(&n, 1, sizeof(*n), "the NCCL communicator"));
	n->device = device;
	n->init_cseq = comm->op_cseq;
	st = herd__dev_stream_create(&n->stream);
	if (st == HERD_OK)
		st = herd__dev_event_create(&n->event);
	if (st == HERD_OK)
		st = share_id(comm, &id);
	if (st != HERD_OK)
		goto fail;
	config.blocking = 0;
	rc = nccl.init_rank_config(&n->comm, comm->size, id, comm->rank, &config);
	if (rc != ncclSuccess && rc != ncclInProgress) {
		st = nccl_error(NULL, rc, "ncclCommInitRankConfig");
		if (n->comm != NULL)
			nccl_drop(n);
		goto fail;
	}
	st = nccl_wait(comm, n, init_done, "ncclCommInitRankConfig");
	if (st != HERD_OK)
		goto fail;
	comm->nccl = n;
	return HERD_OK;
fail:
	herd__dev_event_destroy(n->event);
	herd__dev_stream_destroy(n->stream);
	free(n);
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

/* NCCL's name of the call, for messages. */
static const char *nccl_call_name(herd__op_kind kind)
{
	switch (kind) {
	case HERD__OP_ALLREDUCE: return "ncclAllReduce";
	case HERD__OP_REDUCE: return "ncclReduce";
	case HERD__OP_BROADCAST: return "ncclBroadcast";
	case HERD__OP_ALLGATHER: return "ncclAllGather";
	case HERD__OP_REDUCE_SCATTER: return "ncclReduceScatter";
	default: return "NCCL";
	}
}

/* Queues op on the communicator's stream. */
static ncclResult_t enqueue(herd_comm *comm, const herd__op *op, ncclDataType_t t)
{
	ncclComm_t c = comm->nccl->comm;
	cudaStream_t s = (cudaStream_t)comm->nccl->stream;
	ncclRedOp_t r = redops[op->fp.redop];

	switch ((herd__op_kind)op->fp.kind) {
	case HERD__OP_ALLREDUCE:
		return nccl.allreduce(op->sendbuf, op->recvbuf, op->count, t, r, c, s);
	case HERD__OP_REDUCE:
		return nccl.reduce(op->sendbuf, op->recvbuf, op->count, t, r, op->fp.root, c, s);
	case HERD__OP_BROADCAST:
		return nccl.broadcast(op->sendbuf, op->recvbuf, op->count, t, op->fp.root, c, s);
	case HERD__OP_ALLGATHER:
		return nccl.allgather(op->sendbuf, op->recvbuf, op->count, t, c, s);
	case HERD__OP_REDUCE_SCATTER:
		return nccl.reduce_scatter(op->sendbuf, op->recvbuf, op->count, t, r, c, s);
	default:
		return ncclInvalidUsage;
	}
}

/* The call's fingerprint to the next rank and from the previous one:
 * herd__p2p_exchange compares the headers (HERD_EMISMATCH), and has the
 * call's deadline and the communicator's failures. */
static herd_status check_neighbours(herd_comm *comm)
{
	herd__xfer to = { 0 }, from = { 0 };

	to.peer = (comm->rank + 1) % comm->size;
	from.peer = (comm->rank + comm->size - 1) % comm->size;
	return herd__p2p_exchange(comm, &to, 1, &from, 1);
}

herd_status herd__nccl_run(herd_comm *comm, const herd__op *op)
{
	herd__nccl *n = comm->nccl;
	ncclDataType_t t = ncclInt8;
	const char *what = nccl_call_name((herd__op_kind)op->fp.kind);
	ncclResult_t rc;

	if (n == NULL) {
		HERD_CHECK(nccl_open(comm, op->device));
		n = comm->nccl;
	}
	if (op->device != n->device)
		return herd__error(HERD_EINVAL, "%s: the buffers are on GPU %d; this "
				   "communicator's device collectives run on GPU %d",
				   herd__op_name((herd__op_kind)op->fp.kind), op->device, n->device);
	HERD_CHECK(map_dtype((herd_dtype)op->fp.dtype, &t));
	HERD_CHECK(herd__dev_use(n->device));
	rc = enqueue(comm, op, t);
	if (rc != ncclSuccess && rc != ncclInProgress)
		return nccl_error(n->comm, rc, what);
	/* Non-blocking NCCL may still be queueing: the event goes after. */
	if (rc == ncclInProgress)
		HERD_CHECK(nccl_wait(comm, n, init_done, what));
	HERD_CHECK(herd__dev_event_record(n->event, n->stream));
	if (comm->cfg.device_check && comm->size > 1) {
		herd_status st = check_neighbours(comm);

		if (st != HERD_OK) {
			nccl_drop(n);
			return st;
		}
	}
	return nccl_wait(comm, n, work_done, what);
}

void herd__nccl_free(herd_comm *comm)
{
	herd__nccl *n = comm->nccl;

	if (n == NULL)
		return;
	/* A healthy communicator finalizes (bounded, as every wait); a broken
	 * one, or one whose finalize fails, is aborted. */
	if (n->comm != NULL && atomic_load(&comm->status) == HERD_OK &&
	    nccl.finalize(n->comm) == ncclSuccess) {
		int64_t end = herd__net_now_ms() + 2000;
		ncclResult_t async = ncclInProgress;

		while (nccl.async_error(n->comm, &async) == ncclSuccess && async == ncclInProgress &&
		       herd__net_now_ms() < end)
			nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
		if (async == ncclSuccess) {
			(void)nccl.destroy(n->comm);
			n->comm = NULL;
		}
	}
	nccl_drop(n);
	herd__dev_event_destroy(n->event);
	herd__dev_stream_destroy(n->stream);
	free(n);
	comm->nccl = NULL;
}

#else /* !HERD_HAVE_NCCL */

/* The call's fingerprint to the next rank and from the previous one:
 * herd__p2p_exchange compares the headers (HERD_EMISMATCH), and has the
 * call's deadline and the communicator's failures. */
static herd_status check_neighbours(herd_comm *comm)
{
	herd__xfer to = { 0 }, from = { 0 };

	to.peer = (comm->rank + 1) % comm->size;
	from.peer = (comm->rank + comm->size - 1) % comm->size;
	return herd__p2p_exchange(comm, &to, 1, &from, 1);
}

herd_status herd__nccl_run(herd_comm *comm, const herd__op *op)
{
	(void)comm;
	return herd__error(HERD_EUNAVAIL, "%s on device memory: this libherd was built without "
			   "NCCL", herd__op_name((herd__op_kind)op->fp.kind));
}

void herd__nccl_free(herd_comm *comm)
{
	(void)comm;
}

#endif
