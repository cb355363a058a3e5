/*
 * sdk/comm/ops.c - the public collective and point-to-point calls of
 * herd/comm.h: each checks its arguments, describes itself as a herd__op
 * (its fingerprint and buffers) and hands that to the core, which runs it
 * now (herd__comm_run) or on the progress thread (herd__comm_submit).
 *
 * Checks are local and cheap, and what they reject never reaches the wire:
 * a NULL communicator; an unknown dtype or reduction; a root or peer out
 * of range; a NULL buffer with a non-zero count; a byte count that does
 * not fit in ptrdiff_t; buffers that overlap other than in the in-place
 * forms comm.h names.  Each message names the call, the argument and its
 * value.  Gather and scatter also accept the root's own block of the big
 * buffer as the small one (the allgather / reduce_scatter convention).
 */
#include <stdint.h>
#include <string.h>

#include "comm/comm_internal.h"
#include "device.h"

static herd_status check_comm(const char *fn, const herd_comm *comm)
{
	if (comm == NULL)
		return herd__error(HERD_EINVAL, "%s: comm is NULL", fn);
	return HERD_OK;
}

static herd_status check_dtype(const char *fn, herd_dtype dtype)
{
	if ((unsigned)dtype >= HERD_DTYPE_COUNT)
		return herd__error(HERD_EINVAL,
				   "%s: dtype %d is not a herd_dtype (expected 0..%d, %s..%s)",
				   fn, (int)dtype, HERD_DTYPE_COUNT - 1, herd_dtype_name(0),
				   herd_dtype_name(HERD_DTYPE_COUNT - 1));
	return HERD_OK;
}

static herd_status check_redop(const char *fn, herd_redop op)
{
	if ((unsigned)op >= HERD_REDOP_COUNT)
		return herd__error(HERD_EINVAL,
				   "%s: op %d is not a herd_redop (expected 0..%d, sum..avg)", fn,
				   (int)op, HERD_REDOP_COUNT - 1);
	return HERD_OK;
}

/* name is "root", "peer", "dst" or "src". */
static herd_status check_rank(const char *fn, const char *name, int value, int size)
{
	if (value < 0 || value >= size)
		return herd__error(HERD_EINVAL,
				   "%s: %s %d is out of range for a communicator of %d ranks "
				   "(expected 0..%d)",
				   fn, name, value, size, size - 1);
	return HERD_OK;
}

/*
 * *bytes = count elements of dtype times mult (the number of blocks), when
 * that fits in ptrdiff_t, so that every pointer the algorithms form inside
 * the buffer is valid.
 */
static herd_status check_count(const char *fn, const char *name, size_t count,
			       herd_dtype dtype, int mult, size_t *bytes)
{
	size_t es = herd_dtype_size(dtype), m = (size_t)mult;

	if (count > (size_t)PTRDIFF_MAX / es / m) {
		if (mult > 1)
			return herd__error(HERD_EINVAL,
					   "%s: %s %zu of %s times %d ranks is more than "
					   "PTRDIFF_MAX (%td) bytes",
					   fn, name, count, herd_dtype_name(dtype), mult, PTRDIFF_MAX);
		return herd__error(HERD_EINVAL, "%s: %s %zu of %s is more than PTRDIFF_MAX (%td) bytes",
				   fn, name, count, herd_dtype_name(dtype), PTRDIFF_MAX);
	}
	*bytes = count * es * m;
	return HERD_OK;
}

static herd_status check_buf(const char *fn, const char *name, const void *buf, size_t count)
{
	if (buf == NULL && count != 0)
		return herd__error(HERD_EINVAL,
				   "%s: %s is NULL with count %zu (NULL is allowed only with count 0)",
				   fn, name, count);
	return HERD_OK;
}

/* Whether [a, a+alen) and [b, b+blen) share a byte. */
static bool overlaps(const void *a, size_t alen, const void *b, size_t blen)
{
	uintptr_t ua = (uintptr_t)a, ub = (uintptr_t)b;

	if (alen == 0 || blen == 0)
		return false;
	return ua < ub + blen && ub < ua + alen;
}

