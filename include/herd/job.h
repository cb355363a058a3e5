/*
 * herd/job.h - start N ranks of a program over one or more nodes, give each
 * its identity, GPUs and logs, watch them, and stop them all cleanly.
 *
 * A job is described by a herd_job_spec and started by herd_job_launch.
 * The launching process then:
 *
 *   - hosts the job's rendezvous store (a herd_store_server: the store does
 *     not live on rank 0, so a rank that dies does not take it along) and
 *     generates the job secret;
 *   - places the ranks on nodes (HERD_JOB_LOCAL: this node; a hostlist
 *     expression such as "node[01-04,07]"; an Open MPI / DeepSpeed hostfile
 *     of "host slots=N" lines; or the nodes of the Slurm allocation), ranks
 *     filling each node's slots in order, or per_node at a time;
 *   - starts, on every node, the node supervisor: in-process for the local
 *     backend, `herd exec` over ssh or through one `srun` step otherwise.
 *     The supervisor sets each rank's environment (below), binds it, starts
 *     it in its own process group with the parent-death signal set, streams
 *     its output back line by line and reports its exit;
 *   - supervises: the first rank that fails (non-zero exit, signal, failed
 *     exec) is recorded with the last lines of its stderr, the other ranks
 *     are stopped (SIGTERM, then SIGKILL after the grace period) and, while
 *     restarts remain, the whole job starts again with HERD_RESTART_COUNT
 *     incremented; a job with a time limit (spec.time_limit_ms) is stopped
 *     the same way when it runs out.
 *
 * Elastic membership (spec.min_nodes, spec.max_nodes).  The job runs on at
 * most max_nodes of its nodes, per_node ranks on each (the world size
 * follows: per_node times the nodes in), and the nodes beyond are spares.
 * After a failed run, before restarting, herd judges whether a node is at
 * fault:
 *
 *   - the launcher lost contact with it (its `herd exec` or the link to it
 *     gone, or it did not stop its ranks when told to);
 *   - it said at the failure that something of its hardware failed (a
 *     GPU's Xid or a fault's clock slowdown, a network card that lost its
 *     link: the words the summary gives);
 *   - its rank was the one to blame a second time in this job (a run in
 *     which a node was lost counts no blame: the others' collectives
 *     failed because of it);
 *   - it failed to come up for a run, or failed the health gate
 *     (spec.health_check).
 *
 * A node at fault is excluded: left out of the job and added to the
 * excluded nodes' list (herd/exclude.h) with the reason, and the job
 * restarts on the nodes that remain, a spare taking its place where there
 * is one, as long as at least min_nodes remain; otherwise it ends, its
 * failure saying why.  A failure with no node at fault restarts on the same
 * nodes.  At every restart the nodes this job excluded for losing contact
 * are asked again (`herd probe`, 3 s; a hostlist or hostfile job): one
 * that answers is taken off the list and back into the job when there is
 * room, at the restart, never mid-run.  Ranks are numbered afresh at every
 * run, contiguously node after node; HERD_WORLD_SIZE, HERD_NNODES and
 * their torchrun names give the run's; each change of membership is
 * logged with its reason (herd_set_log_handler), and herd_job_node says
 * where every node stands.  Start failures that exclude a node do not
 * count as restarts.
 *
 * Environment of every rank (DESIGN.md): HERD_RANK, HERD_WORLD_SIZE,
 * HERD_LOCAL_RANK, HERD_LOCAL_WORLD_SIZE, HERD_NODE_RANK, HERD_NNODES,
 * HERD_JOB_ID, HERD_STORE (host:port), HERD_JOB_SECRET, HERD_RESTART_COUNT,
 * and torchrun's RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK,
 * MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RESTART_COUNT; with GPUs,
 * CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER=PCI_BUS_ID.  spec->env entries
 * are added last and win.
 *
 * Output.  Every line a rank writes reaches the job's output callback whole
 * (never torn mid-line; an overlong line is cut into pieces of
 * HERD_JOB_LINE_MAX bytes), with stdout and stderr kept apart.  Without a
 * callback, lines are written to this process's stdout and stderr with the
 * prefix "[host:rank] " (spec->prefix changes or, as "", removes it).
 * With spec->log_dir, each rank also writes its own files
 * LOG_DIR/rank.N.out and LOG_DIR/rank.N.err (unprefixed): new files of
 * mode 0600, renamed into place once every name of the node's ranks is
 * checked (a device, a FIFO, a symbolic link or another user's file there
 * fails the node before any rank starts, replacing no log); a restart
 * appends to them.  A log_dir that is not a directory, or that others may
 * write to and is not sticky, is refused.
 *
 * Threads.  herd_job_launch starts a supervisor thread that owns the job's
 * processes and sockets; the output callback runs on it.  The other calls
 * on a job may come from any thread, except herd_job_free, which must not
 * race with them.  Library code never installs signal handlers: a program
 * that wants its Ctrl-C to end the job (as `herd launch` does) catches
 * SIGINT and calls herd_job_interrupt; herd_job_signal passes any signal on.
 */
