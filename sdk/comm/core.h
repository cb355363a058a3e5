/*
 * sdk/comm/core.h - the communicator itself, shared by the core (core.c,
 * env.c, p2p.c, monitor.c) and its transports (transport/: tcp.c, shm/,
 * nccl.c), which the core reaches through the table of transport.h.
 * The algorithms (algo/) do not include this header: they see
 * comm_internal.h only.
 *
 * Lifetime rules:
 *  1. Init meets the peers in the store (one msgpack "info" record per
 *     rank), connects a control connection to every peer and a data link
 *     to every peer (through the first transport of the table that can
 *     join the pair: shared memory within a host, TCP otherwise), then
 *     starts the monitor thread.  A failed init leaves nothing behind.
 *  2. One thread at a time runs calls (the caller's, or the progress
 *     thread for nonblocking calls; herd__comm_run waits for the queue to
 *     drain first), so links and the current-call fields below need no
 *     lock.
 *  3. The monitor thread owns the reading side of the control connections:
 *     it notices dead or aborting peers at once (connection closed without
 *     a goodbye, pidfd of a local peer readable), answers status queries,
 *     and passes failures on to the peers.
 *  4. The first failure breaks the communicator for good: `status` turns
 *     non-zero, `wake_fd` turns readable and the doorbell futex is rung,
 *     so whatever is waiting returns; every later call gets the same
 *     status and message.
 *  5. abort (any thread) breaks with HERD_EABORTED, tells the peers, and
 *     shuts every socket down; destroy says goodbye (when not broken),
 *     stops the threads, then frees.
 */
#ifndef HERD_COMM_CORE_H
#define HERD_COMM_CORE_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "comm/comm_internal.h"
#include "comm/trace.h"
#include "comm/transport/transport.h"

#define HERD__COMM_MSG_MAX 1024
/* How an error of communicator init begins, so that a message says so
 * once, however deep it was made ("joining the communicator timed out
 * ..."). */
#define HERD__COMM_JOINING "joining the communicator"
#define HERD__COMM_HOST_MAX 256
#define HERD__COMM_KEY_LEN 32
#define HERD__COMM_ID_LEN 8
#define HERD__COMM_ADDRS_MAX 512
/* The most TCP data connections per pair of ranks (HERD_SOCKET_STREAMS). */
#define HERD__STREAMS_MAX 8

typedef enum herd__transport_mode {
	HERD__TRANSPORT_AUTO = 0,   /* shared memory within a host, TCP between */
	HERD__TRANSPORT_TCP = 1
} herd__transport_mode;

/* The options, resolved: explicit values, else HERD_* variables, else defaults. */
typedef struct herd__comm_cfg {
	int timeout_ms;
	char timeout_from[48];      /* "HERD_TIMEOUT=0.5" when that set timeout_ms, else "" */
	int transport;              /* herd__transport_mode */
	int algo;                   /* herd__algo_class: ANY "auto", BANDWIDTH "ring", LATENCY "rd",
				     * HIER "hier" */
	char ifname[64];            /* "" when none was named */
	bool device_check;          /* device calls compare fingerprints (HERD_DEVICE_CHECK) */
	int streams;                /* TCP data connections per pair (HERD_SOCKET_STREAMS) */
	double net_lat_us;          /* HERD_NET_LINK's latency, 0 when not given */
	double net_gbit;            /* ... and rate in Gbit/s */
	bool net_measure;           /* HERD_NET_LINK=measure */
	uint32_t trace_ring;        /* the flight recorder's entries; 0: none */
	/* A named split's (herd__comm_split_named): the name and each new
	 * rank's rank in the parent, copied into the communicator as it is
	 * made, before any thread of it runs; NULL in the communicator's
	 * own cfg. */
	const char *name;
	const int *parent;
} herd__comm_cfg;

/* Resolves opts (may be NULL) against the environment.  env.c. */
herd_status herd__comm_cfg_resolve(const herd_comm_opts *opts, herd__comm_cfg *out);

/*
 * st, with the message of a HERD_ETIMEDOUT naming the setting the
 * deadline came from ("...; the deadline was HERD_TIMEOUT=0.0001 seconds"),
 * so that a deadline too short is not taken for a slow peer.  env.c.
 */
herd_status herd__comm_timeout_source(herd_status st, const herd__comm_cfg *cfg);

/* Joins with resolved options (herd_comm_init, split, init_env).  core.c. */
herd_status herd__comm_init_cfg(herd_comm **out, herd_store *store, int rank, int size,
				const herd__comm_cfg *cfg);

