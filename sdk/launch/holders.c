/*
 * sdk/launch/holders.c - the checkpoint holders of a job (herd_job_spec
 * ckpt_peers): one `herd ckpt hold` per node, started through the engine
 * over the job's backend before the node's first run and kept until the
 * job ends, so that the copies in its memory outlive a failed run.
 *
 * Each holder prints "hold PORT TOKEN" once; the job gives each run's
 * ranks the holders of its nodes as HERD_CKPT_HOLDERS.  The engine's loop
 * is turned only here, at the start of a run: the holders say nothing
 * after their first line, and a holder whose channel ended meanwhile (its
 * node lost, its ssh cut) is seen then and started again when its node
 * runs ranks.  Freeing the engine closes every channel; each holder ends
 * with its standard input.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "holders.h"
#include "net.h"

#define REAP_MS 1000
#define TOKEN_LEN 32

struct holder_node {
	char *host;
	struct batch *b;           /* the engine that started its holder; NULL: none */
	size_t h;                  /* its helper there */
	bool up;                   /* it printed its port */
	bool ended;
	int port;
	char token[TOKEN_LEN + 1];
	char why[256];             /* why it is not up */
};

/* The holders started together: an engine runs one command. */
struct batch {
	herd__holders *hs;
	herd__engine *engine;
	const char **hosts;        /* the command's, as long as the engine lives */
	size_t *node;              /* helper index -> node */
	size_t n;
};

struct herd__holders {
	const herd__launch_backend *be;
	const char *program;
	struct holder_node *nodes; /* by host, as met */
	size_t n;
	struct batch **batches;
	size_t nbatches;
};

static struct holder_node *node_of(struct batch *b, size_t h)
{
	return h < b->n ? &b->hs->nodes[b->node[h]] : NULL;
}

/* "hold PORT TOKEN\n": the holder is up. */
static void on_input(void *userdata, size_t h, herd__buf *in)
{
	struct batch *b = userdata;
	struct holder_node *n = node_of(b, h);
	const char *p = (const char *)in->data + in->off;
	const char *nl = memchr(p, '\n', in->len - in->off);
	char token[TOKEN_LEN + 2], line[128];
	int port, got;

	if (nl == NULL || n == NULL)
		return;
	/* The buffer holds no NUL: the line is scanned from a copy. */
	snprintf(line, sizeof(line), "%.*s", (int)(nl - p), p);
	got = sscanf(line, "hold %d %33s", &port, token);
	if (!n->up && got == 2 && port > 0 && port < 65536 && strlen(token) == TOKEN_LEN) {
		n->up = true;
		n->port = port;
		memcpy(n->token, token, TOKEN_LEN + 1);
		herd__engine_deadline(b->engine, h, -1);
	} else if (!n->up) {
		snprintf(n->why, sizeof(n->why), "its holder printed \"%.*s\", not its port",
			 (int)(nl - p < 80 ? nl - p : 80), p);
	}
	herd__buf_consume(in, (size_t)(nl + 1 - p));
}

static void on_ended(void *userdata, size_t h, const herd__engine_end *end)
{
	struct batch *b = userdata;
	struct holder_node *n = node_of(b, h);
	char said[HERD__LAUNCH_LINK_ERR_MAX + 8];

	if (n == NULL || n->b != b || n->h != h)
		return;   /* a holder replaced since */
	n->ended = true;
	n->up = false;
	if (n->why[0] != '\0')
		return;
	if (end->st != HERD_OK)
		snprintf(n->why, sizeof(n->why), "its checkpoint holder: %s", end->why);
	else
		snprintf(n->why, sizeof(n->why), "its checkpoint holder ended%s",
			 herd__engine_says(b->engine, h, said, sizeof(said)));
}

/*
 * `herd ckpt hold`, with the budget and the steps this process's
 * HERD_CKPT_PEER_BYTES and HERD_CKPT_PEER_STEPS set (ssh carries no
 * environment): the settings of the launch are the holders'.
 */
