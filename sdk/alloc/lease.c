/*
 * sdk/alloc/lease.c - GPU leases: one lock file per GPU UUID in the lease
 * directory, held with flock(2); the record of who holds it; and the
 * status of a node's GPUs as the lease files show it.  The scheme and the
 * record format are described at the top of include/herd/alloc.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "alloc_internal.h"

#define LEASE_SHARED_DIR "/run/herd"
#define LEASE_SUFFIX ".lock"
#define LEASE_RECORD_MAGIC "herd-lease v="
#define LEASE_RECORD_VERSION 1
#define LEASE_RECORD_MAX 4096
/* A lock attempt is retried this many times, ~1 ms apart, to outlast a
 * reader's probe; a replaced lease file is reopened this many times. */
#define LOCK_TRIES 5
#define REOPEN_TRIES 4
/* A held lease with no believable record is probed again this often. */
#define PROBE_TRIES 3

struct herd_lease {
	size_t n;
	int *fds;
	bool shared;
};

/* ------------------------------------------------------------ helpers */

bool herd__lease_uuid_ok(const char *uuid)
{
	size_t n = 0;

	if (uuid == NULL || uuid[0] == '\0' || uuid[0] == '.')
		return false;
	for (; uuid[n] != '\0'; n++) {
		char c = uuid[n];

		if (n >= HERD_NAME_LEN - 1)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_' || c == '.' || c == ':'))
			return false;
	}
	return true;
}

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* flock, retried on EINTR; 0 or the errno. */
static int lock(int fd, int op)
{
	while (flock(fd, op) != 0) {
		if (errno != EINTR)
			return errno;
	}
	return 0;
}

static bool is_set(const char *s)
{
	return s != NULL && s[0] != '\0';
}

herd_status herd_lease_dir(const herd_lease_opts *opts, char *buf, size_t cap)
{
	const char *env = herd__param_str(HERD__P_LEASE_DIR);
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	struct stat sb;
	int n;

	if (buf == NULL || cap == 0)
		return herd__error(HERD_EINVAL, "herd_lease_dir: buf is NULL or empty");
	if (opts != NULL)
		HERD__CHECK_VERSION("lease options", opts, herd_lease_opts, LEASE_OPTS);
	if (opts != NULL && is_set(opts->dir))
		n = snprintf(buf, cap, "%s", opts->dir);
	else if (is_set(env))
		n = snprintf(buf, cap, "%s", env);
	else if ((stat(LEASE_SHARED_DIR, &sb) == 0 && S_ISDIR(sb.st_mode)) ||
		 access("/run", W_OK | X_OK) == 0)
		n = snprintf(buf, cap, "%s", LEASE_SHARED_DIR);
	else if (is_set(xdg))
		n = snprintf(buf, cap, "%s/herd", xdg);
	else
		return herd__error(HERD_EUNAVAIL,
				   "no lease directory: %s does not exist and cannot "
				   "be created, and XDG_RUNTIME_DIR is not set; set HERD_LEASE_DIR "
				   "(or have /run/herd made with mode 1777)",
				   LEASE_SHARED_DIR);
	if (n < 0 || (size_t)n >= cap)
		return herd__error(HERD_EINVAL, "lease directory name too long (%d bytes)", n);
	return HERD_OK;
}

/* The directory, opened; created (not its parents) when create is set. */
static herd_status open_dir(const char *dir, bool create, int *out)
{
	int fd;

	*out = -1;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && create) {
		bool shared = strcmp(dir, LEASE_SHARED_DIR) == 0;

		if (mkdir(dir, shared ? 01777 : 0700) != 0 && errno != EEXIST)
			return herd__error_errno(HERD_ESYS, errno,
						 "cannot create lease directory %s", dir);
		/* The umask narrows mkdir's mode; the shared one must be 1777. */
		if (shared && chmod(dir, 01777) != 0)
			herd__log_warn("cannot make %s mode 1777: %s", dir, strerror(errno));
		fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	}
	if (fd < 0) {
		if (errno == ENOENT && !create)
			return HERD_ENOTFOUND; /* nothing leased yet; not an error */
		return herd__error_errno(HERD_ESYS, errno, "cannot use lease directory %s%s", dir,
					 errno == ENOTDIR ? " (not a directory)" : "");
	}
	*out = fd;
	return HERD_OK;
}

