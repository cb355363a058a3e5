/*
 * sdk/base/param.h - every HERD_* environment variable, declared once, as
 * NCCL's NCCL_PARAM does: its type, bounds, default and one line of
 * documentation in one table, read through one family of functions.  The
 * table is what `herd help env` prints and what docs/cli.md shows (a test
 * keeps the two the same).  Not part of the public API.
 *
 * Values are read from the environment at every call, never cached: the
 * shell and the tests set variables while the process runs.  Unset and
 * empty mean the same: the default.  Variables of other tools (SLURM_*,
 * RANK, MASTER_ADDR, CUDA_VISIBLE_DEVICES, HOME, PATH...) are not herd's
 * settings: the code that bootstraps from them reads them as those tools
 * define them.
 */
#ifndef HERD_BASE_PARAM_H
#define HERD_BASE_PARAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "herd/common.h"

/* How a value is written, and which reader reads it. */
typedef enum herd__param_type {
	HERD__PT_STRING,  /* as given (a path, a program, an address); VALUES says which */
	HERD__PT_WORDS,   /* words split as a shell would, quotes kept together, no expansion */
	HERD__PT_INT,     /* a whole number from MIN to MAX */
	HERD__PT_SIZE,    /* bytes as herd_size_parse reads them ("256M"), MIN to MAX */
	HERD__PT_SECONDS, /* a number of seconds greater than MIN, at most MAX ("0.5") */
	HERD__PT_BOOL,    /* 1 or 0 */
	HERD__PT_CHOICE,  /* one of the words of VALUES, '|' between them */
} herd__param_type;

/*
 * The settings: X(ID, TYPE, VALUES, MIN, MAX, DEFAULT, DOC) for HERD_<ID>.
 * DEFAULT is written as the variable would be; "" when there is none; in
 * parentheses when the code works it out at run time (the readers then
 * leave it to the caller).  DOC is one line; docs/cli.md says more.
 */
