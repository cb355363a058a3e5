/*
 * sdk/launch/discover.c - herd_cluster_discover: this node, an inventory
 * file, or many nodes, each of which runs `herd probe --text` and prints
 * its inventory in the text form (HERD_FORMAT_TEXT), which survives any
 * channel.
 *
 * Over ssh every node has a client of its own (at most
 * HERD_DISCOVER_FANOUT at a time), whose stdout is that node's text and
 * whose stderr and exit status say why when there is none.  In a Slurm
 * allocation one srun step runs a task on every node with --label, and the
 * lines are sorted back into tasks by their label, task t being node t.  Each node's text is decoded with the strict decoder; the
 * nodes that answered are merged in the order given, the others listed
 * with their reasons (herd_cluster_failure).
 */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "topo/hostlist.h"
#include "topo/inventory.h"
#include "discover.h"
#include "net.h"
#include "remote.h"

#define DEFAULT_TIMEOUT_MS 30000
#define PROGRESS_MS 100
/* How long a helper that closed its output may take to exit. */
#define REAP_MS 1000

/* ---- one node ------------------------------------------------------------ */

/* VIA_RELAY: a node of a relay's group, answered for by the relay. */
typedef enum node_state { WAITING, RUNNING, DONE, VIA_RELAY } node_state;

typedef struct probe_node {
	const char *host;          /* as reached */
	node_state state;
	herd__launch_link link;    /* ssh: the client's pipes */
	int64_t deadline;
	herd__buf text;            /* Slurm: the task's lines, labels removed */
	herd__buf err;             /* Slurm: the task's stderr lines */
	herd_cluster *inv;         /* answered */
	char *why;                 /* failed */
	size_t group;              /* ssh tree: a relay's nodes, itself first (else 1) */
	char *forward;             /* a relay's group beyond itself, a hostlist */
} probe_node;

static void node_fail(probe_node *p, const char *fmt, ...) HERD_PRINTF(2, 3);

static void node_fail(probe_node *p, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = herd__vformat(fmt, ap);
	va_end(ap);
	free(p->why);
	p->why = s != NULL ? s : strdup("(no memory for the reason)");
	p->state = DONE;
}

/* A node's text, read: decoded into p->inv, or the reason it is not. */
static void node_answered(probe_node *p, const char *text, size_t len)
{
	char origin[300];
	const char *m;
	size_t k;

	snprintf(origin, sizeof(origin), "%s", p->host);
	if (len > 0 && herd_cluster_decode(&p->inv, text, len, origin) == HERD_OK) {
		if (herd_cluster_node_count(p->inv) == 1 ||
		    (p->group > 1 && herd_cluster_node_count(p->inv) >= 1)) {
			p->state = DONE;
			return;
		}
		node_fail(p, "printed an inventory of %zu nodes, not of one",
			  herd_cluster_node_count(p->inv));
		herd_cluster_free(p->inv);
		p->inv = NULL;
		return;
	}
	if (len == 0) {
		node_fail(p, "herd probe printed nothing");
		return;
	}
	/* The decoder's message starts with the host: keep the rest. */
	m = herd_last_error();
	k = strlen(origin);
	node_fail(p, "printed something that is not an inventory: %s",
		  strncmp(m, origin, k) == 0 && m[k] == ':' ? m + k + 2 : m);
}

/* ---- over ssh ------------------------------------------------------------ */

/* The client of a node that ended: its exit status and output decide. */
static void ssh_ended(probe_node *p, int wstatus)
{
	char said[HERD__LAUNCH_LINK_ERR_MAX + 8];
	const char *words = herd__launch_link_says(&p->link, said, sizeof(said));
	if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) {
		node_answered(p, (const char *)p->link.in.data + p->link.in.off,
			      p->link.in.len - p->link.in.off);
		return;
	}
	/* ssh's own words start "ssh: " already. */
	if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 255)
		node_fail(p, "%s%s", strncmp(words, ": ssh:", 6) == 0 ? "" : "ssh",
			  words[0] == '\0' ? ": exit status 255"
			  : strncmp(words, ": ssh:", 6) == 0 ? words + 2 : words);
	else if (WIFEXITED(wstatus))
		node_fail(p, "herd probe exited %d%s", WEXITSTATUS(wstatus), words);
	else
		node_fail(p, "ssh ended by signal %d%s", WTERMSIG(wstatus), words);
}

