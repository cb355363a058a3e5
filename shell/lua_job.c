/*
 * shell/lua_job.c - herd.launch{...}, the Lua face of herd_job_launch: a
 * herd.Job; and herd.emit(value), by which a rank hands a result to the
 * script that launched it.
 *
 *   local job <close> = herd.launch{cmd = "train.lua", n = 4}
 *   local res = job:wait(600)       -- nil, msg, "HERD_ETIMEDOUT" while it runs
 *   res.status, res.ok, res.ranks[1].host, res.failure
 *   job:results()[1]                -- what rank 0 passed to herd.emit
 *
 * Options, with herd launch's meaning and defaults: cmd (a program and its
 * arguments as an array, or one string; a first element ending in .lua
 * runs as a Lua rank under this herd program), n (np too; not both),
 * per_node, hosts | hostfile | slurm = true, exclude (a hostlist of nodes
 * to leave out, as --exclude), health_check (1 or 2, as --health-check),
 * min_nodes and max_nodes (an elastic job, as --nodes MIN-MAX: per_node
 * ranks on each node in, default 1, and no n; min_nodes defaults to
 * max_nodes), the result's nodes ({host, role = "in" | "spare" | "out",
 * node_rank, why}: where each stands),
 * ckpt_peers (K copies of each rank's checkpoint data in other nodes'
 * memory, as --ckpt-peers), gpus_per_rank, restarts, time
 * (the job's time limit, as --time: srun's "MM", "MM:SS", "HH:MM:SS",
 * "D-HH[:MM[:SS]]", or a whole number of minutes) or timeout (the same
 * limit in seconds, as --timeout), start_timeout (seconds for every rank
 * to start, 60), grace (seconds, 5), env ({NAME = value} or
 * {"NAME=value"}), log_dir, prefix; and output: "print" (the default, each
 * line to this process's stdout or stderr with its "[host:rank] " prefix),
 * "lines" (kept for job:lines(), up to 16 MiB: beyond, lines are dropped
 * and counted) or "none"; detach = true keeps the job running when Ctrl-C
 * interrupts the session (closing or collecting the Job still stops it);
 * monitor = true samples the job's ranks on this node as herd launch
 * --monitor does (monitor_period: seconds between samples, default 1) and
 * prints the summary when the script sees the job end; monitor_out = DIR
 * also writes the files of --monitor-out DIR.
 *
 * herd.jobs.list(), herd.jobs.status(id) and herd.jobs.stop(id): this
 * user's running jobs on this node, whoever launched them, as herd jobs
 * and herd job status|stop see them (herd_jobs_status, herd_jobs_stop).
 *
 * Every job is recorded in the accounting log (herd acct) once the script
 * sees it end (job:wait, job:status, job:stop, job:lines, or its close),
 * with that moment as its end.
 *
 * Values in rank order are arrays: element 1 is rank 0's.  A Job that is
 * closed (job:close(), a <close> variable) or collected stops its ranks
 * (SIGTERM, SIGKILL after the grace period): a script cannot leak them.
 *
 * herd.emit(value) on a rank of a job launched from Lua writes the value's
 * msgpack encoding (hex, up to 32 KiB encoded) as one marked line on its
 * stdout, which the launching script's Job keeps instead of printing; under
 * `herd launch` it prints the value.
 */
#include <errno.h>
#include <lauxlib.h>
#include <limits.h>
#include <lua.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lua_herd.h"
#include "shell.h"

#define LHERD_JOB "herd.Job"

/* The mark of an emitted value's line, and the variable that asks for it. */
#define EMIT_MARK "\x1eherd.emit "
#define EMIT_ENV "HERD_EMIT"
#define EMIT_MAX 32768
/* What output = "lines" keeps before it drops. */
#define LINES_MAX_BYTES (16u << 20)

enum output_mode { OUT_PRINT, OUT_LINES, OUT_NONE };

/* What the supervisor thread hands the Lua side: lines and emitted values. */
typedef struct jobq {
	pthread_mutex_t mu;      /* emitted, emitted_len */
	enum output_mode mode;
	herd_job_lines *lines;   /* output = "lines": what job:lines() reads */
	int nranks;
	char **emitted;          /* per rank: the last value's msgpack bytes */
	size_t *emitted_len;
	char *prefix;            /* "print": the prefix format (NULL: the default) */
} jobq;

typedef struct ljob {
	herd_job *job;  /* NULL once closed */
	jobq *q;
	int grace_ms;
	bool detach;
	int status;     /* exit status, once over */
	/* for the job's end: its record and the monitor's summary */
	bool ended;
	double start, t0;   /* Unix seconds; CLOCK_MONOTONIC */
	int gpus_per_rank;
	int argc;
	char **argv;        /* the command as given (malloc) */
	shell_monitor *mon;
	char *monitor_out;
} ljob;