static herd_status overlap_error(const char *fn, const char *form)
{
	return herd__error(HERD_EINVAL,
			   "%s: sendbuf and recvbuf overlap (the only overlap allowed is %s)", fn,
			   form);
}

/* Whether buf, when used, is on a GPU; device gets its ordinal. */
static herd__mem where(const void *buf, bool used, int *device)
{
	*device = -1;
	return used && buf != NULL ? herd__dev_where(buf, device) : HERD__MEM_HOST;
}

/*
 * Where the call's buffers are: host memory (o->device -1) for herd's own
 * transports, or one GPU's memory for NCCL's (transport/nccl.c).  Buffers
 * in both, or on two GPUs, are refused naming each.
 */
static herd_status place_buffers(const char *fn, const herd_comm *comm, herd__op *o)
{
	bool root = o->fp.root == herd_comm_rank(comm);
	bool send_used = (o->fp.kind != HERD__OP_BROADCAST && o->fp.kind != HERD__OP_SCATTER) ||
			 root;
	bool recv_used = (o->fp.kind != HERD__OP_REDUCE && o->fp.kind != HERD__OP_GATHER) || root;
	int sdev, rdev;
	herd__mem s = where(o->sendbuf, send_used, &sdev);
	herd__mem r = where(o->recvbuf, recv_used, &rdev);

	o->device = -1;
	if (s == HERD__MEM_HOST && r == HERD__MEM_HOST)
		return HERD_OK;
	if (s != r && o->sendbuf != NULL && o->recvbuf != NULL && send_used && recv_used)
		return herd__error(HERD_EINVAL, "%s: sendbuf is in %s memory and recvbuf in %s "
				   "memory: both must be on the host or on one GPU", fn,
				   s == HERD__MEM_DEVICE ? "GPU" : "host",
				   r == HERD__MEM_DEVICE ? "GPU" : "host");
	if (s == HERD__MEM_DEVICE && r == HERD__MEM_DEVICE && sdev != rdev)
		return herd__error(HERD_EINVAL, "%s: sendbuf is on GPU %d and recvbuf on GPU %d: "
				   "both must be on one GPU", fn, sdev, rdev);
	o->device = s == HERD__MEM_DEVICE ? sdev : rdev;
	return HERD_OK;
}

/* Describes a call; NCCL runs it on device memory, and on host memory
 * tune.c picks its algorithm. */
static herd_status op_init(herd__op *o, const char *fn, const herd_comm *comm,
			   herd__op_kind kind, herd_dtype dtype, int redop, int root, size_t count,
			   const void *sendbuf, void *recvbuf)
{
	memset(o, 0, sizeof(*o));
	o->fp.kind = (uint8_t)kind;
	o->fp.dtype = (uint8_t)dtype;
	o->fp.redop = (uint8_t)redop;
	o->fp.root = root;
	o->fp.count = count;
	o->sendbuf = sendbuf;
	o->recvbuf = recvbuf;
	o->count = count;
	o->peer = -1;
	o->peer2 = -1;
	HERD_CHECK(place_buffers(fn, comm, o));
	if (o->device >= 0) {
		herd_status st = herd__nccl_check(comm, o);
		char why[512];

		/* A misuse names the call; what the machine lacks (NCCL)
		 * names the operation already. */
		if (st == HERD_EINVAL) {
			herd__strlcpy(why, herd_last_error(), sizeof(why));
			return herd__error(st, "%s: %s", fn, why);
		}
		if (st != HERD_OK)
			return st;
	}
	if (o->device >= 0) {
		o->run = herd__nccl_run;
		o->algo = HERD__ALGO_NCCL;
	} else {
		o->run = herd__tune_pick(comm, o, &o->algo);
	}
	return HERD_OK;
}

static herd_status check_req(const char *fn, herd_comm_request **req)
{
	if (req == NULL)
		return herd__error(HERD_EINVAL, "%s: req is NULL", fn);
	*req = NULL;
	return HERD_OK;
}

/* ---- one preparation per operation, shared by its blocking and
 * nonblocking forms ------------------------------------------------------- */