/*
 * Starts a node's probe: `herd probe --text`, or for a relay `herd probe
 * --text --forward GROUP`, which probes its group itself and answers for
 * all of them (given twice the time: it may wait the timeout on one).
 */
static void ssh_start_node(probe_node *p, herd__ssh_cmd *cmd, const char *program,
			   int timeout_ms)
{
	char args[4 * HERD__SSH_REMOTE_MAX], relay[3 * HERD__SSH_REMOTE_MAX], qfwd[4200];
	herd__launch_channel ch;

	if (p->forward == NULL) {
		herd__strlcpy(args, "probe --text", sizeof(args));
	} else if (!herd__remote_shell_quote(p->forward, qfwd, sizeof(qfwd)) ||
		   herd__remote_relay_args(relay, sizeof(relay), program) != HERD_OK) {
		node_fail(p, "its group's command line is too long");
		return;
	} else {
		snprintf(args, sizeof(args), "probe --text --forward %s --timeout %d%s", qfwd,
			 (timeout_ms + 999) / 1000, relay);
	}
	if (herd__ssh_cmd_build(cmd, timeout_ms < 10000 ? timeout_ms : 0, program, args) != HERD_OK) {
		node_fail(p, "%s", herd_last_error());
		return;
	}
	cmd->argv[cmd->host_at] = p->host;
	if (herd__launch_spawn_helper(cmd->argv, NULL, &ch) != HERD_OK) {
		node_fail(p, "%s", herd_last_error());
		return;
	}
	herd__launch_link_attach(&p->link, &ch);
	/* The probe reads nothing. */
	close(p->link.ch.wfd);
	p->link.ch.wfd = -1;
	herd__buf_init(&p->link.in, HERD_INVENTORY_MAX_BYTES / 2 * 3);
	p->deadline = herd__net_deadline(p->forward != NULL ? 2 * timeout_ms : timeout_ms);
	p->state = RUNNING;
}

/* Reads what a running node's client has written; notices its end. */
static void ssh_service(probe_node *p)
{
	int wstatus = 0;
	pid_t got;

	if (p->link.ch.rfd >= 0) {
		herd_status st = herd__launch_link_fill(&p->link);

		if (st == HERD_ECLOSED) {
			close(p->link.ch.rfd);
			p->link.ch.rfd = -1;
		} else if (st != HERD_OK) {
			node_fail(p, "reading its output: %s", herd_last_error());
			herd__remote_channel_abort(&p->link.ch, REAP_MS);
			return;
		}
	}
	herd__launch_link_read_err(&p->link);
	if (p->link.ch.rfd >= 0 || p->link.ch.errfd >= 0)
		return;
	got = waitpid(p->link.ch.pid, &wstatus, WNOHANG);
	if (got == p->link.ch.pid) {
		p->link.ch.pid = 0;
		ssh_ended(p, wstatus);
	} else if (got < 0 && errno != EINTR) {
		node_fail(p, "waitpid: %s", strerror(errno));
		p->link.ch.pid = 0;
	}
}

static void report_progress(const herd_discover_opts *o, probe_node *nodes, size_t n,
			    int64_t *last, bool final)
{
	size_t done = 0, failed = 0;
	int64_t now;

	if (o == NULL || o->progress == NULL)
		return;
	now = herd__net_now_ms();
	if (!final && now - *last < PROGRESS_MS)
		return;
	*last = now;
	for (size_t i = 0; i < n; i++)
		if (nodes[i].state == DONE)
			nodes[i].inv != NULL ? done++ : failed++;
	o->progress(o->userdata, done, failed, n - done - failed);
}