#ifndef HERD_JOB_H
#define HERD_JOB_H

#include "common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A running or finished job.  Opaque. */
typedef struct herd_job herd_job;

/* Where the ranks of a job run. */
typedef enum herd_job_where {
	HERD_JOB_LOCAL = 0,  /* this node (fork/exec) */
	HERD_JOB_HOSTS,      /* spec->hosts is a hostlist expression; ssh */
	HERD_JOB_HOSTFILE,   /* spec->hosts is a hostfile path; ssh */
	HERD_JOB_SLURM,      /* the Slurm allocation this process is in; srun */
	/* spec->hosts is a hostlist of pods that start themselves, a
	 * Kubernetes Job's (herd/k8s.h): each pod's `herd exec` connects
	 * back to this launcher at HERD_K8S_PORT, naming itself; the job's
	 * secret is the file HERD_JOB_SECRET_FILE's */
	HERD_JOB_K8S
} herd_job_where;

/* Longest piece of a line handed to the output callback, in bytes. */
#define HERD_JOB_LINE_MAX 65536

/* Which stream a line came from. */
typedef enum herd_job_stream {
	HERD_JOB_STDOUT = 1,
	HERD_JOB_STDERR = 2
} herd_job_stream;

/*
 * Receives each line of output of a rank, without its newline (line points
 * to len bytes; not NUL-terminated).  Runs on the job's supervisor thread;
 * it must not call herd_job_wait or herd_job_free.
 */
typedef void (*herd_job_output_fn)(void *userdata, int rank, const char *host,
				   herd_job_stream stream, const char *line, size_t len);

/*
 * The standard sink: each line, with its prefix and a newline, in one
 * write to this process's stdout or stderr.  Given as spec.output, the job
 * writes in its place from a writer thread of its own, with spec.prefix,
 * many whole lines to a write (at most PIPE_BUF bytes into a pipe or a
 * socket, 16 KiB into a file or a terminal, unless a line is longer).  A reader slower than the ranks holds them back (beyond 8 MiB
 * queued the job stops taking their output, and they wait in write, as
 * on a pipe); a reader that takes nothing for a second never stalls the
 * job: beyond 16 MiB queued, lines are dropped and their count is written
 * when the reader drains.  Called directly, it writes the line with the prefix
 * format given as userdata (a const char *; NULL: HERD_JOB_PREFIX_DEFAULT).
 */
HERD_EXTERN void herd_job_output_stdio(void *userdata, int rank, const char *host,
				       herd_job_stream stream, const char *line, size_t len);

#define HERD_JOB_PREFIX_DEFAULT "[%h:%r] "

/*
 * The prefix of a rank's line: format with %h the host (NULL: "?"), %r the
 * rank and %% a '%' (NULL: HERD_JOB_PREFIX_DEFAULT), into out, NUL
 * terminated, cut to cap - 1 bytes.  Returns its length.
 */