#define HERD__PARAMS_SETTINGS(X)                                                                \
	X(LOG, CHOICE, "error|warn|info|debug", 0, 0, "warn",                                   \
	  "messages libherd writes to stderr")                                                  \
	X(TIMEOUT, SECONDS, "", 0, 2000000, "300",                                              \
	  "deadline of every collective call and of init")                                      \
	X(TRANSPORT, CHOICE, "auto|tcp", 0, 0, "auto",                                          \
	  "tcp: no shared memory between local ranks")                                          \
	X(ALGO, CHOICE, "auto|ring|rd|hier", 0, 0, "auto",                                      \
	  "one algorithm class for every collective")                                           \
	X(SOCKET_IFNAME, STRING, "interfaces", 0, 0, "(store's)",                               \
	  "interfaces to peers, as NCCL_SOCKET_IFNAME")                                         \
	X(SOCKET_STREAMS, INT, "", 1, 8, "1",                                                   \
	  "TCP connections per pair of ranks across hosts")                                     \
	X(NET_LINK, STRING, "US,GBIT|measure", 0, 0, "(kernel's)",                              \
	  "links between hosts: one-way us, Gbit/s")                                            \
	X(DEVICE_CHECK, BOOL, "", 0, 1, "1",                                                    \
	  "compare the ranks' device calls before NCCL's")                                      \
	X(CKPT_STAGING_BYTES, SIZE, "", 1, INT64_MAX, "256M",                                   \
	  "host memory staging checkpointed GPU tensors")                                       \
	X(CKPT_PEERS, INT, "", 0, 64, "0",                                                      \
	  "checkpoint copies in other nodes' memory")                                           \
	X(CKPT_STORAGE_EVERY, INT, "", 1, INT32_MAX, "1",                                       \
	  "with peer copies: steps to storage, multiples")                                      \
	X(CKPT_PEER_BYTES, SIZE, "", 1, INT64_MAX, "(RAM/4)",                           \
	  "most bytes a node's checkpoint holder keeps")                                        \
	X(CKPT_PEER_STEPS, INT, "", 1, 2, "1",                                                  \
	  "committed steps a checkpoint holder keeps")                                          \
	X(CKPT_MTTF, STRING, "duration", 0, 0, "",                                              \
	  "the job's mean time to failure: 8h, 90m, 3600")                                      \
	X(CKPT_RESTART_COST, SECONDS, "", -1, 86400, "30",                                      \
	  "seconds a failure costs before the restore")                                         \
	X(INVENTORY, STRING, "file", 0, 0, "",                                                  \
	  "a recorded inventory stands for this node")                                          \
	X(LEASE_DIR, STRING, "dir", 0, 0, "(/run/herd)",                                        \
	  "GPU leases (else $XDG_RUNTIME_DIR/herd)")                                            \
	X(STATS_DIR, STRING, "dir", 0, 0, "(herd/stats)",                                       \
	  "where processes count calls for herd exporter")                                      \
	X(TRACE_DIR, STRING, "dir", 0, 0, "(launcher's)",                                       \
	  "where each rank keeps its flight recorder")                                          \
	X(TRACE_RING, INT, "", 0, 1048576, "1024",                                              \
	  "calls a flight recorder keeps; 0: none")                                             \
	X(STRAGGLER_CHECK, SECONDS, "", 0, 3600, "10",                                          \
	  "herd launch looks for a straggler this often")                                       \
	X(KERNEL_LOG, STRING, "file", 0, 0, "/dev/kmsg",                                        \
	  "the kernel log herd health and telemetry read")                                     \
	X(HISTORY, STRING, "file", 0, 0, "(state dir)",                                         \
	  "the shell's history; set but empty: none")                                           \
	X(ACCT_LOG, STRING, "file", 0, 0, "(state dir)",                                        \
	  "the accounting log of jobs; set but empty: none")                                    \
	X(EXCLUDE_FILE, STRING, "file", 0, 0, "(state dir)",                                    \
	  "the nodes herd launch leaves out (herd exclude)")                                    \
	X(PROGRAM, STRING, "program", 0, 0, "herd",                                             \
	  "the herd that other nodes run")                                                      \
	X(LAUNCH_ADDR, STRING, "host", 0, 0, "(route)",                                         \
	  "the launcher's address as the nodes reach it")                                       \
	X(LAUNCH_BIND, STRING, "host", 0, 0, "(LAUNCH_ADDR)",                                   \
	  "where the launcher listens (0.0.0.0: all)")                                          \
	X(K8S_PORT, INT, "", 1, 65535, "29400",                                                 \
	  "pod 0's port for a Kubernetes job's pods")                                    \
	X(JOB_SECRET_FILE, STRING, "file", 0, 0, "",                                            \
	  "the file of a Kubernetes job's secret")                                 \
	X(SSH, STRING, "program", 0, 0, "ssh",                                                  \
	  "the ssh client")                                                                     \
	X(SSH_ARGS, WORDS, "words", 0, 0, "",                                                   \
	  "options before ssh's own (-F FILE -l USER)")                                         \
	X(SSH_TREE_MIN, INT, "", 1, 1000000, "32",                                              \
	  "beyond this many nodes, ssh fans out as a tree")                                       \
	X(SSH_TREE_WIDTH, INT, "", 1, 1000000, "(sqrt N)",                                      \
	  "the nodes the launcher reaches in that tree")                                        \
	X(SRUN, STRING, "program", 0, 0, "srun",                                                \
	  "the srun program")                                                                   \
	X(SRUN_ARGS, WORDS, "words", 0, 0, "",                                                  \
	  "options added to srun's")                                                            \
	X(HAPROXY, STRING, "program", 0, 0, "haproxy",                                          \
	  "HAProxy, a service's front door (herd serve)")                                      \
	X(SINFO, STRING, "program", 0, 0, "sinfo",                                              \
	  "the sinfo program (elastic jobs' node states)")                                   \
	X(DISCOVER_FANOUT, INT, "", 1, 1000000, "256",                                          \
	  "ssh clients at once when discovery probes")

/*
 * The contract: what herd sets for the processes it starts (docs/design.md),
 * same columns.  herd_comm_init_env reads the first ones; a user sets them to
 * join ranks another tool started.
 */