static herd_status prep_allreduce(herd__op *o, const char *fn, herd_comm *comm,
				  const void *sendbuf, void *recvbuf, size_t count,
				  herd_dtype dtype, herd_redop op)
{
	size_t bytes = 0;

	HERD_CHECK(check_comm(fn, comm));
	HERD_CHECK(check_dtype(fn, dtype));
	HERD_CHECK(check_redop(fn, op));
	HERD_CHECK(check_count(fn, "count", count, dtype, 1, &bytes));
	HERD_CHECK(check_buf(fn, "sendbuf", sendbuf, count));
	HERD_CHECK(check_buf(fn, "recvbuf", recvbuf, count));
	if (sendbuf != recvbuf && overlaps(sendbuf, bytes, recvbuf, bytes))
		return overlap_error(fn, "sendbuf == recvbuf");
	return op_init(o, fn, comm, HERD__OP_ALLREDUCE, dtype, op, -1, count, sendbuf,
		recvbuf);
}

static herd_status prep_reduce(herd__op *o, const char *fn, herd_comm *comm,
			       const void *sendbuf, void *recvbuf, size_t count, herd_dtype dtype,
			       herd_redop op, int root)
{
	size_t bytes = 0;

	HERD_CHECK(check_comm(fn, comm));
	HERD_CHECK(check_dtype(fn, dtype));
	HERD_CHECK(check_redop(fn, op));
	HERD_CHECK(check_rank(fn, "root", root, herd_comm_size(comm)));
	HERD_CHECK(check_count(fn, "count", count, dtype, 1, &bytes));
	HERD_CHECK(check_buf(fn, "sendbuf", sendbuf, count));
	if (herd_comm_rank(comm) == root) {
		HERD_CHECK(check_buf(fn, "recvbuf", recvbuf, count));
		if (sendbuf != recvbuf && overlaps(sendbuf, bytes, recvbuf, bytes))
			return overlap_error(fn, "sendbuf == recvbuf");
	}
	return op_init(o, fn, comm, HERD__OP_REDUCE, dtype, op, root, count, sendbuf, recvbuf);
}

static herd_status prep_broadcast(herd__op *o, const char *fn, herd_comm *comm,
				  const void *sendbuf, void *recvbuf, size_t count,
				  herd_dtype dtype, int root)
{
	size_t bytes = 0;

	HERD_CHECK(check_comm(fn, comm));
	HERD_CHECK(check_dtype(fn, dtype));
	HERD_CHECK(check_rank(fn, "root", root, herd_comm_size(comm)));
	HERD_CHECK(check_count(fn, "count", count, dtype, 1, &bytes));
	HERD_CHECK(check_buf(fn, "recvbuf", recvbuf, count));
	if (herd_comm_rank(comm) == root) {
		HERD_CHECK(check_buf(fn, "sendbuf", sendbuf, count));
		if (sendbuf != recvbuf && overlaps(sendbuf, bytes, recvbuf, bytes))
			return overlap_error(fn, "sendbuf == recvbuf");
	}
	return op_init(o, fn, comm, HERD__OP_BROADCAST, dtype, 0, root, count, sendbuf,
		recvbuf);
}

static herd_status prep_allgather(herd__op *o, const char *fn, herd_comm *comm,
				  const void *sendbuf, void *recvbuf, size_t count,
				  herd_dtype dtype)
{
	size_t bytes = 0, all = 0;

	HERD_CHECK(check_comm(fn, comm));
	HERD_CHECK(check_dtype(fn, dtype));
	HERD_CHECK(check_count(fn, "count", count, dtype, herd_comm_size(comm), &all));
	bytes = count * herd_dtype_size(dtype);
	HERD_CHECK(check_buf(fn, "sendbuf", sendbuf, count));
	HERD_CHECK(check_buf(fn, "recvbuf", recvbuf, count));
	if (count > 0 && sendbuf != (char *)recvbuf + (size_t)herd_comm_rank(comm) * bytes &&
	    overlaps(sendbuf, bytes, recvbuf, all))
		return overlap_error(fn, "sendbuf == recvbuf + rank * count elements");
	return op_init(o, fn, comm, HERD__OP_ALLGATHER, dtype, 0, -1, count, sendbuf,
		recvbuf);
}

