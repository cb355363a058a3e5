/*
 * shell/shell.h - what the parts of the herd program share: running Lua code
 * the way lua.c does (protected calls with a traceback, Ctrl-C turned into a
 * hook), the REPL, and the subcommands.
 */
#ifndef HERD_SHELL_H
#define HERD_SHELL_H

#include <getopt.h>
#include <lua.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "herd/cluster.h"
#include "herd/comm.h"
#include "herd/grid.h"
#include "herd/job.h"
#include "herd/plan.h"
#include "herd/serve.h"

/* Exit statuses of the herd program. */
#define SHELL_EXIT_OK 0
#define SHELL_EXIT_FAILURE 1 /* a script raised, a command failed */
#define SHELL_EXIT_USAGE 2   /* bad command line or bad input file */

/*
 * The program name used as the prefix of messages on stderr ("herd"); NULL
 * while the REPL runs, so that errors at the prompt carry no prefix (lua.c's
 * progname).
 */
extern const char *shell_progname;

/*
 * The prefix of a command's messages ("herd discover"), which main sets
 * before it runs the command; "herd" otherwise.  Code that several
 * commands share (shell_json_write, cmd_alloc.c's alloc and gpus) speaks
 * with it, so that every message of `herd CMD` starts "herd CMD: ".
 */
extern const char *shell_command;

/*
 * herd_last_error() as the program says it: without the name of the C
 * function that a misuse message begins with ("herd_ckpt_add_tensor: "),
 * which a person running herd or a Lua script never called; what follows
 * says what was wrong.
 */
const char *shell_last_error(void);

/* Writes "progname: msg" (or just msg when pname is NULL) to stderr. */
void shell_message(const char *pname, const char *msg);

/*
 * Reports the error object on top of the stack (when status is not LUA_OK)
 * through shell_message and pops it.  Returns status.
 */
int shell_report(lua_State *L, int status);

/*
 * Calls the function below its narg arguments on the stack, as lua_pcall
 * with a traceback message handler, and with SIGINT turned into an
 * "interrupted!" error raised at the next instruction of the running code.
 */
int shell_docall(lua_State *L, int narg, int nres);

/*
 * What Ctrl-C stops besides Lua code (shell/interrupt.c): communicators
 * are aborted, services stopped and jobs not launched with detach = true are stopped, from a
 * thread of the program, when shell_interrupt_signal (async-signal-safe)
 * is called.  Objects are added when made and removed before being freed.
 */
void shell_interrupt_add_comm(herd_comm *comm);
void shell_interrupt_add_job(herd_job *job, bool detach);
void shell_interrupt_add_service(herd_serve *svc);
void shell_interrupt_remove(const void *obj);
void shell_interrupt_signal(void);

/*
 * The interactive loop on stdin: a banner line saying how to get help and
 * how to leave, then line editing and history when stdin is a terminal,
 * plain lines otherwise.  Returns when input ends or exit or quit is typed
 * alone (shell/repl.c).
 */
void shell_repl(lua_State *L);

/* `herd discover [--json] [--save FILE] [--inventory FILE]`. */
int cmd_discover(int argc, char **argv);
/* `herd probe`: this node's inventory for a discovery elsewhere (shell/cmd_discover.c). */
int cmd_probe(int argc, char **argv);
/* `herd bcast FILE DEST` and its node side (shell/cmd_bcast.c). */
int cmd_bcast(int argc, char **argv);
/* The fabric check (shell/cmd_links.c): one rank of it (`herd probe
 * --links BYTES`), and the launch of it on a discovered cluster's nodes
 * with its report (`herd discover --links`); exit statuses.  links_run
 * checks the nodes names[0..n) (over ssh, or slurm: the allocation's),
 * writes its report to report and, when culprits is not NULL, the nodes
 * whose every link is slow into it ("h3,h7"; "" for none), cut to cap. */
int links_rank(size_t bytes);
int links_check(const herd_cluster *cluster, bool slurm, size_t bytes, int timeout_s);
int links_run(const char *const *names, size_t n, bool slurm, size_t bytes, int timeout_s,
	      FILE *report, char *culprits, size_t cap);

/* `herd bench OP [options]`: a collective benchmark (shell/cmd_bench.c). */
int cmd_bench(int argc, char **argv);

