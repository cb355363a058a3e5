/*
 * sdk/launch/launch_internal.h - the inside of job launch: the node list and
 * placement, the backend vtable, the node protocol spoken between the
 * launcher and `herd exec`, and the node supervisor.  Not part of the public
 * API (include/herd/job.h is).
 *
 * The pieces and who uses them:
 *
 *   launcher (job.c)  --- backend->resolve --->  the nodes (host, slots)
 *                     --- herd__launch_place --> ranks on nodes
 *                     --- per run: a fresh store server, then
 *                         backend->start, which starts `herd exec` for
 *                         every node and hands back one channel per node
 *                         (local: its loop on a thread of this process, at
 *                         the end of a socketpair; ssh, Slurm: a remote
 *                         process);
 *   channel            --- node protocol (below): spec and commands down,
 *                         events up: the one event path of every backend;
 *   `herd exec`        --- reads the spec, runs a herd__node, streams its
 *   (exec.c)              events, obeys commands, stops its ranks when the
 *                         channel closes.
 *
 * The launcher's channels, a relay's children and the commands that
 * discovery and broadcast run on nodes are all helpers of the remote-run
 * engine (engine.h), watched by its one loop (loop.h).
 *
 * Threads.  A job's supervisor thread owns its channels and helper
 * processes; a local node's loop runs on a thread of its own, sharing
 * nothing with it but the socket.  Every function here is called on one of
 * them (or, in `herd exec`, on the main thread) and none is thread-safe on
 * a shared object.
 */
#ifndef HERD_LAUNCH_INTERNAL_H
#define HERD_LAUNCH_INTERNAL_H

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <msgpack.h>

#include "herd/alloc.h"
#include "herd/cluster.h"
#include "herd/job.h"

#include "base.h"
#include "buf.h"

/* ---- nodes and placement ---------------------------------------------- */

/*
 * One node of a job.  Backends fill host and slots in resolve; placement
 * fills node_rank and ranks.  Owned by the job (herd__launch_nodes_free).
 */
typedef struct herd__launch_node {
	char *host;          /* as the backend reaches it ("node07", "127.0.0.1") */
	int slots;           /* ranks it may take; 0: unknown (any) */
	int node_rank;       /* 0..nnodes-1 among the nodes that got ranks */
	int nranks;          /* ranks placed on it */
	int *ranks;          /* their global ranks, ascending; local rank = index */
} herd__launch_node;

/*
 * The nodes of hosts[0..n) that Slurm has taken out of service (drained,
 * draining, down, failing): why[i] says so with Slurm's reason (the
 * caller frees it), NULL for the others.  slurm.c.
 */
void herd__slurm_unfit(char *const *hosts, size_t n, char **why);
/* Slurm's address of node host (NodeAddr, from sinfo), for a name that
 * does not resolve here (slurm.c).  HERD_ENOTFOUND. */
herd_status herd__slurm_node_addr(const char *host, char *addr, size_t cap);

/* How a node's refusal by the health gate (herd_job_spec.health_check)
 * begins, for the launcher to tell it from a node that did not answer. */
#define HERD__HEALTH_REFUSED "the health check"

/* Frees nodes[0..n) and the array.  Accepts NULL. */
void herd__launch_nodes_free(herd__launch_node *nodes, size_t n);

/*
 * Leaves out of nodes[0..*nnodes) (before placement) those on the list of
 * excluded nodes (herd_exclude_list) and those of extra (a hostlist
 * expression; NULL: none), keeping the others' order; *nnodes shrinks.
 * said[cap]: the nodes left out with why ("h3 (GPU 2 Xid 79), h4
 * (excluded for this job)"), "" when none.  exclude.c.
 */
herd_status herd__exclude_filter(herd__launch_node **nodes, size_t *nnodes, const char *extra,
				 char *said, size_t cap);

/*
 * Places ranks 0..nranks-1 on nodes[0..*nnodes), in node order:
 *
 *   - per_node > 0: per_node ranks on each node in turn (the last node may
 *     get fewer); a node with slots > 0 and fewer than per_node slots, or
 *     too few nodes, is refused;
 *   - per_node == 0: each node takes up to its slots; a node whose slots
 *     are unknown (0) takes up to ceil(nranks / nnodes), which spreads
 *     ranks evenly over nodes that say nothing, and lets the one local
 *     node take all of them.
 *
 * Nodes left without ranks are freed and dropped, so *nnodes becomes the
 * number of nodes used and node_rank their index.  HERD_ENORESOURCE when
 * the ranks do not fit, saying how many slots there are: nothing has been
 * started yet.  HERD_EINVAL for nranks < 1 or per_node < 0.
 */
herd_status herd__launch_place(herd__launch_node *nodes, size_t *nnodes, int nranks,
			       int per_node);

/* ---- what a backend sees of a job --------------------------------------- */

/*
 * One run of a job (the first, or a restart) as the backend starts it.
 * Everything is borrowed from the job and valid during backend->start.
 */