static void lease_name(const char *uuid, char name[HERD_NAME_LEN + 8])
{
	snprintf(name, HERD_NAME_LEN + 8, "%s%s", uuid, LEASE_SUFFIX);
}

/* --------------------------------------------------------------- record */

static void copy_clean(char *dst, size_t cap, const char *src)
{
	size_t n = 0;

	for (; src != NULL && src[n] != '\0' && n + 1 < cap; n++)
		dst[n] = (src[n] < 0x20 || src[n] == 0x7f) ? '?' : src[n];
	dst[n] = '\0';
}

static void user_name(char *buf, size_t cap)
{
	struct passwd pw, *res = NULL;
	char tmp[1024];

	if (getpwuid_r(geteuid(), &pw, tmp, sizeof(tmp), &res) == 0 && res != NULL)
		copy_clean(buf, cap, res->pw_name);
	else
		snprintf(buf, cap, "%u", (unsigned int)geteuid());
}

static const char *job_id(const herd_lease_opts *opts)
{
	if (opts != NULL && is_set(opts->job_id))
		return opts->job_id;
	if (herd__param_str(HERD__P_JOB_ID) != NULL)
		return herd__param_str(HERD__P_JOB_ID);
	if (is_set(getenv("SLURM_JOB_ID")))
		return getenv("SLURM_JOB_ID");
	return "-";
}

/* Writes the record of this holder over the file's content. */
static void write_record(int fd, const char *uuid, const char *job)
{
	char host[HERD_NAME_LEN] = "", user[HERD_NAME_LEN], clean_job[HERD_NAME_LEN];
	char rec[LEASE_RECORD_MAX];
	int n;

	if (gethostname(host, sizeof(host)) != 0)
		host[0] = '\0';
	host[sizeof(host) - 1] = '\0';
	user_name(user, sizeof(user));
	copy_clean(clean_job, sizeof(clean_job), job);
	n = snprintf(rec, sizeof(rec),
		     LEASE_RECORD_MAGIC "%d\n"
		     "uuid=%s\njob=%s\npid=%ld\nuser=%s\nuid=%u\nhost=%s\nsince=%lld\nmode=exclusive\n",
		     LEASE_RECORD_VERSION, uuid, clean_job, (long)getpid(), user,
		     (unsigned int)geteuid(), host, (long long)time(NULL));
	/* The lock is the lease; a record that cannot be written only leaves
	 * the holder unnamed. */
	if (ftruncate(fd, 0) != 0 || pwrite(fd, rec, (size_t)n, 0) != n)
		herd__log_debug("lease record of %s not written: %s", uuid, strerror(errno));
}

/*
 * Reads the record into s; false (with a note) when there is none or it
 * is not herd's.
 */
static bool read_record(int fd, herd_alloc_gpu_status *s)
{
	char buf[LEASE_RECORD_MAX + 1];
	ssize_t n = pread(fd, buf, LEASE_RECORD_MAX, 0);
	char *line, *save = NULL;
	long version;

	s->job[0] = s->user[0] = s->host[0] = '\0';
	s->pid = 0;
	s->since = 0;
	if (n <= 0) {
		snprintf(s->note, sizeof(s->note), "no lease record");
		return false;
	}
	buf[n] = '\0';
	if (strncmp(buf, LEASE_RECORD_MAGIC, strlen(LEASE_RECORD_MAGIC)) != 0 ||
	    memchr(buf, '\0', (size_t)n) != NULL) {
		snprintf(s->note, sizeof(s->note), "lease file holds something herd did not write");
		return false;
	}
	version = strtol(buf + strlen(LEASE_RECORD_MAGIC), NULL, 10);
	if (version != LEASE_RECORD_VERSION) {
		snprintf(s->note, sizeof(s->note), "lease record version %ld, expected %d", version,
			 LEASE_RECORD_VERSION);
		return false;
	}
	for (line = strtok_r(buf, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '=');

		if (eq == NULL)
			continue;
		*eq++ = '\0';
		if (strcmp(line, "job") == 0)
			copy_clean(s->job, sizeof(s->job), eq);
		else if (strcmp(line, "user") == 0)
			copy_clean(s->user, sizeof(s->user), eq);
		else if (strcmp(line, "host") == 0)
			copy_clean(s->host, sizeof(s->host), eq);
		else if (strcmp(line, "pid") == 0)
			s->pid = strtoll(eq, NULL, 10);
		else if (strcmp(line, "since") == 0)
			s->since = strtoll(eq, NULL, 10);
	}
	if (s->pid <= 0) {
		snprintf(s->note, sizeof(s->note), "lease record names no pid");
		return false;
	}
	return true;
}