static herd_status discover_ssh(probe_node *nodes, size_t n, const herd_discover_opts *o,
				const char *program, int timeout_ms)
{
	herd__ssh_cmd *cmd = NULL;
	struct pollfd *fds = NULL;
	size_t *owner = NULL, left = n, running = 0, next = 0;
	int64_t last = 0;
	long fanout;
	herd_status st;

	HERD_CHECK(herd__param_int(HERD__P_DISCOVER_FANOUT, &fanout));
	HERD_CHECK(herd__calloc(&cmd, 1, sizeof(*cmd), "the ssh command line"));
	HERD_CHECK_GOTO(herd__calloc(&fds, 2 * (size_t)fanout + 1, sizeof(*fds), "poll"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&owner, 2 * (size_t)fanout + 1, sizeof(*owner), "poll"), st,
			out);
	for (size_t i = 0; i < n; i++)
		left -= nodes[i].state == VIA_RELAY;
	while (left > 0) {
		int64_t now = herd__net_now_ms(), wake = now + PROGRESS_MS;
		size_t nfds = 0;

		for (; next < n && running < (size_t)fanout; next++) {
			if (nodes[next].state == VIA_RELAY)
				continue;
			ssh_start_node(&nodes[next], cmd, program, timeout_ms);
			running += nodes[next].state == RUNNING;
		}
		for (size_t i = 0; i < next; i++) {
			probe_node *p = &nodes[i];
			size_t k;

			if (p->state != RUNNING)
				continue;
			if (now >= p->deadline) {
				herd__remote_channel_abort(&p->link.ch, REAP_MS);
				node_fail(p, "no answer within %d s (--timeout)",
					  ((p->forward != NULL ? 2 : 1) * timeout_ms + 999) / 1000);
				continue;
			}
			k = herd__launch_link_pollfds(&p->link, fds + nfds, true);
			for (size_t j = 0; j < k; j++)
				owner[nfds + j] = i;
			nfds += k;
			if (p->deadline < wake)
				wake = p->deadline;
		}
		if (nfds > 0 && poll(fds, (nfds_t)nfds, (int)(wake > now ? wake - now : 0)) < 0 &&
		    errno != EINTR) {
			st = herd__error_errno(HERD_ESYS, errno, "poll");
			goto out;
		}
		for (size_t i = 0; i < next; i++)
			if (nodes[i].state == RUNNING)
				ssh_service(&nodes[i]);
		left = running = 0;
		for (size_t i = 0; i < n; i++) {
			left += nodes[i].state != DONE && nodes[i].state != VIA_RELAY;
			running += nodes[i].state == RUNNING;
		}
		report_progress(o, nodes, n, &last, false);
		if (nfds == 0 && running > 0) {
			/* Only exits to wait for: not a busy loop. */
			struct timespec ts = { 0, 5 * 1000 * 1000 };

			nanosleep(&ts, NULL);
		}
	}
	st = HERD_OK;
out:
	for (size_t i = 0; i < n; i++)
		if (nodes[i].state == RUNNING) {
			herd__remote_channel_abort(&nodes[i].link.ch, REAP_MS);
			node_fail(&nodes[i], "stopped: %s", herd_last_error());
		}
	free(owner);
	free(fds);
	free(cmd);
	return st;
}

/* ---- in a Slurm allocation ------------------------------------------------ */

/* The next line of text[*at, len) without its newline; false at the end. */
static bool next_line(const char *text, size_t len, size_t *at, const char **line, size_t *n)
{
	const char *nl;

	if (*at >= len)
		return false;
	*line = text + *at;
	nl = memchr(*line, '\n', len - *at);
	*n = nl != NULL ? (size_t)(nl - *line) : len - *at;
	*at += *n + (nl != NULL);
	return true;
}