typedef struct herd__launch_ctx {
	const herd_job_spec *spec;    /* the job's deep copy of the caller's spec */
	const char *job_id;           /* HERD_JOB_ID */
	const char *secret;           /* HERD_JOB_SECRET (64 hex digits) */
	const char *store_addr;       /* HERD_STORE: host:port as the nodes reach it */
	const char *advertise_host;   /* this launcher's address as the nodes reach it
					 (the host part of store_addr): for connect-back */
	const char *bind_host;        /* where the launcher's sockets listen: that
					 address, or HERD_LAUNCH_BIND */
	const char *herd_program;     /* `herd` on the nodes (spec, $HERD_PROGRAM, "herd") */
	int restart_count;            /* HERD_RESTART_COUNT of this run */
	int world_size;
	const herd__launch_node *nodes;
	size_t nnodes;
	int64_t deadline;             /* herd__net_now_ms() time by which every node
					 must be up (start_timeout_ms) */
	const bool *direct;           /* per node: start `herd exec` on it (false: a
					 relay above it does); NULL: every node */
} herd__launch_ctx;

/*
 * A tree fan-out (backend->tree): the launcher starts `herd exec` only on
 * the first-level nodes, and each of them starts it on its children with
 * argv (words before the host, ending "--"), the host, then cmd: the same
 * helper command line as the launcher's.  width 0: no tree.  argv and cmd
 * are allocated; herd__launch_tree_free.
 */
typedef struct herd__launch_tree {
	int width;
	char **argv;
	char *cmd;
} herd__launch_tree;

void herd__launch_tree_free(herd__launch_tree *t);

/*
 * The tree's shape, the same for the launcher and every relay: n nodes in
 * a row are cut into g = min(width, n) contiguous groups (tree_groups),
 * the first n % g of them one node longer; group k starts at *off and has
 * *len nodes (tree_group).  A group's first node is a child of the level
 * above (a first-level node of the launcher, or a relay's child), the
 * rest its subtree, cut again the same way below it.  So a node's subtree
 * is always the nodes right after it: node k with d descendants relays to
 * nodes k+1..k+d.
 */
size_t herd__launch_tree_groups(size_t n, int width);
void herd__launch_tree_group(size_t n, int width, size_t k, size_t *off, size_t *len);

/*
 * The launcher's end of one node's `herd exec`: frames of the node protocol
 * are written to wfd and read from rfd (the same fd for a socket).  errfd,
 * when not -1, is the helper's stderr (ssh's own complaints: "Could not
 * resolve hostname ..."); the launcher reads it and quotes its last lines
 * when the node fails to come up or is lost.  pid, when > 0, is a local
 * helper process (ssh, srun) that the launcher reaps by pid once the
 * channel has closed (SIGTERM to it, then SIGKILL, if it lingers); a
 * backend with one helper for all nodes (srun) puts its pid on one channel
 * only.  The launcher owns and closes the fds after backend->start.
 */
typedef struct herd__launch_channel {
	int rfd, wfd, errfd;
	pid_t pid;              /* the helper process, or 0 */
	pthread_t thread;       /* or the node's thread in this process (local.c) */
	bool joinable;          /* thread is one */
} herd__launch_channel;

/* A channel with no fds, no process and no thread. */
#define HERD__LAUNCH_CHANNEL_INIT { -1, -1, -1, 0, 0, false }

/* Closes the channel's fds and sets them to -1; the process stays (link.c). */
void herd__launch_channel_close_fds(herd__launch_channel *ch);

/*
 * A backend: how the nodes of a job are found and how `herd exec` is
 * started on them.  One const instance per backend; job.c picks it by
 * spec->where through herd__launch_backend_for.
 */
struct herd__launch_run;

typedef struct herd__launch_backend {
	const char *name;             /* "local", "ssh", "slurm" (for messages) */
	/*
	 * true when ranks may run on other hosts: the store then listens on
	 * every interface (0.0.0.0) and is advertised at an address the nodes
	 * reach (HERD_LAUNCH_ADDR, else the source address of a UDP socket
	 * connected to the first node, else the host name).
	 */
	bool remote;
	/*
	 * The nodes the job may use, in order, with their slots (0: unknown),
	 * from spec->where and spec->hosts.  *nodes is allocated with
	 * herd__calloc, its hosts with herd__strdup (freed with
	 * herd__launch_nodes_free).  HERD_EFORMAT for a malformed hostlist or
	 * hostfile (path or expression, line and column), HERD_EUNAVAIL when
	 * the backend cannot work here (no Slurm allocation).  Runs on the
	 * calling thread of herd_job_launch, before anything starts.
	 */
	herd_status (*resolve)(const herd_job_spec *spec, herd__launch_node **nodes,
			       size_t *nnodes);
	/*
	 * Starts `herd exec` on every node of ctx (ctx->herd_program with
	 * arguments of the backend's choosing, e.g. "exec --stdio"; the local
	 * backend: its loop on a thread) and fills channels[0..ctx->nnodes),
	 * one per node in node order; the launcher then sends each its spec
	 * frame and waits for "ready" until ctx->deadline.  On failure it
	 * leaves nothing running and every channel HERD__LAUNCH_CHANNEL_INIT;
	 * the message names the host.  Called once per run (restarts call it
	 * again).
	 */
	herd_status (*start)(const herd__launch_ctx *ctx, herd__launch_channel *channels);
	/*
	 * Optional: whether this run uses a tree fan-out, and how a relay
	 * reaches its children (*tree zeroed first; width 0: flat).  Called
	 * before start; with a tree, start gets ctx->direct set and starts
	 * only those nodes.  HERD_EINVAL for a bad setting (named).
	 */
	herd_status (*tree)(const herd__launch_ctx *ctx, herd__launch_tree *tree);
	/*
	 * Optional: starts `run->program WORDS...` as one helper process (its
	 * stdin, stdout and stderr on ch), the engine's way to run a command
	 * on nodes (engine.h): ssh on run->hosts[0] (nhosts 1); with
	 * one_step, one srun step with a task on each of run->hosts, its
	 * output labelled by task (--label).  HERD_ENOTFOUND when the client
	 * program cannot be run, HERD_EINVAL for a command line too long.
	 */
	herd_status (*run)(const struct herd__launch_run *run, herd__launch_channel *ch);
	bool one_step;
} herd__launch_backend;