HERD_EXTERN size_t herd_job_format_prefix(char *out, size_t cap, const char *format,
					  const char *host, int rank);

/*
 * A queue of lines: a bounded, thread-safe FIFO between an output callback
 * (on the supervisor thread, which must not wait) and a reader of its own
 * pace.  Pushing never blocks on the reader: a line that does not fit is
 * dropped and counted.  Every call may come from any thread, except
 * herd_job_lines_free, which must not race with them.  Opaque.
 */
typedef struct herd_job_lines herd_job_lines;

/*
 * One line taken from the queue, in one allocation the caller frees with
 * herd_free: text holds len bytes and a NUL after them (the bytes may hold
 * NULs of their own); host points inside the same allocation, or is NULL
 * when the line was pushed without one.
 */
typedef struct herd_job_line {
	int rank;
	herd_job_stream stream;
	const char *host;
	size_t len;
	char text[];
} herd_job_line;

/*
 * Makes an empty queue that holds at most max_bytes bytes of text (hosts
 * not counted); HERD_EINVAL when max_bytes is 0.  The caller frees *out with
 * herd_job_lines_free; on failure *out is NULL.
 */
HERD_EXTERN herd_status herd_job_lines_create(herd_job_lines **out, size_t max_bytes);

/*
 * Copies a line (len bytes of text, host may be NULL) to the back of the
 * queue.  Never blocks on a reader.  false when the line was dropped and
 * counted: it does not fit beside the bytes waiting, the queue is closed,
 * or memory ran out.
 */
HERD_EXTERN bool herd_job_lines_push(herd_job_lines *q, int rank, const char *host,
				     herd_job_stream stream, const char *text, size_t len);

/*
 * Takes the line at the front into *out (the caller frees it with
 * herd_free), waiting for one as timeout_ms says (docs/api.md: 0 looks
 * once; HERD_TIMEOUT_NONE and HERD_TIMEOUT_DEFAULT, as the queue has no
 * deadline of its own, wait without one).  HERD_ETIMEDOUT when none came
 * in time, HERD_ECLOSED once the queue is closed (lines still waiting are
 * not handed out), HERD_EINVAL for a NULL argument or a bad timeout; then
 * *out is NULL.
 */
HERD_EXTERN herd_status herd_job_lines_pop(herd_job_lines *q, int timeout_ms, herd_job_line **out);

/*
 * Closes the queue: every pop, waiting or to come, returns HERD_ECLOSED,
 * and every push drops.  Idempotent; NULL is accepted.
 */
HERD_EXTERN void herd_job_lines_close(herd_job_lines *q);

/*
 * A descriptor that is readable while a line waits and once the queue is
 * closed, for a caller's own poll or event loop: wait on it, then pop with
 * timeout 0.  Owned by the queue, valid until herd_job_lines_free; do not
 * read or close it.  -1 when q is NULL.
 */
HERD_EXTERN int herd_job_lines_fd(const herd_job_lines *q);

/*
 * A snapshot of the queue: the lines waiting and their bytes of text, and
 * since its creation the lines dropped and their bytes.  Any out-parameter
 * may be NULL; a NULL q gives zeros.
 */
HERD_EXTERN void herd_job_lines_counts(const herd_job_lines *q, size_t *lines, size_t *bytes,
				       uint64_t *dropped, uint64_t *dropped_bytes);

/*
 * Frees the queue and the lines still in it, after every other call on it
 * has returned (a job that pushes into it freed first).  NULL is accepted.
 */
HERD_EXTERN void herd_job_lines_free(herd_job_lines *q);

/*
 * An output callback (herd_job_output_fn) that pushes each line into the
 * queue given as userdata (a herd_job_lines *), with its rank, host and
 * stream, as herd_job_output_stdio prints it: set spec.output to it and
 * spec.output_userdata to the queue, and free the job before the queue.
 */
HERD_EXTERN void herd_job_output_lines(void *userdata, int rank, const char *host,
				       herd_job_stream stream, const char *line, size_t len);

#define HERD_JOB_SPEC_VERSION 5