/* `herd alloc -g N [...]` and `herd gpus` (shell/cmd_alloc.c). */
int cmd_alloc(int argc, char **argv);
int cmd_gpus(int argc, char **argv);

/* `herd serve --port PORT [...] -- CMD` (shell/cmd_serve.c). */
int cmd_serve(int argc, char **argv);
/* `herd launch -n N [...] -- CMD` (shell/cmd_launch.c). */
int cmd_launch(int argc, char **argv);

/* `herd trace [--json] FILE|DIR`: the wavefront of a job's flight recorders
 * (shell/cmd_trace.c). */
int cmd_trace(int argc, char **argv);

/* `herd jobs [--json]` and `herd job status|stop ID`: this user's running
 * jobs here (shell/cmd_jobs.c). */
int cmd_jobs(int argc, char **argv);
int cmd_job(int argc, char **argv);

/* `herd exclude ls|add|rm`: the nodes herd launch leaves out
 * (shell/cmd_exclude.c). */
int cmd_exclude(int argc, char **argv);

/* `herd acct [--since T] [--until T] [--json] [--log FILE]` (shell/cmd_acct.c). */
int cmd_acct(int argc, char **argv);

/*
 * Accounting (shell/acct.c): one record per job that herd launch or
 * herd.launch ran, appended to the user's log when it ends (docs/telemetry.md,
 * "Accounting").
 */
#define SHELL_ACCT_VERSION 1

/* What a record says beyond what the job itself tells. */
typedef struct shell_acct_job {
	const herd_job *job;       /* over */
	int argc;
	const char *const *argv;   /* the command as the user gave it */
	int gpus;                  /* GPUs the job held */
	double start;              /* Unix seconds, when it was launched */
	double elapsed;            /* seconds from then to its end */
	int exit_status;
	double gpu_hours_used;     /* NAN when it was not measured (no --monitor) */
} shell_acct_job;

/*
 * The log's path (malloc): $HERD_ACCT_LOG, else
 * ${XDG_STATE_HOME:-$HOME/.local/state}/herd/acct.jsonl; NULL when
 * HERD_ACCT_LOG is set but empty, or there is no home to put it in.
 */
char *shell_acct_path(void);

/*
 * Appends j's record to the log.  0, or -1 after a warning on stderr
 * ("herd launch: warning: accounting log ...: ..."); never more.
 */
int shell_acct_append(const shell_acct_job *j);

/*
 * herd launch --monitor (shell/monitor.c): a sampler of this node records,
 * while the job runs, each local rank's CPU use and its GPUs' figures; at
 * the end a summary goes to stderr and, with a directory, the series, the
 * summary, the plots and report.html into it.  Messages start with
 * shell_command.
 */
typedef struct shell_monitor shell_monitor;

/* Makes DIR (mkdir -p) and checks that its files can be written, before
 * the job runs.  0, or -1 (said). */
int shell_monitor_prepare_dir(const char *dir);

/* Opens the sampler (NVML when there is one), before the job; where the
 * job runs (other nodes are watched through herd probe --watch).  0, or -1
 * (said). */
int shell_monitor_create(shell_monitor **out, int period_ms, herd_job_where where);

/* Starts sampling job's ranks; start is the job's start (Unix seconds). */
int shell_monitor_start(shell_monitor *m, herd_job *job, double start);

/*
 * Stops the sampler, prints the summary, writes dir's files (dir NULL:
 * none).  gpus_held: GPUs leased (0: those seen in use count).  Sets
 * *gpu_hours_used (NAN when no utilization was read) and *gpus (held, as
 * counted).  0, or -1 when a file could not be written (said).
 */
int shell_monitor_finish(shell_monitor *m, const char *dir, double elapsed, int gpus_held,
			 double *gpu_hours_used, int *gpus);

/* Frees (stopping the sampler if still running).  Accepts NULL. */
void shell_monitor_free(shell_monitor *m);

/* The wall clock (Unix seconds) and CLOCK_MONOTONIC, in seconds. */
double shell_wall_time(void);
double shell_mono_time(void);

/*
 * The ranks' argv of a launch (calloc'd array, strings borrowed): a .lua
 * script runs under the herd program, and a command named herd is the herd
 * program (herd_program, else $HERD_PROGRAM, else "herd").  (shell/program.c)
 */
const char **shell_rank_argv(int argc, char *const *argv, const char *herd_program);