static bool pid_alive(int64_t pid);

/*
 * The pids that /proc/locks shows holding an exclusive flock on the file
 * open as fd, at most max of them; -1 when /proc/locks cannot be read (no
 * procfs).  A process that forked keeps being shown by the locker's pid.
 */
static int flock_holders(int fd, int64_t *pids, int max)
{
	struct stat sb;
	char line[256];
	int n = 0;
	FILE *f;

	if (fstat(fd, &sb) != 0 || (f = fopen("/proc/locks", "re")) == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		char type[16], access[16];
		unsigned int maj, min;
		unsigned long long ino;
		long long pid;

		/* "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF"; waiters have "->". */
		if (strstr(line, "->") != NULL ||
		    sscanf(line, "%*d: %15s %*s %15s %lld %x:%x:%llu", type, access, &pid, &maj,
			   &min, &ino) != 6)
			continue;
		if (strcmp(type, "FLOCK") == 0 && strcmp(access, "WRITE") == 0 &&
		    ino == (unsigned long long)sb.st_ino && maj == major(sb.st_dev) &&
		    min == minor(sb.st_dev) && n < max)
			pids[n++] = pid;
	}
	fclose(f);
	return n;
}

/*
 * Whether the record read into s is the holder's: its pid holds the lock,
 * as /proc/locks says.  Anyone who can write the file can write a record,
 * so where the kernel can say who holds the lock, it decides; else the
 * record's pid must at least be alive.  When it is not the holder's, s is
 * rewritten to name the pid that holds the lock, with a note.
 */
static bool record_is_holders(int fd, herd_alloc_gpu_status *s)
{
	int64_t pids[8];
	int n = flock_holders(fd, pids, 8);

	if (n < 0)
		return pid_alive(s->pid);
	for (int i = 0; i < n; i++)
		if (pids[i] == s->pid)
			return true;
	if (n > 0) {
		snprintf(s->note, sizeof(s->note), "the lease record names pid %lld, which does not "
			 "hold the lock; pid %lld does", (long long)s->pid, (long long)pids[0]);
		s->job[0] = s->user[0] = s->host[0] = '\0';
		s->pid = pids[0];
		s->since = 0;
	}
	return false;
}