/*
 * A line of srun --label's output: "  T: text" (the task number padded to
 * the widest); *task -1 for a line of srun's own.
 */
static void split_label(const char *line, size_t n, long *task, const char **text, size_t *len)
{
	size_t i = 0;
	long t = 0;

	*task = -1;
	*text = line;
	*len = n;
	while (i < n && line[i] == ' ')
		i++;
	if (i == n || line[i] < '0' || line[i] > '9')
		return;
	for (; i < n && line[i] >= '0' && line[i] <= '9' && t < 10000000; i++)
		t = t * 10 + (line[i] - '0');
	if (i + 1 >= n || line[i] != ':' || line[i + 1] != ' ')
		return;
	*task = t;
	*text = line + i + 2;
	*len = n - i - 2;
}

typedef struct slurm_task {
	herd__buf out, err;
} slurm_task;

/* Sorts srun's lines in buf (whole lines only; the rest stays) into tasks. */
static void sort_lines(herd__buf *buf, slurm_task *tasks, size_t n, bool err, herd__buf *srun,
		       bool all)
{
	const char *data = (const char *)buf->data + buf->off;
	size_t len = buf->len - buf->off, at = 0, used = 0;
	const char *line = NULL, *text = NULL;
	size_t ln = 0, tl = 0;
	long task;

	while (next_line(data, len, &at, &line, &ln)) {
		if (at == len && data[len - 1] != '\n' && !all)
			break;
		used = at;
		split_label(line, ln, &task, &text, &tl);
		herd__buf *to = task >= 0 && (size_t)task < n
					? (err ? &tasks[task].err : &tasks[task].out)
					: srun;
		(void)herd__buf_append(to, text, tl);
		(void)herd__buf_append(to, "\n", 1);
	}
	herd__buf_consume(buf, used);
}

/* The last line of b, for a reason ("" when there is none). */
static const char *last_line(const herd__buf *b, char *out, size_t cap)
{
	size_t end = b->len, start;

	while (end > b->off && (b->data[end - 1] == '\n' || b->data[end - 1] == ' '))
		end--;
	start = end;
	while (start > b->off && b->data[start - 1] != '\n')
		start--;
	snprintf(out, cap, "%.*s", (int)(end - start), (const char *)b->data + start);
	return out;
}