/* This program's path (/proc/self/exe) in buf, or NULL. */
const char *shell_self_program(char *buf, size_t cap);

/* `herd k8s manifest|node` (shell/cmd_k8s.c). */
int cmd_k8s(int argc, char **argv);

/* `herd exec --stdio`, the node side of herd launch (shell/cmd_exec.c). */
int cmd_exec(int argc, char **argv);

/* `herd ckpt ls|verify|inspect|diff|export|import` (shell/cmd_ckpt.c). */
int cmd_ckpt(int argc, char **argv);

/* herd health (shell/cmd_health.c). */
int cmd_health(int argc, char **argv);

/* herd top: this node's telemetry, live, once or as JSON (shell/cmd_top.c). */
int cmd_top(int argc, char **argv);
/* herd exporter: Prometheus metrics over HTTP (shell/cmd_exporter.c). */
int cmd_exporter(int argc, char **argv);

/* herd hostlist expand|compress|count (shell/cmd_hostlist.c). */
int cmd_hostlist(int argc, char **argv);

/* herd top: the live view of telemetry, --once, --json (shell/cmd_top.c). */
int cmd_top(int argc, char **argv);

/*
 * One element of a dense array of a herd_dtype, widened: integer types to
 * int64_t in i (uint64 values above INT64_MAX wrap to negative numbers,
 * as Lua's integers carry them), floating types to double in f (float16
 * and bfloat16 exactly); shell/elem.c.
 */
typedef struct shell_elem {
	int is_int;
	int64_t i;
	double f;
} shell_elem;

/* Whether dtype holds integers (not floating point). */
bool shell_dtype_is_int(herd_dtype dtype);

/* Element i of buf, an array of dtype. */
shell_elem shell_elem_load(const void *buf, size_t i, herd_dtype dtype);

/*
 * Stores e as element i of buf, an array of dtype: floating types round to
 * nearest; an integer type takes only an integral value in its range.
 * Returns 0, or -1 (writing nothing) when the value does not fit.
 */
int shell_elem_store(void *buf, size_t i, herd_dtype dtype, shell_elem e);

/*
 * Writes e, an element of dtype, as text into out (size bytes; 48 hold
 * any): an integer in full (uint64 as unsigned); a float in the fewest
 * significant digits that read back as the same value of dtype (float32's
 * 0.1 is "0.1", not 0.100000001490116), positional from 1e-4 up to 1e16
 * and in exponent form (1e-300) outside; nan, inf and -inf by name.
 */
void shell_elem_format(char *out, size_t size, herd_dtype dtype, shell_elem e);

/*
 * Writes doc (a jansson value) to stdout as one indented JSON document,
 * keys in the order they were set, and releases it.  doc NULL (out of
 * memory) is said on stderr.  0, or -1 when nothing or not all was
 * written.  (shell/json_out.c)
 */
struct json_t;
int shell_json_emit(struct json_t *doc);
/* The same to out (not closed). */
int shell_json_write(FILE *out, struct json_t *doc);
/* A JSON string of s, or null when s is NULL. */
struct json_t *shell_json_str(const char *s);

/*
 * Catches sigs (n of them) through one self-pipe (shell/signals.c): each
 * writes its number, a byte, to the pipe.  Returns the pipe's read end
 * (non-blocking, the same on every call) for the command's loop to poll
 * and read, or -1 after saying on stderr, as pname, why there is none.
 */
int shell_signals_catch(const char *pname, const int *sigs, size_t n);

/* Grids (shell/grid_print.c). */

/* The ranks of a planned job: rank r on hosts[r]; where GPUs are planned
 * (plan not NULL), plan[r] holds its GPUs (NULL: none known), as its rank
 * index[r], the first of them at base[r] in the plan's GPU order. */
typedef struct shell_grid_ranks {
	int n;
	const char **hosts;
	const herd_plan **plan;
	const size_t *index, *base;
} shell_grid_ranks;

/*
 * The grid of dims[0..nd) in order over g's ranks, laid as
 * herd_comm_grid_create lays a running job's (node by node, NVLink set by
 * set) and explained (herd_grid_explain) on stdout, its warnings on stderr
 * ("herd CMD: warning: ..."); with doc, the JSON object into *doc instead
 * of the text.  A grid that does not fit is a usage error, fmt ("--grid:
 * %s") saying it.  Returns the exit status.
 */