static herd_status prep_reduce_scatter(herd__op *o, const char *fn, herd_comm *comm,
				       const void *sendbuf, void *recvbuf, size_t count,
				       herd_dtype dtype, herd_redop op)
{
	size_t bytes = 0, all = 0;

	HERD_CHECK(check_comm(fn, comm));
	HERD_CHECK(check_dtype(fn, dtype));
	HERD_CHECK(check_redop(fn, op));
	HERD_CHECK(check_count(fn, "count", count, dtype, herd_comm_size(comm), &all));
	bytes = count * herd_dtype_size(dtype);
	HERD_CHECK(check_buf(fn, "sendbuf", sendbuf, count));
	HERD_CHECK(check_buf(fn, "recvbuf", recvbuf, count));
	if (count > 0 &&
	    recvbuf != (const char *)sendbuf + (size_t)herd_comm_rank(comm) * bytes &&
	    overlaps(sendbuf, all, recvbuf, bytes))
		return overlap_error(fn, "recvbuf == sendbuf + rank * count elements");
	return op_init(o, fn, comm, HERD__OP_REDUCE_SCATTER, dtype, op, -1, count,
		sendbuf, recvbuf);
}

static herd_status prep_alltoall(herd__op *o, const char *fn, herd_comm *comm,
				 const void *sendbuf, void *recvbuf, size_t count,
				 herd_dtype dtype)
{
	size_t all = 0;

	HERD_CHECK(check_comm(fn, comm));
	HERD_CHECK(check_dtype(fn, dtype));
	HERD_CHECK(check_count(fn, "count", count, dtype, herd_comm_size(comm), &all));
	HERD_CHECK(check_buf(fn, "sendbuf", sendbuf, count));
	HERD_CHECK(check_buf(fn, "recvbuf", recvbuf, count));
	if (overlaps(sendbuf, all, recvbuf, all))
		return herd__error(HERD_EINVAL,
				   "%s: sendbuf and recvbuf overlap (alltoall has no in-place form)",
				   fn);
	return op_init(o, fn, comm, HERD__OP_ALLTOALL, dtype, 0, -1, count, sendbuf,
		recvbuf);
}

/* Gather (scatter false) and scatter: the big buffer is the root's. */
static herd_status prep_rooted(herd__op *o, const char *fn, herd_comm *comm, bool scatter,
			       const void *sendbuf, void *recvbuf, size_t count, herd_dtype dtype,
			       int root)
{
	size_t bytes = 0, all = 0;
	bool is_root;

	HERD_CHECK(check_comm(fn, comm));
	HERD_CHECK(check_dtype(fn, dtype));
	HERD_CHECK(check_rank(fn, "root", root, herd_comm_size(comm)));
	HERD_CHECK(check_count(fn, "count", count, dtype, herd_comm_size(comm), &all));
	bytes = count * herd_dtype_size(dtype);
	is_root = herd_comm_rank(comm) == root;
	if (!scatter || is_root)
		HERD_CHECK(check_buf(fn, "sendbuf", sendbuf, count));
	if (scatter || is_root)
		HERD_CHECK(check_buf(fn, "recvbuf", recvbuf, count));
	if (is_root && count > 0) {
		const char *big = scatter ? sendbuf : recvbuf;
		const void *small = scatter ? recvbuf : sendbuf;

		if (small != big + (size_t)root * bytes && overlaps(big, all, small, bytes))
			return overlap_error(fn, scatter ? "recvbuf == sendbuf + root * count elements"
							 : "sendbuf == recvbuf + root * count elements");
	}
	return op_init(o, fn, comm, scatter ? HERD__OP_SCATTER : HERD__OP_GATHER, dtype, 0, root,
		       count,
		sendbuf, recvbuf);
}

/* ---- blocking calls ------------------------------------------------------- */

