/*
 * sdk/comm/core.c - the communicator: init (meeting in the store, then
 * connecting through the transports of herd__transports[], transport.h),
 * split, the calls' order, numbering and deadlines, the progress thread of
 * nonblocking calls, failures, finalize, destroy, abort.  See core.h for
 * the lifetime rules.
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base.h"
#include "comm/core.h"
#include "comm/stats.h"
#include "mpjson.h"
#include "net.h"
#include "schema.h"
#include "auth.h"

#define INFO_VERSION 2
#define INFO_MAX (64 * 1024)
/* How long a timed-out call waits for its peers to say what they are doing. */
#define QUERY_WAIT_MS 500
/* Ranks named one by one in a message before "...". */
#define RANKS_SHOWN 16

struct herd_comm_request {
	herd_comm_request *next;
	herd_comm *comm;
	herd__op op;
	uint64_t cseq;
	atomic_int done;
	herd_status st;
	char msg[HERD__COMM_MSG_MAX];
};

/* ---- names ---------------------------------------------------------------- */

enum { F_DTYPE = 1, F_REDOP = 2, F_ROOT = 4, F_P2P = 8, F_GROUP = 16 };

/* X(kind, name, the fingerprint fields that mean something for it) */
#define HERD__OP_TABLE(X)                                    \
	X(ALLREDUCE, "allreduce", F_DTYPE | F_REDOP)         \
	X(REDUCE, "reduce", F_DTYPE | F_REDOP | F_ROOT)      \
	X(BROADCAST, "broadcast", F_DTYPE | F_ROOT)          \
	X(ALLGATHER, "allgather", F_DTYPE)                   \
	X(REDUCE_SCATTER, "reduce_scatter", F_DTYPE | F_REDOP) \
	X(ALLTOALL, "alltoall", F_DTYPE)                     \
	X(GATHER, "gather", F_DTYPE | F_ROOT)                \
	X(SCATTER, "scatter", F_DTYPE | F_ROOT)              \
	X(SEND, "send", F_DTYPE | F_P2P)                     \
	X(RECV, "recv", F_DTYPE | F_P2P)                     \
	X(SENDRECV, "sendrecv", F_DTYPE | F_P2P)             \
	X(BARRIER, "barrier", 0)                             \
	X(SPLIT, "split", 0)                                 \
	X(FINALIZE, "finalize", 0)                           \
	X(GROUP, "group", F_GROUP)                           \
	X(GROUP_P2P, "group", F_GROUP | F_P2P)

static const struct {
	const char *name;
	int flags;
} op_table[] = {
#define HERD__OP_ROW_(kind, name, flags) [HERD__OP_##kind] = { name, flags },
	HERD__OP_TABLE(HERD__OP_ROW_)
#undef HERD__OP_ROW_
};

#define OP_TABLE_LEN ((int)(sizeof(op_table) / sizeof(op_table[0])))

const char *herd__op_name(herd__op_kind kind)
{
	if ((int)kind <= 0 || (int)kind >= OP_TABLE_LEN || op_table[kind].name == NULL)
		return "unknown call";
	return op_table[kind].name;
}

static int op_flags(int kind)
{
	if (kind <= 0 || kind >= OP_TABLE_LEN)
		return 0;
	return op_table[kind].flags;
}

bool herd__op_is_p2p(int kind)
{
	return (op_flags(kind) & F_P2P) != 0;
}

void herd__fp_format(const herd__fp *fp, char *buf, size_t cap)
{
	int flags = op_flags(fp->kind);
	size_t o;

	if (cap == 0)
		return;
	snprintf(buf, cap, "#%" PRIu64 " %s", fp->seq, herd__op_name((herd__op_kind)fp->kind));
	o = strlen(buf);
	if ((flags & F_DTYPE) && o < cap)
		o += (size_t)snprintf(buf + o, cap - o, " %s", herd_dtype_name((herd_dtype)fp->dtype));
	if ((flags & F_REDOP) && o < cap)
		o += (size_t)snprintf(buf + o, cap - o, " %s", herd_redop_name((herd_redop)fp->redop));
	if ((flags & F_DTYPE) && o < cap)
		o += (size_t)snprintf(buf + o, cap - o, " count=%" PRIu64, fp->count);
	if ((flags & F_ROOT) && o < cap)
		snprintf(buf + o, cap - o, " root=%" PRId32, fp->root);
	/* a group: how many calls, and a digest of their fingerprints */
	if ((flags & F_GROUP) && o < cap)
		snprintf(buf + o, cap - o, " of %" PRIu64 " calls (digest %08" PRIx32 ")", fp->count,
			 (uint32_t)fp->root);
}

const char *herd__comm_who(const herd_comm *comm, int rank, char *buf, size_t cap)
{
	if (rank >= 0 && rank < comm->size && comm->name[0] != '\0' && comm->parent != NULL)
		snprintf(buf, cap, "rank %d (host %s, in %s, rank %d of its parent)", rank,
			 comm->peers[rank].host, comm->name, comm->parent[rank]);
	else if (rank >= 0 && rank < comm->size)
		snprintf(buf, cap, "rank %d (host %s)", rank, comm->peers[rank].host);
	else
		snprintf(buf, cap, "rank %d", rank);
	return buf;
}


/* "rank 3", "ranks 2, 3, 5", "ranks 0, 1, ... (40 in all)". */
static void format_ranks(char *buf, size_t cap, const int *ranks, size_t n)
{
	size_t o;

	snprintf(buf, cap, "%s", n == 1 ? "rank" : "ranks");
	o = strlen(buf);
	for (size_t i = 0; i < n && i < RANKS_SHOWN && o < cap; i++)
		o += (size_t)snprintf(buf + o, cap - o, "%s %d", i > 0 ? "," : "", ranks[i]);
	if (n > RANKS_SHOWN && o < cap)
		snprintf(buf + o, cap - o, ", ... (%zu in all)", n);
}

/* Appends to a message buffer, keeping it NUL-terminated when full. */
static void msg_append(char *buf, size_t cap, size_t *o, const char *fmt, ...) HERD_PRINTF(4, 5);

static void msg_append(char *buf, size_t cap, size_t *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*o >= cap)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *o, cap - *o, fmt, ap);
	va_end(ap);
	if (n > 0)
		*o = *o + (size_t)n >= cap ? cap - 1 : *o + (size_t)n;
}

/* ---- failures ------------------------------------------------------------- */

/* Records the first failure; true when this one was it. */
static bool record_failure(herd_comm *comm, herd_status st, bool propagate, const char *msg)
{
	bool first = false;

	pthread_mutex_lock(&comm->fail_mu);
	if (atomic_load(&comm->status) == HERD_OK) {
		herd__strlcpy(comm->fail_msg, msg, sizeof(comm->fail_msg));
		comm->fail_propagate = propagate;
		atomic_store(&comm->status, (int)st);
		herd__trace_broken(&comm->trace, st, msg);
		first = true;
	}
	pthread_mutex_unlock(&comm->fail_mu);
	if (first) {
		herd__log_debug("communicator broken on rank %d: %s: %s", comm->rank,
				herd_status_name(st), msg);
		/* The peers are told before whatever waits here wakes: a process
		 * that exits on the error has told them why. */
		if (propagate)
			herd__comm_tell_peers(comm);
		herd__comm_wake(comm);
	}
	return first;
}

herd_status herd__comm_fail(herd_comm *comm, herd_status st, bool propagate)
{
	char msg[HERD__COMM_MSG_MAX];

	if (st == HERD_OK)
		return HERD_OK;
	herd__strlcpy(msg, herd_last_error(), sizeof(msg));
	record_failure(comm, st, propagate, msg);
	return herd__comm_broken(comm);
}