static herd_status discover_slurm(probe_node *nodes, size_t n, const herd_discover_opts *o,
				  const char *program, int timeout_ms)
{
	enum { FIXED_ARGS = 16 };
	const char *argv[HERD__REMOTE_MAX_ARGS + FIXED_ARGS + 1];
	const char *srun = herd__param_str(HERD__P_SRUN);
	char extra[4096], nodes_arg[64], ntasks_arg[64], *nodelist = NULL, *nodelist_arg = NULL;
	const char **names = NULL;
	slurm_task *tasks = NULL;
	herd__launch_link link;
	herd__buf said;
	size_t nextra = 0, k = 0;
	int64_t deadline = herd__net_deadline(timeout_ms), last = 0;
	int wstatus = 0;
	bool timed_out = false;
	herd_status st;

	herd__launch_link_init(&link);
	herd__buf_init(&link.in, 0);
	herd__buf_init(&said, 1 << 20);
	HERD_CHECK_GOTO(herd__calloc(&names, n, sizeof(*names), "the node list"), st, out);
	HERD_CHECK_GOTO(herd__calloc(&tasks, n, sizeof(*tasks), "the tasks"), st, out);
	for (size_t i = 0; i < n; i++) {
		names[i] = nodes[i].host;
		herd__buf_init(&tasks[i].out, HERD_INVENTORY_MAX_BYTES / 2 * 3);
		herd__buf_init(&tasks[i].err, 1 << 16);
	}
	HERD_CHECK_GOTO(herd__hostlist_compress(&nodelist, names, n), st, out);
	if (asprintf(&nodelist_arg, "--nodelist=%s", nodelist) < 0) {
		nodelist_arg = NULL;
		st = herd__error(HERD_ENOMEM, "out of memory for srun's arguments");
		goto out;
	}
	snprintf(nodes_arg, sizeof(nodes_arg), "--nodes=%zu", n);
	snprintf(ntasks_arg, sizeof(ntasks_arg), "--ntasks=%zu", n);
	argv[k++] = srun != NULL ? srun : "srun";
	argv[k++] = nodes_arg;
	argv[k++] = ntasks_arg;
	argv[k++] = "--ntasks-per-node=1";
	argv[k++] = nodelist_arg;
	argv[k++] = "--kill-on-bad-exit=0";
	argv[k++] = "--input=none";
	argv[k++] = "--label";
	HERD_CHECK_GOTO(herd__param_words(HERD__P_SRUN_ARGS, extra, sizeof(extra), argv + k,
					  HERD__REMOTE_MAX_ARGS, &nextra), st, out);
	k += nextra;
	argv[k++] = program;
	argv[k++] = "probe";
	argv[k++] = "--text";
	argv[k] = NULL;
	{
		herd__launch_channel ch;

		HERD_CHECK_GOTO(herd__launch_spawn_helper(argv, NULL, &ch), st, out);
		herd__launch_link_attach(&link, &ch);
		close(link.ch.wfd);
		link.ch.wfd = -1;
	}
	for (size_t i = 0; i < n; i++)
		nodes[i].state = RUNNING;
	/* Until srun has closed both streams, or the deadline. */
	while (link.ch.rfd >= 0 || link.ch.errfd >= 0) {
		struct pollfd fds[3];
		size_t nfds = herd__launch_link_pollfds(&link, fds, true);
		int64_t now = herd__net_now_ms();
		herd__buf errbuf;

		if (now >= deadline) {
			timed_out = true;
			break;
		}
		if (poll(fds, (nfds_t)nfds, (int)(deadline - now < PROGRESS_MS ? deadline - now
									   : PROGRESS_MS)) < 0 &&
		    errno != EINTR) {
			st = herd__error_errno(HERD_ESYS, errno, "poll");
			goto out;
		}
		if (link.ch.rfd >= 0) {
			st = herd__launch_link_fill(&link);
			if (st != HERD_OK) {
				close(link.ch.rfd);
				link.ch.rfd = -1;
			}
			sort_lines(&link.in, tasks, n, false, &said, link.ch.rfd < 0);
		}
		/* stderr: whole lines of it, through a buffer of its own. */
		herd__buf_init(&errbuf, 0);
		if (link.err_len > 0 && memchr(link.err, '\n', link.err_len) != NULL) {
			(void)herd__buf_append(&errbuf, link.err, link.err_len);
			link.err_len = 0;
		}
		herd__launch_link_read_err(&link);
		if (link.ch.errfd < 0 && link.err_len > 0) {
			(void)herd__buf_append(&errbuf, link.err, link.err_len);
			link.err_len = 0;
		}
		sort_lines(&errbuf, tasks, n, true, &said, true);
		if (errbuf.len > errbuf.off) {
			memcpy(link.err, errbuf.data + errbuf.off, errbuf.len - errbuf.off);
			link.err_len = errbuf.len - errbuf.off;
		}
		herd__buf_free(&errbuf);
		report_progress(o, nodes, n, &last, false);
	}
	if (timed_out)
		herd__remote_channel_abort(&link.ch, REAP_MS);
	else {
		while (waitpid(link.ch.pid, &wstatus, 0) < 0 && errno == EINTR)
			;
		link.ch.pid = 0;
	}
	/*
	 * Task t ran on node t: one task a node, in block distribution, on
	 * the nodes in the allocation's order, which SLURM_JOB_NODELIST (and
	 * so the node list) follows.
	 */
	for (size_t t = 0; t < n; t++) {
		probe_node *p = &nodes[t];
		char why[600] = "";

		if (tasks[t].out.len > tasks[t].out.off) {
			node_answered(p, (const char *)tasks[t].out.data + tasks[t].out.off,
				      tasks[t].out.len - tasks[t].out.off);
			if (p->inv == NULL && tasks[t].err.len > tasks[t].err.off)
				node_fail(p, "%s (its task said: %s)", p->why,
					  last_line(&tasks[t].err, why, sizeof(why)));
			if (p->inv != NULL || !timed_out)
				continue;
		}
		last_line(tasks[t].err.len > tasks[t].err.off ? &tasks[t].err : &said, why,
			  sizeof(why));
		if (timed_out)
			node_fail(p, "no answer within %d s (--timeout)%s%s",
				  (timeout_ms + 999) / 1000, why[0] ? ": " : "", why);
		else
			node_fail(p, "no inventory from its srun task: %s",
				  why[0] ? why : "srun said nothing");
	}
	(void)wstatus;
	st = HERD_OK;
out:
	if (link.ch.pid > 0)
		herd__remote_channel_abort(&link.ch, REAP_MS);
	herd__launch_link_free(&link);
	herd__buf_free(&said);
	if (tasks != NULL)
		for (size_t i = 0; i < n; i++) {
			herd__buf_free(&tasks[i].out);
			herd__buf_free(&tasks[i].err);
		}
	free(tasks);
	free(nodelist_arg);
	free(nodelist);
	free(names);
	return st;
}

