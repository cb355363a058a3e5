/*
 * sdk/comm/trace_read.c - flight recorders read back (herd/trace.h): the
 * rings of a directory grouped by communicator, each rank's place in the
 * wavefront, and the report as text or JSON.
 *
 * A ring is read from its file with plain reads (never mapped: a file cut
 * short by a full disk must not fault the reader), the header checked
 * against what this libherd writes, and each entry kept only when its seq
 * reads the same before and after the copy (trace.h).  The analysis works
 * on the copies only; the process states come from /proc for the ranks
 * whose host is this one.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "buf.h"
#include "net.h"
#include "comm/core.h"
#include "comm/trace.h"
#include "herd/dtype.h"
#include "herd/trace.h"

#define MAX_FILES 65536

/* A rank as its ring says. */
typedef enum verdict {
	V_ENTERED,          /* in the next call or past it */
	V_NOT_CALLED,       /* its last call completed; it has not called the next */
	V_STUCK,            /* inside an earlier call */
	V_STOPPED,          /* its process is stopped */
	V_GONE,             /* its process ended without closing the communicator */
	V_NOT_READ,         /* no ring of it */
	V_NAMED,            /* in the next call, which the others failed on it */
	V_FAILED,           /* its last call, an earlier one, failed */
} verdict;

static const char *const verdict_names[] = { "entered", "not called", "stuck", "stopped",
					     "gone", "not read", "named", "failed" };

typedef struct rank_ring {
	herd__trace_head head;
	herd__trace_entry *e;       /* the entries kept, by seq */
	size_t n;
	char path[4096];
} rank_ring;

typedef struct rank_view {
	const rank_ring *r;         /* NULL: not read */
	const herd__trace_entry *last;       /* its newest entry */
	const herd__trace_entry *last_done;  /* its newest completed collective */
	uint64_t entered_cseq;      /* the highest collective number it entered */
	char proc;                  /* /proc state: 'R', 'S', 'T', 'D', ...; 0 unknown, 'X' gone */
	verdict v;
} rank_view;

typedef struct comm_view {
	const char *id;
	int size;
	rank_view *ranks;
	uint64_t next;              /* the next call's collective number; 0: none */
	const herd__trace_entry *next_e;     /* one rank's entry of it */
	int entered, done_next, culprits;
	bool in_communication;      /* every rank entered next and none completed it */
	int named, votes;           /* the rank the failed ranks failed on (-1 none), by how many */
	bool named_others;          /* ... on it or on other ranks of its host */
	bool live;                  /* a rank's process is still there: times are to now */
	double end_s;               /* else to this: the last time recorded, Unix seconds */
} comm_view;

/* ---- reading ------------------------------------------------------------- */

/* len bytes at offset off of fd into buf. */
static herd_status read_all(int fd, void *buf, size_t len, size_t off, const char *path)
{
	size_t got = 0;

	while (got < len) {
		ssize_t r = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return herd__error_errno(HERD_EIO, errno, "reading %s", path);
		if (r == 0)
			return herd__error(HERD_EFORMAT, "%s: cut short at byte %zu of %zu", path,
					   got, len);
		got += (size_t)r;
	}
	return HERD_OK;
}

static int by_seq(const void *a, const void *b)
{
	uint64_t x = ((const herd__trace_entry *)a)->seq, y = ((const herd__trace_entry *)b)->seq;

	return x < y ? -1 : x > y;
}

/* A header's text field as a string of printable ASCII: the file may hold
 * anything, and the report is text and JSON. */
static void printable(char *s, size_t cap)
{
	s[cap - 1] = '\0';
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			*s = '?';
}

/* Whether h, the header of path (size bytes), is one this herd reads. */
static herd_status head_check(const herd__trace_head *h, const char *path, uint64_t size)
{
	if (h->magic != HERD__TRACE_MAGIC)
		return herd__error(HERD_EFORMAT, "%s: not a flight recorder (no \"HTR1\" at its "
				   "start)", path);
	/* Version 1 is 2 without the algorithm (its byte was padding, 0). */
	if (h->version < 1 || h->version > HERD__TRACE_VERSION ||
	    h->head_size != HERD__TRACE_HEAD_SIZE || h->entry_size != sizeof(herd__trace_entry) ||
	    h->cap == 0 || h->cap > HERD__TRACE_MAX_RING || h->size <= 0 || h->rank < 0 ||
	    h->rank >= h->size)
		return herd__error(HERD_EFORMAT, "%s: a flight recorder of version %u, %u-byte "
				   "entries, %u of them, rank %d of %d: this herd reads versions 1 "
				   "to %d, %zu-byte entries", path, h->version, h->entry_size, h->cap,
				   h->rank, h->size, HERD__TRACE_VERSION, sizeof(herd__trace_entry));
	if (size < HERD__TRACE_HEAD_SIZE + (uint64_t)h->cap * sizeof(herd__trace_entry))
		return herd__error(HERD_EFORMAT, "%s: %llu bytes, fewer than its %u entries need",
				   path, (unsigned long long)size, h->cap);
	return HERD_OK;
}

/* One ring file, open on fd, into *r. */
static herd_status read_ring_fd(int fd, const char *path, rank_ring *r)
{
	herd__trace_entry *raw = NULL, *raw2 = NULL;
	herd_status st = HERD_OK;
	struct stat sb;
	size_t len;
	uint64_t next, first;

	memset(r, 0, sizeof(*r));
	herd__strlcpy(r->path, path, sizeof(r->path));
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode))
		return herd__error(HERD_EFORMAT, "%s: not a regular file", path);
	HERD_CHECK_GOTO(read_all(fd, &r->head, sizeof(r->head), 0, path), st, out);
	HERD_CHECK_GOTO(head_check(&r->head, path, (uint64_t)sb.st_size), st, out);
	len = (size_t)r->head.cap * sizeof(*raw);
	printable(r->head.id, sizeof(r->head.id));
	printable(r->head.host, sizeof(r->head.host));
	printable(r->head.job, sizeof(r->head.job));
	printable(r->head.fail_msg, sizeof(r->head.fail_msg));
	printable(r->head.name, sizeof(r->head.name));
	HERD_CHECK_GOTO(herd__calloc(&raw, r->head.cap, sizeof(*raw), "a flight recorder"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&r->e, r->head.cap, sizeof(*raw), "a flight recorder"), st,
			out);
	/* The entries, then their seqs again: a slot the rank rewrote
	 * meanwhile shows another seq the second time (a seqlock's check). */
	HERD_CHECK_GOTO(read_all(fd, raw, len, HERD__TRACE_HEAD_SIZE, path), st, out);
	HERD_CHECK_GOTO(herd__calloc(&raw2, r->head.cap, sizeof(*raw2), "a flight recorder"), st,
			out);
	HERD_CHECK_GOTO(read_all(fd, raw2, len, HERD__TRACE_HEAD_SIZE, path), st, out);
	next = r->head.next;
	first = next > r->head.cap ? next - r->head.cap : 0;
	for (uint64_t k = first; k < next; k++) {
		herd__trace_entry *e = &raw[k % r->head.cap];
		uint64_t again = raw2[k % r->head.cap].seq;

		if (e->seq == 0 || e->seq != again || e->state < HERD__TRACE_ENTERED ||
		    e->state > HERD__TRACE_FAILED)
			continue;
		/* Its end written, its state not yet, or the other way round
		 * in the copy: still in the call. */
		if (e->end_ns == 0)
			e->state = HERD__TRACE_ENTERED;
		r->e[r->n++] = *e;
	}
	qsort(r->e, r->n, sizeof(*r->e), by_seq);