/* A command for backend->run. */
typedef struct herd__launch_run {
	const char *program;          /* herd on the nodes */
	const char *const *words;     /* its arguments */
	size_t nwords;
	bool input;                   /* stdin reaches the command (srun: every task) */
	int connect_timeout_ms;       /* 0: the backend's default */
	const char *const *hosts;
	size_t nhosts;
} herd__launch_run;

/* The backend for where; HERD_EUNAVAIL when this build has none for it. */
herd_status herd__launch_backend_for(herd_job_where where, const herd__launch_backend **out);

/* This node: its supervisor `herd exec`'s loop on a thread (sdk/launch/local.c). */
extern const herd__launch_backend herd__launch_backend_local;
/* HERD_JOB_HOSTS and HERD_JOB_HOSTFILE over ssh (sdk/launch/ssh.c). */
extern const herd__launch_backend herd__launch_backend_ssh;
/* HERD_JOB_SLURM through srun (sdk/launch/slurm.c). */
extern const herd__launch_backend herd__launch_backend_slurm;
extern const herd__launch_backend herd__launch_backend_pods;

/*
 * Starts argv (searched in PATH) in a process group of its own, stdin from
 * /dev/null, stdout and stderr into one pipe (*outfd, non-blocking), the
 * environment envp.  posix_spawn, not fork: the launcher has threads.  No
 * parent-death signal.  what names the command in messages.
 */
herd_status herd__launch_spawn_piped(const char *what, const char *const *argv,
				     char *const *envp, pid_t *pid, int *outfd);
/*
 * Runs argv as herd__launch_spawn_piped does and appends what it prints to
 * out until it ends, then reaps it (*wstatus: waitpid's).  At timeout_ms
 * its group gets SIGKILL: HERD_ETIMEDOUT (out keeps what came).
 */
herd_status herd__launch_capture(const char *what, const char *const *argv, int timeout_ms,
				 herd__buf *out, int *wstatus);

/*
 * Starts a helper process (`herd exec --stdio` itself, or ssh that runs
 * it) for a channel: argv[0] searched in PATH, its stdin and stdout pipes
 * to ch->wfd / ch->rfd, its stderr to ch->errfd, in a process group of its
 * own, with the parent-death signal SIGTERM (so it stops its ranks when
 * the launcher dies) tied to the calling thread.  env NULL: this
 * process's.  HERD_ESYS, or HERD_ENOTFOUND when argv[0] cannot be
 * executed (the message quotes it).
 */
herd_status herd__launch_spawn_helper(const char *const *argv, const char *const *env,
				      herd__launch_channel *ch);

/*
 * The launcher's end of a channel with its buffers and the helper's
 * stderr tail (sdk/launch/link.c): what job.c keeps per node and a relay
 * (`herd exec` with a subtree, relay.c) per child, so both read, write and
 * report a channel the same way.
 */
#define HERD__LAUNCH_LINK_ERR_MAX 2048
/* How long a flush that found the helper gone waits for the rest of its
 * stderr (its reason) before reporting the end without it. */
#define HERD__LAUNCH_LINK_GONE_WAIT_MS 2000

typedef struct herd__launch_link {
	herd__launch_channel ch;
	herd__buf in, out;              /* frames read / waiting to be written */
	char err[HERD__LAUNCH_LINK_ERR_MAX];  /* last bytes of the helper's stderr */
	size_t err_len;
	bool framed;                    /* a whole frame has come (herd__launch_link_frame) */
	bool err_elsewhere;             /* its stderr is read by the owner (an srun step's
					 * labelled lines), never into err */
} herd__launch_link;

/* No channel yet, empty buffers. */
void herd__launch_link_init(herd__launch_link *l);
/* Takes over ch's fds (made non-blocking) and process. */
void herd__launch_link_attach(herd__launch_link *l, const herd__launch_channel *ch);
/*
 * Reads what has arrived into l->in, at most 1 MiB a call (the caller
 * handles the frames, and poll says when there is more), and never more
 * than l->in.max pending bytes.  HERD_OK, or HERD_ECLOSED at end of
 * stream (the helper's stderr read first, for its last words, unless
 * l->err_elsewhere), HERD_ESYS
 * on a read error, HERD_ENOMEM, HERD_EFORMAT when l->in still holds
 * l->in.max bytes from before (the caller consumed none of them) and the
 * helper prints more ("printed more than 1 MiB on its stdout, ..."): the
 * channel is then finished.
 */