/* What a rank says about its calls, for timeout reports. */
typedef struct herd__call_state {
	uint64_t entered_seq;       /* last call it started, 0 when none */
	uint64_t entered_cseq;      /* its collective number */
	uint64_t done_seq;          /* last call it completed successfully */
	uint8_t entered_kind;
	uint8_t done_kind;
	uint8_t busy;               /* in a call now */
} herd__call_state;

typedef struct herd__peer {
	/* From its info record. */
	char host[HERD__COMM_HOST_MAX];
	char boot_id[64];
	char addrs[HERD__COMM_ADDRS_MAX]; /* "a.b.c.d:port,..." it listens on */
	uint64_t shm_dev, shm_ino;  /* identity of its /dev/shm */
	uint64_t pidns;             /* inode of its pid namespace */
	int32_t pid;
	int transport;              /* what it asked for */
	int streams;                /* the TCP data connections per pair it asked for */
	bool same_host;             /* same host name, boot and /dev/shm */
	bool same_pidns;            /* its pid means something here */

	/* The transport that joins the pair, and its data links (both sides
	 * decide alike); NULL and 1 for the rank itself. */
	const herd__transport *via;
	int nlinks;
	herd__link *link;           /* data link; NULL for the rank itself */
	/* Over TCP, nlinks connections: link and these. */
	herd__link *more[HERD__STREAMS_MAX - 1];
	int ctl_fd;                 /* control connection; -1 for the rank itself */
	int pidfd;                  /* -1 when none */
	atomic_int left;            /* it said goodbye (destroyed its communicator) */

	/* Owned by the monitor thread. */
	bool ctl_eof;
	bool dead;
	uint8_t ctl_in[2048];
	size_t ctl_in_len;
	herd__call_state answer;    /* its reply to the current query */
	bool answered;              /* answer is its reply */
	bool resolved;              /* answered, or gone: not waited for */
} herd__peer;

typedef struct herd__shm herd__shm;
typedef struct herd__coll_state herd__coll_state;
typedef struct herd__nccl herd__nccl;

struct herd_comm {
	int rank, size;
	herd__comm_cfg cfg;
	herd_store *store;          /* this communicator's namespace (a prefix handle) */
	herd_store *owned_store;    /* init_env: the connection it made */
	herd_store_server *owned_server; /* init_env, torchrun style, rank 0 */
	uint8_t key[HERD__COMM_KEY_LEN]; /* authenticates the connections */
	uint8_t id[HERD__COMM_ID_LEN];   /* names shared memory segments */
	char id_hex[2 * HERD__COMM_ID_LEN + 1];
	herd__peer *peers;
	int nlocal;                 /* ranks on this host, this one included */
	herd__shm *shm;             /* NULL when no peer is local */
	int listen_fd;              /* tcp.c's listening socket, during init; else -1 */
	/* The doorbell of the links without a descriptor: the first that a
	 * pair's transport has; NULL when no pair's has one. */
	const herd__doorbell *bell;
	herd__place place;          /* what tune.c's choice depends on, set at init */
	int *hosts;                 /* place's host tables, one allocation */
	herd__coll_state *coll_state; /* place.coll's, for this communicator */
	int ncpus;                  /* CPUs this process may run on, or, with
				     * shared memory, that the ranks of this
				     * host may run on together (shm.c) */
	int nkernel;                /* ranks on this machine's kernel (same boot id),
				     * this host's and other containers' */

	/* Failure (rule 4). */
	atomic_int status;
	atomic_bool aborted;
	pthread_mutex_t fail_mu;
	char fail_msg[HERD__COMM_MSG_MAX];
	bool fail_propagate;        /* monitor: tell the peers */
	bool fail_told;             /* the peers have been told */
	int wake_fd;                /* eventfd, readable once broken */
	int mon_fd;                 /* eventfd, wakes the monitor */

	/* Call numbering, on the thread that makes the calls. */
	uint64_t seq, cseq;

	/* The call being run (rule 2). */
	const herd__op *op;
	uint64_t op_cseq;
	int64_t op_start_ms, op_deadline;

	/* What this rank is doing, for the monitor's answers. */
	atomic_uint_least64_t st_entered_seq, st_entered_cseq, st_done_seq;
	atomic_int st_entered_kind, st_done_kind, st_busy;

	/* Nonblocking calls: the progress thread and its queue. */
	pthread_mutex_t q_mu;
	pthread_cond_t q_cv;        /* queue changed, or a request completed */
	herd_comm_request *q_head, *q_tail;
	bool q_busy, q_stop, progress_started;
	pthread_t progress;