void herd__comm_fail_msg(herd_comm *comm, herd_status st, bool propagate, const char *fmt, ...)
{
	char msg[HERD__COMM_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	record_failure(comm, st, propagate, msg);
}

herd_status herd__comm_broken(herd_comm *comm)
{
	char msg[HERD__COMM_MSG_MAX];
	herd_status st = (herd_status)atomic_load(&comm->status);

	if (st == HERD_OK)
		return HERD_OK;
	pthread_mutex_lock(&comm->fail_mu);
	st = (herd_status)atomic_load(&comm->status);
	memcpy(msg, comm->fail_msg, sizeof(msg));
	pthread_mutex_unlock(&comm->fail_mu);
	return herd__error(st, "%s", msg);
}

void herd__comm_wake(herd_comm *comm)
{
	uint64_t one = 1;

	if (comm->wake_fd >= 0) {
		ssize_t n = write(comm->wake_fd, &one, sizeof(one));

		(void)n;
	}
	herd__comm_ring(comm);
}

void herd__comm_doing(herd_comm *comm, char *buf, size_t cap)
{
	char who[HERD__COMM_HOST_MAX + 32];
	uint64_t done = atomic_load(&comm->st_done_seq);

	herd__comm_who(comm, comm->rank, who, sizeof(who));
	if (atomic_load(&comm->st_busy))
		snprintf(buf, cap, "%s #%" PRIu64 " failed on %s",
			 herd__op_name((herd__op_kind)atomic_load(&comm->st_entered_kind)),
			 (uint64_t)atomic_load(&comm->st_entered_seq), who);
	else if (done > 0)
		snprintf(buf, cap, "%s, after #%" PRIu64 " %s", who, done,
			 herd__op_name((herd__op_kind)atomic_load(&comm->st_done_kind)));
	else
		snprintf(buf, cap, "%s, before its first call", who);
}

/* What a peer said it is doing, for a timeout message. */
static void describe_peer(herd_comm *comm, int j, const herd__call_state *s, bool answered,
			  bool behind, char *buf, size_t cap, size_t *o)
{
	char who[HERD__COMM_HOST_MAX + 32];

	herd__comm_who(comm, j, who, sizeof(who));
	if (!answered && atomic_load(&comm->peers[j].left)) {
		msg_append(buf, cap, o, "%s has destroyed its communicator", who);
		return;
	}
	if (!answered) {
		msg_append(buf, cap, o, "%s did not answer (stopped, overloaded or unreachable)",
			   who);
		return;
	}
	if (s->busy && !behind) {
		msg_append(buf, cap, o, "%s is in #%" PRIu64 " %s", who, s->entered_seq,
			   herd__op_name((herd__op_kind)s->entered_kind));
		return;
	}
	msg_append(buf, cap, o, "%s did not arrive; ", who);
	if (s->busy)
		msg_append(buf, cap, o, "it is still in #%" PRIu64 " %s", s->entered_seq,
			   herd__op_name((herd__op_kind)s->entered_kind));
	else if (s->done_seq > 0)
		msg_append(buf, cap, o, "its last completed call was #%" PRIu64 " %s", s->done_seq,
			   herd__op_name((herd__op_kind)s->done_kind));
	else
		msg_append(buf, cap, o, "it has completed no call");
}

herd_status herd__comm_timeout(herd_comm *comm, const int *waiting, size_t nwaiting)
{
	return herd__comm_timeout_call(comm, &comm->op->fp, comm->op_cseq, comm->op_start_ms,
				       false, waiting, nwaiting);
}

herd_status herd__comm_timeout_call(herd_comm *comm, const herd__fp *fp, uint64_t cseq,
				    int64_t start_ms, bool queued, const int *waiting,
				    size_t nwaiting)
{
	char msg[HERD__COMM_MSG_MAX], who[HERD__COMM_HOST_MAX + 32];
	herd__call_state *states = NULL;
	bool *answered = NULL, *named = NULL, p2p;
	size_t o = 0, nnamed = 0;

	if (herd__calloc(&states, (size_t)comm->size, sizeof(*states), "a timeout report") !=
		    HERD_OK ||
	    herd__calloc(&answered, (size_t)comm->size, sizeof(*answered), "a timeout report") !=
		    HERD_OK ||
	    herd__calloc(&named, (size_t)comm->size, sizeof(*named), "a timeout report") != HERD_OK) {
		free(states);
		free(answered);
		return herd__comm_fail(comm, HERD_ENOMEM, true);
	}
	herd__monitor_query(comm, QUERY_WAIT_MS, states, answered);
	p2p = herd__op_is_p2p(fp->kind);
	msg_append(msg, sizeof(msg), &o, "%s #%" PRIu64 " %s %.1f s on %s: ",
		   herd__op_name((herd__op_kind)fp->kind), fp->seq,
		   queued ? "queued on a stream did not complete within" : "timed out after",
		   (double)(herd__net_now_ms() - start_ms) / 1000.0,
		   herd__comm_who(comm, comm->rank, who, sizeof(who)));
	/* A collective: the ranks that have not reached it. */
	for (int j = 0; j < comm->size && !p2p; j++) {
		bool behind = answered[j] && states[j].entered_cseq < cseq;

		if (j == comm->rank || !(behind || !answered[j]))
			continue;
		if (nnamed > 0)
			msg_append(msg, sizeof(msg), &o, "; ");
		describe_peer(comm, j, &states[j], answered[j], behind, msg, sizeof(msg), &o);
		named[j] = true;
		nnamed++;
	}
	/* Everyone is there (or it is point-to-point): who it still waits on. */
	for (size_t i = 0; i < nwaiting; i++) {
		int j = waiting[i];

		if (j < 0 || j >= comm->size || named[j])
			continue;
		msg_append(msg, sizeof(msg), &o, "%s", nnamed > 0 ? "; " :
			   p2p ? "" : "every rank arrived; ");
		msg_append(msg, sizeof(msg), &o, "waiting for ");
		describe_peer(comm, j, &states[j], answered[j], p2p && !states[j].busy,
			      msg, sizeof(msg), &o);
		named[j] = true;
		nnamed++;
	}
	if (nnamed == 0)
		msg_append(msg, sizeof(msg), &o, "no peer is missing");
	if (comm->cfg.timeout_from[0] != '\0')
		msg_append(msg, sizeof(msg), &o, "; the deadline was %s seconds",
			   comm->cfg.timeout_from);
	free(states);
	free(answered);
	free(named);
	return herd__comm_fail(comm, herd__error(HERD_ETIMEDOUT, "%s", msg), true);
}

/* ---- threads -------------------------------------------------------------- */

/* Every signal is blocked in library threads, so that the application's
 * signals go to its own threads. */
herd_status herd__comm_thread_start(pthread_t *t, void *(*fn)(void *), void *arg,
				    const char *what)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0)
		return herd__error_errno(HERD_ESYS, rc, "cannot start the %s thread", what);
	return HERD_OK;
}

/* ---- the info record: who a rank is and where it listens ------------------- */

