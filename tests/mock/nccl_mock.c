/*
 * tests/mock/nccl_mock.c - a stand-in libnccl.so.2 for machines with no
 * GPU, beside tests/mock/cuda_mock.c: what libherd's NCCL transport does
 * around NCCL (its init through the store, its deadlines, abort, the
 * errors it names) runs in CI.  It moves no data between processes: a
 * collective copies sendbuf to recvbuf (the result of one rank), sends and
 * receives move nothing, and the tests check behaviour, not values.
 *
 * A communicator made with ncclConfig_t's blocking = 0 follows NCCL's
 * non-blocking contract as strictly as the real library asks it of its
 * callers: ncclCommInitRankConfig, ncclCommFinalize, a collective outside
 * a group and ncclGroupEnd return ncclInProgress, and the communicator's
 * state (ncclCommGetAsyncError) turns to ncclSuccess after a few polls.
 * A call on a communicator whose state is still ncclInProgress, other than
 * ncclCommGetAsyncError and ncclCommAbort, is the caller's error: it
 * fails with ncclInvalidUsage, and so does the communicator from then on,
 * with ncclGetLastError naming the call.
 *
 * HERD_MOCK_NCCL tells it what to do, for the communicator's rank R (or,
 * with R left out, every rank):
 *   hang[:R]        R's collectives never complete
 *   late:R:MS       R's collectives complete MS ms after they are queued
 *   error:R:N       R's Nth collective (from 1) fails asynchronously:
 *                   ncclCommGetAsyncError says ncclSystemError, and the
 *                   collective never completes
 *   init-hang[:R]   R's ncclCommInitRankConfig stays in progress for ever
 * and by default everything completes at once.  HERD_MOCK_NCCL_LOG=FILE
 * appends "rank R/N: CALL" to FILE for every ncclCommInitRankConfig,
 * ncclCommFinalize, ncclCommDestroy and ncclCommAbort.  The ABI is
 * nccl.h's for the entry points libherd uses.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int ncclResult_t;
enum {
	SUCCESS = 0, SYSTEM_ERROR = 2, INVALID_ARGUMENT = 4, INVALID_USAGE = 5, IN_PROGRESS = 7
};

typedef struct { char internal[128]; } ncclUniqueId;

/* The head of nccl.h's ncclConfig_t, which NCCL_CONFIG_INITIALIZER fills. */
typedef struct {
	size_t size;
	unsigned int magic, version;
	int blocking;
} config_head;

#define CONFIG_MAGIC 0xcafebeefu

/* Polls of ncclCommGetAsyncError before an operation in progress is done. */
#define POLLS 3

struct ncclComm {
	int rank, nranks;
	int ops;
	int blocking;
	ncclResult_t async;     /* what ncclCommGetAsyncError says */
	int polls;              /* left before an operation in progress is done; -1: never */
	char misuse[160];       /* what ncclGetLastError says after one */
};

/* The communicators a group's calls used, which ncclGroupEnd puts in
 * progress. */
static int group_depth;
static struct ncclComm *group_comms[16];
static int group_ncomms;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Whether HERD_MOCK_NCCL says `what` for rank; *arg: its number after the
 * rank, if any. */
static int told(const char *what, int rank, long *arg)
{
	const char *m = getenv("HERD_MOCK_NCCL");
	size_t n = strlen(what);
	char *end;
	long r;

	if (m == NULL || strncmp(m, what, n) != 0 || (m[n] != ':' && m[n] != '\0'))
		return 0;
	if (m[n] == '\0')
		return 1;
	r = strtol(m + n + 1, &end, 10);
	if (r != rank)
		return 0;
	if (arg != NULL)
		*arg = *end == ':' ? strtol(end + 1, NULL, 10) : 0;
	return 1;
}

