/*
 * sdk/launch/relay.c - the tree fan-out: the shape of the tree, and the
 * relay, the part of a `herd exec` with a subtree that does for its
 * children what the launcher does for its nodes (launch_internal.h, "Tree
 * fan-out"): starts `herd exec` on each over ssh, passes spec frames and
 * commands down and every frame of the subtree up, wrapped with the node
 * it came from, and reports the nodes it cannot reach or loses.  Channels
 * are herd__launch_link, the launcher's own (link.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "net.h"
#include "remote.h"

/* How long children may take to stop after the channel above closed,
 * beyond the grace period, before they are killed. */
#define SHUT_SLACK_MS 5000

size_t herd__launch_tree_groups(size_t n, int width)
{
	return width < 1 ? n : (n < (size_t)width ? n : (size_t)width);
}

void herd__launch_tree_group(size_t n, int width, size_t k, size_t *off, size_t *len)
{
	size_t g = herd__launch_tree_groups(n, width), base, extra;

	if (g == 0) {
		*off = *len = 0;
		return;
	}
	base = n / g;
	extra = n % g;
	*off = k * base + (k < extra ? k : extra);
	*len = base + (k < extra ? 1 : 0);
}

void herd__launch_tree_free(herd__launch_tree *t)
{
	for (size_t i = 0; t->argv != NULL && t->argv[i] != NULL; i++)
		free(t->argv[i]);
	free(t->argv);
	free(t->cmd);
	memset(t, 0, sizeof(*t));
}

struct child {
	herd__launch_link link;
	int node;            /* its node rank */
	size_t len;          /* it and its subtree: nodes node..node+len-1 */
	bool open;           /* its channel has not finished */
};

struct herd__relay {
	const herd__node_spec *spec;   /* borrowed: hosts, own node rank */
	herd__buf *up;
	bool *finished;                /* per subtree node: done or error went up */
	struct child *kids;
	size_t nkids;
	bool read, shut;
	int64_t shut_deadline;
};

/* Appends one whole frame (length prefix, payload) to b. */
static herd_status append_frame(herd__buf *b, const char *payload, size_t len)
{
	unsigned char head[4] = { (unsigned char)(len >> 24), (unsigned char)(len >> 16),
				  (unsigned char)(len >> 8), (unsigned char)len };

	HERD_CHECK(herd__buf_reserve(b, len + 4));
	HERD_CHECK(herd__buf_append(b, head, 4));
	return herd__buf_append(b, payload, len);
}

static bool *finished_of(herd__relay *r, int node)
{
	return &r->finished[node - r->spec->node_rank - 1];
}

static const char *host_of(const herd__relay *r, int node)
{
	return r->spec->sub[node - r->spec->node_rank - 1];
}

/* An error frame from node, as if it had sent it, on its way up. */
static void report_up(herd__relay *r, int node, herd_status st, const char *msg)
{
	herd__buf tmp;

	herd__buf_init(&tmp, 0);
	if (herd__launch_enc_error(&tmp, st, msg) == HERD_OK)
		herd__launch_enc_relay(r->up, node, (const char *)tmp.data + tmp.off + 4,
				       tmp.len - tmp.off - 4);
	herd__buf_free(&tmp);
	*finished_of(r, node) = true;
}

/*
 * A child's channel has ended: it and every node below it that had not
 * finished are reported up as lost, naming this relay and quoting ssh.
 */
static void child_end(herd__relay *r, struct child *c, const char *why)
{
	char says[HERD__LAUNCH_LINK_ERR_MAX + 8], msg[HERD__LAUNCH_LINK_ERR_MAX + 1400];

	herd__launch_link_read_err(&c->link);
	for (size_t k = 0; k < c->len; k++) {
		int node = c->node + (int)k;

		if (*finished_of(r, node))
			continue;
		if (k == 0)
			snprintf(msg, sizeof(msg), "%.900s (started over ssh by relay node %s)%s",
				 why, r->spec->host, herd__launch_link_says(&c->link, says,
									    sizeof(says)));
		else
			snprintf(msg, sizeof(msg), "relay node %s was lost: %.900s",
				 host_of(r, c->node), why);
		report_up(r, node, HERD_ECLOSED, msg);
	}
	herd__remote_channel_abort(&c->link.ch, 1000);
	c->open = false;
}