static const lherd_type job_type;

/* ------------------------------------------------------ the output side */

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* An emitted value: keep its bytes as the rank's latest. */
static void keep_emitted(jobq *q, int rank, const char *hex, size_t len)
{
	size_t n = len / 2;
	char *bytes;

	if (rank < 0 || rank >= q->nranks || len % 2 != 0 || (bytes = malloc(n + 1)) == NULL)
		return;
	for (size_t i = 0; i < n; i++) {
		int hi = hexval(hex[2 * i]), lo = hexval(hex[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			free(bytes);
			return;
		}
		bytes[i] = (char)(hi << 4 | lo);
	}
	pthread_mutex_lock(&q->mu);
	free(q->emitted[rank]);
	q->emitted[rank] = bytes;
	q->emitted_len[rank] = n;
	pthread_mutex_unlock(&q->mu);
}

static void on_output(void *userdata, int rank, const char *host, herd_job_stream stream,
		      const char *line, size_t len)
{
	jobq *q = (jobq *)userdata;
	size_t mlen = sizeof(EMIT_MARK) - 1;

	if (stream == HERD_JOB_STDOUT && len >= mlen && memcmp(line, EMIT_MARK, mlen) == 0) {
		keep_emitted(q, rank, line + mlen, len - mlen);
		return;
	}
	if (q->mode == OUT_PRINT) {
		herd_job_output_stdio(q->prefix, rank, host, stream, line, len);
		return;
	}
	if (q->mode == OUT_LINES)
		herd_job_output_lines(q->lines, rank, host, stream, line, len);
}

static jobq *jobq_new(int nranks, enum output_mode mode, const char *prefix)
{
	jobq *q = calloc(1, sizeof(*q));

	if (q == NULL)
		return NULL;
	q->emitted = calloc((size_t)nranks, sizeof(*q->emitted));
	q->emitted_len = calloc((size_t)nranks, sizeof(*q->emitted_len));
	q->prefix = prefix != NULL ? strdup(prefix) : NULL;
	if ((mode == OUT_LINES && herd_job_lines_create(&q->lines, LINES_MAX_BYTES) != HERD_OK) ||
	    q->emitted == NULL || q->emitted_len == NULL ||
	    (prefix != NULL && q->prefix == NULL)) {
		herd_job_lines_free(q->lines);
		free(q->emitted);
		free(q->emitted_len);
		free(q->prefix);
		free(q);
		return NULL;
	}
	pthread_mutex_init(&q->mu, NULL);
	q->nranks = nranks;
	q->mode = mode;
	return q;
}

/* After the job is freed: its supervisor thread no longer calls on_output. */
static void jobq_free(jobq *q)
{
	if (q == NULL)
		return;
	herd_job_lines_free(q->lines);
	for (int i = 0; i < q->nranks; i++)
		free(q->emitted[i]);
	free(q->emitted);
	free(q->emitted_len);
	free(q->prefix);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

/* ------------------------------------------------------------ the object */

static ljob *check_job(lua_State *L, int arg)
{
	return (ljob *)lherd_check(L, arg, &job_type);
}

static void free_argv(ljob *j)
{
	for (int i = 0; j->argv != NULL && i < j->argc; i++)
		free(j->argv[i]);
	free(j->argv);
	j->argv = NULL;
}

/*
 * Once, when the script first sees the job over: the monitor's summary
 * and files, then the job's record in the accounting log.
 */
static void job_ended(ljob *j)
{
	shell_acct_job a = { .job = j->job, .argc = j->argc, .argv = (const char *const *)j->argv,
			     .gpus = herd_job_size(j->job) * j->gpus_per_rank, .start = j->start,
			     .elapsed = shell_mono_time() - j->t0, .exit_status = j->status,
			     .gpu_hours_used = NAN };

	if (j->ended || j->job == NULL)
		return;
	j->ended = true;
	if (j->mon != NULL)
		(void)shell_monitor_finish(j->mon, j->monitor_out, a.elapsed, a.gpus,
					   &a.gpu_hours_used, &a.gpus);
	shell_acct_append(&a);
}

/* What a Job holds besides its job: the launch's failure paths free it
 * here, as a Job with no job is never released. */
static void free_parts(ljob *j)
{
	shell_monitor_free(j->mon);
	j->mon = NULL;
	jobq_free(j->q);
	j->q = NULL;
	free_argv(j);
	free(j->monitor_out);
	j->monitor_out = NULL;
}

/* Stops what still runs and frees it all (close, __close, __gc). */
static void job_release(lua_State *L)
{
	ljob *j = (ljob *)lua_touserdata(L, 1);

	shell_interrupt_remove(j->job);
	if (j->job != NULL && !j->ended) {
		herd_job_kill(j->job);
		(void)herd_job_wait(j->job, 0, &j->status);
		job_ended(j);
	}
	shell_monitor_free(j->mon);
	j->mon = NULL;
	herd_job_free(j->job);
	j->job = NULL;
	free_parts(j);
}

static void job_describe(lua_State *L)
{
	ljob *j = (ljob *)lua_touserdata(L, 1);

	lua_pushfstring(L, "%s, %d ranks", herd_job_id(j->job), herd_job_size(j->job));
}

/* Whether the job is over (without blocking); sets j->status. */
static bool job_over(ljob *j)
{
	if (herd_job_wait(j->job, 0, &j->status) != HERD_OK)
		return false;
	job_ended(j);
	return true;
}

/* Pushes the job's state as a table: the result of wait and status. */
static void push_state(lua_State *L, ljob *j, bool over)
{
	int n = herd_job_size(j->job);
	const char *failure = herd_job_failure(j->job);

	lua_createtable(L, 0, 8);
	lherd_set_string(L, "id", herd_job_id(j->job));
	/* "running", "succeeded", "failed", "time_limit", "interrupted", "stopped" */
	lherd_set_string(L, "state", herd_job_state_name(over ? herd_job_get_state(j->job)
							   : HERD_JOB_RUNNING));
	if (over) {
		lherd_set_integer(L, "status", j->status);
		lua_pushboolean(L, j->status == 0);
		lua_setfield(L, -2, "ok");
	}
	lherd_set_integer(L, "restarts", herd_job_restart_count(j->job));
	lherd_set_string(L, "failure", failure);
	lua_createtable(L, n, 0);
	for (int i = 0; i < n; i++) {
		herd_job_rank_status r;

		if (herd_job_rank(j->job, i, &r) != HERD_OK)
			continue;
		lua_createtable(L, 0, 8);
		lherd_set_integer(L, "rank", r.rank);
		lherd_set_string(L, "host", r.host);
		lherd_set_integer(L, "node_rank", r.node_rank);
		lherd_set_integer(L, "local_rank", r.local_rank);
		if (r.pid > 0)
			lherd_set_integer(L, "pid", r.pid);
		lherd_set_string(L, "state", herd_job_rank_state_name(r.state));
		if (r.state == HERD_JOB_RANK_EXITED || r.state == HERD_JOB_RANK_FAILED_START)
			lherd_set_integer(L, "exit_code", r.exit_code);
		if (r.state == HERD_JOB_RANK_SIGNALED)
			lherd_set_integer(L, "signal", r.signal);
		lherd_set_string(L, "error", r.error);
		lua_rawseti(L, -2, i + 1);
	}
	lua_setfield(L, -2, "ranks");
	lua_createtable(L, (int)herd_job_nodes(j->job), 0);
	for (size_t i = 0; i < herd_job_nodes(j->job); i++) {
		herd_job_node_status nd;

		if (herd_job_node(j->job, i, &nd) != HERD_OK)
			continue;
		lua_createtable(L, 0, 4);
		lherd_set_string(L, "host", nd.host);
		lherd_set_string(L, "role", herd_job_node_role_name(nd.role));
		if (nd.node_rank >= 0)
			lherd_set_integer(L, "node_rank", nd.node_rank);
		lherd_set_string(L, "why", nd.why);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	lua_setfield(L, -2, "nodes");
}

/* job:wait([seconds]) -> the result table once over, or nil, msg,
 * "HERD_ETIMEDOUT" while it still runs at the deadline. */
static int job_wait(lua_State *L)
{
	ljob *j = check_job(L, 1);
	int ms = lherd_check_seconds(L, 2, HERD_TIMEOUT_NONE);
	herd_status st = herd_job_wait(j->job, ms, &j->status);

	if (st != HERD_OK)
		return lherd_fail(L, st);
	job_ended(j);
	push_state(L, j, true);
	return 1;
}

/* job:status() -> the same table at once; state "running" while it runs. */
static int job_status(lua_State *L)
{
	ljob *j = check_job(L, 1);

	push_state(L, j, job_over(j));
	return 1;
}

static const struct {
	const char *name;
	int sig;
} signals[] = {
	{ "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
	{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM }, { "CONT", SIGCONT },
	{ "STOP", SIGSTOP }, { "TSTP", SIGTSTP }, { "ALRM", SIGALRM },
};

static int check_signal(lua_State *L, int arg)
{
	const char *name;

	if (lua_type(L, arg) == LUA_TNUMBER) {
		lua_Integer s = luaL_checkinteger(L, arg);

		luaL_argcheck(L, s >= 1 && s < 65, arg, "a signal number is 1..64");
		return (int)s;
	}
	name = luaL_checkstring(L, arg);
	if (strncmp(name, "SIG", 3) == 0)
		name += 3;
	for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
		if (strcmp(name, signals[i].name) == 0)
			return signals[i].sig;
	return luaL_argerror(L, arg, lua_pushfstring(L, "unknown signal '%s'", lua_tostring(L, arg)));
}

/* job:signal(name_or_number) -> true: the signal to every running rank. */
static int job_signal(lua_State *L)
{
	ljob *j = check_job(L, 1);

	return lherd_result(L, herd_job_signal(j->job, check_signal(L, 2)));
}

/* job:stop([grace]) -> the result table: SIGTERM, then after grace seconds
 * (default the launch's) SIGKILL; no more restarts. */
static int job_stop(lua_State *L)
{
	ljob *j = check_job(L, 1);
	int grace = lua_isnoneornil(L, 2) ? j->grace_ms : lherd_check_seconds(L, 2, HERD_TIMEOUT_NONE);

	/* SIGTERM and the grace period first; herd_job_kill then ends what is
	 * left (at once when nothing is) and turns restarts off */
	if (!job_over(j)) {
		herd_job_signal(j->job, SIGTERM);
		(void)herd_job_wait(j->job, grace, &j->status);
	}
	herd_job_kill(j->job);
	(void)job_over(j);
	push_state(L, j, true);
	return 1;
}

static int job_id(lua_State *L)
{
	lua_pushstring(L, herd_job_id(check_job(L, 1)->job));
	return 1;
}

static int job_size(lua_State *L)
{
	lua_pushinteger(L, herd_job_size(check_job(L, 1)->job));
	return 1;
}

/*
 * The iterator of job:lines(): the next {rank, host, stream, text}; nil
 * once the job is over and every line was read, or at the deadline
 * (upvalue 2, a monotonic ms; -1 none).
 */
static int lines_next(lua_State *L)
{
	ljob *j;
	int64_t deadline = (int64_t)lua_tointeger(L, lua_upvalueindex(2));

	lua_settop(L, 0);
	lua_pushvalue(L, lua_upvalueindex(1));
	j = check_job(L, 1);
	for (;;) {
		herd_job_line *l;
		bool over = job_over(j);
		int wait = -1;

		/* Every line of a job that is over was queued before it was. */
		if (herd_job_lines_pop(j->q->lines, 0, &l) == HERD_OK) {
			lua_createtable(L, 0, 4);
			lherd_set_integer(L, "rank", l->rank);
			lherd_set_string(L, "host", l->host != NULL ? l->host : "");
			lherd_set_string(L, "stream", l->stream == HERD_JOB_STDERR ? "stderr" : "stdout");
			lua_pushlstring(L, l->text, l->len);
			lua_setfield(L, -2, "text");
			herd_free(l);
			return 1;
		}
		if (over)
			return 0;
		if (deadline >= 0) {
			int64_t left = deadline - lherd_now_ms();

			if (left <= 0)
				return 0;
			wait = left > INT_MAX ? INT_MAX : (int)left;
		}
		{
			/* A line, or the job's end, until the deadline. */
			struct pollfd p[2] = { { .fd = herd_job_lines_fd(j->q->lines), .events = POLLIN },
					       { .fd = herd_job_fd(j->job), .events = POLLIN } };

			if (poll(p, 2, wait) < 0 && errno != EINTR)
				return luaL_error(L, "job:lines: cannot wait for a line: %s",
					  strerror(errno));
		}
	}
}

/* for l in job:lines([seconds]) do ... end: the lines of a job launched
 * with output = "lines", as they come, until it is over. */
static int job_lines(lua_State *L)
{
	ljob *j = check_job(L, 1);
	int ms = lherd_check_seconds(L, 2, HERD_TIMEOUT_NONE);

	if (j->q->mode != OUT_LINES)
		return luaL_error(L, "job:lines() needs output = \"lines\" at herd.launch");
	lua_settop(L, 1);
	lua_pushinteger(L, ms == HERD_TIMEOUT_NONE ? -1 : lherd_now_ms() + ms);
	lua_pushcclosure(L, lines_next, 2);
	return 1;
}

/* job:dropped() -> lines output = "lines" dropped for want of reading. */
static int job_dropped(lua_State *L)
{
	ljob *j = check_job(L, 1);
	uint64_t dropped;

	herd_job_lines_counts(j->q->lines, NULL, NULL, &dropped, NULL);
	lua_pushinteger(L, (lua_Integer)dropped);
	return 1;
}

/* job:results() -> an array by rank (element 1 is rank 0) of the last
 * value each rank passed to herd.emit (nil for none). */
static int job_results(lua_State *L)
{
	ljob *j = check_job(L, 1);
	int n = herd_job_size(j->job);

	lua_createtable(L, n, 0);
	for (int i = 0; i < n; i++) {
		char *bytes;
		size_t len;
		int ok = 0;

		pthread_mutex_lock(&j->q->mu);
		len = j->q->emitted_len[i];
		bytes = j->q->emitted[i] != NULL ? malloc(len + 1) : NULL;
		if (bytes != NULL)
			memcpy(bytes, j->q->emitted[i], len);
		pthread_mutex_unlock(&j->q->mu);
		if (bytes == NULL)
			continue;
		lua_pushlstring(L, bytes, len);
		free(bytes);
		ok = lherd_msgpack_decode(L, lua_tostring(L, -1), len);
		if (ok) {
			lua_rawseti(L, -3, i + 1);
			lua_pop(L, 1);
		} else {
			lua_pop(L, 1);
		}
	}
	return 1;
}

/* ---------------------------------------------------------- herd.launch */

static const char *const launch_options[] = {
	"cmd", "n", "np", "per_node", "hosts", "hostfile", "slurm", "gpus_per_rank", "restarts",
	"time", "timeout", "start_timeout", "grace", "env", "log_dir", "prefix", "output",
	"detach", "workdir", "monitor", "monitor_period", "monitor_out", "exclude", "health_check",
	"min_nodes", "max_nodes", "ckpt_peers", NULL
};

/* n, or np as mpirun writes it; both: misuse. */
static int ranks_option(lua_State *L, int arg)
{
	int n = (int)lherd_opt_integer(L, arg, "n", 1, 1000000, 0);
	int np = (int)lherd_opt_integer(L, arg, "np", 1, 1000000, 0);

	luaL_argcheck(L, n == 0 || np == 0, arg, "options 'n' and 'np' are one option (the "
		      "number of ranks); give one");
	return n != 0 ? n : np;
}

/* The job's time limit in ms: time (srun's forms, or minutes) or timeout
 * (seconds); both: misuse. */
static int limit_option(lua_State *L, int arg)
{
	int t = lua_getfield(L, arg, "time"), ms = 0;
	bool given = t != LUA_TNIL;

	if (t == LUA_TNUMBER && !lua_isinteger(L, -1))
		luaL_argerror(L, arg, "option 'time' is srun's: a whole number of minutes or a "
			      "string such as \"1:30:00\" (seconds: option 'timeout')");
	if (t != LUA_TNIL && t != LUA_TNUMBER && t != LUA_TSTRING)
		luaL_argerror(L, arg, lua_pushfstring(L, "option 'time' must be a string or a "
						      "number, not a %s", luaL_typename(L, -1)));
	if (given && shell_parse_time_limit(lua_tostring(L, -1), 2000000 * 1000, &ms) != 0)
		luaL_argerror(L, arg, lua_pushfstring(L, "option 'time' is \"%s\"; expected "
						      "srun's minutes, \"MM:SS\", \"HH:MM:SS\", "
						      "\"D-HH\", \"D-HH:MM\" or \"D-HH:MM:SS\"",
						      lua_tostring(L, -1)));
	lua_pop(L, 1);
	if (lua_getfield(L, arg, "timeout") != LUA_TNIL)
		luaL_argcheck(L, !given, arg, "options 'time' and 'timeout' are one limit (in "
			      "srun's form and in seconds); give one");
	lua_pop(L, 1);
	return given ? ms : lherd_opt_ms(L, arg, "timeout");
}

/*
 * A NULL-terminated array of strings kept in a userdata pushed on the
 * stack, with the table of their Lua strings as its user value.
 */
static const char **string_array(lua_State *L, size_t n)
{
	const char **v = (const char **)lua_newuserdatauv(L, (n + 1) * sizeof(*v), 1);

	memset(v, 0, (n + 1) * sizeof(*v));
	lua_newtable(L);
	lua_setiuservalue(L, -2, 1);
	return v;
}

/* Keeps the string on top in the user value of the array at idx, pops it. */
static const char *keep_string(lua_State *L, int idx)
{
	const char *s = lua_tostring(L, -1);

	lua_getiuservalue(L, idx, 1);
	lua_pushvalue(L, -2);
	lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
	lua_pop(L, 2);
	return s;
}

/* hosts | hostfile | slurm = true: where, and its hostlist or hostfile (lua_herd.h). */
herd_job_where lherd_where_option(lua_State *L, int arg, const char **hosts)
{
	const char *list = lherd_opt_string(L, arg, "hosts");
	const char *file = lherd_opt_string(L, arg, "hostfile");
	herd_job_where where;
	int n;

	lua_getfield(L, arg, "slurm");
	n = (list != NULL) + (file != NULL) + lua_toboolean(L, -1);
	luaL_argcheck(L, n <= 1, arg, "options 'hosts', 'hostfile' and 'slurm' exclude each "
		      "other");
	where = list ? HERD_JOB_HOSTS : file ? HERD_JOB_HOSTFILE
	      : lua_toboolean(L, -1) ? HERD_JOB_SLURM : HERD_JOB_LOCAL;
	lua_pop(L, 1);
	*hosts = list ? list : file;
	return where;
}

/* cmd: an array of strings or one string; pushes the argv array (lua_herd.h). */
const char **lherd_cmd_option(lua_State *L, int arg, int *argc)
{
	const char **v;
	lua_Integer n = 0;
	int t = lua_getfield(L, arg, "cmd"), idx;

	if (t == LUA_TSTRING) {
		v = string_array(L, 1);
		idx = lua_gettop(L);
		lua_pushvalue(L, -2);
		v[0] = keep_string(L, idx);
		lua_remove(L, -2);
		*argc = 1;
		return v;
	}
	if (t != LUA_TTABLE || (n = luaL_len(L, -1)) < 1 || n > 100000)
		luaL_argerror(L, arg, "option 'cmd' must be a command (an array of strings) "
			      "or a script name");
	v = string_array(L, (size_t)n);
	idx = lua_gettop(L);
	for (lua_Integer i = 1; i <= n; i++) {
		lua_geti(L, -2, i);
		if (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER)
			luaL_argerror(L, arg, lua_pushfstring(L, "option 'cmd'[%I] must be a string", i));
		lua_tostring(L, -1);
		v[i - 1] = keep_string(L, idx);
	}
	lua_remove(L, -2);
	*argc = (int)n;
	return v;
}

/* env: {NAME = value} or {"NAME=value"}; pushes the array, with EMIT_ENV when emit. */
const char **lherd_env_option(lua_State *L, int arg, bool emit)
{
	size_t n = 0, k = 0;
	const char **v;
	int idx;

	if (lua_getfield(L, arg, "env") != LUA_TNIL) {
		if (!lua_istable(L, -1))
			luaL_argerror(L, arg, "option 'env' must be a table");
		lua_pushnil(L);
		while (lua_next(L, -2)) {
			lua_pop(L, 1);
			n++;
		}
	}
	v = string_array(L, n + 1);
	idx = lua_gettop(L);
	if (n > 0) {
		lua_pushnil(L);
		while (lua_next(L, -3)) {
			if (lua_type(L, -2) == LUA_TSTRING) {
				if (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER)
					luaL_argerror(L, arg, lua_pushfstring(L, "option 'env': the "
						"value of %s must be a string", lua_tostring(L, -2)));
				lua_pushfstring(L, "%s=%s", lua_tostring(L, -2), lua_tostring(L, -1));
			} else if (lua_type(L, -1) == LUA_TSTRING && strchr(lua_tostring(L, -1), '=')) {
				lua_pushvalue(L, -1);
			} else {
				luaL_argerror(L, arg, "option 'env' takes NAME = value pairs or "
					      "\"NAME=value\" strings");
			}
			v[k++] = keep_string(L, idx);
			lua_pop(L, 1);
		}
	}
	v[k] = emit ? EMIT_ENV "=1" : NULL;
	lua_remove(L, -2);
	return v;
}

/* herd.launch{...} -> a herd.Job once every rank started, or nil, msg, status. */
static int lherd_launch(lua_State *L)
{
	herd_job_spec spec = HERD_JOB_SPEC_INIT;
	static const char *const modes[] = { "print", "lines", "none", NULL };
	const char *out, **argv, *monitor_out;
	char self[4096];
	int argc, mode = 0, monitor_ms;
	bool detach, monitor;
	ljob *j;
	herd_status st;

	luaL_checktype(L, 1, LUA_TTABLE);
	lherd_check_keys(L, 1, launch_options);
	spec.nranks = ranks_option(L, 1);
	spec.per_node = (int)lherd_opt_integer(L, 1, "per_node", 1, 1000000, 0);
	spec.max_nodes = (int)lherd_opt_integer(L, 1, "max_nodes", 1, 65536, 0);
	spec.min_nodes = (int)lherd_opt_integer(L, 1, "min_nodes", 1, 65536, spec.max_nodes);
	luaL_argcheck(L, spec.max_nodes == 0 || spec.nranks == 0, 1, "an elastic job (option "
		      "'max_nodes') takes 'per_node', not 'n': its world size follows its nodes");
	luaL_argcheck(L, spec.min_nodes <= spec.max_nodes, 1, "option 'min_nodes' is more than "
		      "'max_nodes' (or 'max_nodes' is missing)");
	luaL_argcheck(L, (int64_t)spec.per_node * spec.max_nodes <= 1000000, 1, "options "
		      "'per_node' times 'max_nodes' give more than 1000000 ranks");
	luaL_argcheck(L, spec.nranks >= 1 || spec.max_nodes > 0, 1, "option 'n' (the number of "
		      "ranks) is required");
	if (spec.max_nodes > 0 && spec.per_node == 0)
		spec.per_node = 1;
	spec.gpus_per_rank = (int)lherd_opt_integer(L, 1, "gpus_per_rank", 0, 1000000, 0);
	spec.restarts = (int)lherd_opt_integer(L, 1, "restarts", 0, 1000000, 0);
	spec.start_timeout_ms = lherd_opt_ms(L, 1, "start_timeout");
	spec.time_limit_ms = limit_option(L, 1);
	spec.grace_ms = lherd_opt_ms(L, 1, "grace");
	spec.log_dir = lherd_opt_string(L, 1, "log_dir");
	spec.prefix = lherd_opt_string(L, 1, "prefix");
	spec.workdir = lherd_opt_string(L, 1, "workdir");
	spec.exclude = lherd_opt_string(L, 1, "exclude");
	spec.health_check = (int)lherd_opt_integer(L, 1, "health_check", 0, 2, 0);
	spec.ckpt_peers = (int)lherd_opt_integer(L, 1, "ckpt_peers", 0, 64, 0);
	spec.where = lherd_where_option(L, 1, &spec.hosts);
	out = lherd_opt_string(L, 1, "output");
	for (mode = 0; out != NULL && modes[mode] != NULL && strcmp(modes[mode], out) != 0; mode++)
		;
	if (out != NULL && modes[mode] == NULL)
		luaL_argerror(L, 1, "option 'output' must be \"print\", \"lines\" or \"none\"");
	lua_getfield(L, 1, "detach");
	detach = lua_toboolean(L, -1);
	lua_pop(L, 1);
	monitor_out = lherd_opt_string(L, 1, "monitor_out");
	lua_getfield(L, 1, "monitor");
	monitor = lua_toboolean(L, -1) || monitor_out != NULL;
	lua_pop(L, 1);
	monitor_ms = lherd_opt_ms(L, 1, "monitor_period");
	luaL_argcheck(L, monitor_ms == 0 || monitor, 1, "option 'monitor_period' needs "
		      "monitor = true or monitor_out");
	luaL_argcheck(L, monitor_ms == 0 || (monitor_ms >= 10 && monitor_ms <= 3600000), 1,
		      "option 'monitor_period' is seconds from 0.01 to 3600");

	argv = lherd_cmd_option(L, 1, &argc);               /* stack: ..., argv */
	spec.env = lherd_env_option(L, 1, true);            /* ..., argv, env */
	if (spec.where == HERD_JOB_LOCAL)
		spec.herd_program = shell_self_program(self, sizeof(self));
	spec.argv = shell_rank_argv(argc, (char *const *)argv, spec.herd_program);
	if (spec.argv == NULL)
		return luaL_error(L, "not enough memory");

	j = (ljob *)lherd_new(L, &job_type, sizeof(*j), 0);
	j->detach = detach;
	j->grace_ms = spec.grace_ms > 0 ? spec.grace_ms : 5000;
	j->q = jobq_new(spec.max_nodes > 0 ? spec.per_node * spec.max_nodes : spec.nranks,
			(enum output_mode)mode, spec.prefix);
	j->gpus_per_rank = spec.gpus_per_rank;
	j->argv = calloc((size_t)argc, sizeof(*j->argv));
	for (int i = 0; j->argv != NULL && i < argc; i++)
		if ((j->argv[j->argc++] = strdup(argv[i])) == NULL)
			j->argc--;
	if (monitor_out != NULL)
		j->monitor_out = strdup(monitor_out);
	if (j->q == NULL || j->argv == NULL || j->argc < argc ||
	    (monitor_out != NULL && j->monitor_out == NULL)) {
		free((void *)spec.argv);
		free_parts(j);
		return luaL_error(L, "not enough memory");
	}
	/* the monitor's directory and sampler before the job, as herd launch */
	if (monitor && ((monitor_out != NULL && shell_monitor_prepare_dir(monitor_out) != 0) ||
			shell_monitor_create(&j->mon, monitor_ms > 0 ? monitor_ms : 1000,
					     spec.where) != 0)) {
		free((void *)spec.argv);
		free_parts(j);
		return lherd_failf(L, HERD_EINVAL, "herd.launch: the monitor cannot start (said "
				   "on stderr)");
	}
	spec.output = on_output;
	spec.output_userdata = j->q;
	j->start = shell_wall_time();
	j->t0 = shell_mono_time();
	st = herd_job_launch(&j->job, &spec);
	free((void *)spec.argv);
	if (st != HERD_OK) {
		/* no job: the object holds nothing, and its release will not run */
		free_parts(j);
		return lherd_fail(L, st);
	}
	if (j->mon != NULL && shell_monitor_start(j->mon, j->job, j->start) != 0) {
		shell_monitor_free(j->mon);
		j->mon = NULL;
	}
	shell_interrupt_add_job(j->job, j->detach);
	return 1;
}

/* ------------------------------------------------------------ herd.emit */

/* herd.emit(value): to the launching script's job:results(), or printed. */
static int lherd_emit(lua_State *L)
{
	const char *e = shell_env("HERD_EMIT");
	const unsigned char *bytes;
	size_t len;
	luaL_Buffer b;
	static const char hex[] = "0123456789abcdef";

	luaL_checkany(L, 1);
	if (e == NULL || strcmp(e, "1") != 0) {
		/* not under a launching script: herd.pretty.print(value) */
		lua_getfield(L, lua_upvalueindex(1), "pretty");
		lua_getfield(L, -1, "print");
		lua_pushvalue(L, 1);
		lua_call(L, 1, 0);
		return 0;
	}
	lherd_msgpack_push(L, 1);
	bytes = (const unsigned char *)lua_tolstring(L, -1, &len);
	if (len > EMIT_MAX)
		return luaL_error(L, "herd.emit: the value takes %d bytes encoded (at most %d)",
				  (int)len, EMIT_MAX);
	luaL_buffinit(L, &b);
	luaL_addstring(&b, EMIT_MARK);
	for (size_t i = 0; i < len; i++) {
		luaL_addchar(&b, hex[bytes[i] >> 4]);
		luaL_addchar(&b, hex[bytes[i] & 15]);
	}
	luaL_addchar(&b, '\n');
	luaL_pushresult(&b);
	bytes = (const unsigned char *)lua_tolstring(L, -1, &len);
	/* Lua's print and io.write go through C's stdout too: same order */
	if (fwrite(bytes, 1, len, stdout) != len || fflush(stdout) != 0)
		return luaL_error(L, "herd.emit: cannot write to stdout: %s", strerror(errno));
	return 0;
}

static const luaL_Reg job_methods[] = {
	{ "wait", job_wait },
	{ "status", job_status },
	{ "signal", job_signal },
	{ "stop", job_stop },
	{ "lines", job_lines },
	{ "dropped", job_dropped },
	{ "results", job_results },
	{ "id", job_id },
	{ "size", job_size },
	{ NULL, NULL }
};

static const lherd_type job_type = {
	.name = LHERD_JOB,
	.methods = job_methods,
	.release = job_release,
	.describe = job_describe,
};

/* ---- herd.jobs: running jobs of this user on this node ---------------------- */

/* The JSON answer text (libherd's) as Lua values on the stack. */
static int push_answer(lua_State *L, char *text)
{
	void **held = lherd_hold(L, herd_free);
	void **doc;

	*held = text;
	doc = lherd_hold(L, lherd_json_release);
	*doc = lherd_json_parse(text, strlen(text));
	if (*doc == NULL)
		return lherd_failf(L, HERD_EFORMAT, "a job's answer is not JSON");
	lherd_push_json(L, *doc);
	return 1;
}

/* herd.jobs.list() -> {status, ...} | nil, msg, status */
static int jobs_list(lua_State *L)
{
	char *text = NULL;
	herd_status st = herd_jobs_status(NULL, &text);

	if (st != HERD_OK)
		return lherd_fail(L, st);
	return push_answer(L, text);
}

/* herd.jobs.status(id) -> status | nil, msg, status */
static int jobs_status(lua_State *L)
{
	const char *id = luaL_checkstring(L, 1);
	char *text = NULL;
	herd_status st = herd_jobs_status(id, &text);

	if (st != HERD_OK)
		return lherd_fail(L, st);
	return push_answer(L, text);
}

/* herd.jobs.stop(id) -> true | nil, msg, status */
static int jobs_stop(lua_State *L)
{
	herd_status st = herd_jobs_stop(luaL_checkstring(L, 1));

	if (st != HERD_OK)
		return lherd_fail(L, st);
	lua_pushboolean(L, 1);
	return 1;
}

static const luaL_Reg jobs_funcs[] = {
	{ "list", jobs_list },
	{ "status", jobs_status },
	{ "stop", jobs_stop },
	{ NULL, NULL }
};

void lherd_open_job(lua_State *L)
{
	lherd_register(L, &job_type);
	lua_pushcfunction(L, lherd_launch);
	lua_setfield(L, -2, "launch");
	lua_pushvalue(L, -1);
	lua_pushcclosure(L, lherd_emit, 1);
	lua_setfield(L, -2, "emit");
	luaL_newlib(L, jobs_funcs);
	lua_setfield(L, -2, "jobs");
}
