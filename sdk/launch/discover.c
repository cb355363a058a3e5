/*
 * sdk/launch/discover.c - herd_cluster_discover: this node, an inventory
 * file, or many nodes, each of which runs `herd probe --text` and prints
 * its inventory in the text form (HERD_CLUSTER_FORMAT_TEXT), which survives any
 * channel.
 *
 * The probes run through the remote-run engine (engine.h).  Over ssh every
 * node has a client of its own (at most HERD_DISCOVER_FANOUT at a time),
 * whose stdout is that node's text and whose stderr and exit status say
 * why when there is none; beyond HERD_SSH_TREE_MIN nodes the head of each
 * group of the tree probes its group (`herd probe --text --forward`,
 * herd_agent_discover_relay) and answers for all of it.  In a Slurm allocation
 * one srun step runs a task on every node, and the engine sorts its
 * labelled lines back into tasks, task t being node t.  Each node's text
 * is decoded with the strict decoder; the nodes that answered are merged
 * in the order given, the others listed with their reasons
 * (herd_cluster_failure).
 */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "topo/hostlist.h"
#include "topo/inventory.h"
#include "herd/sys/agent.h"
#include "engine.h"
#include "net.h"
#include "remote.h"

#define DEFAULT_TIMEOUT_MS 30000
#define PROGRESS_MS 100
/* How long a helper that closed its output may take to exit. */
#define REAP_MS 1000

/* ---- one node ------------------------------------------------------------ */

typedef struct probe_node {
	const char *host;          /* as reached */
	bool done;
	herd_cluster *inv;         /* answered */
	char *why;                 /* failed */
	size_t group;              /* a relay's nodes, itself first (else 1) */
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
	p->done = true;
}

/*
 * Whether the text starts with something else than herd probe's answer,
 * which comes after it (a login banner, a shell start-up file's echo):
 * then p fails, saying so.
 */
static bool text_before_answer(probe_node *p, const char *text, size_t len)
{
	static const char magic[] = "\n" HERD__INVENTORY_TEXT_MAGIC;
	herd__buf b = { .data = (uint8_t *)text, .len = len };
	const char *at;

	if (len >= sizeof(magic) - 2 && memcmp(text, magic + 1, sizeof(magic) - 2) == 0)
		return false;
	at = memmem(text, len, magic, sizeof(magic) - 1);
	if (at == NULL || herd__launch_text_error(&b, false) == HERD_OK)
		return false;
	node_fail(p, "%s", herd_last_error());
	return true;
}