static herd_status hold_words(void *userdata, const char *forward, const char **words,
			      size_t max, size_t *n, char *buf, size_t cap)
{
	const char *budget = herd__param_str(HERD__P_CKPT_PEER_BYTES);
	const char *steps = herd__param_str(HERD__P_CKPT_PEER_STEPS);

	(void)userdata;
	(void)forward;
	(void)max;
	(void)buf;
	(void)cap;
	*n = 0;
	words[(*n)++] = "ckpt";
	words[(*n)++] = "hold";
	if (budget != NULL && budget[0] != '\0') {
		words[(*n)++] = "--budget";
		words[(*n)++] = budget;
	}
	if (steps != NULL && steps[0] != '\0') {
		words[(*n)++] = "--steps";
		words[(*n)++] = steps;
	}
	return HERD_OK;
}

herd_status herd__holders_create(herd__holders **out, const herd__launch_backend *be,
				 const char *program)
{
	herd__holders *hs = NULL;

	*out = NULL;
	HERD_CHECK(herd__calloc(&hs, 1, sizeof(*hs), "the checkpoint holders"));
	hs->be = be;
	hs->program = program;
	*out = hs;
	return HERD_OK;
}

static void batch_free(struct batch *b)
{
	if (b == NULL)
		return;
	herd__engine_free(b->engine, REAP_MS);
	free(b->hosts);
	free(b->node);
	free(b);
}

void herd__holders_free(herd__holders *hs)
{
	if (hs == NULL)
		return;
	for (size_t i = 0; i < hs->nbatches; i++)
		batch_free(hs->batches[i]);
	free(hs->batches);
	for (size_t i = 0; i < hs->n; i++)
		free(hs->nodes[i].host);
	free(hs->nodes);
	free(hs);
}

static herd_status find_node(herd__holders *hs, const char *host, size_t *at)
{
	struct holder_node *grown;

	for (size_t i = 0; i < hs->n; i++)
		if (strcmp(hs->nodes[i].host, host) == 0) {
			*at = i;
			return HERD_OK;
		}
	grown = realloc(hs->nodes, (hs->n + 1) * sizeof(*grown));
	if (grown == NULL)
		return herd__error(HERD_ENOMEM, "out of memory for the checkpoint holders");
	hs->nodes = grown;
	memset(&grown[hs->n], 0, sizeof(*grown));
	grown[hs->n].h = SIZE_MAX;
	HERD_CHECK(herd__strdup(&grown[hs->n].host, host));
	*at = hs->n++;
	return HERD_OK;
}

static bool waiting(const herd__holders *hs)
{
	for (size_t k = 0; k < hs->n; k++)
		if (hs->nodes[k].b != NULL && !hs->nodes[k].up && !hs->nodes[k].ended)
			return true;
	return false;
}

/*
 * Turns every batch's loop: once each without waiting (until -1), or
 * until every holder started is up or ended, or until passes.
 */
static herd_status turn(herd__holders *hs, int64_t until)
{
	do {
		for (size_t i = 0; i < hs->nbatches; i++) {
			int64_t now = herd__net_now_ms();
			int64_t to = until < 0 || i + 1 < hs->nbatches ? now
				     : now + 20 < until ? now + 20 : until;

			HERD_CHECK(herd__engine_run_once(hs->batches[i]->engine, to));
		}
	} while (until >= 0 && waiting(hs) && herd__net_now_ms() < until);
	return HERD_OK;
}