/* Whether pid may be alive here (another user's process, or unknowable). */
static bool pid_alive(int64_t pid)
{
	if (pid <= 0 || (int64_t)(pid_t)pid != pid)
		return false;
	return kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

/* ---------------------------------------------------------------- probe */

/*
 * The state of the lock on fd, by non-blocking locks held for a moment:
 * no shared lock possible means an exclusive holder; a shared one but no
 * exclusive one means shared holders.  A concurrent prober looks like a
 * holder for that moment; callers probe again when the answer is odd.
 */
static herd_lease_state probe_once(int fd, int *err)
{
	int e = lock(fd, LOCK_SH | LOCK_NB);

	*err = 0;
	if (e == EWOULDBLOCK)
		return HERD_LEASE_EXCLUSIVE;
	if (e != 0) {
		*err = e;
		return HERD_LEASE_UNKNOWN;
	}
	e = lock(fd, LOCK_EX | LOCK_NB);
	lock(fd, LOCK_UN);
	if (e == 0)
		return HERD_LEASE_FREE;
	if (e == EWOULDBLOCK)
		return HERD_LEASE_SHARED;
	*err = e;
	return HERD_LEASE_UNKNOWN;
}

static void probe(int fd, herd_alloc_gpu_status *s)
{
	for (int i = 0; i < PROBE_TRIES; i++) {
		int err;

		if (i > 0)
			sleep_us(1000);
		s->note[0] = '\0';
		s->state = probe_once(fd, &err);
		if (s->state == HERD_LEASE_UNKNOWN) {
			snprintf(s->note, sizeof(s->note), "cannot test the lock: %s",
				 strerror(err));
			return;
		}
		if (s->state == HERD_LEASE_FREE)
			return;
		/* A live holder's record settles it; anything else may be a
		 * prober, or a holder between locking and writing. */
		if (s->state == HERD_LEASE_EXCLUSIVE && read_record(fd, s) && record_is_holders(fd, s))
			return;
	}
	if (s->state == HERD_LEASE_SHARED) {
		s->job[0] = s->user[0] = s->host[0] = '\0';
		s->pid = s->since = 0;
		s->note[0] = '\0';
	}
}

static void status_init(herd_alloc_gpu_status *s, const char *uuid)
{
	memset(s, 0, sizeof(*s));
	herd__strlcpy(s->uuid, uuid, sizeof(s->uuid));
	s->state = HERD_LEASE_FREE;
	s->processes = -1;
	s->free_memory_bytes = -1;
}

/* "<dir>/<name>: <what>", cut to the note's size. */
static void set_note(herd_alloc_gpu_status *s, const char *dir, const char *name, const char *what)
{
	char buf[4096 + HERD_NAME_LEN + 256];

	snprintf(buf, sizeof(buf), "%s/%s %s", dir, name, what);
	herd__strlcpy(s->note, buf, sizeof(s->note));
}

/* The state of one GPU's lease file in the directory dirfd. */
static void query_one(int dirfd, const char *dir, herd_alloc_gpu_status *s)
{
	char name[HERD_NAME_LEN + 8];
	struct stat sb;
	int fd;

	if (!herd__lease_uuid_ok(s->uuid)) {
		s->state = HERD_LEASE_UNKNOWN;
		snprintf(s->note, sizeof(s->note), "UUID cannot name a lease file");
		return;
	}
	lease_name(s->uuid, name);
	fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT)
			return; /* never leased */
		s->state = HERD_LEASE_UNKNOWN;
		if (errno == ELOOP) {
			set_note(s, dir, name, "is a symbolic link, not a lease file");
		} else {
			char why[128];

			snprintf(why, sizeof(why), "cannot be opened: %s", strerror(errno));
			set_note(s, dir, name, why);
		}
		return;
	}
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		s->state = HERD_LEASE_UNKNOWN;
		set_note(s, dir, name, "is not a regular file");
	} else {
		probe(fd, s);
	}
	close(fd);
}

herd_status herd__lease_query(const herd_lease_opts *opts, herd_alloc_gpu_status *st, size_t n)
{
	char dir[4096];
	herd_status rc;
	int dirfd = -1;

	for (size_t g = 0; g < n; g++) {
		char uuid[HERD_NAME_LEN];

		memcpy(uuid, st[g].uuid, sizeof(uuid));
		uuid[sizeof(uuid) - 1] = '\0';
		status_init(&st[g], uuid);
	}
	HERD_CHECK(herd_lease_dir(opts, dir, sizeof(dir)));
	rc = open_dir(dir, false, &dirfd);
	if (rc == HERD_ENOTFOUND)
		return HERD_OK;
	if (rc != HERD_OK)
		return rc;
	for (size_t g = 0; g < n; g++)
		query_one(dirfd, dir, &st[g]);
	close(dirfd);
	return HERD_OK;
}

herd_status herd_alloc_gpu_status_query(const herd_node *node, const herd_lease_opts *opts,
					herd_alloc_gpu_status **out, size_t *n)
{
	herd_alloc_gpu_status *st = NULL;
	herd_status rc;

	if (out == NULL || n == NULL || node == NULL)
		return herd__error(HERD_EINVAL,
				   "herd_alloc_gpu_status_query: out, n and node must not be "
				   "NULL");
	*out = NULL;
	*n = 0;
	if (node->ngpus > 0)
		HERD_CHECK(herd__calloc(&st, node->ngpus, sizeof(*st), "GPU states"));
	for (size_t g = 0; g < node->ngpus; g++)
		herd__strlcpy(st[g].uuid, node->gpus[g].uuid, sizeof(st[g].uuid));
	rc = herd__lease_query(opts, st, node->ngpus);
	if (rc != HERD_OK) {
		free(st);
		return rc;
	}
	herd__alloc_usage(st, node->ngpus);
	*out = st;
	*n = node->ngpus;
	return HERD_OK;
}

/* -------------------------------------------------------------- acquire */