herd_status herd__launch_link_fill(herd__launch_link *l);
/*
 * The next whole frame in l->in: its payload and length (SIZE_MAX: none
 * yet); HERD_EFORMAT for a bad frame, or herd__launch_text_error's for
 * text where a frame must start.  herd__buf_consume(&l->in, len + 4) once
 * handled.
 */
herd_status herd__launch_link_frame(herd__launch_link *l, const char **payload, size_t *len);
/*
 * Writes what it can of l->out.  HERD_ECLOSED when the helper closed its
 * end (its stderr is read first, up to HERD__LAUNCH_LINK_GONE_WAIT_MS, so
 * herd__launch_link_says quotes its reason), HERD_ESYS (errno's text) for
 * another write error: the channel is then finished.
 */
herd_status herd__launch_link_flush(herd__launch_link *l);
/* Reads the helper's stderr into the tail; closes errfd at its end. */
void herd__launch_link_read_err(herd__launch_link *l);
/* The helper's last words for a message: "" or ": <text>" on one line. */
const char *herd__launch_link_says(const herd__launch_link *l, char *buf, size_t cap);
/* Adds the channel's fds to poll (reading only when read): returns how many (<= 3). */
size_t herd__launch_link_pollfds(const herd__launch_link *l, struct pollfd *fds, bool read);
/* Closes the channel's fds (the process stays, for reaping). */
void herd__launch_link_close(herd__launch_link *l);
/* Reaps the helper: joins a node thread (which ends once its socket is
 * closed), or waits up to wait_ms for a process, then SIGKILLs it. */
void herd__launch_link_reap(herd__launch_link *l, int wait_ms);
/* Closes the fds and frees the buffers (not the process: reap first). */
void herd__launch_link_free(herd__launch_link *l);

/* ---- the node protocol ---------------------------------------------------- */