out:
	free(raw);
	free(raw2);
	if (st != HERD_OK) {
		free(r->e);
		r->e = NULL;
	}
	return st;
}

/* One ring file into *r. */
static herd_status read_ring(const char *path, rank_ring *r)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	herd_status st;

	if (fd < 0) {
		memset(r, 0, sizeof(*r));
		return herd__error_errno(HERD_EIO, errno, "cannot open %s", path);
	}
	st = read_ring_fd(fd, path, r);
	close(fd);
	return st;
}

typedef struct rings {
	rank_ring *r;
	size_t n, cap;
} rings;

static void rings_free(rings *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->r[i].e);
	free(s->r);
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The rings of path (a file or a directory) into *s. */
static herd_status read_rings(const char *path, rings *s)
{
	struct stat sb;
	DIR *d;
	struct dirent *de;
	herd_status st = HERD_OK;

	memset(s, 0, sizeof(*s));
	if (stat(path, &sb) != 0)
		return herd__error_errno(errno == ENOENT ? HERD_ENOTFOUND : HERD_EIO, errno,
					 "%s", path);
	if (!S_ISDIR(sb.st_mode)) {
		HERD_CHECK(herd__calloc(&s->r, 1, sizeof(*s->r), "a flight recorder"));
		st = read_ring(path, &s->r[0]);
		if (st != HERD_OK) {
			free(s->r);
			s->r = NULL;
			return st;
		}
		s->n = 1;
		return HERD_OK;
	}
	d = opendir(path);
	if (d == NULL)
		return herd__error_errno(HERD_EIO, errno, "cannot read the directory %s", path);
	while ((de = readdir(d)) != NULL && st == HERD_OK) {
		char file[4096];

		if (!ends_with(de->d_name, ".trace"))
			continue;
		if (s->n == s->cap) {
			size_t cap = s->cap > 0 ? 2 * s->cap : 16;
			rank_ring *p;

			if (cap > MAX_FILES) {
				st = herd__error(HERD_EINVAL, "%s holds more than %d flight recorders",
						 path, MAX_FILES);
				break;
			}
			p = realloc(s->r, cap * sizeof(*p));
			if (p == NULL) {
				st = herd__error(HERD_ENOMEM, "out of memory reading %s", path);
				break;
			}
			s->r = p;
			s->cap = cap;
		}
		snprintf(file, sizeof(file), "%s/%s", path, de->d_name);
		st = read_ring(file, &s->r[s->n]);
		if (st == HERD_OK)
			s->n++;
	}
	closedir(d);
	if (st == HERD_OK && s->n == 0)
		st = herd__error(HERD_ENOTFOUND, "%s holds no flight recorder (*.trace)", path);
	if (st != HERD_OK)
		rings_free(s);
	return st;
}

/* ---- the wavefront --------------------------------------------------------- */

/* The state letter of pid here (/proc/PID/stat), 'X' when it is gone. */
static char proc_state(int pid)
{
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 'X';
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 'X';
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p != NULL && p[1] == ' ' && p[2] != '\0' ? (p[2] == 'Z' ? 'X' : p[2]) : 0;
}

static const char *proc_words(char c)
{
	switch (c) {
	case 'R': return "running";
	case 'S': return "sleeping";
	case 'D': return "in uninterruptible sleep (D: the kernel, a driver or a file system)";
	case 'T': return "stopped";
	case 't': return "stopped by a debugger";
	case 'X': return "gone";
	case 0: return NULL;
	default: return "in another state";
	}
}

/* Unix seconds of ns on rank r's host's monotonic clock. */
static double real_s(const rank_ring *r, uint64_t ns)
{
	return (double)((int64_t)ns + r->head.mono_to_real_ns) / 1e9;
}

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The most peers one failure message is taken to name. */
#define NAMED_MAX 8

/* Whether rank a's host and rank b's are one (both known). */
static bool same_host(const comm_view *c, int a, int b)
{
	return c->ranks[a].r != NULL && c->ranks[b].r != NULL &&
	       strcmp(c->ranks[a].r->head.host, c->ranks[b].r->head.host) == 0;
}

/*
 * The rank that did not answer: a rank's timeout says so of each peer
 * that sent nothing ("rank 4 (host h3) did not answer (stopped,
 * overloaded or unreachable)"), as opposed to one that answered from
 * elsewhere ("did not arrive"), and so does a control connection that
 * failed ("rank 2 (host h3, pid 812) died: its control connection failed
 * (Connection timed out)"); the broken rings keep those messages (their
 * own, or the one their peers told them).  Each ring votes once for
 * the host of the ranks it names so (other than itself): a link cut
 * leaves both sides silent to each other, and the side most ranks found
 * silent is the culprit; the ranks of one host count together.  The host
 * with the most votes, at least 2 (1 when a single ring broke) and no
 * tie, and of it the rank named most (the lowest of a tie).  -1 when
 * none; *votes the host's votes, *others whether other ranks of it were
 * named too.
 */
static int named_by_peers(const comm_view *c, int *votes_out, bool *others)
{
	int (*named)[NAMED_MAX] = calloc((size_t)c->size, sizeof(*named));
	int *nnamed = calloc((size_t)c->size, sizeof(int)), *votes = calloc((size_t)c->size, sizeof(int));
	int best = -1, best_host = 0, broken = 0;
	bool tie = false;

	*votes_out = 0;
	*others = false;
	if (named == NULL || nnamed == NULL || votes == NULL)
		goto out;
	for (int k = 0; k < c->size; k++) {
		const rank_ring *r = c->ranks[k].r;

		if (r == NULL || r->head.state != HERD__TRACE_BROKEN)
			continue;
		broken++;
		for (const char *p = strstr(r->head.fail_msg, "rank "); p != NULL && nnamed[k] < NAMED_MAX;
		     p = strstr(p + 1, "rank ")) {
			char *end;
			long n = strtol(p + 5, &end, 10);
			bool seen = false;

			const char *close;

			if (end == p + 5 || strncmp(end, " (host ", 7) != 0 || n < 0 ||
			    n >= c->size || n == k || (close = strchr(end + 7, ')')) == NULL ||
			    (!starts_with(close, ") did not answer") &&
			     !starts_with(close, ") died: its control connection failed")))
				continue;
			for (int i = 0; i < nnamed[k]; i++)
				seen |= named[k][i] == n;
			if (!seen) {
				named[k][nnamed[k]++] = (int)n;
				votes[n]++;
			}
		}
	}
	for (int m = 0; m < c->size; m++) {
		int host = 0;

		if (votes[m] == 0)
			continue;
		/* The rings that named some rank of m's host. */
		for (int k = 0; k < c->size; k++) {
			bool hit = false;

			for (int i = 0; i < nnamed[k] && !hit; i++)
				hit = named[k][i] == m || same_host(c, named[k][i], m);
			host += hit;
		}
		if (best < 0 || host > best_host) {
			best = m;
			best_host = host;
			tie = false;
		} else if (host == best_host && same_host(c, m, best)) {
			if (votes[m] > votes[best])
				best = m;
		} else if (host == best_host) {
			tie = true;
		}
	}
	if (best >= 0 && (tie || best_host < (broken == 1 ? 1 : 2)))
		best = -1;
	if (best >= 0) {
		*votes_out = best_host;
		for (int m = 0; m < c->size; m++)
			*others |= m != best && votes[m] > 0 && same_host(c, m, best);
	}
out:
	free(named);
	free(nnamed);
	free(votes);
	return best;
}