/* Why a lease is busy, for the message: "job 42 (pid 7, user ann)". */
static void describe_holder(int fd, char *buf, size_t cap)
{
	herd_alloc_gpu_status s;

	memset(&s, 0, sizeof(s));
	if (!read_record(fd, &s)) {
		snprintf(buf, cap, "a process that left no record");
		return;
	}
	/* A pid this process cannot see: a holder in another PID namespace,
	 * or a child that inherited the lease from the pid recorded. */
	snprintf(buf, cap, "%s%s%s(pid %lld%s, user %s, host %s)",
		 strcmp(s.job, "-") != 0 ? "job " : "a process ",
		 strcmp(s.job, "-") != 0 ? s.job : "", strcmp(s.job, "-") != 0 ? " " : "",
		 (long long)s.pid, pid_alive(s.pid) ? "" : ", not running here", s.user, s.host);
}

/* Whether other users write in the lease directory (/run/herd, 1777). */
static bool dir_shared(int dirfd)
{
	struct stat sb;

	return fstat(dirfd, &sb) == 0 && (sb.st_mode & (S_IWGRP | S_IWOTH)) != 0;
}

/*
 * Locks one lease file: opens (creating it), locks without blocking, and
 * checks that the name still leads to the locked file.  *out is the fd.
 */