	/* The monitor thread (rule 3). */
	pthread_t monitor;
	bool monitor_started;
	atomic_bool mon_stop;
	pthread_mutex_t ctl_mu;     /* one writer at a time on control connections */
	pthread_mutex_t mon_mu;     /* the query below */
	pthread_cond_t mon_cv;
	uint32_t query_token;       /* current query; 0: none */
	uint32_t query_sent;        /* the token the monitor has sent */
	int query_expect;           /* peers the query went to */
	int query_answers;          /* of those, resolved */

	/* Device collectives: NULL until the first one (transport/nccl.c). */
	herd__nccl *nccl;
	/* The device calls of an open group (herd_comm_group_start), copied. */
	int group_depth;
	herd__op *group_ops;
	size_t group_n, group_cap;

	/* Scratch for p2p.c, sized for the communicator. */
	void *p2p_scratch;

	/* The collective counters of herd exporter (stats.h); NULL: not
	 * counting.  stats_fd holds the file's lock. */
	struct herd__stats_file *stats;
	int stats_fd;

	/* The flight recorder (trace.h): its ring, written by the thread
	 * that runs the calls; broken under fail_mu. */
	herd__trace trace;

	/* What it is ("tp group 1"; "" unnamed), and each rank's rank in
	 * the communicator it was split from (NULL: not split), for the
	 * messages (herd__comm_who) and the flight recorder. */
	char name[64];
	int *parent;
};

/* Settles place's link figures, an un-numbered exchange of every rank at
 * the end of init when the ranks are on several hosts.  links.c. */
herd_status herd__links_probe(herd_comm *comm, const herd__op *op);

/* The data links of the pair (this rank, peer): 1 over shared memory,
 * the fewer of the two ranks' HERD_SOCKET_STREAMS over TCP (the pair's
 * transport says).  Both sides decide alike. */
int herd__comm_streams(const herd_comm *comm, int peer);

/* Data link s (0 <= s < herd__comm_streams) of the pair with peer. */
static inline herd__link *herd__comm_link(const herd_comm *comm, int peer, int s)
{
	return s == 0 ? comm->peers[peer].link : comm->peers[peer].more[s - 1];
}

/* How many ranks of the communicator are on this host, this one included. */
int herd__comm_nlocal(const herd_comm *comm);

/* Whether kind is a point-to-point call (send, recv, sendrecv), which
 * involves two ranks only and so does not advance the collective number. */
bool herd__op_is_p2p(int kind);

/* ---- failures (core.c) ---------------------------------------------------- */

/*
 * Breaks the communicator with st and the calling thread's last error
 * message, unless it is broken already; propagate: tell the peers (a
 * failure this rank found itself).  Returns the communicator's status,
 * with its message as the thread's last error.
 */
herd_status herd__comm_fail(herd_comm *comm, herd_status st, bool propagate);

/* The same from a thread that reports no error of its own (monitor, abort). */
void herd__comm_fail_msg(herd_comm *comm, herd_status st, bool propagate, const char *fmt, ...)
	HERD_PRINTF(4, 5);

/* HERD_OK, or the status and message the communicator broke with. */
herd_status herd__comm_broken(herd_comm *comm);

/* Wakes whatever waits in a call (poll on wake_fd, the doorbell). */
void herd__comm_wake(herd_comm *comm);

/* Rings this rank's own doorbell, if it has one, so that a call asleep on
 * it looks again (a peer's goodbye).  Any thread. */
static inline void herd__comm_ring(herd_comm *comm)
{
	if (comm->bell != NULL)
		comm->bell->ring(comm);
}

/* Starts a library thread with every signal blocked. */
herd_status herd__comm_thread_start(pthread_t *t, void *(*fn)(void *), void *arg,
				    const char *what);

/* "rank 3 (host node7)" into buf. */
const char *herd__comm_who(const herd_comm *comm, int rank, char *buf, size_t cap);

/* herd_comm_split, the new communicator named ("tp group 1"): its
 * messages name the group and each rank's rank in comm, and so does its
 * flight recorder. */
herd_status herd__comm_split_named(herd_comm **out, herd_comm *comm, int color, int key,
				   const char *name);

/* "#7 allreduce" or "idle after #6 barrier": what this rank is doing. */
void herd__comm_doing(herd_comm *comm, char *buf, size_t cap);

/*
 * The current call's deadline passed: asks the peers what they are doing,
 * then breaks the communicator with HERD_ETIMEDOUT and a message naming the
 * ranks that did not arrive.  waiting[0..nwaiting) are the peers the call
 * still waits on.
 */