/* Starts holders on hosts[0..n): a batch of its own. */
static herd_status start_batch(herd__holders *hs, const char **hosts, size_t n, int timeout_ms)
{
	herd__engine_client client = { .input = on_input, .ended = on_ended };
	herd__engine_cmd cmd = { .program = hs->program, .words = hold_words, .input = true,
				 .timeout_ms = timeout_ms, .flat = true, .in_max = 4096 };
	struct batch *b = NULL, **grown;
	herd_status st;

	grown = realloc(hs->batches, (hs->nbatches + 1) * sizeof(*grown));
	if (grown == NULL)
		return herd__error(HERD_ENOMEM, "out of memory for the checkpoint holders");
	hs->batches = grown;
	HERD_CHECK(herd__calloc(&b, 1, sizeof(*b), "the checkpoint holders"));
	b->hs = hs;
	b->hosts = hosts;
	client.userdata = b;
	HERD_CHECK_GOTO(herd__calloc(&b->node, n + 1, sizeof(size_t), "the holders"), st, fail);
	HERD_CHECK_GOTO(herd__engine_create(&b->engine, hs->be, &client, NULL), st, fail);
	cmd.hosts = hosts;
	cmd.nhosts = n;
	HERD_CHECK_GOTO(herd__engine_fanout(b->engine, &cmd), st, fail);
	b->n = herd__engine_helpers(b->engine);
	for (size_t h = 0; h < b->n; h++) {
		size_t first, count, k = 0;

		herd__engine_nodes(b->engine, h, &first, &count);
		for (k = 0; k < hs->n && strcmp(hs->nodes[k].host, hosts[first]) != 0; k++)
			;
		b->node[h] = k;
		hs->nodes[k].b = b;
		hs->nodes[k].h = h;
	}
	hs->batches[hs->nbatches++] = b;
	return HERD_OK;
fail:
	b->hosts = NULL;   /* the caller's still */
	batch_free(b);
	return st;
}

herd_status herd__holders_ensure(herd__holders *hs, const char *const *hosts, size_t n,
				 int timeout_ms, char **list, char *notes, size_t notes_cap)
{
	const char **start = NULL;
	size_t *idx = NULL, nstart = 0, len = 0, cap = 0;
	char *out = NULL;
	herd_status st;

	*list = NULL;
	notes[0] = '\0';
	HERD_CHECK(turn(hs, -1));   /* what ended since the last run */
	HERD_CHECK_GOTO(herd__calloc(&start, n + 1, sizeof(*start), "the holders to start"), st,
			out);
	HERD_CHECK_GOTO(herd__calloc(&idx, n + 1, sizeof(*idx), "the holders to start"), st,
			out);
	for (size_t i = 0; i < n; i++) {
		struct holder_node *hn;

		HERD_CHECK_GOTO(find_node(hs, hosts[i], &idx[i]), st, out);
		hn = &hs->nodes[idx[i]];
		if (hn->up || (hn->b != NULL && !hn->ended))
			continue;
		hn->b = NULL;
		hn->ended = false;
		hn->why[0] = '\0';
		start[nstart++] = hn->host;
	}
	if (nstart > 0) {
		HERD_CHECK_GOTO(start_batch(hs, start, nstart, timeout_ms), st, out);
		start = NULL;   /* the batch's */
		HERD_CHECK_GOTO(turn(hs, herd__net_now_ms() + timeout_ms), st, out);
	}
	for (size_t i = 0; i < n; i++) {
		struct holder_node *hn = &hs->nodes[idx[i]];
		char entry[512];
		int w;

		if (hn->up) {
			/* ssh's user@host is the ranks' host. */
			const char *at = strrchr(hn->host, '@');

			w = snprintf(entry, sizeof(entry), "%s%s:%d/%s", i ? "," : "",
				     at != NULL ? at + 1 : hn->host, hn->port, hn->token);
		} else {
			w = snprintf(entry, sizeof(entry), "%s-", i ? "," : "");
			if (strlen(notes) + strlen(hn->host) + 64 < notes_cap)
				snprintf(notes + strlen(notes), notes_cap - strlen(notes),
					 "%snode %s has no checkpoint holder: %.150s",
					 notes[0] ? "; " : "", hn->host,
					 hn->why[0] ? hn->why : "it did not answer in time");
		}
		if (len + (size_t)w + 1 > cap) {
			char *g;

			cap = 2 * (len + (size_t)w + 1);
			g = realloc(out, cap);
			if (g == NULL) {
				st = herd__error(HERD_ENOMEM, "out of memory for HERD_CKPT_HOLDERS");
				goto out;
			}
			out = g;
		}
		memcpy(out + len, entry, (size_t)w + 1);
		len += (size_t)w;
	}
	*list = out;
	out = NULL;
	st = HERD_OK;
out:
	free(out);
	free(start);
	free(idx);
	return st;
}
