/*
 * sdk/launch/engine.h - the one remote-run engine: whatever runs on many
 * nodes (a job's `herd exec`, `herd probe`, `herd bcast --receive`) is
 * started, watched and collected here.  Internal to libherd.
 *
 * A client (job.c, discover.c, bcast.c, a relay's children in relay.c)
 * asks the engine for helpers: either a command run on nodes through the
 * backend table (herd__engine_fanout: one srun step, or ssh to each node,
 * or beyond HERD_SSH_TREE_MIN nodes to the head of each group of a relay
 * tree), or channels a backend already started (herd__engine_attach: a
 * job's nodes).  Each helper answers for a run of nodes [first, first +
 * count) and is watched by the engine's one loop (loop.h), which the
 * client may add watchers and timers of its own to.  The engine tells the
 * client, through its callbacks:
 *
 *   input     bytes from the helper's stdout (the client consumes what it
 *             handled: frames, lines, an inventory's text);
 *   writable  the helper's stdin takes more (while the client wants it);
 *   ended     the helper is finished: its exit status once reaped, or the
 *             engine's verdict (it did not start, its deadline passed, its
 *             channel broke), with the last words of its stderr (ssh's own
 *             reason: "ssh: Could not resolve hostname ...").
 *
 * A one-step helper (srun --label) answers for all nodes at once: its
 * stdout and stderr are sorted by task into per-node buffers
 * (herd__engine_node_out / _node_err), and what srun says itself into
 * herd__engine_said, as they come.  A task's stdout holds at most the
 * command's in_max bytes (beyond: herd__engine_node_over, the rest
 * dropped), its stderr and srun's own lines keep their last 64 KiB and
 * 1 MiB: what the engine holds is bounded whatever the nodes print.
 *
 * Deadlines.  Each helper has one (its start plus its patience; a relay's
 * patience is twice the command's, as it may wait that long on one of its
 * group); the client moves it with herd__engine_deadline.  At the deadline
 * the engine ends the helper (SIGTERM to its process group, SIGKILL half
 * a second later, reaped in the background) and reports it ended with
 * HERD_ETIMEDOUT.  A one-step helper (srun) that cannot be started fails
 * herd__engine_run_once with its status: the command cannot run anywhere.
 *
 * Threads: an engine and its loop belong to the thread that made them.
 * Callbacks run inside herd__engine_run_once, herd__engine_flush and
 * herd__engine_close; a callback may call any engine function.
 */
#ifndef HERD_LAUNCH_ENGINE_H
#define HERD_LAUNCH_ENGINE_H

#include "launch_internal.h"
#include "loop.h"

typedef struct herd__engine herd__engine;

/* How a helper ended. */
typedef struct herd__engine_end {
	/*
	 * HERD_OK: its output ended and, for a process the engine started,
	 * it was reaped (wstatus); HERD_ECLOSED: its channel closed (an
	 * attached channel: not reaped here); HERD_ETIMEDOUT: its deadline
	 * passed; HERD_EFORMAT: it printed more than its stdout buffer holds
	 * and the client consumed (in_max), and was stopped unread; another
	 * status: it could not be started or its channel broke (why says
	 * which).
	 */
	herd_status st;
	int wstatus;            /* waitpid's status when st is HERD_OK and reaped, else -1 */
	const char *why;        /* the engine's words when st != HERD_OK, else "" */
} herd__engine_end;

typedef struct herd__engine_client {
	void *userdata;
	/* A planned helper has just started (fan-out helpers only).  May be NULL. */
	void (*started)(void *userdata, size_t h);
	/* New bytes in in (the helper's stdout); consume those handled.  May be NULL. */
	void (*input)(void *userdata, size_t h, herd__buf *in);
	/* The helper's stdin takes more (see herd__engine_want_write).  May be NULL. */
	void (*writable)(void *userdata, size_t h);
	/* The helper is finished; its link stays readable (herd__engine_says). */
	void (*ended)(void *userdata, size_t h, const herd__engine_end *end);
} herd__engine_client;

/*
 * A command for every node of a list, as herd__engine_fanout starts it:
 * `program WORDS...` where WORDS come from words(userdata, forward, ...)
 * for each helper.  forward is NULL for a helper that answers for its own
 * node only, else the hostlist of the rest of its group, which the
 * command must carry (`--forward GROUP`); the engine appends the relay's
 * settings (--program, --ssh, --ssh-args) to its words.
 */
typedef struct herd__engine_cmd {
	const char *const *hosts;  /* the nodes, in order */
	size_t nhosts;
	const char *program;       /* herd on the nodes */
	/* Fills words[0..*n) (at most max; strings must live until the
	 * call returns, buf of cap bytes is the callee's to use). */
	herd_status (*words)(void *userdata, const char *forward, const char **words, size_t max,
			     size_t *n, char *buf, size_t cap);
	void *userdata;
	bool input;                /* the helper reads stdin (every task: srun --input=all) */
	int timeout_ms;            /* a helper's patience, and ssh's connect timeout under 10 s */
	size_t fanout;             /* most helpers running at once; 0: all */
	bool flat;                 /* ssh to every host, never a tree */
	size_t in_max;             /* the most a node's output may hold (0: 1 MiB): a
				    * helper's stdout buffer holds in_max times the
				    * nodes it answers for, a one-step task's in_max */
} herd__engine_cmd;

/*
 * The engine over backend be (its run member starts commands; NULL for an
 * engine of attached channels only), on loop (NULL: a loop of its own).
 */