/*
 * What to run and where.  Strings and arrays are copied by herd_job_launch;
 * a zeroed field means the default written beside it.
 */
typedef struct herd_job_spec {
	unsigned int version;      /* HERD_JOB_SPEC_VERSION */
	const char *const *argv;   /* program and arguments, NULL-terminated; required */
	/* extra "NAME=value" for every rank, NULL-terminated; wins over the rank
	 * variables herd sets (an exported MASTER_PORT, say).  Every rank, remote
	 * ones included, also gets this process's HERD_* and NCCL_* variables
	 * (HERD_TIMEOUT, HERD_SOCKET_IFNAME, NCCL_DEBUG, ...), less the rank
	 * contract's; env wins over them */
	const char *const *env;
	int nranks;                /* number of ranks; required, >= 1 */
	int per_node;              /* ranks per node; 0: fill each node's slots */
	herd_job_where where;      /* default HERD_JOB_LOCAL */
	const char *hosts;         /* hostlist expression or hostfile path (per where) */
	int gpus_per_rank;         /* GPUs leased and bound per rank; 0: none */
	const char *workdir;       /* working directory of the ranks; default: this one's */
	const char *log_dir;       /* per-rank log files; default: none */
	const char *prefix;        /* output prefix format, %h host, %r rank; default "[%h:%r] " */
	int start_timeout_ms;      /* every node's supervisor up and every rank exec'd; default 60000 */
	int grace_ms;              /* SIGTERM to SIGKILL when stopping; default 5000 */
	int restarts;              /* whole-job restarts after a failure; default 0 */
	const char *herd_program;  /* `herd` on remote nodes; default $HERD_PROGRAM, else "herd" */
	int connect_timeout_ms;    /* ssh ConnectTimeout per host; default 10000 */
	/* where rank output goes, line by line: herd_job_output_stdio, a
	 * function of the caller's, or NULL: nowhere (log_dir and the failure
	 * summary still get it); libherd writes to no stream unasked */
	herd_job_output_fn output;
	void *output_userdata;
	/* Version 2.  The job's wall-clock limit; 0: none.  It counts from the
	 * moment every rank of the first run has started (herd_job_launch
	 * returns) and restarts do not reset it.  At the limit the ranks still
	 * running are stopped as after a failure (SIGTERM, SIGKILL after
	 * grace_ms), no restart follows, the job's state is
	 * HERD_JOB_TIME_LIMIT and its exit status HERD_JOB_EXIT_TIME_LIMIT */
	int time_limit_ms;
	/* Version 3.  Nodes to leave out of this job (a hostlist expression;
	 * NULL: none), with those of the excluded nodes' list
	 * (herd/exclude.h), which is always honoured: a node on either is
	 * given no rank, and the job is placed on the nodes that remain */
	const char *exclude;
	/* Version 3.  Before any rank starts, every node runs herd health at
	 * this level (1 or 2, herd/health.h; 0: none) and refuses the job when
	 * a GPU of it fails a check: herd_job_launch then fails, naming the
	 * node and the checks, and no rank has started anywhere.  All nodes
	 * check at once, every GPU of each; level 1 takes seconds, level 2
	 * burns each GPU.  The start deadline grows by 60 s (level 1) or 300 s
	 * (level 2) for it */
	int health_check;
	/* Version 4.  Elastic membership (above): at least min_nodes and at
	 * most max_nodes nodes, per_node ranks each (per_node is required,
	 * nranks must be 0: the world size follows the nodes).  0 and 0: a
	 * job of nranks ranks on fixed nodes.  1 <= min_nodes <= max_nodes */
	int min_nodes;
	int max_nodes;
	/* Version 5.  Checkpoint copies in peers' memory (herd/ckpt.h): before
	 * the first run, a holder (`herd ckpt hold`) starts on every node of
	 * the job over ssh and lives until the job ends, so that what it holds
	 * outlives a failed run; each run's ranks get the holders of its
	 * nodes, in node order, as HERD_CKPT_HOLDERS, and HERD_CKPT_PEERS set
	 * to this count (the copies of each rank's data their saves make).  A
	 * node whose holder ended (the node was lost) gets a new one when it
	 * runs ranks again.  Needs HERD_JOB_SSH and two nodes or more; 0: none */
	int ckpt_peers;
} herd_job_spec;