/*
 * Between the launcher and one node's `herd exec`, over a channel (pipes
 * or a socket).  A frame is a 4-byte big-endian payload length and a
 * payload that is one msgpack map with string keys; every map has "v"
 * (HERD__LAUNCH_PROTOCOL_VERSION) and "t" (the type).  Unknown keys are
 * ignored, so fields can be added within a version.  Payloads are limited
 * to HERD__LAUNCH_FRAME_MAX bytes.  Decoding is strict: the payload passes
 * herd__msgpack_check first, known fields must have their types.
 *
 * launcher -> exec
 *   spec   {job, store, secret, restart, world, nnodes, node, host,
 *           ranks: [int...] (global ranks; local rank = index),
 *           argv: [str...], env: [str...] ("NAME=value", added last),
 *           maddr, mport (MASTER_ADDR / MASTER_PORT),
 *           workdir?, logdir?, grace (ms), gpus (per rank),
 *           lines? (1: the launcher takes lines frames),
 *           trace? (the token in the launcher's trace directory, below),
 *           health? (1, 2: run herd health at that level first, and refuse
 *           the spec when a GPU fails a check)}
 *          first and once; the secret travels here, never on a command line.
 *   signal {sig}           send sig to every running rank's process group
 *   stop   {grace}         SIGTERM now, SIGKILL after grace ms (0: at once)
 *   go     {}              start the ranks: sent once every node of the job
 *                          has said ready, so that a node that refuses the
 *                          spec leaves no rank started anywhere
 *   rings  {seq?}          send copies of the flight recorders of the job
 *                          on this node (ring frames), unless the node sees
 *                          the launcher's own trace directory, then rings
 *                          (below); seq >= 1 (a failure's request): whole
 *                          copies, and what the node knows of itself;
 *                          without (a straggler round): the newest
 *                          HERD__LAUNCH_ROUND_CALLS calls of each ring
 *
 * exec -> launcher
 *   ready  {host, pid, copies?}  spec accepted and checked (host: the
 *                          node's own name, pid: exec's); its ranks start on
 *                          go (a stop first: each is reported exited
 *                          FAILED_START); copies 1: it does not see the
 *                          launcher's trace directory and sends ring frames
 *                          when asked
 *   error  {st, msg}       the spec was refused or the node cannot run it
 *                          (leases busy, bad workdir); exec exits after
 *   started {rank, pid}
 *   out    {rank, s, data} one line (without its newline) of stream s
 *                          (1 stdout, 2 stderr), at most HERD_JOB_LINE_MAX
 *   lines  {rank, s, data} whole lines of stream s, each ending in a newline
 *                          and at most HERD_JOB_LINE_MAX bytes without it,
 *                          at most HERD__LAUNCH_LINES_MAX bytes in all: what
 *                          out frames carry one by one, many in one frame,
 *                          sent in their place when the spec said lines (a
 *                          launcher that predates them never says so)
 *   exited {rank, state, code, sig, err?}  state: a herd_job_rank_state
 *                          (EXITED, SIGNALED or FAILED_START)
 *   paused {rank, sig}     the rank was stopped by signal sig (SIGSTOP,
 *                          SIGTSTP...), or continued again (sig 0); seen
 *                          when the node next looks at its ranks
 *   ring   {data}          a copy of one flight recorder of this node
 *                          (herd__trace_copies), in answer to rings, and
 *                          unasked before done when one of its ranks
 *                          failed; the launcher keeps it in its trace
 *                          directory (herd__trace_keep_copy)
 *   rings  {seq?, msg?}    the answer to rings is complete (after its ring
 *                          frames, if any): the request's seq, and what the
 *                          node says of itself when asked
 *                          (herd__telemetry_node_words: its GPUs' last Xid,
 *                          slowdowns, links lost; taken in a child process
 *                          with a deadline); also sent, without seq, before
 *                          done when one of its ranks failed on its own
 *   done   {}              every rank has ended; exec exits after (a relay:
 *                          once its subtree's channels have closed too)
 *
 * Flight recorders.  Each rank keeps its ring in HERD_TRACE_DIR (the
 * job's trace directory, as the launcher names it), on its own node.  The
 * launcher writes a random token into that directory as its file
 * "launcher" and sends it in the spec; a node that finds the same token
 * there shares the directory (one file system) and sends no copies.
 *
 * Tree fan-out (backend->tree).  Beyond a number of hosts the launcher
 * holds channels only to first-level nodes; each such `herd exec` is also
 * a relay, running the launcher's channel code (herd__launch_link) for
 * the children below it.  A relay's spec has three more fields:
 *   sub    [str...]        hosts of its subtree: the nodes node+1, node+2...
 *                          in order, cut into children by
 *                          herd__launch_tree_split
 *   width  int             the fan-out, for that cut
 *   rsh    [str...], rcmd str   how to start `herd exec` on a child: rsh,
 *                          the child's host, rcmd (the ssh options travel
 *                          here, so every level connects the same way)
 * and frames for or from other nodes travel wrapped:
 *   relay  {node, frame}   node: the node rank the frame is for or from;
 *                          frame: a whole payload (bin) of another type
 * Down, the launcher sends each subtree node's own spec wrapped; a relay
 * unwraps what is for its child and passes the rest on unchanged; signal,
 * stop and go apply to the relay's ranks and go on to every child.  Up, a
 * relay wraps every frame of a child and passes wrapped frames on as they
 * are, so the launcher attributes ready, error, started, out, exited and
 * done to the node that sent them.  A child a relay cannot reach or loses
 * is reported as an error frame from that node naming the relay, and
 * likewise every node below it that had not finished: the launcher
 * treats them as lost.  When a relay's own channel closes it stops its
 * ranks and closes its children's channels, so the whole subtree stops.
 *
 * Every rank gets exactly one started or one FAILED_START exited before
 * anything else about it, and exactly one exited; "out" and "lines" of a
 * rank all come before its exited.
 *
 * Flow control.  A node reads its ranks' pipes only while less than
 * about a MiB of frames waits for the launcher; beyond that the ranks
 * block in write, as on a pipe nobody reads, and neither side's memory
 * grows with the ranks' output.
 */
#define HERD__LAUNCH_PROTOCOL_VERSION 1
#define HERD__LAUNCH_FRAME_MAX (4u * 1024u * 1024u)
/* Most bytes of lines in one lines frame. */
#define HERD__LAUNCH_LINES_MAX (1u * 1024u * 1024u)
/* Most ranks on one node, argv and env entries in one spec. */
#define HERD__LAUNCH_MAX_RANKS_PER_NODE 4096
#define HERD__LAUNCH_MAX_STRINGS 65536

#define HERD__LAUNCH_TYPES(X) \
	X(SPEC, "spec")       \
	X(SIGNAL, "signal")   \
	X(STOP, "stop")       \
	X(GO, "go")           \
	X(READY, "ready")     \
	X(ERROR, "error")     \
	X(STARTED, "started") \
	X(OUT, "out")         \
	X(LINES, "lines")     \
	X(EXITED, "exited")   \
	X(PAUSED, "paused")   \
	X(DONE, "done")       \
	X(RELAY, "relay")     \
	X(RINGS, "rings")     \
	X(RING, "ring")

typedef enum herd__launch_type {
	HERD__LAUNCH_T_UNKNOWN = 0,
#define HERD__LAUNCH_TYPE_ENUM_(name, wire) HERD__LAUNCH_T_##name,
	HERD__LAUNCH_TYPES(HERD__LAUNCH_TYPE_ENUM_)
#undef HERD__LAUNCH_TYPE_ENUM_
	HERD__LAUNCH_T_COUNT
} herd__launch_type;

/* The wire name of a type; "?" for unknown ones. */
const char *herd__launch_type_name(herd__launch_type type);

/*
 * What a node supervisor needs to start its ranks: the decoded spec frame
 * (or, for the local backend, built directly).  Strings and arrays owned
 * by it; freed with herd__node_spec_free.
 */