static void self_identity(herd__peer *me)
{
	struct stat sb;
	char *boot = NULL;
	size_t len = 0;

	if (gethostname(me->host, sizeof(me->host) - 1) != 0)
		herd__strlcpy(me->host, "?", sizeof(me->host));
	me->host[sizeof(me->host) - 1] = '\0';
	if (herd__read_file("/proc/sys/kernel/random/boot_id", 256, &boot, &len) == HERD_OK) {
		while (len > 0 && (boot[len - 1] == '\n' || boot[len - 1] == ' '))
			boot[--len] = '\0';
		herd__strlcpy(me->boot_id, boot, sizeof(me->boot_id));
		free(boot);
	}
	herd_clear_error();
	if (stat("/dev/shm", &sb) == 0) {
		me->shm_dev = (uint64_t)sb.st_dev;
		me->shm_ino = (uint64_t)sb.st_ino;
	}
	if (stat("/proc/self/ns/pid", &sb) == 0)
		me->pidns = (uint64_t)sb.st_ino;
	me->pid = (int32_t)getpid();
}

/* The info record as it travels: the rank, the size it joined, and the
 * peer fields of herd__peer. */
typedef struct info_record {
	int64_t rank, size;
	int32_t pid;
	char host[HERD__COMM_HOST_MAX];
	char boot_id[64];
	uint64_t shm_dev, shm_ino, pidns;
	int transport;
	char addrs[HERD__COMM_ADDRS_MAX];
	int streams;
} info_record;

/* "v" is checked by herd__comm_info_parse before the rest. */
static const herd__schema_field info_fields[] = {
	{ HERD__SCHEMA_CONST_INT("v", INFO_VERSION) },
	{ HERD__SCHEMA_INT("rank", info_record, rank, 0, INT32_MAX) },
	{ HERD__SCHEMA_INT("size", info_record, size, 1, INT32_MAX) },
	{ HERD__SCHEMA_INT("pid", info_record, pid, 0, INT32_MAX) },
	{ HERD__SCHEMA_CHARS("host", info_record, host) },
	{ HERD__SCHEMA_CHARS("boot", info_record, boot_id) },
	{ HERD__SCHEMA_UINT("shmdev", info_record, shm_dev, 0, UINT64_MAX) },
	{ HERD__SCHEMA_UINT("shmino", info_record, shm_ino, 0, UINT64_MAX) },
	{ HERD__SCHEMA_UINT("pidns", info_record, pidns, 0, UINT64_MAX) },
	{ HERD__SCHEMA_INT("transport", info_record, transport, 0, INT32_MAX) },
	{ HERD__SCHEMA_CHARS("addrs", info_record, addrs) },
	{ HERD__SCHEMA_INT("streams", info_record, streams, 1, HERD__STREAMS_MAX) },
};
static const herd__schema info_schema = HERD__SCHEMA(info_record, info_fields, 64, NULL);

herd_status herd__comm_info_pack(const herd__peer *me, int rank, int size, char **out,
				  size_t *len)
{
	info_record rec = { .rank = rank, .size = size, .pid = me->pid, .shm_dev = me->shm_dev,
			    .shm_ino = me->shm_ino, .pidns = me->pidns,
			    .transport = me->transport, .streams = me->streams };
	msgpack_packer pk;
	herd__buf b;

	herd__strlcpy(rec.host, me->host, sizeof(rec.host));
	herd__strlcpy(rec.boot_id, me->boot_id, sizeof(rec.boot_id));
	herd__strlcpy(rec.addrs, me->addrs, sizeof(rec.addrs));
	herd__buf_init(&b, INFO_MAX);
	msgpack_packer_init(&pk, &b, herd__buf_write);
	herd__schema_pack(&pk, &info_schema, &rec, 0);
	return herd__buf_take(&b, "the communicator info record", out, len);
}

herd_status herd__comm_info_parse(herd__peer *p, const char *origin, const void *data,
				   size_t len, int64_t *rank, int64_t *size)
{
	herd__schema_dec d = { .walk = { .origin = origin }, .version = INFO_VERSION };
	info_record rec;
	msgpack_unpacked up;
	const msgpack_object *root;
	int64_t v = -1;
	herd_status st;

	*rank = *size = -1;
	memset(&rec, 0, sizeof(rec));
	msgpack_unpacked_init(&up);
	st = herd__mpjson_unpack(&up, data, len);
	root = &up.data;
	if (st != HERD_OK) {
		msgpack_unpacked_destroy(&up);
		return herd__error(HERD_EFORMAT, "%s is malformed", origin);
	}
	st = herd__mpwalk_map(&d.walk, root, info_schema.max_keys);
	if (st == HERD_OK)
		st = herd__mpwalk_get_int(&d.walk, root, "v", 0, INT32_MAX, &v);
	if (st == HERD_OK && v != INFO_VERSION)
		st = herd__error(HERD_EVERSION, "%s speaks communicator version %" PRId64
				 ", this library version %d", origin, v, INFO_VERSION);
	if (st == HERD_OK)
		st = herd__schema_unpack(&d, &info_schema, root, &rec);
	msgpack_unpacked_destroy(&up);
	if (st != HERD_OK)
		return st;
	*rank = rec.rank;
	*size = rec.size;
	memcpy(p->host, rec.host, sizeof(p->host));
	memcpy(p->boot_id, rec.boot_id, sizeof(p->boot_id));
	memcpy(p->addrs, rec.addrs, sizeof(p->addrs));
	p->shm_dev = rec.shm_dev;
	p->shm_ino = rec.shm_ino;
	p->pidns = rec.pidns;
	p->pid = rec.pid;
	p->transport = rec.transport;
	p->streams = rec.streams;
	return HERD_OK;
}

/* Decodes rank j's info record into peers[j]; checks it agrees with ours. */
static herd_status info_decode(herd_comm *comm, int j, const void *data, size_t len)
{
	herd__peer *p = &comm->peers[j];
	int64_t rank, size;
	char origin[64];

	snprintf(origin, sizeof(origin), "the info record of rank %d", j);
	HERD_CHECK(herd__comm_info_parse(p, origin, data, len, &rank, &size));
	if (rank != j)
		return herd__error(HERD_EFORMAT, "the info record of rank %d says rank %" PRId64,
				   j, rank);
	if (size != comm->size)
		return herd__error(HERD_EINVAL, "rank %d (host %s) joined a communicator of %" PRId64
				   " ranks, rank %d (host %s) one of %d: every rank must pass the "
				   "same size", j, p->host, size, comm->rank,
				   comm->peers[comm->rank].host, comm->size);
	return HERD_OK;
}

/* Waits for every rank's info record, naming those missing at the deadline. */
static herd_status wait_infos(herd_comm *comm, int64_t deadline, int64_t start)
{
	char key[32];
	herd_status st = HERD_OK;

	for (int base = 0; base < comm->size && st == HERD_OK; base += HERD_STORE_WAIT_MAX_KEYS) {
		int n = comm->size - base < HERD_STORE_WAIT_MAX_KEYS ? comm->size - base
								     : HERD_STORE_WAIT_MAX_KEYS;
		char **keys = NULL;

		HERD_CHECK(herd__calloc(&keys, (size_t)n, sizeof(*keys), "store keys"));
		for (int i = 0; i < n && st == HERD_OK; i++) {
			snprintf(key, sizeof(key), "info/%d", base + i);
			st = herd__strdup(&keys[i], key);
		}
		if (st == HERD_OK)
			st = herd_store_wait(comm->store, (const char *const *)keys, (size_t)n,
					     herd__net_remaining_ms(deadline));
		for (int i = 0; i < n; i++)
			free(keys[i]);
		free(keys);
	}
	if (st == HERD_ETIMEDOUT) {
		int *missing = NULL;
		size_t nmissing = 0;
		char list[256], who[HERD__COMM_HOST_MAX + 32];

		HERD_CHECK(herd__calloc(&missing, (size_t)comm->size, sizeof(int), "a rank list"));
		for (int j = 0; j < comm->size; j++) {
			const char *k = key;

			snprintf(key, sizeof(key), "info/%d", j);
			if (herd_store_wait(comm->store, &k, 1, 0) != HERD_OK)
				missing[nmissing++] = j;
		}
		format_ranks(list, sizeof(list), missing, nmissing);
		free(missing);
		return herd__error(HERD_ETIMEDOUT, HERD__COMM_JOINING " timed out after %.1f s on %s "
				   "(%d ranks): %s did not join", (double)(herd__net_now_ms() -
									 start) / 1000.0,
				   herd__comm_who(comm, comm->rank, who, sizeof(who)), comm->size,
				   list);
	}
	return st;
}