herd_status herd__engine_create(herd__engine **out, const herd__launch_backend *be,
				const herd__engine_client *client, herd__loop *loop);

/*
 * Ends every helper still running and frees.  Every channel is closed
 * first; then all the processes are reaped side by side under one deadline
 * of reap_ms: the engine's own get SIGTERM at once, attached ones (a job's
 * ssh) that long to end by themselves, and every one left at the deadline,
 * or at the SIGKILL time of one ended already (herd__engine_kill), gets
 * SIGKILL; node threads are joined last.  Accepts NULL.
 */
void herd__engine_free(herd__engine *e, int reap_ms);

/* The engine's loop, for the client's own watchers and timers. */
herd__loop *herd__engine_loop(herd__engine *e);

/*
 * Plans and queues helpers for cmd (copied): one srun step for all hosts,
 * or ssh to each host, or, beyond HERD_SSH_TREE_MIN hosts, to the head of
 * each group of the tree (herd__launch_tree_group), which answers for its
 * group.  They start as herd__engine_run_once finds room (cmd->fanout).
 * HERD_EUNAVAIL when the backend cannot run commands, HERD_EINVAL for a
 * bad tree setting.
 */
herd_status herd__engine_fanout(herd__engine *e, const herd__engine_cmd *cmd);

/*
 * Watches a channel a backend started (backend->start) as a helper for
 * nodes [first, first + count); its input buffer holds up to in_max bytes.
 * The channel is the engine's from the call on, also when it fails
 * (HERD_ENOMEM: then ended at once): it closes the fds, and
 * herd__engine_free reaps the process or joins the thread.  Returns the
 * helper's index in *h.
 */
herd_status herd__engine_attach(herd__engine *e, const herd__launch_channel *ch, size_t first,
				size_t count, size_t in_max, size_t *h);

/* Helpers, planned or attached; a helper's nodes. */
size_t herd__engine_helpers(const herd__engine *e);
void herd__engine_nodes(const herd__engine *e, size_t h, size_t *first, size_t *count);
/* Whether the engine runs one step for all nodes (srun): per-node buffers. */
bool herd__engine_one_step(const herd__engine *e);
/* Whether h's is a relay (answers for nodes beyond its own). */
bool herd__engine_relays(const herd__engine *e, size_t h);
/* Helpers not ended yet (planned ones included). */
size_t herd__engine_live(const herd__engine *e);
bool herd__engine_ended(const herd__engine *e, size_t h);
/* Whether h's stdout has ended: what its input buffer holds is all there
 * will be (true inside the input callback that hands over the last bytes). */
bool herd__engine_input_ended(const herd__engine *e, size_t h);
/* Whether h has been started. */
bool herd__engine_started(const herd__engine *e, size_t h);

/* h's channel: its buffers (out: frames to write), fds, stderr tail. */
herd__launch_link *herd__engine_link(herd__engine *e, size_t h);
/* h's last words on stderr for a message: "" or ": <text>". */
const char *herd__engine_says(const herd__engine *e, size_t h, char *buf, size_t cap);

/* Starts the helpers that have room, then runs one turn of the loop until at most until (-1: the timers). */
herd_status herd__engine_run_once(herd__engine *e, int64_t until);

/* Moves h's deadline (a herd__net_now_ms() time; -1: none). */
void herd__engine_deadline(herd__engine *e, size_t h, int64_t at);

/* Writes what it can of h's out buffer now and watches for the rest; a
 * channel that broke ends the helper (ended called). */
void herd__engine_flush(herd__engine *e, size_t h);
/* While held, no helper's stdout is read (its writer waits): a client
 * whose own output is backlogged slows its helpers down. */
void herd__engine_hold_input(herd__engine *e, bool hold);
/*
 * Reads h's stdout now, as its watcher would when it is ready (input is
 * called with what came): after a hold, the client reads its helpers in
 * an order of its choosing, so that the first watched is not always the
 * first served.  Nothing when h is not running or nothing waits.
 */
void herd__engine_read(herd__engine *e, size_t h);
/* Whether writable is called for h when its stdin takes more. */
void herd__engine_want_write(herd__engine *e, size_t h, bool want);
/* Closes h's stdin (the helper reads its end of input). */
void herd__engine_close_input(herd__engine *e, size_t h);

/*
 * Ends h now, with why as the verdict: its fds closed and, for a process
 * the engine started, its process group sent SIGTERM (SIGKILL half a second
 * later) and reaped in the background; ended is called with st (and why),
 * unless st is HERD_OK: then quietly (the client knows).
 */
void herd__engine_close(herd__engine *e, size_t h, herd_status st, const char *why);

/* Ends h quietly (if not ended yet) and its process as herd__engine_close
 * ends the engine's own, attached or not (a relay's lost child). */
void herd__engine_kill(herd__engine *e, size_t h);

/* A one-step helper's output of node i (labels removed), and srun's own lines. */
herd__buf *herd__engine_node_out(herd__engine *e, size_t node);
herd__buf *herd__engine_node_err(herd__engine *e, size_t node);
herd__buf *herd__engine_said(herd__engine *e);
/* Whether a one-step helper's task printed more than in_max on stdout
 * (node_out then holds its first in_max bytes at most). */
bool herd__engine_node_over(const herd__engine *e, size_t node);

/* The last line of b ("" when none), for messages. */
const char *herd__engine_last_line(const herd__buf *b, char *out, size_t cap);

#endif /* HERD_LAUNCH_ENGINE_H */