#define HERD_JOB_SPEC_INIT \
	{ HERD_JOB_SPEC_VERSION, NULL, NULL, 0, 0, HERD_JOB_LOCAL, NULL, 0, NULL, NULL, \
	  NULL, 0, 0, 0, NULL, 0, NULL, NULL, 0, NULL, 0, 0, 0, 0 }

/* The exit status of a job stopped at its time limit, as timeout(1) gives. */
#define HERD_JOB_EXIT_TIME_LIMIT 124

/* How a job stands, or how it ended (herd_job_get_state). */
typedef enum herd_job_state {
	HERD_JOB_RUNNING = 0,   /* not over yet */
	HERD_JOB_SUCCEEDED,     /* every rank exited 0 */
	HERD_JOB_FAILED,        /* a rank failed: herd_job_failure says which and how
				   (a job ended by herd_job_signal too) */
	HERD_JOB_TIME_LIMIT,    /* spec.time_limit_ms was reached; its ranks were stopped */
	HERD_JOB_INTERRUPTED,   /* herd_job_interrupt: the caller's user ended it */
	HERD_JOB_STOPPED        /* herd_job_kill (or herd_job_free) before it finished,
				   or a herd_job_signal that ends a program came
				   before its ranks started */
} herd_job_state;

/* Name of a job state: "running", "succeeded", "failed", "time_limit",
 * "interrupted", "stopped". */
HERD_EXTERN const char *herd_job_state_name(herd_job_state state);

/* State of one rank. */
typedef enum herd_job_rank_state {
	HERD_JOB_RANK_PENDING = 0,      /* not started yet (or being restarted) */
	HERD_JOB_RANK_RUNNING,
	HERD_JOB_RANK_EXITED,           /* exit_code valid */
	HERD_JOB_RANK_SIGNALED,         /* signal valid */
	HERD_JOB_RANK_FAILED_START      /* error says why; exit_code is 126 when the
					   command is there but cannot be executed
					   (EACCES: no execute permission, a
					   directory), else 127 */
} herd_job_rank_state;

/* Name of a state ("running", "exited", ...). */
HERD_EXTERN const char *herd_job_rank_state_name(herd_job_rank_state state);

/*
 * A snapshot of one rank (herd_job_rank).  host and error point into the
 * job and stay valid until herd_job_free.
 */
typedef struct herd_job_rank_status {
	int rank;
	int node_rank;
	int local_rank;
	const char *host;
	long pid;               /* on its host; 0 before start */
	herd_job_rank_state state;
	int exit_code;
	int signal;
	/* Why it failed to start (HERD_JOB_RANK_FAILED_START, e.g. "exec
	 * \"train\": No such file or directory"), or, with exit_code 255, why
	 * its fate is unknown ("lost contact with node ..."); NULL otherwise. */
	const char *error;
} herd_job_rank_status;

/*
 * Where herd_job_launch would place spec's ranks, starting nothing and
 * reaching no node: the nodes as the launch resolves them (the hostlist,
 * the hostfile, the Slurm allocation's, this node; excluded nodes left
 * out; an elastic job's first max_nodes), the ranks on them as the launch
 * places them.  *hosts: one block from malloc (free it with free), rank
 * r's host at hosts[r]; *nranks its length.  The launch's errors before
 * it starts anything: a bad spec, a malformed hostlist or hostfile, no
 * Slurm allocation, more ranks than slots.
 */
HERD_EXTERN herd_status herd_job_place(const herd_job_spec *spec, char ***hosts, int *nranks);