herd_status herd_comm_allreduce(herd_comm *comm, const void *sendbuf, void *recvbuf,
				size_t count, herd_dtype dtype, herd_redop op)
{
	herd__op o;

	HERD_CHECK(prep_allreduce(&o, __func__, comm, sendbuf, recvbuf, count, dtype, op));
	return herd__comm_run(comm, &o);
}

herd_status herd_comm_reduce(herd_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
			     herd_dtype dtype, herd_redop op, int root)
{
	herd__op o;

	HERD_CHECK(prep_reduce(&o, __func__, comm, sendbuf, recvbuf, count, dtype, op, root));
	return herd__comm_run(comm, &o);
}

herd_status herd_comm_broadcast(herd_comm *comm, const void *sendbuf, void *recvbuf,
				size_t count, herd_dtype dtype, int root)
{
	herd__op o;

	HERD_CHECK(prep_broadcast(&o, __func__, comm, sendbuf, recvbuf, count, dtype, root));
	return herd__comm_run(comm, &o);
}

herd_status herd_comm_allgather(herd_comm *comm, const void *sendbuf, void *recvbuf,
				size_t count, herd_dtype dtype)
{
	herd__op o;

	HERD_CHECK(prep_allgather(&o, __func__, comm, sendbuf, recvbuf, count, dtype));
	return herd__comm_run(comm, &o);
}

herd_status herd_comm_reduce_scatter(herd_comm *comm, const void *sendbuf, void *recvbuf,
				     size_t count, herd_dtype dtype, herd_redop op)
{
	herd__op o;

	HERD_CHECK(prep_reduce_scatter(&o, __func__, comm, sendbuf, recvbuf, count, dtype, op));
	return herd__comm_run(comm, &o);
}

/* ---- stream-ordered calls ----------------------------------------------------- */

/* Runs a prepared device call queued on stream. */
static herd_status run_queued(herd_comm *comm, herd__op *o, const char *fn, herd_stream stream)
{
	/* Nothing to queue, on every rank alike whatever its pointers. */
	if (o->fp.count == 0)
		return HERD_OK;
	if (o->device < 0)
		return herd__error(HERD_EINVAL, "%s: the buffers are in host memory; a "
				   "stream-ordered call takes device buffers", fn);
	o->queued = true;
	o->stream = stream;
	return herd__comm_run(comm, o);
}

herd_status herd_comm_allreduce_stream(herd_comm *comm, const void *sendbuf, void *recvbuf,
				       size_t count, herd_dtype dtype, herd_redop op,
				       herd_stream stream)
{
	herd__op o;

	HERD_CHECK(prep_allreduce(&o, __func__, comm, sendbuf, recvbuf, count, dtype, op));
	return run_queued(comm, &o, __func__, stream);
}

herd_status herd_comm_reduce_stream(herd_comm *comm, const void *sendbuf, void *recvbuf,
				    size_t count, herd_dtype dtype, herd_redop op, int root,
				    herd_stream stream)
{
	herd__op o;

	HERD_CHECK(prep_reduce(&o, __func__, comm, sendbuf, recvbuf, count, dtype, op, root));
	return run_queued(comm, &o, __func__, stream);
}

herd_status herd_comm_broadcast_stream(herd_comm *comm, const void *sendbuf, void *recvbuf,
				       size_t count, herd_dtype dtype, int root,
				       herd_stream stream)
{
	herd__op o;

	HERD_CHECK(prep_broadcast(&o, __func__, comm, sendbuf, recvbuf, count, dtype, root));
	return run_queued(comm, &o, __func__, stream);
}

herd_status herd_comm_allgather_stream(herd_comm *comm, const void *sendbuf, void *recvbuf,
				       size_t count, herd_dtype dtype, herd_stream stream)
{
	herd__op o;

	HERD_CHECK(prep_allgather(&o, __func__, comm, sendbuf, recvbuf, count, dtype));
	return run_queued(comm, &o, __func__, stream);
}