static herd_status lock_one(int dirfd, const char *dir, const char *uuid, bool shared,
			    const char *job, int *out)
{
	char name[HERD_NAME_LEN + 8];
	int op = (shared ? LOCK_SH : LOCK_EX) | LOCK_NB;
	mode_t mode = dir_shared(dirfd) ? 0644 : 0600;

	*out = -1;
	lease_name(uuid, name);
	for (int attempt = 0; attempt < REOPEN_TRIES; attempt++) {
		struct stat fsb, psb;
		bool writable = true;
		int fd, e = EWOULDBLOCK;

		fd = openat(dirfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK,
			    mode);
		if (fd < 0 && errno == EACCES) {
			/* Another user's file we may not write: locking needs no
			 * write access, only the record is lost. */
			writable = false;
			fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		}
		if (fd < 0) {
			if (errno == ELOOP)
				return herd__error(HERD_EINVAL,
						   "lease file %s/%s is a symbolic link; "
						   "something other than herd made it: remove it",
						   dir, name);
			return herd__error_errno(errno == EISDIR ? HERD_EINVAL : HERD_ESYS, errno,
						 "cannot open lease file %s/%s", dir, name);
		}
		if (fstat(fd, &fsb) != 0 || !S_ISREG(fsb.st_mode)) {
			close(fd);
			return herd__error(HERD_EINVAL,
					   "lease file %s/%s is not a regular file; "
					   "something other than herd made it: remove it",
					   dir, name);
		}
		/* The record is written in place: never into a file that has
		 * another name (a hard link), whose bytes it would replace. */
		if (fsb.st_nlink != 1) {
			close(fd);
			return herd__error(HERD_EINVAL,
					   "lease file %s/%s has %lu names (a hard link); "
					   "something other than herd made it: remove it",
					   dir, name, (unsigned long)fsb.st_nlink);
		}
		/* Our own file, written by us alone whatever the umask or an
		 * older herd's 0666 made it: in a shared directory readable by
		 * every user, so that every user can lock it (flock needs no
		 * write access); in a private one owner-only. */
		if (writable && fsb.st_uid == geteuid() && (fsb.st_mode & 0777) != mode &&
		    fchmod(fd, mode) != 0)
			herd__log_debug("cannot chmod %s/%s: %s", dir, name, strerror(errno));
		for (int i = 0; i < LOCK_TRIES && e == EWOULDBLOCK; i++) {
			if (i > 0)
				sleep_us(300L * i);
			e = lock(fd, op);
		}
		if (e == EWOULDBLOCK) {
			char who[256];

			describe_holder(fd, who, sizeof(who));
			close(fd);
			return herd__error(HERD_EBUSY, "GPU %s is held%s by %s (lease file %s/%s)",
					   uuid, shared ? " exclusively" : "", who, dir, name);
		}
		if (e != 0) {
			close(fd);
			return herd__error_errno(HERD_ESYS, e, "cannot lock lease file %s/%s", dir,
						 name);
		}
		/* Locked; but if the name now leads elsewhere, the lock guards
		 * nothing anyone else will look at: start again. */
		if (fstatat(dirfd, name, &psb, AT_SYMLINK_NOFOLLOW) == 0 &&
		    psb.st_dev == fsb.st_dev && psb.st_ino == fsb.st_ino) {
			if (!shared && writable)
				write_record(fd, uuid, job);
			*out = fd;
			return HERD_OK;
		}
		close(fd);
	}
	return herd__error(HERD_EBUSY,
			   "lease file %s/%s keeps being replaced while locked; "
			   "something other than herd is deleting lease files",
			   dir, name);
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void release_fds(int *fds, size_t n, bool shared)
{
	for (size_t i = 0; i < n; i++) {
		if (fds[i] < 0)
			continue;
		/* Empty the record while the lock is still ours; a reader that
		 * sees the lock after this takes the holder for unknown. */
		if (!shared && ftruncate(fds[i], 0) != 0)
			herd__log_debug("cannot empty a lease record: %s", strerror(errno));
		close(fds[i]);
		fds[i] = -1;
	}
}

herd_status herd_lease_acquire(herd_lease **out, const char *const *uuids, size_t n, bool shared,
			       const herd_lease_opts *opts)
{
	char dir[4096];
	const char **sorted = NULL;
	herd_lease *lease = NULL;
	int dirfd = -1;
	herd_status st;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_lease_acquire: out is NULL");
	*out = NULL;
	if (n > 0 && uuids == NULL)
		return herd__error(HERD_EINVAL, "herd_lease_acquire: n is %zu but uuids is NULL",
				   n);
	if (n > HERD_ALLOC_MAX_GPUS)
		return herd__error(HERD_EINVAL, "herd_lease_acquire: %zu GPUs; at most %d", n,
				   HERD_ALLOC_MAX_GPUS);
	for (size_t i = 0; i < n; i++)
		if (!herd__lease_uuid_ok(uuids[i]))
			return herd__error(HERD_EINVAL,
					   "GPU UUID '%s' cannot name a lease file "
					   "(1 to %d letters, digits, '-', '_', '.', ':')",
					   uuids[i] ? uuids[i] : "(null)", HERD_NAME_LEN - 1);
	HERD_CHECK(herd_lease_dir(opts, dir, sizeof(dir)));
	HERD_CHECK_GOTO(herd__calloc(&sorted, n, sizeof(*sorted), "a lease"), st, out);
	for (size_t i = 0; i < n; i++)
		sorted[i] = uuids[i];
	if (n > 0)
		qsort(sorted, n, sizeof(*sorted), str_cmp);
	for (size_t i = 1; i < n; i++)
		if (strcmp(sorted[i - 1], sorted[i]) == 0) {
			st = herd__error(HERD_EINVAL, "GPU %s is named twice in one lease",
					 sorted[i]);
			goto out;
		}
	HERD_CHECK_GOTO(herd__calloc(&lease, 1, sizeof(*lease), "a lease"), st, out);
	lease->shared = shared != 0;
	if (n > 0)
		HERD_CHECK_GOTO(herd__calloc(&lease->fds, n, sizeof(int), "a lease"), st, out);
	for (size_t i = 0; i < n; i++)
		lease->fds[i] = -1;
	HERD_CHECK_GOTO(open_dir(dir, true, &dirfd), st, out);
	/* Ascending UUID order, never waiting while holding: no deadlock. */
	for (size_t i = 0; i < n; i++) {
		HERD_CHECK_GOTO(lock_one(dirfd, dir, sorted[i], lease->shared, job_id(opts),
					 &lease->fds[i]),
				st, out);
		lease->n = i + 1;
	}
	lease->n = n;
	*out = lease;
	lease = NULL;
	st = HERD_OK;
out:
	if (lease != NULL) {
		release_fds(lease->fds, n, lease->shared);
		free(lease->fds);
		free(lease);
	}
	if (dirfd >= 0)
		close(dirfd);
	free(sorted);
	return st;
}

size_t herd_lease_gpu_count(const herd_lease *lease)
{
	return lease != NULL ? lease->n : 0;
}

size_t herd__lease_fds(const herd_lease *lease, const int **fds)
{
	*fds = lease != NULL ? lease->fds : NULL;
	return lease != NULL ? lease->n : 0;
}

void herd_lease_free(herd_lease *lease)
{
	if (lease == NULL)
		return;
	release_fds(lease->fds, lease->n, lease->shared);
	free(lease->fds);
	free(lease);
}