herd_status herd__comm_timeout(herd_comm *comm, const int *waiting, size_t nwaiting);

/* The same report for a call that is no longer the current one: fp, its
 * collective number and when it started; queued: it was queued on a
 * stream and did not complete (transport/nccl.c's watchdog).  Any thread. */
herd_status herd__comm_timeout_call(herd_comm *comm, const herd__fp *fp, uint64_t cseq,
				    int64_t start_ms, bool queued, const int *waiting,
				    size_t nwaiting);

/*
 * The info record a rank publishes in the store at init (msgpack: its
 * rank, the size it joined, pid, host, boot id, /dev/shm and pid namespace
 * identity, transport, listening addresses).  parse fills p's info-record
 * fields and *rank, *size from a record of outside origin (origin names it
 * in messages): HERD_EFORMAT or HERD_EVERSION when it is not one.
 */
herd_status herd__comm_info_pack(const herd__peer *me, int rank, int size, char **out,
				  size_t *len);
herd_status herd__comm_info_parse(herd__peer *p, const char *origin, const void *data,
				   size_t len, int64_t *rank, int64_t *size);

/* ---- the monitor and the control connections (monitor.c) ------------------ */

enum {
	HERD__CTL_MAPPED = 1,       /* init: I have mapped your shared memory */
	HERD__CTL_BYE = 2,          /* destroy: a clean goodbye */
	HERD__CTL_ABORT = 3,        /* abort */
	HERD__CTL_FAILED = 4,       /* {int32 status, message}: my communicator broke */
	HERD__CTL_QUERY = 5,        /* {uint32 token}: what are you doing? */
	HERD__CTL_STATUS = 6        /* {uint32 token, herd__call_state} */
};

/* A control frame: this header, in host byte order, then len bytes of
 * payload (at most HERD__CTL_PAYLOAD_MAX). */
typedef struct herd__ctl_hdr {
	uint32_t magic;
	uint16_t type;
	uint16_t len;
} herd__ctl_hdr;

#define HERD__CTL_PAYLOAD_MAX 1200

/*
 * The next control frame of the len bytes at buf: its size, with *h and
 * *payload (inside buf) set; 0 when the frame is not whole yet; -1 when
 * the bytes are not a control frame (the stream is out of step).
 */
long herd__ctl_frame(const uint8_t *buf, size_t len, herd__ctl_hdr *h, const uint8_t **payload);

/* A FAILED frame's payload: the status its sender failed with (a timeout
 * and a mismatch as they are, anything else HERD_EPEER) and its message
 * (text_len bytes, not terminated).  false when too short or too long. */
bool herd__ctl_failed_parse(const uint8_t *payload, size_t len, herd_status *code,
			    const char **text, int *text_len);

/* Writes one control frame to peer, whole; best effort (a peer that does
 * not read its control connection is not waited for beyond a moment). */
herd_status herd__ctl_send(herd_comm *comm, int peer, uint32_t type, const void *payload,
			   size_t len);

/* Init only (before the monitor runs): reads the next control frame of
 * peer, which must be of type want, before deadline. */
herd_status herd__ctl_expect(herd_comm *comm, int peer, uint32_t want, int64_t deadline);

/* abort: one ABORT frame to every peer (one try each), then shuts every
 * control connection down, and ends a query under way.  Any thread. */
void herd__ctl_abort(herd_comm *comm);

/* Tells every peer about a failure this rank found or heard of in a
 * peer's FAILED frame (one FAILED frame each), once per communicator;
 * nothing after an ABORT.  Any thread: the thread that records the failure tells before anything
 * waiting on the communicator wakes, so that a process that exits on the
 * error has told its peers why. */
void herd__comm_tell_peers(herd_comm *comm);

herd_status herd__monitor_start(herd_comm *comm);
void herd__monitor_stop(herd_comm *comm);
void herd__monitor_kick(herd_comm *comm);

/*
 * Asks every peer for its herd__call_state and waits up to wait_ms for the
 * answers: states[r], answered[r] (both arrays of comm->size).
 */
void herd__monitor_query(herd_comm *comm, int wait_ms, herd__call_state *states,
			 bool *answered);

/* p2p.c: the error for a peer that destroyed its communicator while the
 * current call still needed it. */
herd_status herd__p2p_left_error(herd_comm *comm, int peer);

/* p2p.c: scratch space for the exchange, sized for the communicator. */
herd_status herd__p2p_init(herd_comm *comm);
void herd__p2p_free(herd_comm *comm);

#endif /* HERD_COMM_CORE_H */
