/*
 * sdk/comm/trace.c - a communicator's flight recorder (trace.h): opening
 * its ring in HERD_TRACE_DIR or in memory, and closing it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "comm/trace.h"

static int64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A file of len bytes in dir for the ring, mapped; NULL when it cannot be made. */
static void *map_file(herd__trace *t, const char *dir, const char *id, int rank, size_t len)
{
	char tmp[sizeof(t->path) + 16];
	void *p;
	int fd, n;

	n = snprintf(t->path, sizeof(t->path), "%s/%s.%d.trace", dir, id, rank);
	if (n < 0 || (size_t)n >= sizeof(t->path))
		return NULL;
	/* Made whole under another name, then renamed: a reader never sees
	 * a file without its header. */
	snprintf(tmp, sizeof(tmp), "%s.new", t->path);
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0 && errno == ENOENT) {
		/* A directory named but not made yet is made, as the launcher
		 * makes the job's. */
		if (herd__mkdirs(dir, 0700) != HERD_OK) {
			herd_clear_error();
			errno = ENOENT;
			return NULL;
		}
		fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	}
	if (fd < 0)
		return NULL;
	if (ftruncate(fd, (off_t)len) != 0) {
		close(fd);
		unlink(tmp);
		return NULL;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		unlink(tmp);
		return NULL;
	}
	t->map_len = len;
	/* The header before the name: the caller fills it, then renames. */
	return p;
}

void herd__trace_open(herd__trace *t, const char *id, int rank, int size, const char *host,
		      uint32_t cap)
{
	const char *dir = herd__param_str(HERD__P_TRACE_DIR), *job;
	size_t len;
	herd__trace_head *h = NULL;
	bool in_file = false;

	memset(t, 0, sizeof(*t));
	if (cap == 0)
		return;
	len = HERD__TRACE_HEAD_SIZE + (size_t)cap * sizeof(herd__trace_entry);
	if (dir != NULL) {
		h = map_file(t, dir, id, rank, len);
		if (h == NULL)
			herd__log_warn("the flight recorder of rank %d: cannot make %s (%s); it "
				       "is kept in memory only", rank,
				       t->path[0] != '\0' ? t->path : dir, strerror(errno));
		in_file = h != NULL;
	}
	if (h == NULL) {
		t->path[0] = '\0';
		h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (h == MAP_FAILED)
			return;
		t->map_len = len;
	}
	h->magic = HERD__TRACE_MAGIC;
	h->version = HERD__TRACE_VERSION;
	h->head_size = HERD__TRACE_HEAD_SIZE;
	h->entry_size = sizeof(herd__trace_entry);
	h->cap = cap;
	h->rank = rank;
	h->size = size;
	h->pid = (int32_t)getpid();
	h->mono_to_real_ns = clock_ns(CLOCK_REALTIME) - clock_ns(CLOCK_MONOTONIC);
	herd__strlcpy(h->id, id, sizeof(h->id));
	herd__strlcpy(h->host, host, sizeof(h->host));
	h->host[strcspn(h->host, ".")] = '\0';
	job = herd__param_str(HERD__P_JOB_ID);
	herd__strlcpy(h->job, job != NULL ? job : "", sizeof(h->job));
	atomic_init(&h->next, 0);
	atomic_store_explicit(&h->state, HERD__TRACE_OPEN, memory_order_release);
	if (in_file) {
		char tmp[sizeof(t->path) + 16];

		snprintf(tmp, sizeof(tmp), "%s.new", t->path);
		if (rename(tmp, t->path) != 0) {
			unlink(tmp);
			t->path[0] = '\0';
		}
	}
	t->head = h;
	t->ring = (herd__trace_entry *)((char *)h + HERD__TRACE_HEAD_SIZE);
	t->cap = cap;
}

void herd__trace_broken(herd__trace *t, herd_status st, const char *msg)
{
	if (t->head == NULL || atomic_load(&t->head->state) == HERD__TRACE_BROKEN)
		return;
	t->head->fail_status = (int32_t)st;
	herd__strlcpy(t->head->fail_msg, msg, sizeof(t->head->fail_msg));
	atomic_store_explicit(&t->head->state, HERD__TRACE_BROKEN, memory_order_release);
}

void herd__trace_name(herd__trace *t, const char *name, int parent_rank)
{
	if (t->head == NULL)
		return;
	t->head->parent_rank = parent_rank;
	herd__strlcpy(t->head->name, name, sizeof(t->head->name));
}

void herd__trace_close(herd__trace *t)
{
	if (t->head == NULL)
		return;
	if (atomic_load(&t->head->state) == HERD__TRACE_OPEN)
		atomic_store_explicit(&t->head->state, HERD__TRACE_CLOSED, memory_order_release);
	munmap(t->head, t->map_len);
	t->head = NULL;
	t->ring = NULL;
}

void herd__trace_base(const char *given, char *out, size_t cap)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");

	if (given != NULL && given[0] != '\0')
		snprintf(out, cap, "%s", given);
	else if (xdg != NULL && xdg[0] == '/')
		snprintf(out, cap, "%s/herd/trace", xdg);
	else
		snprintf(out, cap, "/tmp/herd-trace-%u", (unsigned)getuid());
}

void herd__trace_dir_remove(const char *dir)
{
	DIR *d = dir != NULL && dir[0] != '\0' ? opendir(dir) : NULL;
	struct dirent *de;

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		/* ID.RANK.trace, and ID.RANK.trace.new of a rank that
		 * died while making it. */
		if (strstr(de->d_name, ".trace") != NULL || strcmp(de->d_name, "launcher") == 0)
			unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
	rmdir(dir);
}