typedef struct herd__node_spec {
	char *job_id, *store, *secret;
	char *host;            /* the node's name in output and messages */
	char *master_addr;
	int master_port;
	int restart_count, world_size, nnodes, node_rank;
	int64_t job_start_ms;  /* HERD_JOB_START, in ms of Unix time; 0: unknown */
	int nranks;
	int *ranks;            /* global ranks; local rank = index */
	char **argv;           /* NULL-terminated, at least one */
	char **env;            /* NULL-terminated, maybe empty */
	char *workdir, *log_dir;  /* NULL: unchanged / none */
	int grace_ms;
	int gpus_per_rank;
	bool lines;            /* the launcher takes lines frames */
	char *trace_token;     /* NULL: none (the launcher keeps no trace directory) */
	int health;            /* herd health's level before ready; 0: none */
	/* Tree fan-out (a relay); nsub 0: a leaf. */
	int nsub;
	char **sub;            /* hosts of nodes node_rank+1..node_rank+nsub */
	int width;
	char **rsh;            /* NULL-terminated; NULL unless nsub > 0 */
	char *rcmd;
} herd__node_spec;

void herd__node_spec_free(herd__node_spec *s);

/* Whether "NAME=value" (or "NAME") names a variable of the rank contract
 * (HERD_RANK, MASTER_ADDR, ...), which the supervisor sets.  node.c. */
bool herd__launch_contract_name(const char *entry);

/*
 * A decoded event or command frame (not spec: see herd__launch_spec_decode).
 * Byte strings point into the payload, which must outlive it.
 */
typedef struct herd__launch_msg {
	msgpack_unpacked up;
	herd__launch_type type;
	int64_t rank, pid, sig, grace, state, code, st, s, node, copies, seq;
	const char *host, *msg, *err, *data, *frame;
	size_t host_len, msg_len, err_len, data_len, frame_len;
} herd__launch_msg;

/*
 * Looks for a whole frame in buf's pending bytes: *payload_len is its
 * payload's length once there, else SIZE_MAX.  HERD_EFORMAT for an empty
 * or oversized frame.
 */
herd_status herd__launch_frame_peek(const herd__buf *buf, size_t *payload_len);

/*
 * Whether the pending bytes of buf, where a frame must start, are text
 * instead (a login banner, a shell's greeting): a frame's length prefix
 * starts with a zero byte (frames are under 16 MiB), text with a printable
 * character, a blank, a terminal's escape or a UTF-8 byte, and so do the
 * rest of the first four bytes up to a newline.  When it is, its first line is quoted into quote
 * (at most 80 bytes of it, control bytes as \xNN, "..." when cut).
 */
bool herd__launch_frame_text(const herd__buf *buf, char *quote, size_t cap);

/*
 * HERD_EFORMAT when the pending bytes of buf are text where herd's
 * protocol must be (herd__launch_frame_text), saying so: "printed text
 * before herd's protocol: 'Welcome to node1'; a login banner on stdout?",
 * or "amid" it once a frame has come (framed).  HERD_OK, raising nothing,
 * when they are not text.
 */
herd_status herd__launch_text_error(const herd__buf *buf, bool framed);

/*
 * Decodes one payload (not a spec).  HERD_EFORMAT with the reason for a
 * malformed frame or missing fields of its type, HERD_EVERSION for another
 * protocol version.  On failure m needs no free.
 */
herd_status herd__launch_msg_decode(herd__launch_msg *m, const void *data, size_t len);
void herd__launch_msg_free(herd__launch_msg *m);

/* Peeks at a payload's type without decoding the rest (HERD__LAUNCH_T_UNKNOWN if bad). */
herd__launch_type herd__launch_payload_type(const void *data, size_t len);

/* Decodes a spec payload into *out (zeroed first).  Errors as msg_decode. */
herd_status herd__launch_spec_decode(herd__node_spec *out, const void *data, size_t len);

/*
 * Frame encoders: each appends one whole frame to buf, or leaves buf as it
 * was and raises (HERD_ENOMEM, HERD_EINVAL over the frame limit).
 */
herd_status herd__launch_enc_spec(herd__buf *buf, const herd__node_spec *s);
herd_status herd__launch_enc_signal(herd__buf *buf, int sig);
herd_status herd__launch_enc_stop(herd__buf *buf, int grace_ms);
herd_status herd__launch_enc_go(herd__buf *buf);
/* copies: the node sends copies of its rings (said only when true). */
herd_status herd__launch_enc_ready(herd__buf *buf, const char *host, long pid, bool copies);
herd_status herd__launch_enc_error(herd__buf *buf, herd_status st, const char *msg);
herd_status herd__launch_enc_started(herd__buf *buf, int rank, long pid);
herd_status herd__launch_enc_out(herd__buf *buf, int rank, herd_job_stream s,
				 const char *data, size_t len);
/* data: whole lines, each ending in '\n' (see the lines frame). */
herd_status herd__launch_enc_lines(herd__buf *buf, int rank, herd_job_stream s,
				   const char *data, size_t len);
herd_status herd__launch_enc_exited(herd__buf *buf, int rank, herd_job_rank_state state,
				    int code, int sig, const char *err);