herd_status herd__relay_start(herd__relay **out, const herd__node_spec *spec, herd__buf *up)
{
	herd__relay *r = NULL;
	const char **argv = NULL;
	size_t nrsh = 0, host_at;
	herd_status st;

	*out = NULL;
	if (spec->nsub < 1 || spec->rsh == NULL || spec->rcmd == NULL)
		return herd__error(HERD_EINVAL, "herd__relay_start: the spec has no subtree");
	while (spec->rsh[nrsh] != NULL)
		nrsh++;
	HERD_CHECK(herd__calloc(&r, 1, sizeof(*r), "a relay"));
	r->spec = spec;
	r->up = up;
	r->read = true;
	r->nkids = herd__launch_tree_groups((size_t)spec->nsub, spec->width);
	HERD_CHECK_GOTO(herd__calloc(&r->finished, (size_t)spec->nsub, sizeof(bool),
				     "a relay's nodes"), st, fail);
	HERD_CHECK_GOTO(herd__calloc(&r->kids, r->nkids, sizeof(*r->kids), "a relay's children"),
			st, fail);
	HERD_CHECK_GOTO(herd__calloc(&argv, nrsh + 3, sizeof(*argv), "the ssh command line"), st,
			fail);
	memcpy(argv, spec->rsh, nrsh * sizeof(*argv));
	host_at = nrsh;
	argv[nrsh + 1] = spec->rcmd;
	for (size_t k = 0; k < r->nkids; k++)
		herd__launch_link_init(&r->kids[k].link);
	/* Every child at once, as the launcher does its first level. */
	for (size_t k = 0; k < r->nkids; k++) {
		struct child *c = &r->kids[k];
		herd__launch_channel ch;
		size_t off;

		herd__launch_tree_group((size_t)spec->nsub, spec->width, k, &off, &c->len);
		c->node = spec->node_rank + 1 + (int)off;
		argv[host_at] = spec->sub[off];
		c->open = true;
		if (herd__launch_spawn_helper(argv, NULL, &ch) != HERD_OK) {
			char why[1024];

			snprintf(why, sizeof(why), "starting ssh: %s", herd_last_error());
			child_end(r, c, why);
			continue;
		}
		herd__launch_link_attach(&c->link, &ch);
	}
	free(argv);
	*out = r;
	return HERD_OK;
fail:
	free(argv);
	herd__relay_free(r);
	return st;
}

static struct child *child_for(herd__relay *r, int64_t node)
{
	for (size_t k = 0; k < r->nkids; k++)
		if (node >= r->kids[k].node && node < r->kids[k].node + (int64_t)r->kids[k].len)
			return &r->kids[k];
	return NULL;
}

/* Writes what it can to a child; a failed write ends it. */
static void child_flush(herd__relay *r, struct child *c)
{
	if (c->open && herd__launch_link_flush(&c->link) != HERD_OK) {
		char why[512];

		snprintf(why, sizeof(why), "%s", herd_last_error());
		child_end(r, c, why);
	}
}

herd_status herd__relay_down(herd__relay *r, const herd__launch_msg *m)
{
	struct child *c = child_for(r, m->node);
	herd_status st;

	if (c == NULL)
		return herd__error(HERD_EFORMAT, "node protocol: relay frame for node %lld, which "
				   "is not below node %d", (long long)m->node,
				   r->spec->node_rank);
	if (!c->open)
		return HERD_OK;  /* reported lost already */
	if (m->node == c->node)
		st = append_frame(&c->link.out, m->frame, m->frame_len);
	else
		st = herd__launch_enc_relay(&c->link.out, (int)m->node, m->frame, m->frame_len);
	if (st != HERD_OK)
		return st;
	child_flush(r, c);
	return HERD_OK;
}

void herd__relay_command(herd__relay *r, const char *payload, size_t len)
{
	for (size_t k = 0; k < r->nkids; k++) {
		struct child *c = &r->kids[k];

		if (c->open && c->link.ch.wfd >= 0 &&
		    append_frame(&c->link.out, payload, len) == HERD_OK)
			child_flush(r, c);
	}
}

size_t herd__relay_nfds(const herd__relay *r)
{
	return r != NULL ? 3 * r->nkids : 0;
}

size_t herd__relay_pollfds(herd__relay *r, struct pollfd *fds, bool read)
{
	size_t n = 0;

	if (r == NULL)
		return 0;
	r->read = read;
	for (size_t k = 0; k < r->nkids; k++)
		if (r->kids[k].open)
			n += herd__launch_link_pollfds(&r->kids[k].link, fds + n, read);
	return n;
}

int herd__relay_timeout(const herd__relay *r)
{
	if (r == NULL || !r->shut || herd__relay_done(r))
		return -1;
	return herd__net_remaining_ms(r->shut_deadline);
}