static herd_status read_infos(herd_comm *comm, int64_t deadline)
{
	char key[32];

	for (int j = 0; j < comm->size; j++) {
		void *val = NULL;
		size_t len = 0;
		herd_status st;

		if (j == comm->rank)
			continue;
		snprintf(key, sizeof(key), "info/%d", j);
		HERD_CHECK(herd_store_get(comm->store, key, herd__net_remaining_ms(deadline), &val,
					  &len));
		st = info_decode(comm, j, val, len);
		free(val);
		HERD_CHECK(st);
	}
	return HERD_OK;
}

/* The job-wide key and id: made by rank 0, read by the others. */
static herd_status share_key(herd_comm *comm, int64_t deadline)
{
	uint8_t both[HERD__COMM_KEY_LEN + HERD__COMM_ID_LEN];
	void *val = NULL;
	size_t len = 0;

	if (comm->rank == 0) {
		HERD_CHECK(herd__auth_random(both, sizeof(both)));
		HERD_CHECK(herd_store_set(comm->store, "key", both, sizeof(both)));
	} else {
		HERD_CHECK(herd_store_get(comm->store, "key", herd__net_remaining_ms(deadline), &val,
					  &len));
		if (len != sizeof(both)) {
			free(val);
			return herd__error(HERD_EFORMAT, "the communicator key in the store has %zu "
					   "bytes, expected %zu", len, sizeof(both));
		}
		memcpy(both, val, sizeof(both));
		free(val);
	}
	memcpy(comm->key, both, HERD__COMM_KEY_LEN);
	memcpy(comm->id, both + HERD__COMM_KEY_LEN, HERD__COMM_ID_LEN);
	for (int i = 0; i < HERD__COMM_ID_LEN; i++)
		snprintf(comm->id_hex + 2 * i, 3, "%02x", comm->id[i]);
	return HERD_OK;
}

/* Same host name, boot and /dev/shm: one host (not merely one kernel). */
static bool same_host(const herd__peer *a, const herd__peer *b)
{
	return strcmp(a->host, b->host) == 0 && strcmp(a->boot_id, b->boot_id) == 0 &&
	       a->shm_dev == b->shm_dev && a->shm_ino == b->shm_ino;
}

/* Which ranks share this host, and the CPUs this process may run on. */
static void classify_peers(herd_comm *comm)
{
	const herd__peer *me = &comm->peers[comm->rank];
	cpu_set_t set;

	comm->nlocal = comm->nkernel = 0;
	for (int j = 0; j < comm->size; j++) {
		herd__peer *p = &comm->peers[j];

		p->same_host = same_host(p, me);
		p->same_pidns = p->same_host && me->pidns != 0 && p->pidns == me->pidns;
		if (p->same_host)
			comm->nlocal++;
		/* Containers of one machine (network namespaces, pods) are hosts
		 * of their own but share its kernel, and its CPUs. */
		if (p->same_host || (me->boot_id[0] != '\0' && strcmp(p->boot_id, me->boot_id) == 0))
			comm->nkernel++;
	}
	comm->ncpus = 1;
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		comm->ncpus = CPU_COUNT(&set);
}

int herd__comm_streams(const herd_comm *comm, int peer)
{
	return comm->peers[peer].nlinks;
}

/* The hosts of place (see herd__place), from every rank's info record. */
static herd_status place_hosts(herd_comm *comm)
{
	herd__place *pl = &comm->place;
	int p = comm->size, nh = 0, *host_of, *start, *ranks, *first;

	HERD_CHECK(herd__calloc(&comm->hosts, (size_t)(4 * p + 1), sizeof(int), "the host table"));
	host_of = comm->hosts;
	start = host_of + p;
	ranks = start + p + 1;
	first = ranks + p;          /* each host's lowest rank */
	for (int j = 0; j < p; j++) {
		int h = 0;

		while (h < nh && !same_host(&comm->peers[first[h]], &comm->peers[j]))
			h++;
		if (h == nh)
			first[nh++] = j;
		host_of[j] = h;
		start[h + 1]++;
	}
	pl->max_local = 0;
	for (int h = 0; h < nh; h++) {
		pl->max_local = start[h + 1] > pl->max_local ? start[h + 1] : pl->max_local;
		start[h + 1] += start[h];
	}
	/* each host's next free slot, where its lowest rank was */
	for (int h = 0; h < nh; h++)
		first[h] = start[h];
	for (int j = 0; j < p; j++)
		ranks[first[host_of[j]]++] = j;
	pl->nhosts = nh;
	pl->host_of = host_of;
	pl->host_start = start;
	pl->host_ranks = ranks;
	return HERD_OK;
}

/*
 * Which transport joins each pair: the first of herd__transports[] that can
 * connect it, as NCCL's canConnect over ncclTransports[].  Every rank reads
 * the same info records, so both ends of a pair pick alike.  Also the
 * doorbell, and whether some pair talks through sockets (place.any_tcp).
 */
static herd_status pick_transports(herd_comm *comm)
{
	char who[HERD__COMM_HOST_MAX + 32];

	comm->place.any_tcp = false;
	comm->bell = NULL;
	for (int j = 0; j < comm->size; j++) {
		const herd__transport *const *t = herd__transports;
		herd__peer *p = &comm->peers[j];

		p->via = NULL;
		p->nlinks = 1;
		if (j == comm->rank)
			continue;
		while (*t != NULL && ((*t)->can_connect == NULL || !(*t)->can_connect(comm, j)))
			t++;
		if (*t == NULL)
			return herd__error(HERD_EUNAVAIL, "no transport of this libherd joins "
					   "rank %d with %s", comm->rank,
					   herd__comm_who(comm, j, who, sizeof(who)));
		p->via = *t;
		if (p->via->streams != NULL)
			p->nlinks = p->via->streams(comm, j);
		comm->place.any_tcp = comm->place.any_tcp || p->via->sockets;
		if (comm->bell == NULL)
			comm->bell = p->via->bell;
	}
	return HERD_OK;
}

/* What tune.c's choice depends on, alike on every rank: every rank sees
 * the same hosts, and every pair's transport the same way from both ends.
 * The collective transport, if any, is set after the links are made. */
static herd_status place_ranks(herd_comm *comm)
{
	comm->place.force = comm->cfg.algo;
	comm->place.one_host = comm->nlocal == comm->size;
	comm->place.coll = NULL;
	HERD_CHECK(pick_transports(comm));
	return place_hosts(comm);
}

/* One step of init on every transport that takes part in it, in the
 * table's order (transport.h). */
static herd_status setup_step(herd_comm *comm, herd__setup_step step, int64_t deadline)
{
	for (const herd__transport *const *t = herd__transports; *t != NULL; t++)
		if ((*t)->setup[step] != NULL)
			HERD_CHECK((*t)->setup[step](comm, deadline));
	return HERD_OK;
}