herd_status herd_comm_reduce_scatter_stream(herd_comm *comm, const void *sendbuf,
					    void *recvbuf, size_t count, herd_dtype dtype,
					    herd_redop op, herd_stream stream)
{
	herd__op o;

	HERD_CHECK(prep_reduce_scatter(&o, __func__, comm, sendbuf, recvbuf, count, dtype, op));
	return run_queued(comm, &o, __func__, stream);
}

herd_status herd_comm_alltoall(herd_comm *comm, const void *sendbuf, void *recvbuf,
			       size_t count, herd_dtype dtype)
{
	herd__op o;

	HERD_CHECK(prep_alltoall(&o, __func__, comm, sendbuf, recvbuf, count, dtype));
	return herd__comm_run(comm, &o);
}

herd_status herd_comm_gather(herd_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
			     herd_dtype dtype, int root)
{
	herd__op o;

	HERD_CHECK(prep_rooted(&o, __func__, comm, false, sendbuf, recvbuf, count, dtype, root));
	return herd__comm_run(comm, &o);
}

herd_status herd_comm_scatter(herd_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
			      herd_dtype dtype, int root)
{
	herd__op o;

	HERD_CHECK(prep_rooted(&o, __func__, comm, true, sendbuf, recvbuf, count, dtype, root));
	return herd__comm_run(comm, &o);
}

/* A message to the caller itself could only be matched by the same call,
 * so send and recv refuse it (sendrecv takes both sides at once). */
static herd_status check_p2p(const char *fn, herd_comm *comm, const void *buf, size_t count,
			     herd_dtype dtype, int peer)
{
	size_t bytes = 0;

	HERD_CHECK(check_comm(fn, comm));
	HERD_CHECK(check_dtype(fn, dtype));
	HERD_CHECK(check_rank(fn, "peer", peer, herd_comm_size(comm)));
	if (peer == herd_comm_rank(comm))
		return herd__error(HERD_EINVAL,
				   "%s: peer %d is the calling rank itself, which would wait forever "
				   "(a sendrecv can exchange with itself)",
				   fn, peer);
	HERD_CHECK(check_count(fn, "count", count, dtype, 1, &bytes));
	return check_buf(fn, "buf", buf, count);
}

herd_status herd_comm_send(herd_comm *comm, const void *buf, size_t count, herd_dtype dtype,
			   int peer)
{
	herd__op o;

	HERD_CHECK(check_p2p(__func__, comm, buf, count, dtype, peer));
	HERD_CHECK(op_init(&o, __func__, comm, HERD__OP_SEND, dtype, 0, -1, count, buf, NULL));
	o.peer = peer;
	return herd__comm_run(comm, &o);
}

herd_status herd_comm_recv(herd_comm *comm, void *buf, size_t count, herd_dtype dtype, int peer)
{
	herd__op o;

	HERD_CHECK(check_p2p(__func__, comm, buf, count, dtype, peer));
	HERD_CHECK(op_init(&o, __func__, comm, HERD__OP_RECV, dtype, 0, -1, count, NULL, buf));
	o.peer = peer;
	return herd__comm_run(comm, &o);
}

herd_status herd_comm_sendrecv(herd_comm *comm, const void *sendbuf, size_t sendcount, int dst,
			       void *recvbuf, size_t recvcount, int src, herd_dtype dtype)
{
	const char *fn = __func__;
	size_t sbytes = 0, rbytes = 0;
	herd__op o;
	int me;

	HERD_CHECK(check_comm(fn, comm));
	HERD_CHECK(check_dtype(fn, dtype));
	HERD_CHECK(check_rank(fn, "dst", dst, herd_comm_size(comm)));
	HERD_CHECK(check_rank(fn, "src", src, herd_comm_size(comm)));
	me = herd_comm_rank(comm);
	if ((dst == me) != (src == me))
		return herd__error(HERD_EINVAL,
				   "%s: dst %d and src %d: a message to itself must also be received "
				   "from itself (rank %d), or it waits forever",
				   fn, dst, src, me);
	HERD_CHECK(check_count(fn, "sendcount", sendcount, dtype, 1, &sbytes));
	HERD_CHECK(check_count(fn, "recvcount", recvcount, dtype, 1, &rbytes));
	if (dst == me && sendcount != recvcount)
		return herd__error(HERD_EINVAL,
				   "%s: sendcount %zu and recvcount %zu differ for a message to itself",
				   fn, sendcount, recvcount);
	HERD_CHECK(check_buf(fn, "sendbuf", sendbuf, sendcount));
	HERD_CHECK(check_buf(fn, "recvbuf", recvbuf, recvcount));
	if (overlaps(sendbuf, sbytes, recvbuf, rbytes))
		return herd__error(HERD_EINVAL, "%s: sendbuf and recvbuf overlap", fn);
	HERD_CHECK(op_init(&o, __func__, comm, HERD__OP_SENDRECV, dtype, 0, -1, sendcount, sendbuf,
		recvbuf));
	o.recvcount = recvcount;
	o.peer = dst;
	o.peer2 = src;
	return herd__comm_run(comm, &o);
}