/* ---- an ssh tree ----------------------------------------------------------- */

/* Makes the first node of each group of the tree over nodes a relay. */
static herd_status plan_tree(probe_node *nodes, size_t n)
{
	size_t groups, off = 0, len = 0;
	const char **names = NULL;
	long width;

	HERD_CHECK(herd__ssh_tree_width(n, &width));
	if (width >= (long)n)
		return HERD_OK;
	HERD_CHECK(herd__calloc(&names, n + 1, sizeof(*names), "the node list"));
	for (size_t i = 0; i < n; i++)
		names[i] = nodes[i].host;
	groups = herd__launch_tree_groups(n, (int)width);
	for (size_t k = 0; k < groups; k++) {
		herd__launch_tree_group(n, (int)width, k, &off, &len);
		nodes[off].group = len;
		for (size_t j = off + 1; j < off + len; j++)
			nodes[j].state = VIA_RELAY;
		if (len > 1 && herd__hostlist_compress(&nodes[off].forward, names + off + 1,
						       len - 1) != HERD_OK) {
			free(names);
			return HERD_ENOMEM;
		}
	}
	free(names);
	return HERD_OK;
}

/* The nodes of a relay's group take their answers from the relay's. */
static void expand_relay(probe_node *nodes, size_t r)
{
	probe_node *relay = &nodes[r];
	herd_cluster *c = relay->inv;

	for (size_t j = r + 1; j < r + relay->group; j++) {
		probe_node *m = &nodes[j];
		bool found = false;

		if (c == NULL) {
			node_fail(m, "not reached: its relay %s failed: %s", relay->host, relay->why);
			continue;
		}
		for (size_t k = 1; k < c->nnodes && !found; k++) {
			if (c->nodes[k].hostname == NULL || strcmp(c->nodes[k].hostname, m->host) != 0 ||
			    herd__cluster_new(&m->inv, 1) != HERD_OK)
				continue;
			m->inv->nodes[0] = c->nodes[k];
			memset(&c->nodes[k], 0, sizeof(c->nodes[k]));
			m->state = DONE;
			found = true;
		}
		for (size_t f = 0; f < c->nfailed && !found; f++)
			if (strcmp(c->failed[f].host, m->host) == 0) {
				node_fail(m, "%s", c->failed[f].reason);
				found = true;
			}
		if (!found)
			node_fail(m, "its relay %s said nothing of it", relay->host);
	}
	/* The relay keeps its own node. */
	for (size_t k = 1; c != NULL && k < c->nnodes; k++)
		herd__node_clear(&c->nodes[k]);
	if (c != NULL && c->nnodes > 1)
		c->nnodes = 1;
}