struct json_t;
int shell_grid_print(const char *cmd, const char *fmt, const herd_grid_dim *dims, size_t nd,
		     const char *order, const shell_grid_ranks *g, struct json_t **doc);

/* Command lines (shell/options.c). */

/* A size ("40G", "512MiB", "4096") in bytes into *out; 0, or -1 if malformed. */
int shell_parse_bytes(const char *s, uint64_t *out);

/* "herd CMD: " fmt (with arg), then where to read more, on stderr;
 * returns SHELL_EXIT_USAGE. */
int shell_usage_error(const char *cmd, const char *fmt, const char *arg);

/* argv[*i] is option name with a value ("--opt VALUE", "--opt=VALUE", and
 * "-gN" for short ones): 1 with *out set (and *i past the value), -1 when
 * the value is missing, 0 when argv[*i] is another option. */
int shell_option_value(int argc, char **argv, int *i, const char *name, const char **out);

/*
 * For "did you mean": of count names, each a const char * stride bytes
 * after the one before (first; an array of structs whose field is the name
 * does), the nearest to word (an edit distance under 3, else the first that
 * word begins), or NULL when none is near.
 */
const char *shell_nearest(const char *word, const char *const *first, size_t count,
			  size_t stride);

/* herd's setting name (herd_env_get), NULL when unset or empty. */
const char *shell_env(const char *name);

/* A decimal integer in [min, max] into *out; 0, or -1 (out untouched) if not. */
int shell_parse_int(const char *s, int min, int max, int *out);

/*
 * A job's time limit in srun's forms ("MM", "MM:SS", "HH:MM:SS", "D-HH",
 * "D-HH:MM", "D-HH:MM:SS"; "0", "UNLIMITED" and "INFINITE": none) into
 * *ms, at most max_ms; 0, or -1 (out untouched) if malformed or too long.
 */
int shell_parse_time_limit(const char *s, int max_ms, int *ms);

/*
 * A flag of another launcher or tool (torchrun, mpirun, srun, nccl-tests)
 * that a command answers: name as typed ("-np", "--rdzv-endpoint", "-x");
 * with, the command's own option it is read as ("-n", "--env",
 * "--nnodes=1"; "" when there is nothing to do), or NULL when it has none,
 * and then why says which of its options does the job.  has_arg: the flag
 * takes a value (as a separate argument or after '=').
 */
typedef struct shell_habit {
	const char *name;
	bool has_arg;
	const char *with;
	const char *why;
} shell_habit;

/* What shell_args_check leaves for getopt_long. */
typedef struct shell_args {
	int argc;
	char **argv;          /* the arguments, habits rewritten, NULL-terminated */
	char **owned;         /* the arguments rewritten here ... */
	const char **typed;   /* ... and what the user typed in their place */
	size_t nowned;
} shell_args;

/*
 * Reads argv (argv[0] the command) as getopt_long will read it with
 * shortopts and longopts, before it does, so that no option is taken for
 * another: getopt_long takes a unique prefix ("--res" for "--restarts",
 * "-np" for "-n p"); here
 *   - a long option, "--name" or "--name=VALUE", is one of longopts
 *     exactly ('_' and '-' alike, as torchrun spells them), else one of
 *     habits, else an unknown option;
 *   - an argument that is a habit's name ("-np", "-x", "--ntasks") is
 *     rewritten to the command's option (its value kept), or refused with
 *     the habit's words;
 *   - a short option not in shortopts is looked up in habits;
 *   - an option's value is never read as an option; "--" ends the options,
 *     and with shortopts starting with '+' so does the first argument that
 *     is not an option.
 * out gets the arguments to hand getopt_long (free with shell_args_free).
 * Returns 0, or SHELL_EXIT_USAGE after saying on stderr, as a usage error
 * of `herd CMD`, what is wrong and what to give instead.
 */
int shell_args_check(const char *cmd, int argc, char **argv, const char *shortopts,
		     const struct option *longopts, const shell_habit *habits, shell_args *out);
void shell_args_free(shell_args *a);

/*
 * The option getopt_long has just returned, as the user typed it, for
 * messages ("--np", "-np", "--nproc_per_node"), into buf: c the value
 * getopt_long returned, li its long index (-1 for a short option).
 */
const char *shell_args_option(const shell_args *a, const struct option *longopts, int c,
			      int li, char *buf, size_t cap);

#endif /* HERD_SHELL_H */