/* Builds the view of the communicator whose rings are r[0..n) (one id). */
static herd_status view_comm(comm_view *c, rank_ring **r, size_t n, const char *here)
{
	int causes = 0;

	memset(c, 0, sizeof(*c));
	c->id = r[0]->head.id;
	c->size = r[0]->head.size;
	HERD_CHECK(herd__calloc(&c->ranks, (size_t)c->size, sizeof(*c->ranks), "a wavefront"));
	for (size_t i = 0; i < n; i++) {
		int k = r[i]->head.rank;

		if (k < c->size && r[i]->head.size == c->size)
			c->ranks[k].r = r[i];
	}
	for (int k = 0; k < c->size; k++) {
		rank_view *v = &c->ranks[k];

		if (v->r == NULL)
			continue;
		for (size_t j = 0; j < v->r->n; j++) {
			const herd__trace_entry *e = &v->r->e[j];

			v->last = e;
			if (herd__op_is_p2p(e->kind))
				continue;
			if (e->cseq > v->entered_cseq)
				v->entered_cseq = e->cseq;
			if (e->state == HERD__TRACE_DONE)
				v->last_done = e;
			if (e->cseq > c->next) {
				c->next = e->cseq;
				c->next_e = e;
			}
		}
		for (size_t j = 0; j < v->r->n; j++) {
			const herd__trace_entry *e = &v->r->e[j];
			double t = real_s(v->r, e->end_ns != 0 ? e->end_ns : e->start_ns);

			if (t > c->end_s)
				c->end_s = t;
		}
		if (v->r->head.copied_proc != 0)
			v->proc = v->r->head.copied_proc;
		else if (strcmp(v->r->head.host, here) == 0 && v->r->head.pid > 0)
			v->proc = proc_state(v->r->head.pid);
		/* Another host's ranks, or one alive here: times are to now. */
		c->live |= v->proc != 'X';
	}
	for (int k = 0; k < c->size; k++) {
		rank_view *v = &c->ranks[k];
		bool closed = v->r != NULL && v->r->head.state != HERD__TRACE_OPEN;

		if (v->r == NULL)
			v->v = V_NOT_READ;
		else if (v->entered_cseq >= c->next && c->next > 0)
			v->v = V_ENTERED;
		else if (v->proc == 'T' || v->proc == 't')
			v->v = V_STOPPED;
		else if (v->proc == 'X' && !closed)
			v->v = V_GONE;
		else if (v->last != NULL && v->last->state == HERD__TRACE_ENTERED)
			v->v = V_STUCK;
		else if (v->last != NULL && v->last->state == HERD__TRACE_FAILED)
			v->v = V_FAILED;
		else
			v->v = V_NOT_CALLED;
		if (v->v == V_ENTERED) {
			c->entered++;
			if (v->last_done != NULL && v->last_done->cseq >= c->next)
				c->done_next++;
		} else {
			c->culprits++;
		}
	}
	c->named = -1;
	/* Everyone is in the next call and nobody got out: the ranks stopped
	 * or gone there are the culprits. */
	if (c->culprits == 0 && c->next > 0 && c->done_next == 0) {
		c->in_communication = true;
		for (int k = 0; k < c->size; k++) {
			rank_view *v = &c->ranks[k];

			if (v->proc == 'T' || v->proc == 't') {
				v->v = V_STOPPED;
				c->culprits++;
			} else if (v->proc == 'X' && v->r->head.state == HERD__TRACE_OPEN) {
				v->v = V_GONE;
				c->culprits++;
			}
		}
	}
	/* No rank that is the cause itself (only ranks whose calls failed,
	 * or a hang in communication with nobody stopped or gone: a link
	 * cut, a host whose processes this one cannot see): the rank that
	 * did not answer the others. */
	for (int k = 0; k < c->size; k++)
		causes += c->ranks[k].v != V_ENTERED && c->ranks[k].v != V_FAILED;
	if (causes == 0 && (c->culprits > 0 || c->in_communication) &&
	    (c->named = named_by_peers(c, &c->votes, &c->named_others)) >= 0) {
		rank_view *v = &c->ranks[c->named];

		if (v->v == V_ENTERED) {
			c->culprits++;
			c->entered--;
		}
		v->v = V_NAMED;
	}
	return HERD_OK;
}

/* "allreduce #812" of entry e. */
static void call_name(const herd__trace_entry *e, char *buf, size_t cap)
{
	if (e == NULL)
		snprintf(buf, cap, "no call");
	else
		snprintf(buf, cap, "%s #%llu", herd__op_name((herd__op_kind)e->kind),
			 (unsigned long long)(herd__op_is_p2p(e->kind) ? e->seq : e->cseq));
}

/* CLOCK_REALTIME in seconds: the clock the rings' times are read in. */
static double now_real_s(void)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return (double)now.tv_sec + (double)now.tv_nsec / 1e9;
}

/* Seconds from e's end (or start) on rank r's host until now, or, when no
 * rank's process is there any more, until the last time recorded. */
static double ago(const comm_view *c, const rank_ring *r, const herd__trace_entry *e,
		  bool from_start)
{
	return (c->live ? now_real_s() : c->end_s) - real_s(r, from_start ? e->start_ns : e->end_ns);
}

/* Seconds an ended entry e took; 0 when its end, from the coarse clock,
 * reads before its start. */
static double ran_s(const herd__trace_entry *e)
{
	return e->end_ns > e->start_ns ? (double)(e->end_ns - e->start_ns) / 1e9 : 0.0;
}

/* "failed in allreduce #459 (HERD_ETIMEDOUT) after 2.5 s and has not
 * called allreduce #460" of a rank whose last call, last, failed. */
static size_t failed_words(const herd__trace_entry *last, const char *cur, const char *next,
			   char *buf, size_t cap)
{
	return (size_t)snprintf(buf, cap, "failed in %s (%s) after %.1f s and has not called %s",
				cur, herd_status_name((herd_status)last->status), ran_s(last), next);
}