/*
 * Starts a job and returns once every rank has been started, or fails:
 * HERD_EINVAL for a bad spec (the message names the field), HERD_EFORMAT for
 * a malformed hostlist or hostfile (line and column), HERD_ENORESOURCE for
 * more ranks than slots or GPUs (before anything starts), HERD_EUNAVAIL
 * for a node that cannot be reached, has no herd program or prints text
 * where herd's protocol must be (a login banner: the message quotes its
 * first line), HERD_ETIMEDOUT
 * for a node whose supervisor did not come up within start_timeout_ms (the
 * message names the host).  A rank whose exec fails
 * does not fail the launch: it is reported as HERD_JOB_RANK_FAILED_START and
 * the job fails as any failed rank makes it fail.  On failure nothing is
 * left running and *out is NULL.  The caller frees *out with herd_job_free.
 */
HERD_EXTERN herd_status herd_job_launch(herd_job **out, const herd_job_spec *spec);

/*
 * Waits until the job is over (every rank ended, after any restarts) or
 * timeout_ms passes (HERD_TIMEOUT_NONE, and HERD_TIMEOUT_DEFAULT as a job
 * has no deadline of its own: until it is over).  HERD_OK when the job is over, with
 * *exit_status (may be NULL) as a shell gives it: 0 when every rank exited
 * 0, else the first failed rank's exit code, 128 + signal when it was
 * killed, 126 or 127 when its exec failed (not executable, not found);
 * HERD_JOB_EXIT_TIME_LIMIT (124) at its time limit, 128 + sig when
 * interrupted (herd_job_interrupt).  HERD_ETIMEDOUT when still running.
 */
HERD_EXTERN herd_status herd_job_wait(herd_job *job, int timeout_ms, int *exit_status);

/*
 * A descriptor that becomes readable once the job is over (herd_job_wait
 * then returns at once) and stays readable, for a caller's own poll or
 * event loop: wait on it, then call herd_job_wait.  Owned by the job, valid
 * until herd_job_free; do not read or close it.  -1 when job is NULL.
 */
HERD_EXTERN int herd_job_fd(const herd_job *job);

/*
 * Sends sig to every running rank (through the node supervisors).  SIGHUP,
 * SIGINT, SIGQUIT, SIGTERM and SIGKILL, the signals that ask a program to
 * end, also end the job: it is not restarted after them, whatever
 * spec.restarts says (the ranks' deaths from them are the caller's doing,
 * not a failure), and herd_job_wait gives the first failed rank's status
 * (128 + sig for a rank the signal killed, 0 when every rank exited 0).
 * One that comes before the ranks have started keeps them from starting:
 * the job then ends with status 128 + sig.  HERD_EINVAL for a number that
 * is not a signal, HERD_EBUSY when 64 signals already wait to be sent.
 */
HERD_EXTERN herd_status herd_job_signal(herd_job *job, int sig);

/*
 * The caller was interrupted (a Ctrl-C, SIGTERM or SIGHUP to the program
 * that supervises the job): sig (SIGINT, SIGTERM, SIGHUP or SIGQUIT) goes
 * to every running rank, the ranks still running grace_ms later get
 * SIGKILL, and no restart follows.  The ranks' ends from it are not
 * failures: the job's state is HERD_JOB_INTERRUPTED, herd_job_wait gives
 * 128 + sig and herd_job_failure says so ("interrupted by SIGINT; ranks
 * 0-3 stopped"), unless a rank had failed before it came (then that
 * failure stands).  One that comes before the ranks have started keeps
 * them from starting.  A second call sends SIGKILL at once to what is left
 * (every rank's process group).  Does not block.  HERD_OK also when the
 * job is over, or when no rank is left running (its state is then left as
 * it is); HERD_EINVAL for another signal.
 */
HERD_EXTERN herd_status herd_job_interrupt(herd_job *job, int sig);

/*
 * Stops the job: SIGTERM to every rank, SIGKILL after the grace period,
 * no more restarts.  Returns once every rank is gone (at most the grace
 * period plus a few seconds); the job's state is then HERD_JOB_STOPPED
 * (exit status 128 + SIGTERM, herd_job_failure "stopped before it
 * finished") unless it had already ended.
 */