static herd_status prep_barrier(herd__op *o, const char *fn, herd_comm *comm)
{
	HERD_CHECK(check_comm(fn, comm));
	return op_init(o, fn, comm, HERD__OP_BARRIER, HERD_UINT8, 0, -1, 0, NULL, NULL);
}

herd_status herd_comm_barrier(herd_comm *comm)
{
	herd__op o;

	HERD_CHECK(prep_barrier(&o, __func__, comm));
	return herd__comm_run(comm, &o);
}

/* ---- nonblocking calls ---------------------------------------------------- */

herd_status herd_comm_iallreduce(herd_comm *comm, const void *sendbuf, void *recvbuf,
				 size_t count, herd_dtype dtype, herd_redop op,
				 herd_comm_request **req)
{
	herd__op o;

	HERD_CHECK(check_req(__func__, req));
	HERD_CHECK(prep_allreduce(&o, __func__, comm, sendbuf, recvbuf, count, dtype, op));
	return herd__comm_submit(comm, &o, req);
}

herd_status herd_comm_ireduce(herd_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
			      herd_dtype dtype, herd_redop op, int root, herd_comm_request **req)
{
	herd__op o;

	HERD_CHECK(check_req(__func__, req));
	HERD_CHECK(prep_reduce(&o, __func__, comm, sendbuf, recvbuf, count, dtype, op, root));
	return herd__comm_submit(comm, &o, req);
}

herd_status herd_comm_ibroadcast(herd_comm *comm, const void *sendbuf, void *recvbuf,
				 size_t count, herd_dtype dtype, int root, herd_comm_request **req)
{
	herd__op o;

	HERD_CHECK(check_req(__func__, req));
	HERD_CHECK(prep_broadcast(&o, __func__, comm, sendbuf, recvbuf, count, dtype, root));
	return herd__comm_submit(comm, &o, req);
}

herd_status herd_comm_iallgather(herd_comm *comm, const void *sendbuf, void *recvbuf,
				 size_t count, herd_dtype dtype, herd_comm_request **req)
{
	herd__op o;

	HERD_CHECK(check_req(__func__, req));
	HERD_CHECK(prep_allgather(&o, __func__, comm, sendbuf, recvbuf, count, dtype));
	return herd__comm_submit(comm, &o, req);
}

herd_status herd_comm_ireduce_scatter(herd_comm *comm, const void *sendbuf, void *recvbuf,
				      size_t count, herd_dtype dtype, herd_redop op,
				      herd_comm_request **req)
{
	herd__op o;

	HERD_CHECK(check_req(__func__, req));
	HERD_CHECK(prep_reduce_scatter(&o, __func__, comm, sendbuf, recvbuf, count, dtype, op));
	return herd__comm_submit(comm, &o, req);
}

herd_status herd_comm_ialltoall(herd_comm *comm, const void *sendbuf, void *recvbuf,
				size_t count, herd_dtype dtype, herd_comm_request **req)
{
	herd__op o;

	HERD_CHECK(check_req(__func__, req));
	HERD_CHECK(prep_alltoall(&o, __func__, comm, sendbuf, recvbuf, count, dtype));
	return herd__comm_submit(comm, &o, req);
}