/* ---- merging ------------------------------------------------------------- */

static herd_status merge(probe_node *nodes, size_t n, herd_cluster **out)
{
	herd_cluster *c = NULL;
	size_t ok = 0, bad = 0, j = 0, f = 0;
	herd_status st;

	for (size_t i = 0; i < n; i++)
		nodes[i].inv != NULL ? ok++ : bad++;
	if (ok == 0) {
		char msg[1024] = "";
		size_t len = 0;

		for (size_t i = 0; i < n && i < 3; i++)
			len += (size_t)snprintf(msg + len, len < sizeof(msg) ? sizeof(msg) - len : 0,
						"%s%s: %s", i ? "; " : "", nodes[i].host,
						nodes[i].why);
		return herd__error(HERD_EUNAVAIL, "none of the %zu nodes answered: %s%s", n, msg,
				   n > 3 ? "; ..." : "");
	}
	HERD_CHECK(herd__cluster_new(&c, ok));
	HERD_CHECK_GOTO(herd__calloc(&c->failed, bad + 1, sizeof(*c->failed), "failures"), st,
			fail);
	for (size_t i = 0; i < n; i++) {
		if (nodes[i].inv == NULL) {
			c->failed[f].reason = nodes[i].why;
			nodes[i].why = NULL;
			c->nfailed = ++f;
			if (herd__strdup(&c->failed[f - 1].host, nodes[i].host) != HERD_OK) {
				st = HERD_ENOMEM;
				goto fail;
			}
			continue;
		}
		c->nodes[j] = nodes[i].inv->nodes[0];
		memset(&nodes[i].inv->nodes[0], 0, sizeof(herd_node));
		free((void *)c->nodes[j].hostname);
		c->nodes[j].hostname = NULL;
		if (herd__strdup(&HERD_MUT(char *, c->nodes[j].hostname), nodes[i].host) != HERD_OK) {
			st = HERD_ENOMEM;
			goto fail;
		}
		j++;
	}
	*out = c;
	return HERD_OK;
fail:
	herd_cluster_free(c);
	return st;
}

/* ---- the call -------------------------------------------------------------- */