/* "rank R/N: call" to HERD_MOCK_NCCL_LOG, if set. */
static void note(const struct ncclComm *c, const char *call)
{
	const char *path = getenv("HERD_MOCK_NCCL_LOG");
	char line[96];
	int fd, n;

	if (path == NULL)
		return;
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
	if (fd < 0)
		return;
	n = snprintf(line, sizeof(line), "rank %d/%d: %s\n", c->rank, c->nranks, call);
	if (write(fd, line, (size_t)n) != n)
		n = 0;
	close(fd);
}

/* Whether call may use c now; when not (c's state is still in progress),
 * c fails with ncclInvalidUsage, naming call. */
static int usable(struct ncclComm *c, const char *call)
{
	if (c->async != IN_PROGRESS)
		return 1;
	snprintf(c->misuse, sizeof(c->misuse), "the stand-in NCCL: %s called while the "
		 "communicator's state was ncclInProgress", call);
	c->async = INVALID_USAGE;
	return 0;
}

/* A non-blocking communicator's operation returns in progress. */
static ncclResult_t in_progress(struct ncclComm *c, int polls)
{
	if (c->blocking)
		return SUCCESS;
	c->async = IN_PROGRESS;
	c->polls = polls;
	return IN_PROGRESS;
}

/* The stand-in driver's stream clock. */
static void stream_busy(void *stream, int64_t until_ms)
{
	static void (*busy)(void *, int64_t);

	if (busy == NULL) {
		void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
		void *sym = h != NULL ? dlsym(h, "herd_mock_stream_busy") : NULL;

		memcpy(&busy, &sym, sizeof(sym));
	}
	if (busy != NULL && stream != NULL)
		busy(stream, until_ms);
}

ncclResult_t ncclGetVersion(int *version)
{
	*version = 22800;
	return SUCCESS;
}

const char *ncclGetErrorString(ncclResult_t rc)
{
	switch (rc) {
	case SUCCESS: return "no error";
	case SYSTEM_ERROR: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
	case INVALID_ARGUMENT: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
	case IN_PROGRESS: return "NCCL operation in progress";
	default: return "unknown result code";
	}
}

const char *ncclGetLastError(struct ncclComm *comm)
{
	if (comm != NULL && comm->misuse[0] != '\0')
		return comm->misuse;
	return "the stand-in NCCL was told to fail";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
	for (size_t i = 0; i < sizeof(id->internal); i++)
		id->internal[i] = (char)(rand() & 0xff);
	return SUCCESS;
}

ncclResult_t ncclCommInitRankConfig(struct ncclComm **comm, int nranks, ncclUniqueId id, int rank,
				    void *config)
{
	const config_head *cfg = config;
	struct ncclComm *c;

	(void)id;
	if (nranks < 1 || rank < 0 || rank >= nranks)
		return INVALID_ARGUMENT;
	if (cfg != NULL && (cfg->magic != CONFIG_MAGIC || cfg->size < sizeof(*cfg)))
		return INVALID_ARGUMENT;   /* not from NCCL_CONFIG_INITIALIZER */
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return SYSTEM_ERROR;
	c->rank = rank;
	c->nranks = nranks;
	c->blocking = cfg == NULL || cfg->blocking != 0;
	*comm = c;
	note(c, "ncclCommInitRankConfig");
	if (told("init-hang", rank, NULL)) {
		c->async = IN_PROGRESS;
		c->polls = -1;
		return IN_PROGRESS;
	}
	return in_progress(c, POLLS);
}

ncclResult_t ncclCommGetAsyncError(struct ncclComm *comm, ncclResult_t *async)
{
	if (comm->async == IN_PROGRESS && comm->polls > 0 && --comm->polls == 0)
		comm->async = SUCCESS;
	*async = comm->async;
	return SUCCESS;
}

ncclResult_t ncclCommAbort(struct ncclComm *comm)
{
	note(comm, "ncclCommAbort");
	free(comm);
	return SUCCESS;
}

ncclResult_t ncclCommFinalize(struct ncclComm *comm)
{
	note(comm, "ncclCommFinalize");
	if (!usable(comm, "ncclCommFinalize"))
		return INVALID_USAGE;
	if (comm->async != SUCCESS)
		return comm->async;
	return in_progress(comm, POLLS);
}