#define HERD__PARAMS_CONTRACT(X)                                                                \
	X(RANK, STRING, "integer", 0, 0, "", "this rank, from 0")                               \
	X(WORLD_SIZE, STRING, "integer", 0, 0, "", "ranks in the job")                          \
	X(LOCAL_RANK, STRING, "integer", 0, 0, "", "this rank among its node's")                \
	X(LOCAL_WORLD_SIZE, STRING, "integer", 0, 0, "", "ranks on this node")                  \
	X(NODE_RANK, STRING, "integer", 0, 0, "", "this node among the job's")                  \
	X(NNODES, STRING, "integer", 0, 0, "", "nodes of the job")                              \
	X(JOB_ID, STRING, "text", 0, 0, "", "the job; leases and checkpoint locks name it")     \
	X(STORE, STRING, "host:port", 0, 0, "", "the job's store")                              \
	X(JOB_SECRET, STRING, "text", 0, 0, "", "what every connection of the job proves")      \
	X(CKPT_HOLDERS, STRING, "list", 0, 0, "", "checkpoint holders of the nodes, in order")  \
	X(RESTART_COUNT, STRING, "integer", 0, 0, "", "restarts of the job so far")             \
	X(JOB_START, STRING, "seconds", 0, 0, "", "when the job was launched (Unix time)")      \
	X(REPLICA, STRING, "integer", 0, 0, "", "this replica of a service, from 0")            \
	X(PORT, STRING, "integer", 0, 0, "", "the port this replica listens on")                \
	X(LISTEN, STRING, "address", 0, 0, "", "the address this replica listens on")           \
	X(SERVICE, STRING, "text", 0, 0, "", "the service this replica serves (herd serve)")    \
	X(EMIT, STRING, "1", 0, 0, "", "herd.emit goes to the script of herd.launch")           \
	X(BENCH_LAUNCHER, STRING, "1", 0, 0, "", "a rank that herd bench -n started")

#define HERD__PARAMS(X) HERD__PARAMS_SETTINGS(X) HERD__PARAMS_CONTRACT(X)

typedef enum herd__param {
#define HERD__PARAM_ENUM_(ID, TYPE, VALUES, MIN, MAX, DEFAULT, DOC) HERD__P_##ID,
	HERD__PARAMS(HERD__PARAM_ENUM_)
#undef HERD__PARAM_ENUM_
	HERD__P_COUNT
} herd__param;

/* One row of the table. */
typedef struct herd__param_info {
	const char *name;      /* "HERD_TIMEOUT" */
	herd__param_type type;
	const char *values;    /* CHOICE: its words; STRING, WORDS: what it holds */
	long long min, max;    /* INT, SIZE, SECONDS */
	const char *dflt;      /* as in the table */
	const char *doc;
	bool contract;         /* set by herd (HERD__PARAMS_CONTRACT) */
} herd__param_info;

/* The row of p; NULL when p is out of range. */
const herd__param_info *herd__param_get(herd__param p);

/* The value as the environment holds it: NULL when unset, "" when empty. */
const char *herd__param_raw(herd__param p);

/* Any variable's value: NULL when unset or empty (defaults are the caller's). */
const char *herd__param_str(herd__param p);

/*
 * The typed readers.  *out: the value; when unset or empty, the table's
 * default, or, for a default worked out at run time (in parentheses), *out
 * as the caller set it.  A malformed value is HERD_EINVAL with a message
 * naming the variable, the value and what is expected, and leaves *out at
 * the default.  Each checks that p has its type.
 */
herd_status herd__param_int(herd__param p, long *out);
herd_status herd__param_size(herd__param p, uint64_t *out);
/* Seconds, as milliseconds rounded up. */
herd_status herd__param_ms(herd__param p, int *out);
herd_status herd__param_bool(herd__param p, bool *out);
/* The index of the value among the words of VALUES. */
herd_status herd__param_choice(herd__param p, int *out);

/* The index of word among the words of CHOICE p's VALUES; -1 when none. */
int herd__param_choice_of(herd__param p, const char *word);

/*
 * WORDS p split as a shell would split it (quotes keep blanks, no
 * expansion) into buf (cap bytes), at most max words in words; *n: their
 * number, 0 when unset.  HERD_EINVAL naming the variable when it does not
 * fit or has an unclosed quote.
 */
herd_status herd__param_words(herd__param p, char *buf, size_t cap, const char **words,
			      size_t max, size_t *n);

/* The splitting of herd__param_words, of a value named name. */
herd_status herd__param_split_words(const char *name, const char *value, char *buf, size_t cap,
				    const char **words, size_t max, size_t *n);

/* What `herd help env` prints, in a malloc'd string (NULL when out of memory). */
char *herd__param_table_text(void);

#endif /* HERD_BASE_PARAM_H */