herd_status herd_cluster_discover(herd_cluster **out, const herd_discover_opts *opts)
{
	const herd_discover_opts *o = opts != NULL && opts->version >= 2 ? opts : NULL;
	const herd__launch_backend *be;
	herd__launch_node *lnodes = NULL;
	probe_node *nodes = NULL;
	herd_job_spec spec;
	const char *program;
	size_t n = 0;
	int kinds, timeout_ms;
	herd_status st;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_cluster_discover: out is NULL");
	*out = NULL;
	if (opts != NULL)
		HERD__CHECK_VERSION("herd_cluster_discover", opts, herd_discover_opts,
				    DISCOVER_OPTS);
	kinds = o != NULL ? (o->hosts != NULL) + (o->hostfile != NULL) + (o->slurm != 0) : 0;
	if (kinds > 1)
		return herd__error(HERD_EINVAL, "herd_cluster_discover: hosts, hostfile and slurm "
				   "are different ways to name the nodes; give one");
	if (kinds == 1 && opts->inventory != NULL)
		return herd__error(HERD_EINVAL, "herd_cluster_discover: an inventory file or nodes "
				   "to probe, not both");
	if (opts != NULL && opts->inventory != NULL)
		return herd_cluster_load(out, opts->inventory);
	if (kinds == 0) {
		/* A recorded inventory stands for this node's hardware: tests
		 * and offline planning (herd alloc, herd gpus) on machines one
		 * is not on. */
		if (herd__param_str(HERD__P_INVENTORY) != NULL)
			return herd_cluster_load(out, herd__param_str(HERD__P_INVENTORY));
		return herd__cluster_probe(out);
	}
	if (o->timeout_ms < 0)
		return herd__error(HERD_EINVAL, "herd_cluster_discover: timeout_ms %d is negative",
				   o->timeout_ms);
	timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
	program = o->herd_program != NULL && o->herd_program[0] != '\0'
			  ? o->herd_program
			  : herd__param_str(HERD__P_PROGRAM) != NULL
				    ? herd__param_str(HERD__P_PROGRAM)
				    : "herd";
	memset(&spec, 0, sizeof(spec));
	spec.where = o->slurm ? HERD_JOB_SLURM : o->hostfile ? HERD_JOB_HOSTFILE : HERD_JOB_HOSTS;
	spec.hosts = o->hostfile != NULL ? o->hostfile : o->hosts;
	HERD_CHECK(herd__launch_backend_for(spec.where, &be));
	HERD_CHECK(be->resolve(&spec, &lnodes, &n));
	HERD_CHECK_GOTO(herd__calloc(&nodes, n, sizeof(*nodes), "the nodes"), st, out);
	for (size_t i = 0; i < n; i++) {
		nodes[i].host = lnodes[i].host;
		herd__launch_link_init(&nodes[i].link);
	}
	for (size_t i = 0; i < n; i++)
		nodes[i].group = 1;
	if (!o->slurm)
		HERD_CHECK_GOTO(plan_tree(nodes, n), st, out);
	st = o->slurm ? discover_slurm(nodes, n, o, program, timeout_ms)
		      : discover_ssh(nodes, n, o, program, timeout_ms);
	for (size_t i = 0; st == HERD_OK && i < n; i++)
		if (nodes[i].group > 1)
			expand_relay(nodes, i);
	if (st == HERD_OK) {
		int64_t last = 0;

		report_progress(o, nodes, n, &last, true);
		st = merge(nodes, n, out);
	}
out:
	for (size_t i = 0; i < n && nodes != NULL; i++) {
		herd__launch_link_free(&nodes[i].link);
		herd_cluster_free(nodes[i].inv);
		free(nodes[i].why);
		free(nodes[i].forward);
	}
	free(nodes);
	herd__launch_nodes_free(lnodes, n);
	return st;
}

herd_status herd__discover_relay(const char *forward, int timeout_ms, const char *program,
				 herd_cluster **out)
{
	herd__launch_node *lnodes = NULL;
	probe_node *nodes = NULL;
	char self[256];
	size_t n = 0;
	herd_status st;

	*out = NULL;
	HERD_CHECK(herd__remote_nodes_from_hostlist(forward, &lnodes, &n));
	HERD_CHECK_GOTO(herd__calloc(&nodes, n + 1, sizeof(*nodes), "the nodes"), st, out);
	/* This node first, as the one a relay's parent reached. */
	HERD_CHECK_GOTO(herd_cluster_discover(&nodes[0].inv, NULL), st, out);
	/* merge renames the node to host: a copy of its own name, not the name. */
	herd__strlcpy(self, nodes[0].inv->nodes[0].hostname != NULL
				    ? nodes[0].inv->nodes[0].hostname : "localhost", sizeof(self));
	nodes[0].host = self;
	nodes[0].state = DONE;
	for (size_t i = 0; i <= n; i++) {
		nodes[i].group = 1;
		herd__launch_link_init(&nodes[i].link);
		if (i > 0)
			nodes[i].host = lnodes[i - 1].host;
	}
	HERD_CHECK_GOTO(discover_ssh(nodes + 1, n, NULL, program, timeout_ms), st, out);
	st = merge(nodes, n + 1, out);
out:
	for (size_t i = 0; i <= n && nodes != NULL; i++) {
		herd__launch_link_free(&nodes[i].link);
		herd_cluster_free(nodes[i].inv);
		free(nodes[i].why);
	}
	free(nodes);
	herd__launch_nodes_free(lnodes, n);
	return st;
}