herd_status herd__launch_enc_paused(herd__buf *buf, int rank, int sig);
herd_status herd__launch_enc_done(herd__buf *buf);
/* seq: the request's (0: none); words: NULL, or what the node says of
 * itself in its answer. */
herd_status herd__launch_enc_rings(herd__buf *buf, int seq, const char *words);
/* The newest calls of each ring a straggler round's copies carry. */
#define HERD__LAUNCH_ROUND_CALLS 512
herd_status herd__launch_enc_ring(herd__buf *buf, const void *image, size_t len);
/* The most bytes of a ring frame's copy: a header and HERD__TRACE_COPY_MAX entries. */
#define HERD__LAUNCH_RING_MAX (4096u + 8192u * 64u)
/* A relay frame around payload (one whole frame's payload, without its length). */
herd_status herd__launch_enc_relay(herd__buf *buf, int node, const char *payload, size_t len);

/* A copy of the NULL-terminated v (NULL: an empty one), and its freeing (job.c). */
herd_status herd__launch_strv_copy(char ***out, const char *const *v, const char *what);
void herd__launch_strv_free(char **v);
/* An output prefix: only %h, %r and %% in it, else HERD_EINVAL naming field (job.c). */
herd_status herd__launch_check_prefix(const char *prefix, const char *field);
/* A new job id ("TIME-RANDOM") into id (job.c). */
herd_status herd__launch_new_id(char *id, size_t cap);
/*
 * herd_job_launch for a replica of a service (serve.c): the job's id is
 * id, it has no control socket of its own (the service answers) and no
 * flight recorders, and the nodes its spec excludes are not logged.
 */
herd_status herd__job_launch_member(herd_job **out, const herd_job_spec *spec, const char *id);

/* ---- the control socket of a running job (control.c) ------------------------ */

/*
 * Listens on herd_jobs_dir()/ID.sock for job id (mode 0600, non-blocking):
 * *fd and its path into path[cap].  On failure *fd is -1.
 */
herd_status herd__control_listen(const char *id, int *fd, char *path, size_t cap);
/*
 * Serves the requests waiting on the listening lfd (at most 4 a call):
 * each peer of this user sends a line, answer(arg, line) gives the JSON
 * to send back (malloc; NULL: none), and the connection closes.  Each
 * request has 0.2 s to arrive and its answer 0.5 s to leave.
 */
void herd__control_serve(int lfd, char *(*answer)(void *arg, const char *request), void *arg);

/* ---- the relay (a `herd exec` with a subtree, sdk/launch/relay.c) ---------- */

typedef struct herd__relay herd__relay;
struct herd__loop;

/*
 * Starts `herd exec` on each child of spec's subtree (spec->nsub > 0) at
 * once, as helpers of an engine on loop (the `herd exec`'s), which reads
 * them, writes to them and reports lost ones by itself.  A child whose
 * helper cannot start is reported up at once (an error frame for it and
 * its subtree, appended to up).  up: the relay's own outgoing buffer,
 * which must outlive the relay.
 */
herd_status herd__relay_start(herd__relay **out, const herd__node_spec *spec, herd__buf *up,
			      struct herd__loop *loop);
/* A relay frame from above: for a child (unwrapped) or below it (as is).
 * HERD_EFORMAT for a node outside the subtree. */
herd_status herd__relay_down(herd__relay *r, const herd__launch_msg *m);
/* A command frame (signal, stop) passed to every child as it is. */
void herd__relay_command(herd__relay *r, const char *payload, size_t len);
/* While held, the children are not read (the channel above is backlogged). */
void herd__relay_hold(herd__relay *r, bool hold);
/* The channel above is gone: close every child's channel (they stop their
 * ranks), and give up on those still open after grace_ms and a margin. */
void herd__relay_shut(herd__relay *r, int grace_ms);
/* Whether every child's channel has closed. */
bool herd__relay_done(const herd__relay *r);
/* Ends what is left (bounded), frees.  Accepts NULL. */
void herd__relay_free(herd__relay *r);

/* ---- the node supervisor ---------------------------------------------------- */

/*
 * Starts, watches and stops the ranks of one node.  Used in-process by the
 * local backend (on the job's supervisor thread) and by `herd exec`.
 *
 * Ranks are forked from the calling thread, which must live as long as
 * they do: the parent-death signal (SIGKILL) follows the thread that
 * forked.  Each rank runs in a process group of its own (signals go to
 * the group, so a rank's children get them too), with stdout and stderr on
 * pipes the supervisor reads, cut into lines.  Reaping is by pid (pidfds),
 * never waitpid(-1): the embedding program's own children are left alone.
 */
/* ---- output.c: the job's lines to stdout and stderr, never blocking the caller ---- */

typedef struct herd__outq herd__outq;

/* How long a queue's reader may take nothing before it counts as stalled
 * (herd__outq_backlogged). */
#define HERD__OUTQ_STALL_MS 1000

/* Starts the writer thread (start it with signals blocked); at most
 * max_bytes wait in the queue. */
herd_status herd__outq_start(herd__outq **out, size_t max_bytes);