/* What rank k of c is doing, in words, into buf. */
static void rank_words(const comm_view *c, int k, char *buf, size_t cap)
{
	const rank_view *v = &c->ranks[k];
	char done[96], cur[96], next[96];
	const char *proc = proc_words(v->proc);
	size_t o = 0;

	call_name(c->next_e, next, sizeof(next));
	call_name(v->last_done, done, sizeof(done));
	call_name(v->last, cur, sizeof(cur));
	switch (v->v) {
	case V_NOT_READ:
		snprintf(buf, cap, "its flight recorder was not found");
		return;
	case V_ENTERED:
	case V_NAMED:
		if (v->v == V_NAMED && v->entered_cseq < c->next && v->last != NULL &&
		    v->last->state == HERD__TRACE_FAILED)
			o = failed_words(v->last, cur, next, buf, cap);
		else if (v->last != NULL && v->last->state == HERD__TRACE_ENTERED)
			o = (size_t)snprintf(buf, cap, "inside %s for %.1f s", cur,
					     ago(c, v->r, v->last, true));
		else if (v->last != NULL && v->last->state == HERD__TRACE_FAILED)
			o = (size_t)snprintf(buf, cap, "entered %s, which failed (%s) after %.1f s",
					     cur, herd_status_name((herd_status)v->last->status),
					     ran_s(v->last));
		else
			o = (size_t)snprintf(buf, cap, "completed %s", done);
		if (v->v == V_NAMED && o < cap)
			o += (size_t)snprintf(buf + o, cap - o, "; it%s did not answer %d rank%s (a "
					      "link to %s, or the host)",
					      c->named_others ? " and other ranks of its host" : "",
					      c->votes, c->votes == 1 ? "" : "s", v->r->head.host);
		break;
	case V_STUCK:
		o = (size_t)snprintf(buf, cap, "stuck inside %s for %.1f s and has not called %s",
				     cur, ago(c, v->r, v->last, true), next);
		break;
	case V_FAILED:
		o = failed_words(v->last, cur, next, buf, cap);
		break;
	default:
		if (v->last != NULL && v->last->state == HERD__TRACE_ENTERED)
			o = (size_t)snprintf(buf, cap, "inside %s for %.1f s and has not called %s",
					     cur, ago(c, v->r, v->last, true), next);
		else if (v->last_done != NULL)
			o = (size_t)snprintf(buf, cap, "last completed %s %.1f s %s and has not "
					     "called %s", done, ago(c, v->r, v->last_done, false),
					     c->live ? "ago" : "before the last call recorded", next);
		else
			o = (size_t)snprintf(buf, cap, "completed no call and has not called %s",
					     next);
		if (v->v == V_NOT_CALLED && o < cap)
			o += (size_t)snprintf(buf + o, cap - o, " (the application did not call)");
		break;
	}
	if (proc != NULL && o < cap)
		o += (size_t)snprintf(buf + o, cap - o, "; its process is %s", proc);
	/* A copy its node sent a while ago: what it says is as of then. */
	if (v->r->head.copied_ns != 0 && c->live && o < cap) {
		double age = now_real_s() - (double)v->r->head.copied_ns / 1e9;

		if (age >= 1.0)
			snprintf(buf + o, cap - o, " (as %s saw it %.1f s ago)", v->r->head.host, age);
	}
}

/* Ranks as "0-3,5", of those of c with verdict v (or != V_ENTERED when want < 0). */
static void rank_list(const comm_view *c, int want, char *buf, size_t cap)
{
	size_t o = 0;

	buf[0] = '\0';
	for (int k = 0; k < c->size && o < cap; k++) {
		bool in = want < 0 ? c->ranks[k].v != V_ENTERED : (int)c->ranks[k].v == want;
		int j = k;

		if (!in)
			continue;
		while (j + 1 < c->size && (want < 0 ? c->ranks[j + 1].v != V_ENTERED
					  : (int)c->ranks[j + 1].v == want))
			j++;
		o += (size_t)snprintf(buf + o, cap - o, j == k ? "%s%d" : "%s%d-%d", o ? "," : "",
				      k, j);
		k = j;
	}
}

/* ---- the views of a set of rings ------------------------------------------- */

typedef struct views {
	rings rs;
	rank_ring **order;
	comm_view *c;
	size_t n;
} views;

static void views_free(views *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->c[i].ranks);
	free(w->c);
	free(w->order);
	rings_free(&w->rs);
}

static int by_comm(const void *a, const void *b)
{
	const rank_ring *x = *(rank_ring *const *)a, *y = *(rank_ring *const *)b;
	int d = y->head.size - x->head.size;

	return d != 0 ? d : strcmp(x->head.id, y->head.id);
}

static herd_status make_views(const char *path, views *w)
{
	char here[256];
	herd_status st;

	memset(w, 0, sizeof(*w));
	HERD_CHECK(read_rings(path, &w->rs));
	/* Unknown, no rank is taken for this host's (their states stay unknown). */
	(void)herd__net_host_short(here, sizeof(here));
	st = herd__calloc(&w->order, w->rs.n, sizeof(*w->order), "the flight recorders");
	if (st == HERD_OK)
		st = herd__calloc(&w->c, w->rs.n, sizeof(*w->c), "the communicators");
	if (st != HERD_OK) {
		views_free(w);
		return st;
	}
	for (size_t i = 0; i < w->rs.n; i++)
		w->order[i] = &w->rs.r[i];
	qsort(w->order, w->rs.n, sizeof(*w->order), by_comm);
	for (size_t i = 0; i < w->rs.n && st == HERD_OK;) {
		size_t j = i;

		while (j < w->rs.n && strcmp(w->order[j]->head.id, w->order[i]->head.id) == 0)
			j++;
		st = view_comm(&w->c[w->n], &w->order[i], j - i, here);
		if (st == HERD_OK)
			w->n++;
		i = j;
	}
	if (st != HERD_OK)
		views_free(w);
	return st;
}

/* ---- the report -------------------------------------------------------------- */

/* The summary line of c: who entered the next call and who is missing. */
static void headline(const comm_view *c, char *buf, size_t cap)
{
	char next[96], who[256];

	call_name(c->next_e, next, sizeof(next));
	if (c->next == 0) {
		snprintf(buf, cap, "no collective call yet");
		return;
	}
	rank_list(c, V_ENTERED, who, sizeof(who));
	if (c->in_communication && c->named >= 0)
		snprintf(buf, cap, "%s: every rank entered it and none completed it: a hang in "
			 "communication, on rank %d (it did not answer the others)", next, c->named);
	else if (c->in_communication)
		snprintf(buf, cap, "%s: every rank entered it and none completed it: a hang in "
			 "communication%s", next, c->culprits > 0 ? "" : " (no rank stopped or gone)");
	else if (c->culprits == 0)
		snprintf(buf, cap, "%s: every rank entered it", next);
	else
		snprintf(buf, cap, "%s: ranks %s entered", next, who[0] != '\0' ? who : "none");
}

static const char *state_name(const herd__trace_entry *e)
{
	return e->state == HERD__TRACE_ENTERED ? "entered"
	       : e->state == HERD__TRACE_DONE ? "done" : "failed";
}

static json_t *entry_json(const herd__trace_entry *e)
{
	if (e == NULL)
		return json_null();
	return json_pack("{s:s,s:I,s:I,s:s,s:I,s:i,s:s?,s:s}", "op",
			 herd__op_name((herd__op_kind)e->kind), "seq", (json_int_t)e->seq, "cseq",
			 (json_int_t)e->cseq, "dtype", herd_dtype_name((herd_dtype)e->dtype),
			 "count", (json_int_t)e->count, "peer", e->peer, "algorithm",
			 herd__tune_algo_name(e->kind, e->algo), "state", state_name(e));
}