HERD_EXTERN herd_status herd_job_kill(herd_job *job);

/* Number of ranks: of the current (or last) run for an elastic job. */
HERD_EXTERN int herd_job_size(const herd_job *job);

/* Where a node of the job stands (herd_job_node). */
typedef enum herd_job_node_role {
	HERD_JOB_NODE_IN = 0,     /* has ranks in the current (or last) run */
	HERD_JOB_NODE_SPARE,      /* usable, not needed: beyond max_nodes, or
				     beyond the ranks of a fixed job */
	HERD_JOB_NODE_OUT         /* excluded; why says why */
} herd_job_node_role;

/* Name of a role: "in", "spare", "out". */
HERD_EXTERN const char *herd_job_node_role_name(herd_job_node_role role);

/* A snapshot of one node of the job (herd_job_node); the strings are
 * borrowed from the job, valid until herd_job_free. */
typedef struct herd_job_node_status {
	const char *host;
	herd_job_node_role role;
	int node_rank;            /* in the current run; -1 when not in it */
	int faults;               /* runs whose failure this node's rank was blamed for */
	const char *why;          /* HERD_JOB_NODE_OUT: the reason; else NULL */
	double since;             /* HERD_JOB_NODE_OUT by this job: when, Unix
				     seconds; else 0 */
} herd_job_node_status;

/*
 * The job's nodes, in the order given (those of the excluded nodes' list
 * at launch not among them): how many, and a snapshot of node i
 * (0..herd_job_nodes - 1) into *out.  HERD_EINVAL naming i and the count
 * when it is out of range.
 */
HERD_EXTERN size_t herd_job_nodes(const herd_job *job);
HERD_EXTERN herd_status herd_job_node(const herd_job *job, size_t i, herd_job_node_status *out);

/*
 * A snapshot of rank (0..herd_job_size - 1) into *out: a copy, as a
 * running job's ranks change.  HERD_EINVAL naming the rank and the size
 * when it is out of range.
 */
HERD_EXTERN herd_status herd_job_rank(const herd_job *job, int rank, herd_job_rank_status *out);

/* The job id (also HERD_JOB_ID of every rank), borrowed from the job. */
HERD_EXTERN const char *herd_job_id(const herd_job *job);

/* How many times the job has been restarted so far. */
HERD_EXTERN int herd_job_restart_count(const herd_job *job);

/*
 * The first-failure summary of the last run, or NULL when no rank failed:
 * host, rank, exit code or signal, and the last lines of its stderr; for a
 * job that ended otherwise (HERD_JOB_TIME_LIMIT, HERD_JOB_INTERRUPTED,
 * HERD_JOB_STOPPED), how, and which ranks were stopped.  Borrowed; valid
 * until the next restart or herd_job_free.
 */
HERD_EXTERN const char *herd_job_failure(const herd_job *job);

/*
 * The directory of the ranks' flight recorders (herd/trace.h), HERD_TRACE_DIR
 * as the ranks get it: BASE/JOB_ID, BASE the job environment's
 * HERD_TRACE_DIR, else $XDG_RUNTIME_DIR/herd/trace, else
 * /tmp/herd-trace-UID.  On a failure the summary uses the recorders to name
 * the rank missing from the call the others waited in, and they stay for
 * `herd trace DIR`; a job that succeeds removes them (on this node).
 * Borrowed; NULL for a NULL job.
 */
HERD_EXTERN const char *herd_job_trace_dir(const herd_job *job);

/* HERD_JOB_RUNNING until the job is over, then how it ended.  A NULL job
 * gives HERD_JOB_RUNNING. */
HERD_EXTERN herd_job_state herd_job_get_state(const herd_job *job);

/*
 * Frees the job.  A job still running is stopped first as by herd_job_kill.
 * NULL is accepted.
 */
HERD_EXTERN void herd_job_free(herd_job *job);


#ifdef __cplusplus
}
#endif

#endif /* HERD_JOB_H */