/*
 * Queues nlines whole lines (len bytes, each line ending in '\n') for
 * stdout or stderr, or drops them (counted, said later) when they do not
 * fit.  Never blocks on the reader.
 */
void herd__outq_push(herd__outq *q, herd_job_stream stream, const char *data, size_t len,
		     uint64_t nlines);

/*
 * Whether the caller is to take no more output for now: the queue holds
 * more than half its bound and its reader takes what is written (a write
 * finished within HERD__OUTQ_STALL_MS).  When true, herd__outq_fd becomes
 * readable once there is room, and *recheck_at is when the reader counts
 * as stalled if it has taken nothing more (a herd__net_now_ms() time).
 */
bool herd__outq_backlogged(herd__outq *q, int64_t *recheck_at);

/* An eventfd, readable once a queue found backlogged has room again; the
 * caller reads it to clear it.  Owned by the queue. */
int herd__outq_fd(const herd__outq *q);

/* Waits until everything queued is written, or give_up(arg) (asked every
 * 100 ms) says to stop waiting; says on stderr what was not written. */
void herd__outq_drain(herd__outq *q, bool (*give_up)(void *arg), void *arg);

/* Stops the writer, even inside a write, and frees the queue. */
void herd__outq_free(herd__outq *q);

typedef struct herd__node herd__node;

/* Where a node reports; the callbacks run inside herd__node_* calls. */
typedef struct herd__node_events {
	void *userdata;
	void (*started)(void *userdata, int rank, long pid);
	/*
	 * Whole lines of a stream, in order: len bytes, each line ending in
	 * '\n' (a line longer than HERD_JOB_LINE_MAX is cut into pieces of
	 * that length, each ending in a '\n' of its own, as a last line
	 * without one gets one), at most HERD_JOB_LINE_MAX + 1 bytes a call.
	 */
	void (*output)(void *userdata, int rank, herd_job_stream stream, const char *lines,
		       size_t len);
	/*
	 * Whether the caller holds as much output as it will take for now:
	 * the node then leaves the ranks' pipes unread, so that they block in
	 * write, until herd__node_process finds it false again.  May be NULL:
	 * never full.
	 */
	bool (*full)(void *userdata);
	/* state EXITED (code), SIGNALED (sig) or FAILED_START (code 126 when
	 * the command is there but cannot be executed, else 127; err). */
	void (*exited)(void *userdata, int rank, herd_job_rank_state state, int code, int sig,
		       const char *err);
	/* Stopped by signal sig, or continued (sig 0); may be NULL. */
	void (*paused)(void *userdata, int rank, int sig);
} herd__node_events;

/*
 * Checks spec (copied) and makes the node ready to start its ranks: GPU
 * leases, the guardian.  No rank runs yet.  HERD_EINVAL for a bad spec
 * or a HERD_SOCKET_IFNAME that matches no interface here (naming the host,
 * the value and the interfaces), HERD_ESYS, HERD_ENORESOURCE when the
 * node's GPUs cannot be leased.
 */
herd_status herd__node_create(herd__node **out, const herd__node_spec *spec,
			      const herd__node_events *events);

/*
 * Starts every rank (once; nothing after a stop): each is reported through
 * started, or exited with FAILED_START when its exec failed (not an error
 * of the call).  HERD_EIO for a log file that cannot be opened, HERD_ESYS
 * when pipes or fork fail: the ranks after it are not started, and
 * herd__node_stop ends the started ones and reports the others.
 */
herd_status herd__node_go(herd__node *node);

/*
 * The fds the node needs polled (rank pipes, pidfds), written to fds[0..]
 * with events set; returns how many (at most herd__node_nfds).
 */
size_t herd__node_pollfds(const herd__node *node, struct pollfd *fds);
size_t herd__node_nfds(const herd__node *node);

/* Milliseconds until herd__node_process must run even without fd activity; -1: none. */
int herd__node_timeout(const herd__node *node);

/*
 * Does what is due: reads output (a few reads of each pipe that is ready,
 * none while events->full says so), reaps ranks that ended (what their
 * pipes hold, then exited), escalates SIGTERM to SIGKILL at the grace
 * deadline.  fds
 * as filled by herd__node_pollfds and then poll()ed (revents may be 0).
 */
void herd__node_process(herd__node *node, const struct pollfd *fds, size_t nfds);

/* Sends sig to the process group of every running rank. */
void herd__node_signal(herd__node *node, int sig);

/*
 * SIGTERM to every running rank now and SIGKILL to those left after
 * grace_ms (0: SIGKILL at once); an earlier deadline already set stands.
 * Before herd__node_go: every rank is reported FAILED_START, none starts.
 */
void herd__node_stop(herd__node *node, int grace_ms);

/* Whether every rank has ended and been reported. */
bool herd__node_done(const herd__node *node);

/*
 * Frees the node.  Ranks still running are killed (SIGKILL to their
 * groups) and reaped first; blocks until they are gone (bounded: killed
 * processes end in milliseconds).  Accepts NULL.
 */
void herd__node_free(herd__node *node);

#endif /* HERD_LAUNCH_INTERNAL_H */
