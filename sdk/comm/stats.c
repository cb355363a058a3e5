/*
 * sdk/comm/stats.c - the file of a communicator's collective counters
 * (stats.h): where it goes, making, mapping and closing it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "comm/stats.h"

#define SHARED_DIR "/run/herd/stats"

static bool is_dir(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

herd_status herd__stats_dir(char *buf, size_t cap, int for_exporter)
{
	const char *env = herd__param_str(HERD__P_STATS_DIR);
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	char mine[4096] = "";
	int n;

	if (xdg != NULL && xdg[0] != '\0')
		snprintf(mine, sizeof(mine), "%s/herd/stats", xdg);
	if (env != NULL)
		n = snprintf(buf, cap, "%s", env);
	else if (is_dir(SHARED_DIR) || (for_exporter && (is_dir("/run/herd") ?
							access("/run/herd", W_OK | X_OK) == 0 :
							access("/run", W_OK | X_OK) == 0)))
		n = snprintf(buf, cap, "%s", SHARED_DIR);
	else if (mine[0] != '\0' && (for_exporter || is_dir(mine)))
		n = snprintf(buf, cap, "%s", mine);
	else
		return herd__error(HERD_EUNAVAIL, "no directory for collective counters: %s does "
				   "not exist%s, and %s%s; set HERD_STATS_DIR", SHARED_DIR,
				   for_exporter ? " and cannot be made" : "",
				   mine[0] != '\0' ? mine : "XDG_RUNTIME_DIR is not set",
				   mine[0] != '\0' ? " does not exist either" : "");
	if (n < 0 || (size_t)n >= cap)
		return herd__error(HERD_EINVAL, "the directory for collective counters: name too "
				   "long (%d bytes)", n);
	return HERD_OK;
}

uint64_t herd__stats_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The job and rank this process runs as, from the launchers' variables. */
static void identity(herd__stats_file *f)
{
	const char *job = herd__param_str(HERD__P_JOB_ID);
	const char *rank = herd__param_str(HERD__P_RANK);
	char *end;
	long r;

	if (job == NULL)
		job = getenv("SLURM_JOB_ID");
	if (rank == NULL)
		rank = getenv("RANK");
	if (rank == NULL)
		rank = getenv("SLURM_PROCID");
	herd__strlcpy(f->job, job != NULL ? job : "", sizeof(f->job));
	f->rank = -1;
	if (rank != NULL) {
		errno = 0;
		r = strtol(rank, &end, 10);
		if (errno == 0 && end != rank && *end == '\0' && r >= 0 && r <= INT32_MAX)
			f->rank = (int32_t)r;
	}
}

herd__stats_file *herd__stats_open(int *fdp)
{
	char dir[4096], tmp[4200], name[4200];
	herd__stats_file *f;
	size_t len;
	int fd;

	*fdp = -1;
	if (herd__stats_dir(dir, sizeof(dir), 0) != HERD_OK || !is_dir(dir))
		return NULL;
	/* mkstemp's template: it puts six random characters in place of the X's. */
	snprintf(tmp, sizeof(tmp), "%s/.%ld-XXXXXX", dir, (long)getpid());
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fchmod(fd, 0644) != 0 || ftruncate(fd, sizeof(herd__stats_file)) != 0 ||
	    flock(fd, LOCK_SH | LOCK_NB) != 0)
		goto fail;
	f = mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (f == MAP_FAILED)
		goto fail;
	f->version = HERD__STATS_VERSION;
	f->size = sizeof(*f);
	f->pid = getpid();
	identity(f);
	/* The magic last: a reader takes a file without it for one not ready. */
	atomic_thread_fence(memory_order_release);
	f->magic = HERD__STATS_MAGIC;
	/* ".PID-RANDOM" becomes "PID-RANDOM.stats", the same unique part. */
	len = strlen(dir) + 2;
	snprintf(name, sizeof(name), "%s/%s.stats", dir, tmp + len);
	if (rename(tmp, name) != 0) {
		munmap(f, sizeof(*f));
		goto fail;
	}
	*fdp = fd;
	return f;
fail:
	unlink(tmp);
	close(fd);
	return NULL;
}

void herd__stats_close(herd__stats_file *f, int fd)
{
	if (f != NULL)
		munmap(f, sizeof(*f));
	if (fd >= 0)
		close(fd);
}