/* What the transports keep for the communicator, in the reverse of the
 * order they were set up in. */
static void free_transports(herd_comm *comm)
{
	size_t n = 0;

	while (herd__transports[n] != NULL)
		n++;
	while (n-- > 0)
		if (herd__transports[n]->free != NULL)
			herd__transports[n]->free(comm);
}

/* A pidfd for each peer whose process this one can see: it turns readable
 * when that process exits, zombie or not.  A peer already gone may have
 * finished its init, its calls and its destroy before this rank got here:
 * its control connection says which (a goodbye, or an end without one),
 * and the monitor reads it. */
static void open_pidfds(herd_comm *comm)
{
#ifdef SYS_pidfd_open
	for (int j = 0; j < comm->size; j++) {
		herd__peer *p = &comm->peers[j];

		if (j != comm->rank && p->same_pidns)
			p->pidfd = (int)syscall(SYS_pidfd_open, (pid_t)p->pid, 0);
	}
#else
	(void)comm;
#endif
}

/* ---- lifetime ------------------------------------------------------------- */

static void comm_free(herd_comm *comm)
{
	if (comm == NULL)
		return;
	for (int j = 0; comm->peers != NULL && j < comm->size; j++) {
		herd__peer *p = &comm->peers[j];

		for (int k = 0; k < HERD__STREAMS_MAX; k++) {
			herd__link *l = herd__comm_link(comm, j, k);

			if (l != NULL)
				l->ops->close(l);
		}
		if (p->ctl_fd >= 0)
			close(p->ctl_fd);
		if (p->pidfd >= 0)
			close(p->pidfd);
	}
	if (comm->place.coll != NULL)
		comm->place.coll->free(comm);
	free_transports(comm);
	free(comm->group_ops);
	herd__p2p_free(comm);
	if (comm->wake_fd >= 0)
		close(comm->wake_fd);
	if (comm->mon_fd >= 0)
		close(comm->mon_fd);
	herd__stats_close(comm->stats, comm->stats_fd);
	herd__trace_close(&comm->trace);
	herd_store_free(comm->store);
	herd_store_free(comm->owned_store);
	herd_store_server_free(comm->owned_server);
	pthread_mutex_destroy(&comm->fail_mu);
	pthread_mutex_destroy(&comm->q_mu);
	pthread_cond_destroy(&comm->q_cv);
	pthread_mutex_destroy(&comm->ctl_mu);
	pthread_mutex_destroy(&comm->mon_mu);
	pthread_cond_destroy(&comm->mon_cv);
	free(comm->peers);
	free(comm->hosts);
	free(comm->parent);
	free(comm);
}

static herd_status comm_alloc(herd_comm **out, int rank, int size, const herd__comm_cfg *cfg)
{
	herd_comm *comm;

	HERD_CHECK(herd__calloc(&comm, 1, sizeof(*comm), "a communicator"));
	comm->rank = rank;
	comm->size = size;
	comm->cfg = *cfg;
	comm->cfg.name = NULL;
	comm->cfg.parent = NULL;
	comm->wake_fd = comm->mon_fd = comm->listen_fd = -1;
	atomic_init(&comm->status, HERD_OK);
	atomic_init(&comm->aborted, false);
	atomic_init(&comm->mon_stop, false);
	pthread_mutex_init(&comm->fail_mu, NULL);
	pthread_mutex_init(&comm->q_mu, NULL);
	herd__net_cond_init(&comm->q_cv);
	pthread_mutex_init(&comm->ctl_mu, NULL);
	pthread_mutex_init(&comm->mon_mu, NULL);
	herd__net_cond_init(&comm->mon_cv);
	if (herd__calloc(&comm->peers, (size_t)size, sizeof(*comm->peers), "the peer table") !=
	    HERD_OK) {
		comm_free(comm);
		return HERD_ENOMEM;
	}
	if (cfg->name != NULL && cfg->parent != NULL) {
		if (herd__calloc(&comm->parent, (size_t)size, sizeof(int), "a split") != HERD_OK) {
			comm_free(comm);
			return HERD_ENOMEM;
		}
		memcpy(comm->parent, cfg->parent, (size_t)size * sizeof(int));
		herd__strlcpy(comm->name, cfg->name, sizeof(comm->name));
	}
	for (int j = 0; j < size; j++) {
		comm->peers[j].ctl_fd = -1;
		comm->peers[j].pidfd = -1;
		atomic_init(&comm->peers[j].left, 0);
	}
	comm->stats_fd = -1;
	comm->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	comm->mon_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (comm->wake_fd < 0 || comm->mon_fd < 0) {
		int err = errno;

		comm_free(comm);
		return herd__error_errno(HERD_ESYS, err, "cannot create the communicator's "
					 "wake-up descriptors");
	}
	*out = comm;
	return HERD_OK;
}

static herd_status execute(herd_comm *comm, const herd__op *op, uint64_t cseq);

/* The link figures (links.c), run as a call before the first: numbered 0,
 * so that the caller's calls are numbered from 1 as ever. */
static herd_status probe_links(herd_comm *comm)
{
	herd__op op = { .run = herd__links_probe };

	op.fp.kind = HERD__OP_BARRIER;
	op.fp.root = -1;
	return execute(comm, &op, 0);
}

herd_status herd__comm_init_cfg(herd_comm **out, herd_store *store, int rank, int size,
				const herd__comm_cfg *cfg)
{
	int64_t start = herd__net_now_ms(), deadline = herd__net_deadline(cfg->timeout_ms);
	herd_comm *comm = NULL;
	char key[48], who[HERD__COMM_HOST_MAX + 32];
	char *info = NULL;
	size_t info_len = 0;
	int64_t gen = 0;
	herd_status st;

	HERD_CHECK(comm_alloc(&comm, rank, size, cfg));
	self_identity(&comm->peers[rank]);
	comm->peers[rank].transport = cfg->transport;
	comm->peers[rank].streams = cfg->streams;

	/* Every init of a rank on one store gets the next generation, so that
	 * ranks re-initializing on the same store meet their own kind. */
	snprintf(key, sizeof(key), "gen/%d", rank);
	HERD_CHECK_GOTO(herd_store_add(store, key, 1, &gen), st, out);
	snprintf(key, sizeof(key), "c%" PRId64 "/", gen);
	HERD_CHECK_GOTO(herd_store_prefix(&comm->store, store, key), st, out);
	if (rank == 0)
		HERD_CHECK_GOTO(share_key(comm, deadline), st, out);

	if (size > 1)
		HERD_CHECK_GOTO(setup_step(comm, HERD__SETUP_LISTEN, deadline), st, out);
	HERD_CHECK_GOTO(herd__comm_info_pack(&comm->peers[comm->rank], comm->rank, comm->size,
					     &info, &info_len), st, out);
	snprintf(key, sizeof(key), "info/%d", rank);
	HERD_CHECK_GOTO(herd_store_set(comm->store, key, info, info_len), st, out);
	HERD_CHECK_GOTO(wait_infos(comm, deadline, start), st, out);
	HERD_CHECK_GOTO(read_infos(comm, deadline), st, out);
	if (rank != 0)
		HERD_CHECK_GOTO(share_key(comm, deadline), st, out);
	classify_peers(comm);
	HERD_CHECK_GOTO(place_ranks(comm), st, out);
	if (size > 1)
		HERD_CHECK_GOTO(setup_step(comm, HERD__SETUP_ADDRS, deadline), st, out);

	HERD_CHECK_GOTO(herd__p2p_init(comm), st, out);
	if (size > 1) {
		for (int step = HERD__SETUP_CREATE; step <= HERD__SETUP_COLL; step++)
			HERD_CHECK_GOTO(setup_step(comm, (herd__setup_step)step, deadline), st, out);
		open_pidfds(comm);
		HERD_CHECK_GOTO(herd__comm_broken(comm), st, out);
		HERD_CHECK_GOTO(herd__monitor_start(comm), st, out);
		if (comm->place.nhosts > 1)
			HERD_CHECK_GOTO(probe_links(comm), st, out);
	}
	herd__log_debug("communicator %s: rank %d of %d on %s, %d on this host, transport %s, "
			"listened on %s during init", comm->id_hex, rank, size,
			comm->peers[rank].host, comm->nlocal,
			cfg->transport == HERD__TRANSPORT_TCP ? "tcp" : "auto",
			size > 1 ? comm->peers[rank].addrs : "nothing");
	/* Counted from here on, where there is a stats directory. */
	comm->stats = herd__stats_open(&comm->stats_fd);
	/* Recorded from here on. */
	herd__trace_open(&comm->trace, comm->id_hex, rank, size, comm->peers[rank].host,
			 cfg->trace_ring);
	if (comm->name[0] != '\0')
		herd__trace_name(&comm->trace, comm->name, comm->parent[rank]);
	st = HERD_OK;
out:
	free(info);
	if (st != HERD_OK) {
		char msg[HERD__COMM_MSG_MAX];

		herd__strlcpy(msg, herd_last_error(), sizeof(msg));
		/* Messages that already say where they come from stay as they are. */
		if (strncmp(msg, HERD__COMM_JOINING, strlen(HERD__COMM_JOINING)) != 0)
			herd__error(st, HERD__COMM_JOINING " on %s (%d ranks): %s",
				    herd__comm_who(comm, rank, who, sizeof(who)), size, msg);
		comm_free(comm);
		return st;
	}
	*out = comm;
	return HERD_OK;
}

