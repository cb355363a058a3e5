/*
 * sdk/launch/node.c - the node supervisor: starts the ranks of one node
 * with their environment, in process groups of their own, reads their
 * output into lines, reaps them by pid and stops them with a grace period
 * (see launch_internal.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <inttypes.h>
#include <limits.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc/alloc_internal.h"
#include "launch_internal.h"
#include "net.h"

extern char **environ;

/* How often ranks are polled for exit where pidfds are missing. */
#define REAP_POLL_MS 50
/* Bytes one read of a rank's pipe takes: at most HERD_JOB_LINE_MAX, so that
 * every line that ends inside it is short enough to go out whole. */
#define READ_CHUNK 65536
/* Most bytes read from one pipe in one herd__node_process, so that one
 * rank that writes without pause does not keep the others waiting. */
#define READ_TURN_MAX (4 * READ_CHUNK)
/* What a rank's pipe holds at most when it ends, where F_GETPIPE_SZ cannot
 * say (Linux's pipe-max-size default). */
#define PIPE_MAX_DEFAULT (1 << 20)
/* The most asked for a rank's stdout and stderr pipes (rank_pipe_bytes). */
#define RANK_PIPE_BYTES (1 << 20)

/* What the child tells its parent through the CLOEXEC pipe when it fails. */
enum child_stage { STAGE_EXEC = 1, STAGE_CHDIR, STAGE_PARENT, STAGE_AFFINITY };

struct child_failure {
	int stage;
	int err;
};

struct stream {
	int fd;          /* read end of the rank's pipe; -1 once closed */
	int log_fd;      /* LOG_DIR/rank.N.{out,err}; -1 without */
	char *line;      /* the line being assembled: HERD_JOB_LINE_MAX bytes and
			    room for its newline */
	size_t len;
};

struct rank {
	int rank, local;
	pid_t pid;       /* 0: not started or reaped */
	int pidfd;
	bool ended;      /* reported through exited */
	struct stream s[2];  /* stdout, stderr */
};

struct herd__node {
	herd__node_spec spec;
	herd__node_events ev;
	struct rank *ranks;
	int64_t kill_at;      /* SIGKILL deadline of a stop; 0: none */
	bool stopping;
	bool started;         /* herd__node_go ran */
	int devnull;
	herd_plan *plan;      /* GPU leases (gpus_per_rank > 0) */
	pid_t guardian;       /* see start_guardian; 0: none */
	int guardian_fd;      /* its pipe: rank pids, 0 for "done"; -1: none */
	int pipe_bytes;       /* asked for each rank pipe; 0: the system's default */
};

/*
 * The size of each rank's stdout and stderr pipe: up to RANK_PIPE_BYTES,
 * so that a fast writer and its node take fewer turns per byte, but all of
 * them together at most an eighth of what the user's pipes may hold
 * (pipe-user-pages-soft: past it, every new pipe of the user's is cut to
 * two pages, the ranks' own among them).  0 where that is no more than
 * the default 64 KiB.
 */
static int rank_pipe_bytes(int nranks)
{
	long pages = 16384, page = sysconf(_SC_PAGESIZE);
	FILE *f = fopen("/proc/sys/fs/pipe-user-pages-soft", "r");
	long bytes = RANK_PIPE_BYTES, budget;

	if (f != NULL) {
		long v;

		if (fscanf(f, "%ld", &v) == 1 && v >= 0)
			pages = v;   /* 0: no limit */
		fclose(f);
	}
	if (page <= 0)
		page = 4096;
	if (pages > 0) {
		budget = pages * page / 8 / (2L * (nranks > 0 ? nranks : 1));
		while (bytes > budget)
			bytes /= 2;
	}
	return bytes > 65536 ? (int)bytes : 0;
}

/* ---- copying a spec ------------------------------------------------------- */

static herd_status dup_strv(char ***out, char *const *v)
{
	size_t n = 0;

	while (v != NULL && v[n] != NULL)
		n++;
	HERD_CHECK(herd__calloc(out, n + 1, sizeof(char *), "a string array"));
	for (size_t i = 0; i < n; i++)
		HERD_CHECK(herd__strdup(&(*out)[i], v[i]));
	return HERD_OK;
}

static herd_status spec_copy(herd__node_spec *d, const herd__node_spec *s)
{
	memset(d, 0, sizeof(*d));
	*d = (herd__node_spec){ .master_port = s->master_port, .restart_count = s->restart_count,
				.world_size = s->world_size, .nnodes = s->nnodes,
				.node_rank = s->node_rank, .nranks = s->nranks,
				.grace_ms = s->grace_ms, .gpus_per_rank = s->gpus_per_rank,
				.lines = s->lines };
	HERD_CHECK(herd__strdup(&d->job_id, s->job_id));
	HERD_CHECK(herd__strdup(&d->store, s->store));
	HERD_CHECK(herd__strdup(&d->secret, s->secret));
	HERD_CHECK(herd__strdup(&d->host, s->host));
	HERD_CHECK(herd__strdup(&d->master_addr, s->master_addr));
	HERD_CHECK(herd__strdup(&d->workdir, s->workdir));
	HERD_CHECK(herd__strdup(&d->log_dir, s->log_dir));
	HERD_CHECK(dup_strv(&d->argv, s->argv));
	HERD_CHECK(dup_strv(&d->env, s->env));
	HERD_CHECK(herd__calloc(&d->ranks, (size_t)s->nranks, sizeof(int), "the node's ranks"));
	memcpy(d->ranks, s->ranks, (size_t)s->nranks * sizeof(int));
	return HERD_OK;
}

/* ---- the environment of a rank --------------------------------------------- */

/* The variables every rank gets; inherited values of the same names are dropped. */
static const char *const contract_names[] = {
	"HERD_RANK", "HERD_WORLD_SIZE", "HERD_LOCAL_RANK", "HERD_LOCAL_WORLD_SIZE",
	"HERD_NODE_RANK", "HERD_NNODES", "HERD_JOB_ID", "HERD_STORE", "HERD_JOB_SECRET",
	"HERD_RESTART_COUNT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
	"GROUP_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
	/* bench -n's marker: a rank of herd launch is not one of bench's. */
	"HERD_BENCH_PARENT",
};