ncclResult_t ncclCommDestroy(struct ncclComm *comm)
{
	note(comm, "ncclCommDestroy");
	if (!usable(comm, "ncclCommDestroy"))
		return INVALID_USAGE;
	free(comm);
	return SUCCESS;
}

/* A collective of bytes: queued on stream, done when HERD_MOCK_NCCL says. */
static ncclResult_t collective(struct ncclComm *c, const void *send, void *recv, size_t bytes,
			       void *stream)
{
	long arg = 0;

	if (!usable(c, "a collective"))
		return INVALID_USAGE;
	if (c->async != SUCCESS)
		return c->async;
	c->ops++;
	if (recv != NULL && send != NULL && send != recv)
		memmove(recv, send, bytes);
	if (told("hang", c->rank, NULL)) {
		stream_busy(stream, INT64_MAX);
	} else if (told("late", c->rank, &arg)) {
		stream_busy(stream, now_ms() + arg);
	} else if (told("error", c->rank, &arg) && c->ops >= arg) {
		c->async = SYSTEM_ERROR;
		stream_busy(stream, INT64_MAX);
		return SUCCESS;
	}
	if (group_depth > 0) {
		int i = 0;

		while (i < group_ncomms && group_comms[i] != c)
			i++;
		if (i == group_ncomms && group_ncomms < (int)(sizeof(group_comms) /
							      sizeof(group_comms[0])))
			group_comms[group_ncomms++] = c;
		return SUCCESS;
	}
	return in_progress(c, POLLS);
}

static size_t type_size(int t)
{
	static const size_t sizes[] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };

	return t >= 0 && t < 12 ? sizes[t] : 0;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, int type, int op,
			   struct ncclComm *comm, void *stream)
{
	(void)op;
	return collective(comm, send, recv, count * type_size(type), stream);
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, int type, int op, int root,
			struct ncclComm *comm, void *stream)
{
	(void)op;
	return collective(comm, send, comm->rank == root ? recv : NULL,
			  count * type_size(type), stream);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, int type, int root,
			   struct ncclComm *comm, void *stream)
{
	return collective(comm, comm->rank == root ? send : recv, recv, count * type_size(type),
			  stream);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, int type,
			   struct ncclComm *comm, void *stream)
{
	size_t b = count * type_size(type);

	return collective(comm, send, (char *)recv + (size_t)comm->rank * b, b, stream);
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, int type, int op,
			       struct ncclComm *comm, void *stream)
{
	size_t b = count * type_size(type);

	(void)op;
	return collective(comm, (const char *)send + (size_t)comm->rank * b, recv, b, stream);
}

ncclResult_t ncclSend(const void *send, size_t count, int type, int peer, struct ncclComm *comm,
		      void *stream)
{
	(void)send;
	(void)count;
	(void)type;
	return peer >= 0 && peer < comm->nranks ? collective(comm, NULL, NULL, 0, stream)
						: INVALID_ARGUMENT;
}

ncclResult_t ncclRecv(void *recv, size_t count, int type, int peer, struct ncclComm *comm,
		      void *stream)
{
	(void)recv;
	(void)count;
	(void)type;
	return peer >= 0 && peer < comm->nranks ? collective(comm, NULL, NULL, 0, stream)
						: INVALID_ARGUMENT;
}

ncclResult_t ncclGroupStart(void)
{
	if (group_depth++ == 0)
		group_ncomms = 0;
	return SUCCESS;
}

ncclResult_t ncclGroupEnd(void)
{
	ncclResult_t rc = SUCCESS;

	if (group_depth == 0)
		return INVALID_USAGE;
	if (--group_depth > 0)
		return SUCCESS;
	for (int i = 0; i < group_ncomms; i++)
		if (group_comms[i]->async == SUCCESS && in_progress(group_comms[i], POLLS) != SUCCESS)
			rc = IN_PROGRESS;
	group_ncomms = 0;
	return rc;
}