herd_status herd_comm_init(herd_comm **out, herd_store *store, int rank, int size,
			   const herd_comm_opts *opts)
{
	herd__comm_cfg cfg;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_comm_init: out is NULL");
	*out = NULL;
	if (store == NULL)
		return herd__error(HERD_EINVAL, "herd_comm_init: store is NULL");
	if (size < 1 || rank < 0 || rank >= size)
		return herd__error(HERD_EINVAL, "herd_comm_init: rank %d of %d ranks; expected a "
				   "size of at least 1 and a rank from 0 to size-1", rank, size);
	HERD_CHECK(herd__comm_cfg_resolve(opts, &cfg));
	return herd__comm_timeout_source(herd__comm_init_cfg(out, store, rank, size, &cfg), &cfg);
}

int herd_comm_rank(const herd_comm *comm)
{
	return comm != NULL ? comm->rank : -1;
}

int herd_comm_size(const herd_comm *comm)
{
	return comm != NULL ? comm->size : 0;
}

herd_status herd_comm_host(const herd_comm *comm, int rank, const char **host)
{
	if (host != NULL)
		*host = NULL;
	if (comm == NULL || host == NULL)
		return herd__error(HERD_EINVAL, "herd_comm_host: comm and host must not be NULL");
	if (rank < 0 || rank >= comm->size)
		return herd__error(HERD_EINVAL,
				   "herd_comm_host: rank %d is out of range for a communicator "
				   "of %d ranks",
				   rank, comm->size);
	*host = comm->peers[rank].host;
	return HERD_OK;
}

herd_status herd_comm_async_error(herd_comm *comm)
{
	if (comm == NULL)
		return herd__error(HERD_EINVAL, "herd_comm_async_error: comm is NULL");
	return herd__comm_broken(comm);
}

const herd__place *herd__comm_place(const herd_comm *comm)
{
	return &comm->place;
}

int herd__comm_nlocal(const herd_comm *comm)
{
	return comm->nlocal;
}

/* ---- running calls -------------------------------------------------------- */

/* Numbers a call, in the order the caller makes them.  Returns its
 * collective number (for a point-to-point call, the last one's). */
static uint64_t number_call(herd_comm *comm, herd__op *op)
{
	op->fp.seq = ++comm->seq;
	if (!herd__op_is_p2p(op->fp.kind))
		comm->cseq++;
	return comm->cseq;
}

/* Runs a numbered call on the calling thread (the caller's or the progress
 * thread), with its deadline, and records how it ended. */
static herd_status execute(herd_comm *comm, const herd__op *op, uint64_t cseq)
{
	herd_status st = herd__comm_broken(comm);
	herd__trace_entry *e;
	uint64_t t0, t1;

	if (st != HERD_OK)
		return st;
	comm->op = op;
	comm->op_cseq = cseq;
	/* One reading of the clock for the deadline and the counters. */
	t0 = herd__stats_now_ns();
	comm->op_start_ms = (int64_t)(t0 / 1000000);
	comm->op_deadline = comm->op_start_ms + comm->cfg.timeout_ms;
	/* Release stores: the monitor wants a recent state, not a fence (a
	 * sequentially consistent store costs more than a small allreduce's
	 * own work). */
	atomic_store_explicit(&comm->st_entered_seq, op->fp.seq, memory_order_release);
	atomic_store_explicit(&comm->st_entered_cseq, cseq, memory_order_release);
	atomic_store_explicit(&comm->st_entered_kind, op->fp.kind, memory_order_release);
	atomic_store_explicit(&comm->st_busy, 1, memory_order_release);
	/* The flight recorder; not the link probe (number 0). */
	e = op->fp.seq != 0 ? herd__trace_begin(&comm->trace, op->fp.seq, cseq, op->fp.kind,
						op->fp.dtype, op->fp.redop,
						herd__op_is_p2p(op->fp.kind) ? op->peer
									     : op->fp.root,
						op->fp.count, op->device, op->algo, t0)
			    : NULL;
	if (comm->place.coll != NULL)
		comm->place.coll->enter(comm, op, cseq);
	st = op->run(comm, op);
	if (st != HERD_OK) {
		st = herd__comm_fail(comm, st, true);
	} else {
		atomic_store_explicit(&comm->st_done_kind, op->fp.kind, memory_order_release);
		atomic_store_explicit(&comm->st_done_seq, op->fp.seq, memory_order_release);
	}
	atomic_store_explicit(&comm->st_busy, 0, memory_order_release);
	comm->op = NULL;
	/* The recorder's end alone takes the coarse clock (a tick's
	 * resolution is enough to say how long ago; it costs a few ns). */
	t1 = comm->stats != NULL ? herd__stats_now_ns() : e != NULL ? herd__trace_now_coarse() : 0;
	herd__trace_end(e, st, t1);
	/* The counters of herd exporter; not the link probe before the first
	 * call (number 0), which no caller made. */
	if (comm->stats != NULL && op->fp.seq != 0)
		herd__stats_add(comm->stats, op->fp.kind,
				op->fp.count * herd_dtype_size((herd_dtype)op->fp.dtype),
				t1 - t0, st);
	return st;
}

/* Waits until the progress thread has run every queued call. */
static void drain_queue(herd_comm *comm)
{
	if (!comm->progress_started)
		return;
	pthread_mutex_lock(&comm->q_mu);
	while (comm->q_head != NULL || comm->q_busy)
		pthread_cond_wait(&comm->q_cv, &comm->q_mu);
	pthread_mutex_unlock(&comm->q_mu);
}

/* The transport that runs op and gathers such calls in groups; NULL when
 * none does. */