static bool name_in(const char *entry, const char *const *names, size_t n);

bool herd__launch_contract_name(const char *entry)
{
	return name_in(entry, contract_names, sizeof(contract_names) / sizeof(*contract_names));
}

static bool name_in(const char *entry, const char *const *names, size_t n)
{
	size_t len = strcspn(entry, "=");

	for (size_t i = 0; i < n; i++)
		if (names[i] != NULL && strncmp(entry, names[i], len) == 0 &&
		    (names[i][len] == '\0' || names[i][len] == '='))
			return true;
	return false;
}

static herd_status push(char ***v, size_t *n, size_t *cap, char *s)
{
	if (s == NULL)
		return herd__error(HERD_ENOMEM, "out of memory building a rank's environment");
	if (*n + 2 > *cap) {
		size_t nc = *cap ? 2 * *cap : 64;
		char **nv = realloc(*v, nc * sizeof(char *));

		if (nv == NULL) {
			free(s);
			return herd__error(HERD_ENOMEM, "out of memory building a rank's "
					   "environment");
		}
		*v = nv;
		*cap = nc;
	}
	(*v)[(*n)++] = s;
	(*v)[*n] = NULL;
	return HERD_OK;
}

static char *fmt(const char *f, ...) HERD_PRINTF(1, 2);
static char *fmt(const char *f, ...)
{
	va_list ap;
	char *s = NULL;

	va_start(ap, f);
	if (vasprintf(&s, f, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

static void free_strv(char **v)
{
	for (size_t i = 0; v != NULL && v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

/* push, unless entry's name is one of names (the entry is then freed). */
static herd_status push_unless(char ***v, size_t *n, size_t *cap, char *entry,
			       char *const *names, size_t nnames)
{
	if (entry != NULL && name_in(entry, (const char *const *)names, nnames)) {
		free(entry);
		return HERD_OK;
	}
	return push(v, n, cap, entry);
}

/*
 * environ, less the contract's names and those the GPU plan or spec->env
 * set, then the contract, then the plan's GPU variables, then spec->env.
 */
static herd_status rank_env(const herd__node *n, int i, char ***out)
{
	const herd__node_spec *s = &n->spec;
	char **v = NULL, **gpu = NULL;
	size_t cnt = 0, cap = 0, ngpu = 0, nenv = 0;
	int rank = s->ranks[i];
	herd_status st;

	*out = NULL;
	if (n->plan != NULL)
		HERD_CHECK(herd_plan_rank_env(n->plan, (size_t)i, &gpu));
	while (gpu != NULL && gpu[ngpu] != NULL)
		ngpu++;
	while (s->env[nenv] != NULL)
		nenv++;
	for (size_t k = 0; environ[k] != NULL; k++) {
		const char *e = environ[k];

		if (strchr(e, '=') == NULL ||
		    herd__launch_contract_name(e) ||
		    name_in(e, (const char *const *)gpu, ngpu) ||
		    name_in(e, (const char *const *)s->env, nenv))
			continue;
		HERD_CHECK_GOTO(push(&v, &cnt, &cap, strdup(e)), st, fail);
	}
#define PUSHF(...) HERD_CHECK_GOTO(push(&v, &cnt, &cap, fmt(__VA_ARGS__)), st, fail)
	/* A contract variable that spec->env sets is spec->env's (an exported
	 * MASTER_PORT, say): getenv would find the first of two. */
#define PUSHC(...) HERD_CHECK_GOTO(push_unless(&v, &cnt, &cap, fmt(__VA_ARGS__), s->env, nenv), st, fail)
	PUSHC("HERD_RANK=%d", rank);
	PUSHC("HERD_WORLD_SIZE=%d", s->world_size);
	PUSHC("HERD_LOCAL_RANK=%d", i);
	PUSHC("HERD_LOCAL_WORLD_SIZE=%d", s->nranks);
	PUSHC("HERD_NODE_RANK=%d", s->node_rank);
	PUSHC("HERD_NNODES=%d", s->nnodes);
	PUSHC("HERD_JOB_ID=%s", s->job_id);
	PUSHC("HERD_STORE=%s", s->store);
	PUSHC("HERD_JOB_SECRET=%s", s->secret);
	PUSHC("HERD_RESTART_COUNT=%d", s->restart_count);
	if (s->job_start_ms > 0)
		PUSHC("HERD_JOB_START=%" PRId64 ".%03d", s->job_start_ms / 1000,
		      (int)(s->job_start_ms % 1000));
	PUSHC("RANK=%d", rank);
	PUSHC("LOCAL_RANK=%d", i);
	PUSHC("WORLD_SIZE=%d", s->world_size);
	PUSHC("LOCAL_WORLD_SIZE=%d", s->nranks);
	PUSHC("GROUP_RANK=%d", s->node_rank);
	PUSHC("MASTER_ADDR=%s", s->master_addr);
	PUSHC("MASTER_PORT=%d", s->master_port);
	PUSHC("TORCHELASTIC_RESTART_COUNT=%d", s->restart_count);
	for (size_t k = 0; k < ngpu; k++)
		if (!name_in(gpu[k], (const char *const *)s->env, nenv))
			PUSHF("%s", gpu[k]);
	for (size_t k = 0; k < nenv; k++)
		PUSHF("%s", s->env[k]);
#undef PUSHF
#undef PUSHC
	if (v == NULL)
		HERD_CHECK_GOTO(push(&v, &cnt, &cap, strdup("HERD_RANK=0")), st, fail);
	herd_free(gpu);
	*out = v;
	return HERD_OK;
fail:
	herd_free(gpu);
	free_strv(v);
	return st;
}

/*
 * PATH of the rank's environment, searched for argv0 the way execvp does:
 * the first regular file that may be executed; else the first regular file
 * there (its exec then fails with EACCES: it cannot be executed, status
 * 126, as a shell says of it); else argv0 itself (ENOENT: not found, 127).
 */
static char *resolve_program(const char *argv0, char *const *envp)
{
	const char *path = "/usr/local/bin:/usr/bin:/bin";
	char *denied = NULL;

	if (argv0[0] == '\0' || strchr(argv0, '/') != NULL)
		return strdup(argv0);
	for (size_t i = 0; envp[i] != NULL; i++)
		if (strncmp(envp[i], "PATH=", 5) == 0)
			path = envp[i] + 5;
	for (const char *p = path;; p++) {
		const char *end = strchrnul(p, ':');
		char *cand = end == p ? fmt("./%s", argv0)
				      : fmt("%.*s/%s", (int)(end - p), p, argv0);
		struct stat sb;

		if (cand == NULL) {
			free(denied);
			return NULL;
		}
		if (stat(cand, &sb) == 0 && S_ISREG(sb.st_mode) && access(cand, X_OK) == 0) {
			free(denied);
			return cand;
		}
		if (denied == NULL && stat(cand, &sb) == 0 && S_ISREG(sb.st_mode))
			denied = cand;
		else
			free(cand);
		if (*end == '\0')
			break;
		p = end;
	}
	/* Not found: execve then fails with ENOENT, reported like any exec failure. */
	return denied != NULL ? denied : strdup(argv0);
}

/* What a path that exec refused (EACCES) is, for the message (a relative
 * one is the rank's, in workdir when there is one). */
static const char *why_denied(const char *path, const char *workdir)
{
	char full[PATH_MAX];
	struct stat sb;

	if (path[0] != '/' && workdir != NULL &&
	    snprintf(full, sizeof(full), "%s/%s", workdir, path) < (int)sizeof(full))
		path = full;
	if (stat(path, &sb) != 0)
		return "";
	if (S_ISDIR(sb.st_mode))
		return " (a directory)";
	if (S_ISREG(sb.st_mode) && (sb.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH)) == 0)
		return " (no execute permission)";
	return "";
}

/*
 * The status of a rank whose exec failed with err, as a shell gives it:
 * 127 when the command is not there, 126 when it is but cannot be executed
 * (no execute permission, a directory, not a program this system runs).
 */
static int exec_failure_status(int err)
{
	return err == ENOENT ? 127 : 126;
}

/* ---- starting a rank -------------------------------------------------------- */

/*
 * The child, between fork and exec: async-signal-safe calls only (the
 * launcher has other threads, which may have held locks at the fork).
 */
static void child(const herd__node *n, int out_fd, int err_fd, int fail_fd, pid_t parent,
		  const char *path, char *const *argv, char *const *envp,
		  const cpu_set_t *cpus)
{
	struct child_failure f = { 0, 0 };
	struct sigaction dfl;
	sigset_t none;
	static const int reset[] = { SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD,
				     SIGUSR1, SIGUSR2, SIGALRM, SIGTSTP, SIGTTIN, SIGTTOU };

	setpgid(0, 0);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) {
		/* The supervisor died between fork and prctl: nobody to run for. */
		f.stage = STAGE_PARENT;
		goto fail;
	}
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	for (size_t i = 0; i < sizeof(reset) / sizeof(*reset); i++)
		sigaction(reset[i], &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (dup2(n->devnull, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 ||
	    dup2(err_fd, STDERR_FILENO) < 0) {
		f.stage = STAGE_EXEC;
		goto fail;
	}
	if (n->spec.workdir != NULL && chdir(n->spec.workdir) != 0) {
		f.stage = STAGE_CHDIR;
		goto fail;
	}
	if (cpus != NULL && sched_setaffinity(0, sizeof(*cpus), cpus) != 0) {
		f.stage = STAGE_AFFINITY;
		goto fail;
	}
	execve(path, argv, envp);
	f.stage = STAGE_EXEC;
fail:
	f.err = errno;
	if (write(fail_fd, &f, sizeof(f)) < 0) {
		/* Nothing left to tell it with: the exit status says 127. */
	}
	_exit(127);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void report_exit(herd__node *n, struct rank *r, herd_job_rank_state state, int code, int sig,
			const char *err)
{
	r->ended = true;
	r->pid = 0;
	if (n->ev.exited != NULL)
		n->ev.exited(n->ev.userdata, r->rank, state, code, sig, err);
}

/* The CPU set of rank i from the GPU plan, when there is one. */
static bool rank_cpus(const herd__node *n, int i, cpu_set_t *set)
{
	const herd_plan_rank_info *pr = NULL;
	const char *p;

	if (n->plan == NULL || herd_plan_rank(n->plan, (size_t)i, &pr) != HERD_OK ||
	    pr->cpus == NULL || pr->cpus[0] == '\0')
		return false;
	/* A Linux CPU list: "0-55,112-167". */
	CPU_ZERO(set);
	for (p = pr->cpus; *p != '\0';) {
		char *end;
		long a = strtol(p, &end, 10), b = a;

		if (end == p)
			return false;
		if (*end == '-') {
			p = end + 1;
			b = strtol(p, &end, 10);
			if (end == p)
				return false;
		}
		for (long c = a; c <= b && c < CPU_SETSIZE; c++)
			if (c >= 0)
				CPU_SET((int)c, set);
		p = *end == ',' ? end + 1 : end;
		if (*end != ',' && *end != '\0')
			return false;
	}
	/* Only CPUs this process may use: a plan made from a recorded
	 * inventory can name CPUs this machine does not have, and a rank
	 * left unpinned beats one that cannot start. */
	{
		cpu_set_t mine;

		if (sched_getaffinity(0, sizeof(mine), &mine) == 0)
			CPU_AND(set, set, &mine);
	}
	return CPU_COUNT(set) > 0;
}

static const char *const log_ext[2] = { "out", "err" };

/*
 * Refuses the log file at path unless it is absent or a regular file of
 * this user, which a log replaces (by rename) or appends to.
 */
static herd_status log_check(const herd__node *n, const char *path)
{
	struct stat sb;

	if (lstat(path, &sb) != 0) {
		if (errno == ENOENT)
			return HERD_OK;
		return herd__error_errno(HERD_EIO, errno, "log file %s on %s", path, n->spec.host);
	}
	if (!S_ISREG(sb.st_mode))
		return herd__error(HERD_EIO, "log file %s on %s is %s: a log replaces only a "
				   "regular file (remove it, or choose another log directory)", path,
				   n->spec.host, herd__file_kind(sb.st_mode));
	if (sb.st_uid != geteuid())
		return herd__error(HERD_EIO, "log file %s on %s belongs to user %u: a log "
				   "replaces only a file of this user's (remove it, or choose "
				   "another log directory)", path, n->spec.host, (unsigned)sb.st_uid);
	return HERD_OK;
}

/* A restart's log: appended to, never through a link nor a file of other names. */
static herd_status log_append(const herd__node *n, const char *path, int *fd)
{
	struct stat sb;

	/* O_NONBLOCK: a FIFO put there since the check is not waited on. */
	*fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK |
		   O_NOCTTY, 0600);
	if (*fd < 0)
		return herd__error_errno(HERD_EIO, errno, "log file %s on %s", path, n->spec.host);
	if (fstat(*fd, &sb) != 0)
		return herd__error_errno(HERD_EIO, errno, "log file %s on %s", path, n->spec.host);
	if (!S_ISREG(sb.st_mode) || sb.st_uid != geteuid() || sb.st_nlink != 1)
		return herd__error(HERD_EIO, "log file %s on %s is %s of user %u with %lu "
				   "names, not a regular file of this user's with one name: a "
				   "restart appends only to its run's own logs", path, n->spec.host,
				   herd__file_kind(sb.st_mode), (unsigned)sb.st_uid,
				   (unsigned long)sb.st_nlink);
	if ((sb.st_mode & 077) != 0 && fchmod(*fd, 0600) != 0)
		return herd__error_errno(HERD_EIO, errno, "log file %s on %s", path, n->spec.host);
	fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) & ~O_NONBLOCK);
	return HERD_OK;
}

/*
 * The log files of every rank of the node, opened before any rank starts.
 * A first run's logs are new files, owner-only, each made under a
 * temporary name and renamed into place once every name has been checked
 * and every file made, so that a refused name replaces no log and a name
 * that was a hard link leaves its other names' bytes alone.  A restart
 * appends to the files of the runs before it.
 */
static herd_status open_logs(herd__node *n)
{
	size_t count = (size_t)n->spec.nranks * 2;
	char path[PATH_MAX], **tmp = NULL;
	herd_status st = HERD_OK;
	struct stat sb;

	if (n->spec.log_dir == NULL)
		return HERD_OK;
	if (stat(n->spec.log_dir, &sb) != 0)
		return herd__error_errno(HERD_EIO, errno, "log directory %s on %s",
					 n->spec.log_dir, n->spec.host);
	if (!S_ISDIR(sb.st_mode))
		return herd__error(HERD_EINVAL, "log directory %s on %s is %s, not a directory",
				   n->spec.log_dir, n->spec.host, herd__file_kind(sb.st_mode));
	/* In a directory others may write to (and not sticky, as /tmp is),
	 * another user could swap a log file for something else between runs. */
	if ((sb.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (sb.st_mode & S_ISVTX) == 0)
		return herd__error(HERD_EINVAL, "log directory %s on %s is writable by other "
				   "users (mode %04o) and not sticky: another user could replace "
				   "the logs; use a directory only you can write", n->spec.log_dir,
				   n->spec.host, (unsigned)(sb.st_mode & 07777));
	HERD_CHECK(herd__calloc(&tmp, count, sizeof(*tmp), "the log files' names"));
	for (size_t j = 0; j < count; j++) {
		snprintf(path, sizeof(path), "%s/rank.%d.%s", n->spec.log_dir,
			 n->ranks[j / 2].rank, log_ext[j % 2]);
		HERD_CHECK_GOTO(log_check(n, path), st, out);
	}
	for (size_t j = 0; j < count; j++) {
		int *fd = &n->ranks[j / 2].s[j % 2].log_fd;

		snprintf(path, sizeof(path), "%s/rank.%d.%s", n->spec.log_dir,
			 n->ranks[j / 2].rank, log_ext[j % 2]);
		if (n->spec.restart_count > 0) {
			HERD_CHECK_GOTO(log_append(n, path, fd), st, out);
			continue;
		}
		HERD_CHECK_GOTO(herd__calloc(&tmp[j], strlen(path) + 8, 1, "a log file's name"), st,
				out);
		memcpy(tmp[j], path, strlen(path));
		memcpy(tmp[j] + strlen(path), ".XXXXXX", 8);
		/* mkostemp: a new file, mode 0600, never through a link. */
		*fd = mkostemp(tmp[j], O_CLOEXEC);
		if (*fd < 0) {
			st = herd__error_errno(HERD_EIO, errno, "log file %s on %s", tmp[j],
					       n->spec.host);
			free(tmp[j]);
			tmp[j] = NULL;
			goto out;
		}
	}
	for (size_t j = 0; j < count && n->spec.restart_count == 0; j++) {
		snprintf(path, sizeof(path), "%s/rank.%d.%s", n->spec.log_dir,
			 n->ranks[j / 2].rank, log_ext[j % 2]);
		if (rename(tmp[j], path) != 0) {
			st = herd__error_errno(HERD_EIO, errno, "log file %s on %s", path,
					       n->spec.host);
			goto out;
		}
		free(tmp[j]);
		tmp[j] = NULL;
	}
out:
	for (size_t j = 0; j < count; j++) {
		if (st != HERD_OK)
			close_fd(&n->ranks[j / 2].s[j % 2].log_fd);
		if (tmp[j] != NULL)
			unlink(tmp[j]);
		free(tmp[j]);
	}
	free(tmp);
	return st;
}

static void guard(herd__node *n, pid_t group);

static herd_status start_rank(herd__node *n, int i)
{
	struct rank *r = &n->ranks[i];
	int outp[2] = { -1, -1 }, errp[2] = { -1, -1 }, failp[2] = { -1, -1 };
	char **envp = NULL, *path = NULL;
	cpu_set_t cpus;
	bool pin;
	struct child_failure f = { 0, 0 };
	pid_t parent = getpid(), pid;
	ssize_t got;
	herd_status st = HERD_OK;

	HERD_CHECK_GOTO(rank_env(n, i, &envp), st, out);
	path = resolve_program(n->spec.argv[0], envp);
	if (path == NULL) {
		st = herd__error(HERD_ENOMEM, "out of memory starting rank %d", r->rank);
		goto out;
	}
	pin = rank_cpus(n, i, &cpus);
	if (pipe2(outp, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0 ||
	    pipe2(failp, O_CLOEXEC) != 0) {
		st = herd__error_errno(HERD_ESYS, errno, "pipes for rank %d on %s", r->rank,
				       n->spec.host);
		goto out;
	}
	/* Room for a fast writer's bursts: fewer turns of both sides per
	 * byte.  Beyond the system's limit it keeps its default (64 KiB). */
	if (n->pipe_bytes > 0) {
		(void)fcntl(outp[0], F_SETPIPE_SZ, n->pipe_bytes);
		(void)fcntl(errp[0], F_SETPIPE_SZ, n->pipe_bytes);
	}
	pid = fork();
	if (pid < 0) {
		st = herd__error_errno(HERD_ESYS, errno, "fork of rank %d on %s", r->rank,
				       n->spec.host);
		goto out;
	}
	if (pid == 0)
		child(n, outp[1], errp[1], failp[1], parent, path, n->spec.argv, envp,
		      pin ? &cpus : NULL);
	/* Both sides set the group, so that it exists before anyone signals it. */
	setpgid(pid, pid);
	guard(n, pid);
	close_fd(&outp[1]);
	close_fd(&errp[1]);
	close_fd(&failp[1]);
	r->pid = pid;
	r->s[0].fd = outp[0];
	r->s[1].fd = errp[0];
	outp[0] = errp[0] = -1;
	do
		got = read(failp[0], &f, sizeof(f));
	while (got < 0 && errno == EINTR);
	if (got == (ssize_t)sizeof(f)) {
		char err[PATH_MAX + 128];
		int status;

		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		if (f.stage == STAGE_CHDIR)
			snprintf(err, sizeof(err), "chdir to %s failed: %s", n->spec.workdir,
				 strerror(f.err));
		else if (f.stage == STAGE_PARENT)
			snprintf(err, sizeof(err), "its supervisor died during the start");
		else if (f.stage == STAGE_AFFINITY)
			snprintf(err, sizeof(err), "binding to its CPUs failed: %s",
				 strerror(f.err));
		else
			snprintf(err, sizeof(err), "exec \"%.*s\": %s%s", PATH_MAX, n->spec.argv[0],
				 strerror(f.err),
				 f.err == EACCES ? why_denied(path, n->spec.workdir) : "");
		close_fd(&r->s[0].fd);
		close_fd(&r->s[1].fd);
		report_exit(n, r, HERD_JOB_RANK_FAILED_START,
			    f.stage == STAGE_EXEC ? exec_failure_status(f.err) : 127, 0, err);
		goto out;
	}
	for (int k = 0; k < 2; k++)
		fcntl(r->s[k].fd, F_SETFL, fcntl(r->s[k].fd, F_GETFL) | O_NONBLOCK);
	r->pidfd = pidfd_open(pid, 0);
	if (n->ev.started != NULL)
		n->ev.started(n->ev.userdata, r->rank, (long)pid);
out:
	close_fd(&outp[0]);
	close_fd(&outp[1]);
	close_fd(&errp[0]);
	close_fd(&errp[1]);
	close_fd(&failp[0]);
	close_fd(&failp[1]);
	free_strv(envp);
	free(path);
	return st;
}

/* ---- GPUs ---------------------------------------------------------------- */

/*
 * Leases gpus_per_rank GPUs for every rank of the node, held by this
 * process for the node's life, planned on the node as discovery sees it
 * (which honours HERD_INVENTORY: an inventory file for fixtures and tests).
 */
static herd_status lease_gpus(herd__node *n)
{
	herd_alloc_request req = HERD_ALLOC_REQUEST_INIT;
	herd_cluster *cluster = NULL;
	herd_alloc_opts ao = HERD_ALLOC_OPTS_INIT;
	herd_status st;

	if (n->spec.gpus_per_rank <= 0)
		return HERD_OK;
	st = herd_cluster_discover(&cluster, NULL);
	if (st != HERD_OK)
		return herd__error_wrap(st, "GPUs for the ranks on %s: ", n->spec.host);
	req.gpus_per_rank = n->spec.gpus_per_rank;
	req.gpus = n->spec.gpus_per_rank * n->spec.nranks;
	req.link = HERD_ALLOC_LINK_SAME_NODE;
	ao.job_id = n->spec.job_id;
	st = herd_alloc(&n->plan, cluster, &req, &ao);
	herd_cluster_free(cluster);
	if (st != HERD_OK)
		return herd__error_wrap(st, "%d GPUs for %d ranks on %s: ", req.gpus,
					n->spec.nranks, n->spec.host);
	return HERD_OK;
}

/* ---- the guardian ------------------------------------------------------------ */

/*
 * A process of the node that outlives this one for a moment: the ranks die
 * with their supervisor (parent-death signal), but what they started does
 * not, and the GPU leases would be free while it still runs.  The guardian
 * is forked before the ranks, keeps only the read end of a pipe and the
 * lease descriptors, and learns each rank's process group.  When this
 * process ends without saying "done" (killed, even by SIGKILL), the pipe
 * reads end-of-file: the guardian kills every rank's group and only then
 * exits, closing the lease descriptors last, so a lease is never free while
 * a process of the job runs.  Between fork and _exit it makes only
 * async-signal-safe calls (this process has other threads).
 */
static void guardian_main(int rfd, const int *keep, size_t nkeep, pid_t *groups, int max)
{
	static const int quiet[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP };
	struct sigaction ign;
	struct rlimit rl;
	int n = 0;

	memset(&ign, 0, sizeof(ign));
	ign.sa_handler = SIG_IGN;
	for (size_t i = 0; i < sizeof(quiet) / sizeof(*quiet); i++)
		sigaction(quiet[i], &ign, NULL);
	/* Nothing else of this process stays open in it: a channel or a
	 * socket it kept would hide the supervisor's death from its peers. */
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur > 65536)
		rl.rlim_cur = 65536;
	for (int fd = 0; fd < (int)rl.rlim_cur; fd++) {
		bool kept = fd == rfd;

		for (size_t i = 0; i < nkeep && !kept; i++)
			kept = fd == keep[i];
		if (!kept)
			close(fd);
	}
	for (;;) {
		pid_t pid;
		ssize_t got = read(rfd, &pid, sizeof(pid));

		if (got < 0 && errno == EINTR)
			continue;
		if (got == (ssize_t)sizeof(pid) && pid == 0)
			_exit(0);  /* the supervisor ended the job itself */
		if (got == (ssize_t)sizeof(pid) && n < max) {
			groups[n++] = pid;
			continue;
		}
		if (got <= 0)
			break;
	}
	for (int i = 0; i < n; i++)
		kill(-groups[i], SIGKILL);
	_exit(0);
}

static herd_status start_guardian(herd__node *n)
{
	const int *keep = NULL;
	size_t nkeep = n->plan != NULL ? herd__lease_fds(n->plan->lease, &keep) : 0;
	pid_t *groups = NULL;
	int p[2];
	pid_t pid;

	HERD_CHECK(herd__calloc(&groups, (size_t)n->spec.nranks, sizeof(*groups),
				"the guardian's groups"));
	if (pipe2(p, O_CLOEXEC) != 0) {
		free(groups);
		return herd__error_errno(HERD_ESYS, errno, "the guardian's pipe on %s",
					 n->spec.host);
	}
	pid = fork();
	if (pid == 0)
		guardian_main(p[0], keep, nkeep, groups, n->spec.nranks);
	free(groups);
	close(p[0]);
	if (pid < 0) {
		close(p[1]);
		return herd__error_errno(HERD_ESYS, errno, "starting the guardian on %s",
					 n->spec.host);
	}
	n->guardian = pid;
	n->guardian_fd = p[1];
	return HERD_OK;
}

/* Tells the guardian a rank's process group (one atomic write). */
static void guard(herd__node *n, pid_t group)
{
	if (n->guardian_fd >= 0 && write(n->guardian_fd, &group, sizeof(group)) < 0) {
		/* A guardian that is gone cannot guard; the ranks still run. */
	}
}

/* The supervisor ends the job itself: the guardian leaves without a kill. */
static void stop_guardian(herd__node *n)
{
	if (n->guardian_fd >= 0) {
		guard(n, 0);
		close_fd(&n->guardian_fd);
	}
	if (n->guardian > 0) {
		while (waitpid(n->guardian, NULL, 0) < 0 && errno == EINTR)
			;
		n->guardian = 0;
	}
}

/* ---- the public (internal) calls -------------------------------------------- */

static herd_status check_spec(const herd__node_spec *s)
{
	if (s->nranks < 1 || s->ranks == NULL || s->argv == NULL || s->argv[0] == NULL ||
	    s->env == NULL || s->job_id == NULL || s->store == NULL || s->secret == NULL ||
	    s->host == NULL || s->master_addr == NULL)
		return herd__error(HERD_EINVAL, "node spec is incomplete (ranks, argv, env, job "
				   "id, store, secret, host and master address are required)");
	return HERD_OK;
}

/*
 * The HERD_SOCKET_IFNAME the ranks will get (spec->env's, else this
 * process's) must match an interface of this host that is up with an IPv4
 * address: a name that matches nothing here fails the node before any of
 * its ranks starts, naming the host, the value and what the host has.
 */
static herd_status check_ifname(const herd__node_spec *s)
{
	static const char var[] = "HERD_SOCKET_IFNAME=";
	const char *spec = herd__param_str(HERD__P_SOCKET_IFNAME);
	char addrs[512], names[256] = "";
	struct ifaddrs *ifs = NULL;
	size_t o = 0;
	int count = 0;

	for (size_t i = 0; s->env[i] != NULL; i++)
		if (strncmp(s->env[i], var, sizeof(var) - 1) == 0)
			spec = s->env[i] + sizeof(var) - 1;
	if (spec == NULL || spec[0] == '\0')
		return HERD_OK;
	HERD_CHECK(herd__net_if_addrs(spec, 1, addrs, sizeof(addrs), &count));
	if (count > 0)
		return HERD_OK;
	if (getifaddrs(&ifs) == 0) {
		for (struct ifaddrs *i = ifs; i != NULL; i = i->ifa_next) {
			int n;

			if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
			    !(i->ifa_flags & IFF_UP) || o >= sizeof(names))
				continue;
			n = snprintf(names + o, sizeof(names) - o, "%s%s", o > 0 ? ", " : "",
				     i->ifa_name);
			o = n < 0 ? sizeof(names) : o + (size_t)n;
		}
		freeifaddrs(ifs);
	}
	return herd__error(HERD_EINVAL, "HERD_SOCKET_IFNAME=%s matches no interface of %s that "
			   "is up with an IPv4 address (it has: %s)", spec, s->host,
			   names[0] != '\0' ? names : "none");
}

herd_status herd__node_create(herd__node **out, const herd__node_spec *spec,
			      const herd__node_events *events)
{
	herd__node *n = NULL;
	herd_status st;

	*out = NULL;
	HERD_CHECK(check_spec(spec));
	HERD_CHECK(check_ifname(spec));
	HERD_CHECK(herd__calloc(&n, 1, sizeof(*n), "a node supervisor"));
	n->devnull = -1;
	n->guardian_fd = -1;
	if (events != NULL)
		n->ev = *events;
	HERD_CHECK_GOTO(herd__calloc(&n->ranks, (size_t)spec->nranks, sizeof(*n->ranks),
				     "the node's ranks"), st, fail);
	for (int i = 0; i < spec->nranks; i++) {
		struct rank *r = &n->ranks[i];

		r->rank = spec->ranks[i];
		r->local = i;
		r->pidfd = -1;
		for (int k = 0; k < 2; k++)
			r->s[k].fd = r->s[k].log_fd = -1;
	}
	HERD_CHECK_GOTO(spec_copy(&n->spec, spec), st, fail);
	for (int i = 0; i < spec->nranks; i++)
		for (int k = 0; k < 2; k++)
			HERD_CHECK_GOTO(herd__calloc(&n->ranks[i].s[k].line, HERD_JOB_LINE_MAX + 1,
						     1, "a line buffer"), st, fail);
	n->pipe_bytes = rank_pipe_bytes(spec->nranks);
	n->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (n->devnull < 0) {
		st = herd__error_errno(HERD_ESYS, errno, "/dev/null on %s", spec->host);
		goto fail;
	}
	if (spec->log_dir != NULL && mkdir(spec->log_dir, 0700) != 0 && errno != EEXIST) {
		st = herd__error_errno(HERD_EIO, errno, "log directory %s on %s", spec->log_dir,
				       spec->host);
		goto fail;
	}
	HERD_CHECK_GOTO(lease_gpus(n), st, fail);
	HERD_CHECK_GOTO(start_guardian(n), st, fail);
	*out = n;
	return HERD_OK;
fail:
	herd__node_free(n);
	return st;
}

/* Reports every rank not started yet as FAILED_START, saying why. */
static void fail_unstarted(herd__node *n, const char *why)
{
	for (int i = 0; i < n->spec.nranks; i++) {
		struct rank *r = &n->ranks[i];

		if (r->pid == 0 && !r->ended)
			report_exit(n, r, HERD_JOB_RANK_FAILED_START, 127, 0, why);
	}
}

herd_status herd__node_go(herd__node *n)
{
	if (n->started || n->stopping)
		return HERD_OK;
	n->started = true;
	HERD_CHECK(open_logs(n));
	for (int i = 0; i < n->spec.nranks; i++)
		HERD_CHECK(start_rank(n, i));
	return HERD_OK;
}

size_t herd__node_nfds(const herd__node *n)
{
	return (size_t)n->spec.nranks * 3;
}

size_t herd__node_pollfds(const herd__node *n, struct pollfd *fds)
{
	size_t k = 0;

	for (int i = 0; i < n->spec.nranks; i++) {
		const struct rank *r = &n->ranks[i];

		for (int s = 0; s < 2; s++)
			if (r->s[s].fd >= 0)
				fds[k++] = (struct pollfd){ .fd = r->s[s].fd, .events = POLLIN };
		if (r->pid > 0 && r->pidfd >= 0)
			fds[k++] = (struct pollfd){ .fd = r->pidfd, .events = POLLIN };
	}
	return k;
}

int herd__node_timeout(const herd__node *n)
{
	int t = -1;

	for (int i = 0; i < n->spec.nranks; i++)
		if (n->ranks[i].pid > 0 && n->ranks[i].pidfd < 0)
			t = REAP_POLL_MS;
	if (n->kill_at > 0) {
		int left = herd__net_remaining_ms(n->kill_at);

		if (t < 0 || left < t)
			t = left;
	}
	return t;
}

static void emit(herd__node *n, struct rank *r, int k, const char *p, size_t len)
{
	if (n->ev.output != NULL)
		n->ev.output(n->ev.userdata, r->rank, (herd_job_stream)(k + 1), p, len);
}

/* The line being assembled goes out, with a newline (a piece of a long
 * line, or a last line without one). */
static void emit_partial(herd__node *n, struct rank *r, int k)
{
	struct stream *s = &r->s[k];

	if (s->len == 0)
		return;
	s->line[s->len] = '\n';
	emit(n, r, k, s->line, s->len + 1);
	s->len = 0;
}

/*
 * Cuts bytes read (at most READ_CHUNK) into lines: the whole lines in them
 * go out as one piece, straight from the read buffer; a line begun in an
 * earlier read is assembled first, and the bytes after the last newline
 * wait for the rest of their line.  A line that fills the buffer goes out
 * as a piece.
 */
static void feed(herd__node *n, struct rank *r, int k, const char *p, size_t len)
{
	struct stream *s = &r->s[k];

	if (s->log_fd >= 0) {
		size_t done = 0;

		while (done < len) {
			ssize_t w = write(s->log_fd, p + done, len - done);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				/* A full disk must not stop the job; the lines still
				 * reach the launcher. */
				close_fd(&s->log_fd);
				break;
			}
			done += (size_t)w;
		}
	}
	while (len > 0) {
		const char *last = s->len == 0 ? memrchr(p, '\n', len) : NULL;
		const char *nl;
		size_t take;

		if (last != NULL) {
			take = (size_t)(last - p) + 1;
			emit(n, r, k, p, take);
			p += take;
			len -= take;
			continue;
		}
		nl = memchr(p, '\n', len);
		take = nl != NULL ? (size_t)(nl - p) : len;
		if (take > HERD_JOB_LINE_MAX - s->len)
			take = HERD_JOB_LINE_MAX - s->len;
		memcpy(s->line + s->len, p, take);
		s->len += take;
		p += take;
		len -= take;
		if (len > 0 && *p == '\n') {
			p++;
			len--;
			/* An empty line still goes out. */
			s->line[s->len] = '\n';
			emit(n, r, k, s->line, s->len + 1);
			s->len = 0;
		} else if (s->len == HERD_JOB_LINE_MAX) {
			emit_partial(n, r, k);
		}
	}
}

/* Whether the caller holds all the output it will take for now. */
static bool output_full(const herd__node *n)
{
	return n->ev.full != NULL && n->ev.full(n->ev.userdata);
}

/*
 * Reads up to max bytes of what the pipe holds (stopping early while the
 * caller's output is full, unless all), and closes it at EOF, sending a
 * last partial line.
 */
static void drain(herd__node *n, struct rank *r, int k, size_t max, bool all)
{
	struct stream *s = &r->s[k];
	char buf[READ_CHUNK];

	for (size_t taken = 0; s->fd >= 0 && taken < max;) {
		ssize_t got;

		if (!all && output_full(n))
			return;
		got = read(s->fd, buf, sizeof(buf));
		if (got > 0) {
			feed(n, r, k, buf, (size_t)got);
			taken += (size_t)got;
			continue;
		}
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		close_fd(&s->fd);
	}
	if (s->fd < 0)
		emit_partial(n, r, k);
}

/* What a pipe can hold: all a rank left in it when it ended. */
static size_t pipe_capacity(int fd)
{
	int sz = fd >= 0 ? fcntl(fd, F_GETPIPE_SZ) : -1;

	return sz > 0 ? (size_t)sz : PIPE_MAX_DEFAULT;
}

static void try_reap(herd__node *n, struct rank *r)
{
	int status;
	pid_t got;

	if (r->pid <= 0)
		return;
	do
		got = waitpid(r->pid, &status, WNOHANG | WUNTRACED | WCONTINUED);
	while (got < 0 && errno == EINTR);
	if (got == 0)
		return;
	/* Stopped (SIGSTOP, a terminal's SIGTSTP) or continued: still there. */
	if (got > 0 && (WIFSTOPPED(status) || WIFCONTINUED(status))) {
		if (n->ev.paused != NULL)
			n->ev.paused(n->ev.userdata, r->rank,
				     WIFSTOPPED(status) ? WSTOPSIG(status) : 0);
		return;
	}
	/* Its last words are in the pipes already (what the pipe holds, no
	 * more); anything a descendant writes after this is not the rank's. */
	for (int k = 0; k < 2; k++) {
		drain(n, r, k, pipe_capacity(r->s[k].fd), true);
		close_fd(&r->s[k].fd);
		emit_partial(n, r, k);
	}
	close_fd(&r->pidfd);
	/* Its descendants in its group go with it. */
	kill(-r->pid, SIGKILL);
	if (got < 0)
		report_exit(n, r, HERD_JOB_RANK_EXITED, 255, 0, "lost track of the process");
	else if (WIFSIGNALED(status))
		report_exit(n, r, HERD_JOB_RANK_SIGNALED, 0, WTERMSIG(status), NULL);
	else
		report_exit(n, r, HERD_JOB_RANK_EXITED, WEXITSTATUS(status), 0, NULL);
}

void herd__node_process(herd__node *n, const struct pollfd *fds, size_t nfds)
{
	for (size_t j = 0; j < nfds; j++) {
		if (fds[j].revents == 0)
			continue;
		for (int i = 0; i < n->spec.nranks; i++) {
			struct rank *r = &n->ranks[i];

			for (int k = 0; k < 2; k++)
				if (r->s[k].fd == fds[j].fd)
					drain(n, r, k, READ_TURN_MAX, false);
		}
	}
	for (int i = 0; i < n->spec.nranks; i++)
		try_reap(n, &n->ranks[i]);
	if (n->kill_at > 0 && herd__net_now_ms() >= n->kill_at) {
		n->kill_at = 0;
		herd__node_signal(n, SIGKILL);
	}
}

void herd__node_signal(herd__node *n, int sig)
{
	for (int i = 0; i < n->spec.nranks; i++)
		if (n->ranks[i].pid > 0)
			kill(-n->ranks[i].pid, sig);
}

void herd__node_stop(herd__node *n, int grace_ms)
{
	int64_t at = herd__net_deadline(grace_ms > 0 ? grace_ms : 0);

	if (!n->started) {
		n->started = n->stopping = true;
		fail_unstarted(n, "the job stopped before its ranks started (another node "
			       "failed, or the launcher went away)");
		return;
	}
	/* Those a failed herd__node_go left. */
	fail_unstarted(n, "its node stopped before it started");
	if (!n->stopping) {
		n->stopping = true;
		herd__node_signal(n, grace_ms > 0 ? SIGTERM : SIGKILL);
		/* A rank stopped before it could take a SIGTERM handler is
		 * stopped, not paused: SIGCONT is harmless otherwise. */
		herd__node_signal(n, SIGCONT);
	}
	if (grace_ms <= 0)
		herd__node_signal(n, SIGKILL);
	if (n->kill_at == 0 || at < n->kill_at)
		n->kill_at = at;
}

bool herd__node_done(const herd__node *n)
{
	for (int i = 0; i < n->spec.nranks; i++)
		if (!n->ranks[i].ended)
			return false;
	return true;
}

void herd__node_free(herd__node *n)
{
	if (n == NULL)
		return;
	for (int i = 0; n->ranks != NULL && i < n->spec.nranks; i++) {
		struct rank *r = &n->ranks[i];

		if (r->pid > 0) {
			int status;

			kill(-r->pid, SIGKILL);
			kill(r->pid, SIGKILL);
			while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR)
				;
		}
		close_fd(&r->pidfd);
		for (int k = 0; k < 2; k++) {
			close_fd(&r->s[k].fd);
			close_fd(&r->s[k].log_fd);
			free(r->s[k].line);
		}
	}
	free(n->ranks);
	close_fd(&n->devnull);
	stop_guardian(n);
	herd_plan_free(n->plan);
	herd__node_spec_free(&n->spec);
	free(n);
}