/*
 * Passes a child's frames up: its own wrapped with its node rank, those it
 * relays as they are (they must be of its subtree).  false, with why, when
 * it broke the protocol.
 */
static bool child_frames(herd__relay *r, struct child *c, char *why, size_t cap)
{
	for (;;) {
		const char *p;
		size_t len;
		herd__launch_type t;
		herd_status st;

		if (herd__launch_link_frame(&c->link, &p, &len) != HERD_OK) {
			snprintf(why, cap, "%s", herd_last_error());
			return false;
		}
		if (len == SIZE_MAX)
			return true;
		t = herd__launch_payload_type(p, len);
		if (t == HERD__LAUNCH_T_UNKNOWN) {
			snprintf(why, cap, "it sent a malformed frame");
			return false;
		}
		if (t == HERD__LAUNCH_T_RELAY) {
			herd__launch_msg m;
			herd__launch_type inner;

			if (herd__launch_msg_decode(&m, p, len) != HERD_OK) {
				snprintf(why, cap, "%s", herd_last_error());
				return false;
			}
			inner = herd__launch_payload_type(m.frame, m.frame_len);
			if (m.node <= c->node || m.node >= c->node + (int64_t)c->len) {
				snprintf(why, cap, "it relayed a frame of node %lld, which is not "
					 "in its subtree", (long long)m.node);
				herd__launch_msg_free(&m);
				return false;
			}
			if (inner == HERD__LAUNCH_T_DONE || inner == HERD__LAUNCH_T_ERROR)
				*finished_of(r, (int)m.node) = true;
			herd__launch_msg_free(&m);
			st = append_frame(r->up, p, len);
		} else {
			if (t == HERD__LAUNCH_T_DONE || t == HERD__LAUNCH_T_ERROR)
				*finished_of(r, c->node) = true;
			st = herd__launch_enc_relay(r->up, c->node, p, len);
		}
		if (st != HERD_OK) {
			snprintf(why, cap, "%s", herd_last_error());
			return false;
		}
		herd__buf_consume(&c->link.in, len + 4);
	}
}

void herd__relay_process(herd__relay *r, const struct pollfd *fds, size_t nfds)
{
	(void)fds;
	(void)nfds;
	if (r == NULL)
		return;
	for (size_t k = 0; k < r->nkids; k++) {
		struct child *c = &r->kids[k];
		char why[1024];
		herd_status st;

		if (!c->open)
			continue;
		if (r->shut && herd__net_now_ms() >= r->shut_deadline) {
			/* Nobody above listens any more: just end it. */
			herd__remote_channel_abort(&c->link.ch, 1000);
			c->open = false;
			continue;
		}
		/* Non-blocking throughout: a child with nothing to say costs a
		 * read that returns EAGAIN. */
		herd__launch_link_read_err(&c->link);
		child_flush(r, c);
		if (!c->open || !r->read || c->link.ch.rfd < 0)
			continue;
		st = herd__launch_link_fill(&c->link);
		snprintf(why, sizeof(why), "%s", st != HERD_OK ? herd_last_error() : "");
		/* What arrived before the end goes up first. */
		if (!child_frames(r, c, why, sizeof(why)) || st != HERD_OK)
			child_end(r, c, why);
	}
}

void herd__relay_shut(herd__relay *r, int grace_ms)
{
	if (r == NULL || r->shut)
		return;
	r->shut = true;
	r->shut_deadline = herd__net_deadline(grace_ms + SHUT_SLACK_MS);
	for (size_t k = 0; k < r->nkids; k++) {
		struct child *c = &r->kids[k];

		/* End of its stdin: that `herd exec` stops its ranks and, a relay
		 * itself, shuts its own children the same way. */
		if (c->link.ch.wfd >= 0) {
			close(c->link.ch.wfd);
			c->link.ch.wfd = -1;
		}
	}
}

bool herd__relay_done(const herd__relay *r)
{
	for (size_t k = 0; r != NULL && k < r->nkids; k++)
		if (r->kids[k].open)
			return false;
	return true;
}

void herd__relay_free(herd__relay *r)
{
	if (r == NULL)
		return;
	for (size_t k = 0; r->kids != NULL && k < r->nkids; k++) {
		struct child *c = &r->kids[k];

		herd__launch_link_close(&c->link);
		/* Closed stdin first: give it a moment to stop its ranks. */
		if (c->link.ch.pid > 0)
			herd__launch_link_reap(&c->link, c->open ? SHUT_SLACK_MS : 1000);
		herd__launch_link_free(&c->link);
	}
	free(r->kids);
	free(r->finished);
	free(r);
}