static json_t *report_json(const views *w)
{
	json_t *comms = json_array();

	for (size_t i = 0; i < w->n; i++) {
		const comm_view *c = &w->c[i];
		json_t *ranks = json_array(), *culprits = json_array();
		char line[1024];

		for (int k = 0; k < c->size; k++) {
			const rank_view *v = &c->ranks[k];
			const char *proc = proc_words(v->proc);

			rank_words(c, k, line, sizeof(line));
			json_array_append_new(ranks, json_pack(
				"{s:i,s:s?,s:i,s:i,s:s,s:s,s:o,s:o,s:s?,s:s?}", "rank", k, "host",
				v->r ? v->r->head.host : NULL, "pid", v->r ? v->r->head.pid : 0,
				"parent_rank", v->r && v->r->head.name[0] ? v->r->head.parent_rank : -1,
				"verdict", verdict_names[v->v], "says", line, "last", entry_json(v->last),
				"last_completed", entry_json(v->last_done), "process", proc,
				"broke", v->r && v->r->head.state == HERD__TRACE_BROKEN
					? v->r->head.fail_msg : NULL));
			if (v->v != V_ENTERED)
				json_array_append_new(culprits, json_integer(k));
		}
		headline(c, line, sizeof(line));
		json_array_append_new(comms, json_pack(
			"{s:s,s:i,s:s,s:s,s:o,s:b,s:o,s:s,s:o}", "id", c->id, "size", c->size, "job",
			c->ranks[0].r ? c->ranks[0].r->head.job : "", "name",
			c->ranks[0].r ? c->ranks[0].r->head.name : "", "next", entry_json(c->next_e),
			"in_communication", c->in_communication, "culprits", culprits, "summary",
			line, "ranks", ranks));
	}
	return json_pack("{s:i,s:o}", "v", 1, "communicators", comms);
}

static herd_status bprintf(herd__buf *b, const char *fmt, ...) HERD_PRINTF(2, 3);