/* A node's text, read: decoded into p->inv, or the reason it is not. */
static void node_answered(probe_node *p, const char *text, size_t len)
{
	char origin[300];
	const char *m;
	size_t k;

	if (text_before_answer(p, text, len))
		return;
	snprintf(origin, sizeof(origin), "%s", p->host);
	if (len > 0 && herd_cluster_decode(&p->inv, text, len, origin) == HERD_OK) {
		if (herd_cluster_node_count(p->inv) == 1 ||
		    (p->group > 1 && herd_cluster_node_count(p->inv) >= 1)) {
			p->done = true;
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

/* ---- the probes, through the engine ------------------------------------------ */

typedef struct discovery {
	probe_node *nodes;
	size_t n;
	herd__engine *engine;
	const herd_cluster_discover_opts *o;
	int timeout_ms;
	bool one_step;
	herd__timer progress;
	int64_t last;
} discovery;

static void report_progress(discovery *d, bool final)
{
	size_t done = 0, failed = 0;
	int64_t now;

	if (d->o == NULL || d->o->progress == NULL)
		return;
	now = herd__net_now_ms();
	if (!final && now - d->last < PROGRESS_MS)
		return;
	d->last = now;
	for (size_t i = 0; i < d->n; i++)
		if (d->nodes[i].done)
			d->nodes[i].inv != NULL ? done++ : failed++;
	d->o->progress(d->o->userdata, done, failed, d->n - done - failed);
}

static void on_progress(herd__timer *t)
{
	discovery *d = t->data;

	report_progress(d, false);
	(void)herd__loop_timer(herd__engine_loop(d->engine), t, herd__net_now_ms() + PROGRESS_MS);
}

/*
 * `herd probe --text`, or for a relay `herd probe --text --forward GROUP
 * --timeout S`, which probes its group itself and answers for all of them.
 */
static herd_status probe_words(void *userdata, const char *forward, const char **words,
			       size_t max, size_t *n, char *buf, size_t cap)
{
	const discovery *d = userdata;

	(void)max;
	*n = 0;
	words[(*n)++] = "probe";
	words[(*n)++] = "--text";
	if (forward == NULL)
		return HERD_OK;
	snprintf(buf, cap, "%d", (d->timeout_ms + 999) / 1000);
	words[(*n)++] = "--forward";
	words[(*n)++] = forward;
	words[(*n)++] = "--timeout";
	words[(*n)++] = buf;
	return HERD_OK;
}

/*
 * Why a helper answering for group nodes failed at the bound (then: what
 * became of the rest of its output).
 */
static const char *too_much(size_t group, const char *then, char *buf, size_t cap)
{
	size_t mib = HERD__INVENTORY_NODE_TEXT_MAX >> 20;

	if (group > 1)
		snprintf(buf, cap, "printed more than %zu MiB on stdout, more than the "
			 "inventories of its %zu nodes may take (%zu MiB a node); %s",
			 mib * group, group, mib, then);
	else
		snprintf(buf, cap, "printed more than %zu MiB on stdout, more than an inventory "
			 "may take; %s", mib, then);
	return buf;
}

/* One node's ssh ended: its exit status and output decide. */
static void ssh_ended(discovery *d, size_t h, probe_node *p, const herd__engine_end *end)
{
	char said[HERD__LAUNCH_LINK_ERR_MAX + 8];
	const char *words = herd__engine_says(d->engine, h, said, sizeof(said));
	const herd__buf *in = &herd__engine_link(d->engine, h)->in;
	int ws = end->wstatus;

	if (end->st == HERD_ETIMEDOUT) {
		node_fail(p, "no answer within %d s (--timeout)",
			  ((p->group > 1 ? 2 : 1) * d->timeout_ms + 999) / 1000);
	} else if (end->st == HERD_EFORMAT) {
		node_fail(p, "%s", too_much(p->group, "stopped reading it", said, sizeof(said)));
	} else if (end->st != HERD_OK) {
		node_fail(p, "%s", end->why);
	} else if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) {
		node_answered(p, (const char *)in->data + in->off, in->len - in->off);
	} else if (WIFEXITED(ws) && WEXITSTATUS(ws) == 255) {
		/* ssh's own words start "ssh: " already. */
		node_fail(p, "%s%s", strncmp(words, ": ssh:", 6) == 0 ? "" : "ssh",
			  words[0] == '\0' ? ": exit status 255"
			  : strncmp(words, ": ssh:", 6) == 0 ? words + 2 : words);
	} else if (WIFEXITED(ws)) {
		node_fail(p, "herd probe exited %d%s", WEXITSTATUS(ws), words);
	} else {
		node_fail(p, "ssh ended by signal %d%s", WTERMSIG(ws), words);
	}
}

/*
 * The srun step ended: task t ran on node t (one task a node, in block
 * distribution, on the nodes in the allocation's order, which
 * SLURM_JOB_NODELIST and so the node list follow).
 */
static void step_ended(discovery *d, const herd__engine_end *end)
{
	bool timed_out = end->st == HERD_ETIMEDOUT;

	for (size_t t = 0; t < d->n; t++) {
		probe_node *p = &d->nodes[t];
		const herd__buf *out = herd__engine_node_out(d->engine, t);
		const herd__buf *err = herd__engine_node_err(d->engine, t);
		char why[600] = "";

		if (herd__engine_node_over(d->engine, t)) {
			node_fail(p, "%s", too_much(1, "the rest was dropped", why, sizeof(why)));
			continue;
		}
		if (out->len > out->off) {
			node_answered(p, (const char *)out->data + out->off, out->len - out->off);
			if (p->inv == NULL && err->len > err->off)
				node_fail(p, "%s (its task said: %s)", p->why,
					  herd__engine_last_line(err, why, sizeof(why)));
			if (p->inv != NULL || !timed_out)
				continue;
		}
		herd__engine_last_line(err->len > err->off ? err : herd__engine_said(d->engine), why,
				       sizeof(why));
		if (timed_out)
			node_fail(p, "no answer within %d s (--timeout)%s%s",
				  (d->timeout_ms + 999) / 1000, why[0] ? ": " : "", why);
		else if (end->st != HERD_OK)
			node_fail(p, "%s", end->why);
		else
			node_fail(p, "no inventory from its srun task: %s",
				  why[0] ? why : "srun said nothing");
	}
}

static void probe_ended(void *userdata, size_t h, const herd__engine_end *end)
{
	discovery *d = userdata;
	size_t first, count;

	if (d->one_step) {
		step_ended(d, end);
		return;
	}
	herd__engine_nodes(d->engine, h, &first, &count);
	d->nodes[first].group = count;
	ssh_ended(d, h, &d->nodes[first], end);
}

/* Runs the probes of nodes[0..n) through backend be, until each has answered or failed. */
static herd_status probe_all(probe_node *nodes, size_t n, const herd_cluster_discover_opts *o,
			     const herd__launch_backend *be, const char *program, int timeout_ms,
			     bool flat)
{
	herd__engine_client client = { .ended = probe_ended };
	const char **names = NULL;
	discovery d = { .nodes = nodes, .n = n, .o = o, .timeout_ms = timeout_ms,
			.one_step = be->one_step };
	herd__engine_cmd cmd = { .program = program, .words = probe_words, .userdata = &d,
				 .timeout_ms = timeout_ms, .flat = flat,
				 .in_max = HERD__INVENTORY_NODE_TEXT_MAX };
	long fanout = 0;
	herd_status st;

	if (!be->one_step)
		HERD_CHECK(herd__param_int(HERD__P_DISCOVER_FANOUT, &fanout));
	HERD_CHECK(herd__calloc(&names, n + 1, sizeof(*names), "the node list"));
	for (size_t i = 0; i < n; i++)
		names[i] = nodes[i].host;
	cmd.hosts = names;
	cmd.nhosts = n;
	cmd.fanout = (size_t)fanout;
	client.userdata = &d;
	HERD_CHECK_GOTO(herd__engine_create(&d.engine, be, &client, NULL), st, out);
	HERD_CHECK_GOTO(herd__engine_fanout(d.engine, &cmd), st, out);
	herd__timer_init(&d.progress, on_progress, &d);
	HERD_CHECK_GOTO(herd__loop_timer(herd__engine_loop(d.engine), &d.progress,
					 herd__net_now_ms() + PROGRESS_MS), st, out);
	while (herd__engine_live(d.engine) > 0)
		HERD_CHECK_GOTO(herd__engine_run_once(d.engine, -1), st, out);
	st = HERD_OK;
out:
	if (st != HERD_OK) {
		char why[1024];

		herd__strlcpy(why, herd_last_error(), sizeof(why));
		for (size_t i = 0; i < n; i++)
			if (!nodes[i].done)
				node_fail(&nodes[i], "stopped: %s", why);
		herd__error(st, "%s", why);
	}
	herd__engine_free(d.engine, REAP_MS);
	free(names);
	return st;
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
			m->done = true;
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

herd_status herd_cluster_discover(herd_cluster **out, const herd_cluster_discover_opts *opts)
{
	const herd_cluster_discover_opts *o = opts != NULL && opts->version >= 2 ? opts : NULL;
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
		HERD__CHECK_VERSION("herd_cluster_discover", opts, herd_cluster_discover_opts,
				    CLUSTER_DISCOVER_OPTS);
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
		nodes[i].group = 1;
	}
	st = probe_all(nodes, n, o, be, program, timeout_ms, false);
	for (size_t i = 0; st == HERD_OK && i < n; i++)
		if (nodes[i].group > 1)
			expand_relay(nodes, i);
	if (st == HERD_OK) {
		discovery d = { .nodes = nodes, .n = n, .o = o };

		report_progress(&d, true);
		st = merge(nodes, n, out);
	}
out:
	for (size_t i = 0; i < n && nodes != NULL; i++) {
		herd_cluster_free(nodes[i].inv);
		free(nodes[i].why);
	}
	free(nodes);
	herd__launch_nodes_free(lnodes, n);
	return st;
}

herd_status herd_agent_discover_relay(herd_cluster **out, const char *forward, int timeout_ms,
				      const char *program)
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
	nodes[0].done = true;
	for (size_t i = 0; i <= n; i++) {
		nodes[i].group = 1;
		if (i > 0)
			nodes[i].host = lnodes[i - 1].host;
	}
	/* Its group is reached flat, each node over ssh. */
	HERD_CHECK_GOTO(probe_all(nodes + 1, n, NULL, &herd__launch_backend_ssh, program,
				  timeout_ms, true), st, out);
	st = merge(nodes, n + 1, out);
out:
	for (size_t i = 0; i <= n && nodes != NULL; i++) {
		herd_cluster_free(nodes[i].inv);
		free(nodes[i].why);
	}
	free(nodes);
	herd__launch_nodes_free(lnodes, n);
	return st;
}