static const herd__transport *group_transport(const herd__op *op)
{
	for (const herd__transport *const *t = herd__transports; *t != NULL; t++)
		if ((*t)->groups != NULL && (*t)->groups(op))
			return *t;
	return NULL;
}

/* A call between herd_comm_group_start and _end: kept for the end. */
static herd_status group_record(herd_comm *comm, const herd__op *op)
{
	if (group_transport(op) == NULL)
		return herd__error(HERD_EINVAL, "%s inside a group: a group takes calls on device "
				   "memory only", herd__op_name((herd__op_kind)op->fp.kind));
	if (comm->group_n == comm->group_cap) {
		size_t cap = comm->group_cap > 0 ? 2 * comm->group_cap : 16;
		herd__op *ops = realloc(comm->group_ops, cap * sizeof(*ops));

		if (ops == NULL)
			return herd__error(HERD_ENOMEM, "out of memory for %zu calls of a group", cap);
		comm->group_ops = ops;
		comm->group_cap = cap;
	}
	comm->group_ops[comm->group_n++] = *op;
	return HERD_OK;
}

herd_status herd_comm_group_start(herd_comm *comm)
{
	if (comm == NULL)
		return herd__error(HERD_EINVAL, "herd_comm_group_start: comm is NULL");
	HERD_CHECK(herd__comm_broken(comm));
	comm->group_depth++;
	return HERD_OK;
}

herd_status herd_comm_group_end(herd_comm *comm)
{
	herd__op op;
	bool coll = false;
	uint64_t digest = 0;
	herd_status st;

	if (comm == NULL)
		return herd__error(HERD_EINVAL, "herd_comm_group_end: comm is NULL");
	if (comm->group_depth == 0)
		return herd__error(HERD_EINVAL, "herd_comm_group_end: no group is open");
	if (--comm->group_depth > 0 || comm->group_n == 0)
		return HERD_OK;
	memset(&op, 0, sizeof(op));
	for (size_t i = 0; i < comm->group_n; i++) {
		const herd__fp *f = &comm->group_ops[i].fp;
		uint64_t v[4] = { f->kind, (uint64_t)f->dtype << 8 | f->redop, (uint64_t)f->root,
				  f->count };

		coll = coll || !herd__op_is_p2p(f->kind);
		for (int k = 0; k < 4; k++)
			digest = (digest ^ v[k]) * 0x100000001b3ull;
	}
	op.fp.kind = coll ? HERD__OP_GROUP : HERD__OP_GROUP_P2P;
	op.fp.count = comm->group_n;
	op.fp.root = (int32_t)(uint32_t)(digest ^ digest >> 32);
	op.sendbuf = comm->group_ops;
	op.count = comm->group_n;
	op.device = comm->group_ops[0].device;
	op.peer = op.peer2 = -1;
	/* Every call of the group passed group_record. */
	op.run = group_transport(&comm->group_ops[0])->run_group;
	st = herd__comm_run(comm, &op);
	comm->group_n = 0;
	return st;
}

herd_status herd__comm_run(herd_comm *comm, herd__op *op)
{
	uint64_t cseq;

	if (comm == NULL || op == NULL || op->run == NULL)
		return herd__error(HERD_EINVAL, "herd__comm_run: comm, op and op->run must not "
				   "be NULL");
	if (comm->group_depth > 0)
		return group_record(comm, op);
	drain_queue(comm);
	HERD_CHECK(herd__comm_broken(comm));
	cseq = number_call(comm, op);
	return execute(comm, op, cseq);
}

static void *progress_main(void *arg)
{
	herd_comm *comm = arg;

	pthread_mutex_lock(&comm->q_mu);
	for (;;) {
		herd_comm_request *req;
		herd_status st;

		while (comm->q_head == NULL && !comm->q_stop)
			pthread_cond_wait(&comm->q_cv, &comm->q_mu);
		if (comm->q_head == NULL)
			break;
		req = comm->q_head;
		comm->q_head = req->next;
		if (comm->q_head == NULL)
			comm->q_tail = NULL;
		comm->q_busy = true;
		pthread_mutex_unlock(&comm->q_mu);

		st = execute(comm, &req->op, req->cseq);
		req->st = st;
		if (st != HERD_OK)
			herd__strlcpy(req->msg, herd_last_error(), sizeof(req->msg));

		pthread_mutex_lock(&comm->q_mu);
		atomic_store(&req->done, 1);
		comm->q_busy = false;
		pthread_cond_broadcast(&comm->q_cv);
	}
	pthread_mutex_unlock(&comm->q_mu);
	return NULL;
}

herd_status herd__comm_submit(herd_comm *comm, herd__op *op, herd_comm_request **req)
{
	herd_comm_request *r;

	if (req == NULL)
		return herd__error(HERD_EINVAL, "herd__comm_submit: req is NULL");
	*req = NULL;
	if (comm == NULL || op == NULL || op->run == NULL)
		return herd__error(HERD_EINVAL, "herd__comm_submit: comm, op and op->run must not "
				   "be NULL");
	if (comm->group_depth > 0)
		return herd__error(HERD_EINVAL, "i%s inside a group: a group takes blocking and "
				   "stream-ordered device calls only",
				   herd__op_name((herd__op_kind)op->fp.kind));
	HERD_CHECK(herd__comm_broken(comm));
	if (!comm->progress_started) {
		HERD_CHECK(herd__comm_thread_start(&comm->progress, progress_main, comm,
						   "progress"));
		comm->progress_started = true;
	}
	HERD_CHECK(herd__calloc(&r, 1, sizeof(*r), "a request"));
	r->comm = comm;
	r->cseq = number_call(comm, op);
	r->op = *op;
	atomic_init(&r->done, 0);
	pthread_mutex_lock(&comm->q_mu);
	if (comm->q_tail != NULL)
		comm->q_tail->next = r;
	else
		comm->q_head = r;
	comm->q_tail = r;
	pthread_cond_broadcast(&comm->q_cv);
	pthread_mutex_unlock(&comm->q_mu);
	*req = r;
	return HERD_OK;
}

/* Hands a completed request's outcome to the caller and frees it. */
static herd_status request_finish(herd_comm_request *req)
{
	herd_status st = req->st;

	if (st != HERD_OK)
		herd__error(st, "%s", req->msg);
	free(req);
	return st;
}

herd_status herd_comm_request_test(herd_comm_request *req, bool *done)
{
	if (req == NULL || done == NULL)
		return herd__error(HERD_EINVAL,
				   "herd_comm_request_test: req and done must not be NULL");
	if (!atomic_load(&req->done)) {
		*done = false;
		return HERD_OK;
	}
	*done = true;
	return request_finish(req);
}

herd_status herd_comm_request_wait(herd_comm_request *req)
{
	if (req == NULL)
		return herd__error(HERD_EINVAL, "herd_comm_request_wait: req is NULL");
	if (!atomic_load(&req->done)) {
		herd_comm *comm = req->comm;

		/* The call has its own deadline, so this wait ends. */
		pthread_mutex_lock(&comm->q_mu);
		while (!atomic_load(&req->done))
			pthread_cond_wait(&comm->q_cv, &comm->q_mu);
		pthread_mutex_unlock(&comm->q_mu);
	}
	return request_finish(req);
}

/* ---- finalize, split, destroy, abort -------------------------------------- */