/* Appends a formatted line to b. */
static herd_status bprintf(herd__buf *b, const char *fmt, ...)
{
	char line[4096];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return herd__error(HERD_EINVAL, "a report line that does not format");
	return herd__buf_append(b, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

/* ", parent rank 3" for a rank of a named communicator split from another; "". */
static const char *parent_words(const rank_ring *r, char *buf, size_t cap)
{
	buf[0] = '\0';
	if (r->head.name[0] != '\0' && r->head.parent_rank >= 0)
		snprintf(buf, cap, ", parent rank %d", r->head.parent_rank);
	return buf;
}

static herd_status report_text(const views *w, char **out)
{
	size_t len;
	herd__buf b;
	char line[2048], who[256];
	herd_status st = HERD_OK;

	herd__buf_init(&b, 0);
	for (size_t i = 0; i < w->n && st == HERD_OK; i++) {
		const comm_view *c = &w->c[i];
		const rank_view *r0 = NULL;

		for (int k = 0; k < c->size && r0 == NULL; k++)
			r0 = c->ranks[k].r != NULL ? &c->ranks[k] : NULL;
		headline(c, line, sizeof(line));
		st = bprintf(&b, "communicator %s (%d ranks%s%s%s%s): %s\n", c->id, c->size,
				      r0 && r0->r->head.job[0] ? ", job " : "",
				      r0 ? r0->r->head.job : "", r0 && r0->r->head.name[0] ? ", " : "",
				      r0 ? r0->r->head.name : "", line);
		for (int k = 0; k < c->size && st == HERD_OK; k++) {
			const rank_view *v = &c->ranks[k];

			/* With many ranks entered, those in the next call go on one line. */
			if (v->v == V_ENTERED && c->culprits > 0 && c->size > 8)
				continue;
			rank_words(c, k, line, sizeof(line));
			if (v->r != NULL)
				st = bprintf(&b, "  rank %d (%s, pid %d%s) %s\n", k, v->r->head.host,
						      v->r->head.pid, parent_words(v->r, who, sizeof(who)),
						      line);
			else
				st = bprintf(&b, "  rank %d: %s\n", k, line);
		}
		if (st == HERD_OK && c->culprits > 0 && c->size > 8 && c->entered > 0) {
			rank_list(c, V_ENTERED, who, sizeof(who));
			st = bprintf(&b, "  ranks %s: in the next call\n", who);
		}
	}
	if (st != HERD_OK) {
		herd__buf_free(&b);
		return st;
	}
	return herd__buf_take(&b, "a report", out, &len);
}

herd_status herd_trace_report(const char *path, herd_trace_format format, char **out)
{
	views w;
	herd_status st;

	if (out == NULL || path == NULL)
		return herd__error(HERD_EINVAL, "herd_trace_report: %s is NULL",
				   out == NULL ? "out" : "path");
	*out = NULL;
	if (format != HERD_TRACE_TEXT && format != HERD_TRACE_JSON)
		return herd__error(HERD_EINVAL, "herd_trace_report: format %d is neither text nor "
				   "JSON", (int)format);
	HERD_CHECK(make_views(path, &w));
	if (format == HERD_TRACE_JSON) {
		json_t *j = report_json(&w);

		*out = j != NULL ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
		json_decref(j);
		st = *out != NULL ? HERD_OK : herd__error(HERD_ENOMEM, "out of memory for a report");
	} else {
		st = report_text(&w, out);
	}
	views_free(&w);
	return st;
}

/* ---- the calls of each rank ------------------------------------------------------- */

/* Seconds e took (to now on the rank's host when it is still inside). */
static double took(const comm_view *c, const rank_ring *r, const herd__trace_entry *e)
{
	return e->state == HERD__TRACE_ENTERED ? ago(c, r, e, true) : ran_s(e);
}

/* Whether e's operation reduces (its redop says how; HERD_SUM is 0). */
static bool reduces(const herd__trace_entry *e)
{
	return e->kind == HERD__OP_ALLREDUCE || e->kind == HERD__OP_REDUCE ||
	       e->kind == HERD__OP_REDUCE_SCATTER;
}

/* "float32 x 1024, sum, root 0, ring" of e. */
static void call_args(const herd__trace_entry *e, char *buf, size_t cap)
{
	const char *algo = herd__tune_algo_name(e->kind, e->algo);
	size_t o;

	o = (size_t)snprintf(buf, cap, "%s x %llu", herd_dtype_name((herd_dtype)e->dtype),
			     (unsigned long long)e->count);
	if (reduces(e) && o < cap)
		o += (size_t)snprintf(buf + o, cap - o, ", %s", herd_redop_name((herd_redop)e->redop));
	if (e->peer >= 0 && o < cap)
		o += (size_t)snprintf(buf + o, cap - o, ", %s %d",
				      herd__op_is_p2p(e->kind) ? "peer" : "root", (int)e->peer);
	if (e->device && o < cap)
		o += (size_t)snprintf(buf + o, cap - o, ", on a GPU");
	if (algo != NULL && o < cap)
		snprintf(buf + o, cap - o, ", %s", algo);
}

/* How e went: "done in 1.52 ms, 3.1 s ago", "inside for 31.2 s", ... */
static void call_outcome(const comm_view *c, const rank_ring *r, const herd__trace_entry *e,
			 char *buf, size_t cap)
{
	double t = took(c, r, e);
	struct timespec tick = { 0, 0 };
	char d[32];

	/* An end from the coarse clock says no more than "within a tick". */
	clock_getres(CLOCK_MONOTONIC_COARSE, &tick);
	if (e->state != HERD__TRACE_ENTERED && t < (double)tick.tv_nsec / 1e9)
		snprintf(d, sizeof(d), "under %.0f ms", (double)tick.tv_nsec / 1e6);
	else if (t < 1)
		snprintf(d, sizeof(d), "%.1f ms", t * 1e3);
	else
		snprintf(d, sizeof(d), "%.2f s", t);
	if (e->state == HERD__TRACE_ENTERED)
		snprintf(buf, cap, "inside for %s", d);
	else if (e->state == HERD__TRACE_DONE)
		snprintf(buf, cap, "done in %s, %.1f s %s", d, ago(c, r, e, false),
			 c->live ? "ago" : "before the last call recorded");
	else
		snprintf(buf, cap, "failed (%s) after %s, %.1f s %s",
			 herd_status_name((herd_status)e->status), d, ago(c, r, e, false),
			 c->live ? "ago" : "before the last call recorded");
}

/* The first of r's entries among its last ncalls. */
static size_t calls_from(const rank_ring *r, int ncalls)
{
	return r->n > (size_t)ncalls ? r->n - (size_t)ncalls : 0;
}

static json_t *calls_json(const views *w, int ncalls)
{
	json_t *comms = json_array();

	for (size_t i = 0; i < w->n; i++) {
		const comm_view *c = &w->c[i];
		json_t *ranks = json_array();

		for (int k = 0; k < c->size; k++) {
			const rank_ring *r = c->ranks[k].r;
			json_t *calls = json_array();

			for (size_t j = r != NULL ? r->n : 0; j > (r != NULL ? calls_from(r, ncalls) : 0);
			     j--) {
				const herd__trace_entry *e = &r->e[j - 1];
				json_t *o = entry_json(e);

				json_object_set_new(o, "redop", reduces(e)
					? json_string(herd_redop_name((herd_redop)e->redop)) : json_null());
				json_object_set_new(o, "device", json_boolean(e->device));
				json_object_set_new(o, "status", json_string(
					herd_status_name((herd_status)e->status)));
				json_object_set_new(o, "start", json_real(real_s(r, e->start_ns)));
				json_object_set_new(o, "seconds", json_real(took(c, r, e)));
				json_array_append_new(calls, o);
			}
			json_array_append_new(ranks, json_pack(
				"{s:i,s:s?,s:i,s:o}", "rank", k, "host", r ? r->head.host : NULL,
				"pid", r ? r->head.pid : 0, "calls", calls));
		}
		json_array_append_new(comms, json_pack(
			"{s:s,s:i,s:s,s:s,s:o}", "id", c->id, "size", c->size, "job",
			c->ranks[0].r ? c->ranks[0].r->head.job : "", "name",
			c->ranks[0].r ? c->ranks[0].r->head.name : "", "ranks", ranks));
	}
	return json_pack("{s:i,s:o}", "v", 1, "communicators", comms);
}

static herd_status calls_text(const views *w, int ncalls, char **out)
{
	herd_status st = HERD_OK;
	herd__buf b;
	size_t len;
	char who[64];

	herd__buf_init(&b, 0);
	for (size_t i = 0; i < w->n && st == HERD_OK; i++) {
		const comm_view *c = &w->c[i];

		st = bprintf(&b, "communicator %s (%d ranks%s%s%s%s), the last %d calls of each "
			     "rank, newest first:\n", c->id, c->size,
			     c->ranks[0].r && c->ranks[0].r->head.job[0] ? ", job " : "",
			     c->ranks[0].r ? c->ranks[0].r->head.job : "",
			     c->ranks[0].r && c->ranks[0].r->head.name[0] ? ", " : "",
			     c->ranks[0].r ? c->ranks[0].r->head.name : "", ncalls);
		for (int k = 0; k < c->size && st == HERD_OK; k++) {
			const rank_ring *r = c->ranks[k].r;

			if (r == NULL) {
				st = bprintf(&b, "  rank %d: its flight recorder was not found\n", k);
				continue;
			}
			st = bprintf(&b, "  rank %d (%s, pid %d%s)%s\n", k, r->head.host, r->head.pid,
				     parent_words(r, who, sizeof(who)),
				     r->n == 0 ? ": no call" : ":");
			for (size_t j = r->n; j > calls_from(r, ncalls) && st == HERD_OK; j--) {
				char name[96], args[256], how[128];

				call_name(&r->e[j - 1], name, sizeof(name));
				call_args(&r->e[j - 1], args, sizeof(args));
				call_outcome(c, r, &r->e[j - 1], how, sizeof(how));
				st = bprintf(&b, "    %s (%s): %s\n", name, args, how);
			}
		}
	}
	if (st != HERD_OK) {
		herd__buf_free(&b);
		return st;
	}
	return herd__buf_take(&b, "the calls", out, &len);
}

herd_status herd_trace_calls(const char *path, int ncalls, herd_trace_format format,
			     char **out)
{
	views w;
	herd_status st;

	if (out == NULL || path == NULL)
		return herd__error(HERD_EINVAL, "herd_trace_calls: %s is NULL",
				   out == NULL ? "out" : "path");
	*out = NULL;
	if (format != HERD_TRACE_TEXT && format != HERD_TRACE_JSON)
		return herd__error(HERD_EINVAL, "herd_trace_calls: format %d is neither text nor "
				   "JSON", (int)format);
	if (ncalls < 1 || ncalls > HERD__TRACE_MAX_RING)
		return herd__error(HERD_EINVAL, "herd_trace_calls: ncalls %d is not in 1 to %d",
				   ncalls, HERD__TRACE_MAX_RING);
	HERD_CHECK(make_views(path, &w));
	if (format == HERD_TRACE_JSON) {
		json_t *j = calls_json(&w, ncalls);

		*out = j != NULL ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
		json_decref(j);
		st = *out != NULL ? HERD_OK : herd__error(HERD_ENOMEM, "out of memory for the calls");
	} else {
		st = calls_text(&w, ncalls, out);
	}
	views_free(&w);
	return st;
}

/* The culprit of c to name first: the rank that did not answer the
 * others, else the first that is a cause itself, else the first whose
 * call failed; -1 when none. */
static int culprit_of(const comm_view *c)
{
	int failed = -1;

	if (c->named >= 0)
		return c->named;
	for (int k = 0; k < c->size; k++) {
		if (c->ranks[k].v == V_FAILED && failed < 0)
			failed = k;
		else if (c->ranks[k].v != V_ENTERED && c->ranks[k].v != V_FAILED)
			return k;
	}
	return failed;
}

herd_status herd_trace_blame(const char *dir, herd_trace_culprit *out)
{
	views w;

	if (out == NULL || dir == NULL)
		return herd__error(HERD_EINVAL, "herd_trace_blame: %s is NULL",
				   out == NULL ? "out" : "dir");
	memset(out, 0, sizeof(*out));
	out->rank = -1;
	HERD_CHECK(make_views(dir, &w));
	for (size_t i = 0; i < w.n && out->rank < 0; i++) {
		const comm_view *c = &w.c[i];
		int k = culprit_of(c);

		if (k >= 0) {
			const rank_view *v = &c->ranks[k];
			char words[1024];

			out->rank = k;
			out->count = c->culprits;
			out->size = c->size;
			out->pid = v->r != NULL ? v->r->head.pid : 0;
			herd__strlcpy(out->host, v->r != NULL ? v->r->head.host : "", sizeof(out->host));
			rank_words(c, k, words, sizeof(words));
			herd__strlcpy(out->what, words, sizeof(out->what));
		}
	}
	views_free(&w);
	if (out->rank < 0)
		return herd__error(HERD_ENOTFOUND, "the flight recorders of %s name no rank missing "
				   "from a call", dir);
	return HERD_OK;
}

/* ---- stragglers --------------------------------------------------------------- */

static int by_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* A rank's completed collectives with cseq in (from, to]: their count, and
 * the sum of their times inside (ns) and the first and last start. */
static size_t window(const rank_view *v, uint64_t from, uint64_t to, double *inside_ns,
		     uint64_t *first_start, uint64_t *last_start)
{
	size_t n = 0;

	*inside_ns = 0;
	for (size_t j = 0; j < v->r->n; j++) {
		const herd__trace_entry *e = &v->r->e[j];

		if (herd__op_is_p2p(e->kind) || e->state != HERD__TRACE_DONE || e->cseq <= from ||
		    e->cseq > to)
			continue;
		/* Signed: the coarse clock of the end reads up to a tick early,
		 * as much on every rank on average, so differences stay true. */
		*inside_ns += (double)((int64_t)e->end_ns - (int64_t)e->start_ns);
		if (n == 0)
			*first_start = e->start_ns;
		*last_start = e->start_ns;
		n++;
	}
	return n;
}

bool herd__trace_straggle(const char *dir, int nranks, herd__straggle *s, int *rank,
			  char *host, size_t host_cap, char *why, size_t why_cap)
{
	char kept[1024], op[64] = "";
	const comm_view *c = NULL;
	double *mean = NULL, *sorted = NULL, median, step = 0;
	uint64_t to = UINT64_MAX;
	size_t calls = SIZE_MAX;
	int late = -1;
	bool found = false;
	views w;

	herd__strlcpy(kept, herd_last_error(), sizeof(kept));
	if (make_views(dir, &w) != HERD_OK) {
		herd__error(HERD_OK, "%s", kept);
		return false;
	}
	/* The job's world: the communicator of nranks last heard of (a
	 * restarted job's earlier runs left theirs). */
	for (size_t i = 0; i < w.n; i++)
		if (w.c[i].size == nranks && nranks > 1 && (c == NULL || w.c[i].end_s > c->end_s))
			c = &w.c[i];
	for (int k = 0; c != NULL && k < c->size && to > 0; k++) {
		const rank_view *v = &c->ranks[k];

		if (v->r == NULL || v->last_done == NULL)
			to = 0;
		else if (v->last_done->cseq < to)
			to = v->last_done->cseq;
	}
	if (c == NULL || to == 0 || to <= s->last_cseq)
		goto out;
	mean = calloc((size_t)c->size, sizeof(*mean));
	sorted = calloc((size_t)c->size, sizeof(*sorted));
	if (mean == NULL || sorted == NULL)
		goto out;
	for (int k = 0; k < c->size; k++) {
		uint64_t first = 0, last = 0;
		size_t n = window(&c->ranks[k], s->last_cseq, to, &mean[k], &first, &last);

		/* A ring that no longer holds the whole window: fewer calls here. */
		if (n < calls)
			calls = n;
		mean[k] = n > 0 ? mean[k] / (double)n : 0;
		if (n > 1)
			step += (double)(last - first) / (double)(n - 1) / c->size;
		if (late < 0 || mean[k] < mean[late])
			late = k;
	}
	s->last_cseq = to;
	if (calls < 10)
		goto out;               /* too few calls: the round does not count */
	for (int k = 0, j = 0; k < c->size; k++)
		if (k != late)
			sorted[j++] = mean[k];
	qsort(sorted, (size_t)c->size - 1, sizeof(*sorted), by_double);
	median = c->size % 2 == 0 ? sorted[(c->size - 1) / 2]
				  : (sorted[(c->size - 1) / 2 - 1] + sorted[(c->size - 1) / 2]) / 2;
	herd__log_debug("straggler round over calls %llu..%llu: rank %d inside %.2f ms a call, "
			"the others' median %.2f ms, a step of %.2f ms",
			(unsigned long long)s->last_cseq - calls + 1, (unsigned long long)to, late,
			mean[late] / 1e6, median / 1e6, step / 1e6);
	if (median - mean[late] < 2.5e6 || median - mean[late] < step / 15) {
		s->rank = -1;           /* nobody late this round */
		s->streak = 0;
		if (s->warned >= 0 && ++s->calm >= HERD__STRAGGLE_ROUNDS)
			s->warned = -1;
		goto out;
	}
	s->calm = 0;
	if (late == s->rank) {
		s->streak++;
	} else {
		s->rank = late;
		s->streak = 1;
	}
	if (late == s->warned)
		s->late_ns = median - mean[late];
	if (s->streak < HERD__STRAGGLE_ROUNDS || s->warned == late)
		goto out;
	s->warned = late;
	s->late_ns = median - mean[late];
	found = true;
	*rank = late;
	herd__strlcpy(host, c->ranks[late].r->head.host, host_cap);
	if (c->ranks[late].last_done != NULL)
		herd__strlcpy(op, herd__op_name((herd__op_kind)c->ranks[late].last_done->kind),
			      sizeof(op));
	snprintf(why, why_cap, "it arrived last at the collectives (%s last), %.1f ms after the "
		 "others' median, in %d rounds in a row (%zu calls in the last, a step of %.1f ms)",
		 op, (median - mean[late]) / 1e6, s->streak, calls, step / 1e6);
out:
	free(mean);
	free(sorted);
	views_free(&w);
	herd__error(HERD_OK, "%s", kept);
	return found;
}

/* ---- the straggler mark ----------------------------------------------------------- */

/* Calls fn(fd, sb, head, name) for each ring file of rank in dir
 * ("*.RANK.trace"; rank -1: every "*.trace"), opened with flags, its header
 * read; stops when fn returns false.  The directory may be anybody's
 * (named by a process's environment): entries are opened relative to it,
 * regular files only, links not followed. */
static void each_ring_of(const char *dir, int rank, int flags,
			 bool (*fn)(int fd, const struct stat *sb, const herd__trace_head *h,
				    const char *name, void *arg), void *arg)
{
	char suffix[32] = ".trace";
	struct dirent *de;
	DIR *d;

	if (dir == NULL || dir[0] == '\0' || rank < -1 || (d = opendir(dir)) == NULL)
		return;
	if (rank >= 0)
		snprintf(suffix, sizeof(suffix), ".%d.trace", rank);
	for (int files = 0; (de = readdir(d)) != NULL && files < MAX_FILES; files++) {
		herd__trace_head h;
		struct stat sb;
		bool more = true;
		int fd;

		if (!ends_with(de->d_name, suffix) || (de->d_type != DT_REG && de->d_type != DT_UNKNOWN))
			continue;
		fd = openat(dirfd(d), de->d_name, flags | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
		if (fd < 0)
			continue;
		if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
		    pread(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) &&
		    h.magic == HERD__TRACE_MAGIC && h.version >= 1 && h.version <= HERD__TRACE_VERSION &&
		    h.head_size == HERD__TRACE_HEAD_SIZE && (rank < 0 || h.rank == rank))
			more = fn(fd, &sb, &h, de->d_name, arg);
		close(fd);
		if (!more)
			break;
	}
	closedir(d);
}

static bool mark_one(int fd, const struct stat *sb, const herd__trace_head *h,
		     const char *name, void *arg)
{
	int64_t late = *(const int64_t *)arg;

	(void)sb;
	(void)h;
	(void)name;
	/* Readers read the header with pread too: a value read while it
	 * changes is at worst one between two rounds' (it says how late). */
	if (pwrite(fd, &late, sizeof(late), offsetof(herd__trace_head, late_ns)) !=
	    (ssize_t)sizeof(late))
		herd__log_debug("cannot mark a flight recorder of a straggler: %s", strerror(errno));
	return true;
}

void herd__trace_mark(const char *dir, int rank, int64_t late_ns)
{
	each_ring_of(dir, rank, O_RDWR, mark_one, &late_ns);
}

typedef struct marked_arg {
	long pid;
	uid_t uid;                  /* the process's owner: its rings are its user's */
	int64_t late;               /* -1: no ring of the pid yet */
} marked_arg;

static bool marked_one(int fd, const struct stat *sb, const herd__trace_head *h,
		       const char *name, void *arg)
{
	marked_arg *m = arg;

	(void)fd;
	(void)name;
	if (h->pid != m->pid || h->state != HERD__TRACE_OPEN || sb->st_uid != m->uid)
		return true;
	if (m->late < 0)
		m->late = 0;
	if (h->late_ns > m->late)
		m->late = h->late_ns;
	return true;
}

int64_t herd__trace_marked(const char *dir, int rank, long pid)
{
	marked_arg m = { pid, 0, -1 };
	struct stat ps;
	char proc[48];

	snprintf(proc, sizeof(proc), "/proc/%ld", pid);
	if (stat(proc, &ps) != 0)
		return -1;
	m.uid = ps.st_uid;
	each_ring_of(dir, rank, O_RDONLY, marked_one, &m);
	return m.late;
}

/* ---- copies for the launcher's node ----------------------------------------------- */

typedef struct copy_arg {
	herd_status (*emit)(void *arg, const void *image, size_t len);
	void *arg;
	const char *dir;
	size_t max;
	herd_status st;
	int count;
} copy_arg;

static bool copy_one(int fd, const struct stat *sb, const herd__trace_head *h, const char *name,
		     void *arg)
{
	copy_arg *c = arg;
	char path[4096];
	rank_ring r;
	herd__trace_head *head;
	unsigned char *image = NULL;
	size_t n, len;

	(void)h;
	if (sb->st_uid != getuid())
		return true;
	snprintf(path, sizeof(path), "%s/%s", c->dir, name);
	if (read_ring_fd(fd, path, &r) != HERD_OK) {
		herd__log_debug("not copied: %s", herd_last_error());
		return true;
	}
	n = r.n < c->max ? r.n : c->max;
	len = HERD__TRACE_HEAD_SIZE + (n > 0 ? n : 1) * sizeof(herd__trace_entry);
	if (herd__calloc(&image, 1, len, "a copy of a flight recorder") != HERD_OK) {
		c->st = HERD_ENOMEM;
		free(r.e);
		return false;
	}
	head = (herd__trace_head *)(void *)image;
	*head = r.head;
	/* The newest n entries, in call order, in slots 0 to n-1. */
	head->cap = n > 0 ? (uint32_t)n : 1;
	head->next = n;
	if (n > 0)
		memcpy(image + HERD__TRACE_HEAD_SIZE, r.e + (r.n - n), n * sizeof(*r.e));
	head->copied_ns = (int64_t)(now_real_s() * 1e9);
	head->copied_proc = r.head.pid > 0 ? proc_state(r.head.pid) : 'X';
	free(r.e);
	c->st = c->emit(c->arg, image, len);
	free(image);
	if (c->st != HERD_OK)
		return false;
	c->count++;
	return true;
}

herd_status herd__trace_copies(const char *dir, size_t max_calls,
			       herd_status (*emit)(void *arg, const void *image, size_t len),
			       void *arg, int *count)
{
	copy_arg c = { emit, arg, dir, max_calls < HERD__TRACE_COPY_MAX ? max_calls
							: HERD__TRACE_COPY_MAX, HERD_OK, 0 };

	each_ring_of(dir, -1, O_RDONLY, copy_one, &c);
	if (count != NULL)
		*count = c.count;
	return c.st;
}

herd_status herd__trace_keep_copy(const char *dir, const void *image, size_t len)
{
	herd__trace_head h;
	char path[4096];
	size_t i;

	if (len < sizeof(h))
		return herd__error(HERD_EFORMAT, "a copy of a flight recorder of %zu bytes", len);
	memcpy(&h, image, sizeof(h));
	HERD_CHECK(head_check(&h, "a copy of a flight recorder", len));
	/* Its id names the file: hex, nothing a path could be made of. */
	for (i = 0; i < sizeof(h.id) && h.id[i] != '\0'; i++)
		if (!((h.id[i] >= '0' && h.id[i] <= '9') || (h.id[i] >= 'a' && h.id[i] <= 'f')))
			break;
	if (i == 0 || i == sizeof(h.id) || h.id[i] != '\0')
		return herd__error(HERD_EFORMAT, "a copy of a flight recorder whose communicator id "
				   "is not hex");
	if (h.copied_proc == 0)
		return herd__error(HERD_EFORMAT, "a copy of a flight recorder that does not say "
				   "when it was copied");
	snprintf(path, sizeof(path), "%s/%s.%d.trace", dir, h.id, h.rank);
	return herd__write_file_scratch(path, image, len, 0600);
}

herd_status herd_trace_job_dir(const char *job_id, char *out, size_t cap)
{
	char base[4096];
	int len;

	if (out == NULL || cap == 0)
		return herd__error(HERD_EINVAL, "herd_trace_job_dir: out is NULL");
	out[0] = '\0';
	HERD_CHECK(herd__check_job_id(job_id));
	herd__trace_base(herd__param_str(HERD__P_TRACE_DIR), base, sizeof(base));
	len = snprintf(out, cap, "%s/%s", base, job_id);
	if (len < 0 || (size_t)len >= cap) {
		out[0] = '\0';
		return herd__error(HERD_EINVAL, "%s/%s: too long a directory name", base, job_id);
	}
	return HERD_OK;
}

typedef struct remove_arg {
	const long *pids;
	size_t n;
	int dirfd;
} remove_arg;

static bool remove_one(int fd, const struct stat *sb, const herd__trace_head *h, const char *name,
		       void *arg)
{
	remove_arg *r = arg;

	(void)fd;
	if (sb->st_uid != getuid())
		return true;
	for (size_t i = 0; i < r->n; i++)
		if (r->pids[i] == h->pid) {
			unlinkat(r->dirfd, name, 0);
			break;
		}
	return true;
}

void herd__trace_remove_of(const char *dir, const long *pids, size_t n)
{
	remove_arg r = { pids, n, -1 };

	if (dir == NULL || n == 0)
		return;
	r.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r.dirfd < 0)
		return;
	each_ring_of(dir, -1, O_RDONLY, remove_one, &r);
	close(r.dirfd);
	rmdir(dir);
}