herd_status herd_comm_igather(herd_comm *comm, const void *sendbuf, void *recvbuf, size_t count,
			      herd_dtype dtype, int root, herd_comm_request **req)
{
	herd__op o;

	HERD_CHECK(check_req(__func__, req));
	HERD_CHECK(prep_rooted(&o, __func__, comm, false, sendbuf, recvbuf, count, dtype, root));
	return herd__comm_submit(comm, &o, req);
}

herd_status herd_comm_iscatter(herd_comm *comm, const void *sendbuf, void *recvbuf,
			       size_t count, herd_dtype dtype, int root, herd_comm_request **req)
{
	herd__op o;

	HERD_CHECK(check_req(__func__, req));
	HERD_CHECK(prep_rooted(&o, __func__, comm, true, sendbuf, recvbuf, count, dtype, root));
	return herd__comm_submit(comm, &o, req);
}

herd_status herd_comm_ibarrier(herd_comm *comm, herd_comm_request **req)
{
	herd__op o;

	HERD_CHECK(check_req(__func__, req));
	HERD_CHECK(prep_barrier(&o, __func__, comm));
	return herd__comm_submit(comm, &o, req);
}

/* ---- what a call would do ------------------------------------------------- */

/* herd_comm_op names the kinds of the fingerprint by their own numbers. */
#define PUBLIC_KINDS_(X)                                                               \
	X(ALLREDUCE) X(REDUCE) X(BROADCAST) X(ALLGATHER) X(REDUCE_SCATTER) X(ALLTOALL) \
	X(GATHER) X(SCATTER) X(SEND) X(RECV) X(SENDRECV) X(BARRIER)
#define SAME_KIND_(k) \
	_Static_assert((int)HERD_COMM_OP_##k == (int)HERD__OP_##k, "herd_comm_op " #k);
PUBLIC_KINDS_(SAME_KIND_)
#undef SAME_KIND_
#undef PUBLIC_KINDS_

herd_status herd_comm_explain(const herd_comm *comm, herd_comm_op op, size_t count,
			      herd_dtype dtype, herd_redop redop, int root, char *buf, size_t cap)
{
	const char *fn = __func__;
	bool reduces = op == HERD_COMM_OP_ALLREDUCE || op == HERD_COMM_OP_REDUCE ||
		       op == HERD_COMM_OP_REDUCE_SCATTER;
	bool rooted = op == HERD_COMM_OP_REDUCE || op == HERD_COMM_OP_BROADCAST ||
		      op == HERD_COMM_OP_GATHER || op == HERD_COMM_OP_SCATTER;
	herd__op o;

	HERD_CHECK(check_comm(fn, comm));
	if (buf == NULL || cap == 0)
		return herd__error(HERD_EINVAL, "%s: buf is NULL or cap is 0: no room for the text",
				   fn);
	buf[0] = '\0';
	if ((int)op < HERD_COMM_OP_ALLREDUCE || (int)op > HERD_COMM_OP_BARRIER)
		return herd__error(HERD_EINVAL, "%s: op %d is not a herd_comm_op (expected "
				   "%d..%d, allreduce..barrier)", fn, (int)op, HERD_COMM_OP_ALLREDUCE,
				   HERD_COMM_OP_BARRIER);
	if (op == HERD_COMM_OP_BARRIER) {
		/* as herd_comm_barrier describes itself */
		dtype = HERD_UINT8;
		count = 0;
	}
	HERD_CHECK(check_dtype(fn, dtype));
	if (reduces)
		HERD_CHECK(check_redop(fn, redop));
	if (rooted)
		HERD_CHECK(check_rank(fn, "root", root, herd_comm_size(comm)));
	memset(&o, 0, sizeof(o));
	o.fp.kind = (uint8_t)op;
	o.fp.dtype = (uint8_t)dtype;
	o.fp.redop = reduces ? (uint8_t)redop : 0;
	o.fp.root = rooted ? root : -1;
	o.fp.count = o.count = count;
	o.peer = o.peer2 = o.device = -1;
	herd__tune_explain(comm, &o, buf, cap);
	return HERD_OK;
}