/* A dissemination barrier: log2(size) rounds of empty messages. */
static herd_status barrier_run(herd_comm *comm, const herd__op *op)
{
	(void)op;
	for (int k = 1; k < comm->size; k <<= 1) {
		herd__xfer s = { .peer = (comm->rank + k) % comm->size };
		herd__xfer r = { .peer = (comm->rank - k + comm->size) % comm->size };

		HERD_CHECK(herd__p2p_exchange(comm, &s, 1, &r, 1));
	}
	return HERD_OK;
}

herd_status herd_comm_finalize(herd_comm *comm)
{
	herd__op op = { .run = barrier_run };

	if (comm == NULL)
		return herd__error(HERD_EINVAL, "herd_comm_finalize: comm is NULL");
	op.fp.kind = HERD__OP_FINALIZE;
	op.fp.root = -1;
	return herd__comm_run(comm, &op);
}

typedef struct split_call {
	herd__op op;          /* first, so that the core's op pointer is the call's */
	int32_t mine[2];      /* color, key */
	int32_t *all;         /* every rank's color and key */
} split_call;

static herd_status split_run(herd_comm *comm, const herd__op *op)
{
	const split_call *sc = (const split_call *)op;
	herd__xfer *sends = NULL, *recvs = NULL;
	herd_status st;

	HERD_CHECK(herd__calloc(&sends, (size_t)comm->size, sizeof(*sends), "a split"));
	st = herd__calloc(&recvs, (size_t)comm->size, sizeof(*recvs), "a split");
	for (int j = 0; j < comm->size && st == HERD_OK; j++) {
		sends[j].peer = recvs[j].peer = j;
		sends[j].buf = sc->mine;
		sends[j].len = recvs[j].len = sizeof(sc->mine);
		recvs[j].sink.dst = sc->all + 2 * j;
	}
	if (st == HERD_OK)
		st = herd__p2p_exchange(comm, sends, (size_t)comm->size, recvs, (size_t)comm->size);
	free(sends);
	free(recvs);
	return st;
}

herd_status herd__comm_split_named(herd_comm **out, herd_comm *comm, int color, int key,
				   const char *name)
{
	split_call sc;
	herd_store *sub = NULL;
	herd__comm_cfg cfg;
	char prefix[64];
	int newrank = 0, newsize = 0, *parent = NULL;
	herd_status st;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_comm_split: out is NULL");
	*out = NULL;
	if (comm == NULL)
		return herd__error(HERD_EINVAL, "herd_comm_split: comm is NULL");
	if (color < 0 && color != HERD_COMM_SPLIT_NONE)
		return herd__error(HERD_EINVAL, "herd_comm_split: color %d; expected 0 or more, or "
				   "HERD_COMM_SPLIT_NONE", color);
	memset(&sc, 0, sizeof(sc));
	sc.op.run = split_run;
	sc.op.fp.kind = HERD__OP_SPLIT;
	sc.op.fp.dtype = HERD_INT32;
	sc.op.fp.count = 2;
	sc.op.fp.root = -1;
	sc.mine[0] = color;
	sc.mine[1] = key;
	HERD_CHECK(herd__calloc(&sc.all, 2 * (size_t)comm->size, sizeof(int32_t), "a split"));
	st = herd__comm_run(comm, &sc.op);
	if (st != HERD_OK || color == HERD_COMM_SPLIT_NONE)
		goto out;
	/* The new rank: position by (key, old rank) among the ranks of this color. */
	for (int j = 0; j < comm->size; j++) {
		if (sc.all[2 * j] != color)
			continue;
		newsize++;
		if (sc.all[2 * j + 1] < key || (sc.all[2 * j + 1] == key && j < comm->rank))
			newrank++;
	}
	cfg = comm->cfg;
	if (name != NULL) {
		/* Each new rank's old one, by (key, old rank) as above. */
		HERD_CHECK_GOTO(herd__calloc(&parent, (size_t)newsize, sizeof(int), "a split"), st,
				out);
		for (int j = 0; j < comm->size; j++) {
			int at = 0;

			if (sc.all[2 * j] != color)
				continue;
			for (int i = 0; i < comm->size; i++)
				at += sc.all[2 * i] == color &&
				      (sc.all[2 * i + 1] < sc.all[2 * j + 1] ||
				       (sc.all[2 * i + 1] == sc.all[2 * j + 1] && i < j));
			parent[at] = j;
		}
		cfg.name = name;
		cfg.parent = parent;
	}
	/* The collective number is the same on every rank, so is the namespace. */
	snprintf(prefix, sizeof(prefix), "split/%" PRIu64 "/%d/", comm->cseq, color);
	HERD_CHECK_GOTO(herd_store_prefix(&sub, comm->store, prefix), st, out);
	st = herd__comm_init_cfg(out, sub, newrank, newsize, &cfg);
	herd_store_free(sub);
out:
	free(parent);
	free(sc.all);
	return st;
}

herd_status herd_comm_split(herd_comm **out, herd_comm *comm, int color, int key)
{
	return herd__comm_split_named(out, comm, color, key, NULL);
}

herd_status herd_comm_abort(herd_comm *comm)
{
	char who[HERD__COMM_HOST_MAX + 32];

	if (comm == NULL)
		return herd__error(HERD_EINVAL, "herd_comm_abort: comm is NULL");
	if (atomic_exchange(&comm->aborted, true))
		return HERD_OK;
	herd__comm_who(comm, comm->rank, who, sizeof(who));
	/* Abort wins over an earlier failure: the caller asked for it. */
	pthread_mutex_lock(&comm->fail_mu);
	snprintf(comm->fail_msg, sizeof(comm->fail_msg), "the communicator was aborted on %s",
		 who);
	comm->fail_propagate = false;
	atomic_store(&comm->status, (int)HERD_EABORTED);
	pthread_mutex_unlock(&comm->fail_mu);
	herd__comm_wake(comm);

	herd__ctl_abort(comm);
	for (int j = 0; j < comm->size; j++) {
		for (int k = 0; k < HERD__STREAMS_MAX; k++) {
			herd__link *l = herd__comm_link(comm, j, k);

			if (l != NULL)
				l->ops->shutdown(l);
		}
	}
	herd__monitor_kick(comm);
	return HERD_OK;
}

void herd_comm_free(herd_comm *comm)
{
	if (comm == NULL)
		return;
	if (comm->progress_started) {
		bool pending;

		pthread_mutex_lock(&comm->q_mu);
		pending = comm->q_head != NULL || comm->q_busy;
		pthread_mutex_unlock(&comm->q_mu);
		/* Calls still queued would each run until their deadline. */
		if (pending)
			herd_comm_abort(comm);
		pthread_mutex_lock(&comm->q_mu);
		comm->q_stop = true;
		pthread_cond_broadcast(&comm->q_cv);
		pthread_mutex_unlock(&comm->q_mu);
		pthread_join(comm->progress, NULL);
	}
	/* A broken communicator tells its peers why before it goes, whoever
	 * found the failure: a peer still waiting on this rank then learns the
	 * cause, not just that this rank left. */
	pthread_mutex_lock(&comm->fail_mu);
	if (atomic_load(&comm->status) != HERD_OK && !atomic_load(&comm->aborted))
		comm->fail_propagate = true;
	pthread_mutex_unlock(&comm->fail_mu);
	/* The monitor passes on a failure still untold before it stops. */
	herd__monitor_stop(comm);
	/* A goodbye, so that peers do not take the closing connections for a
	 * crash. */
	if (!atomic_load(&comm->aborted))
		for (int j = 0; j < comm->size; j++)
			if (comm->peers[j].ctl_fd >= 0)
				(void)herd__ctl_send(comm, j, HERD__CTL_BYE, NULL, 0);
	comm_free(comm);
}
