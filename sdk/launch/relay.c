/*
 * sdk/launch/relay.c - the tree fan-out: the shape of the tree, and the
 * relay, the part of a `herd exec` with a subtree that does for its
 * children what the launcher does for its nodes (launch_internal.h, "Tree
 * fan-out"): starts `herd exec` on each over ssh, passes spec frames and
 * commands down and every frame of the subtree up, wrapped with the node
 * it came from, and reports the nodes it cannot reach or loses.  Its
 * children are helpers of the remote-run engine (engine.h) on the loop of
 * its `herd exec`, as the launcher's nodes are of the launcher's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
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

/*
 * The relay's children are helpers of an engine on the loop of its `herd
 * exec`; helper h answers for the subtree nodes [first, first + count),
 * first counted from the relay's first child (node node_rank + 1).
 */
struct herd__relay {
	const herd__node_spec *spec;   /* borrowed: hosts, own node rank */
	herd__buf *up;
	bool *finished;                /* per subtree node: done or error went up */
	herd__engine *engine;
	bool shut;
	herd__timer shut_timer;
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

/* The node rank of a child's own node, and its subtree's size. */
static int child_node(const herd__relay *r, size_t h, size_t *len)
{
	size_t first;

	herd__engine_nodes(r->engine, h, &first, len);
	return r->spec->node_rank + 1 + (int)first;
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
 * A child is lost (node, with len nodes in its subtree; says: ssh's last
 * words): it and every node below it that had not finished are reported
 * up, naming this relay and quoting ssh.
 */
static void report_lost(herd__relay *r, int node, size_t len, const char *why, const char *says)
{
	char msg[HERD__LAUNCH_LINK_ERR_MAX + 1400];

	for (size_t k = 0; k < len; k++) {
		int n = node + (int)k;

		if (*finished_of(r, n))
			continue;
		if (k == 0)
			snprintf(msg, sizeof(msg), "%.900s (started over ssh by relay node %s)%s",
				 why, r->spec->host, says);
		else
			snprintf(msg, sizeof(msg), "relay node %s was lost: %.900s",
				 host_of(r, node), why);
		report_up(r, n, HERD_ECLOSED, msg);
	}
}

/* A child that broke the protocol or whose channel ended: reported, ended. */
static void child_end(herd__relay *r, size_t h, const char *why)
{
	herd__launch_link *l = herd__engine_link(r->engine, h);
	char says[HERD__LAUNCH_LINK_ERR_MAX + 8];
	size_t len;
	int node = child_node(r, h, &len);

	herd__launch_link_read_err(l);
	report_lost(r, node, len, why, herd__launch_link_says(l, says, sizeof(says)));
	herd__engine_kill(r->engine, h);
}

/*
 * Passes a child's frames up: its own wrapped with its node rank, those it
 * relays as they are (they must be of its subtree).  false, with why, when
 * it broke the protocol.
 */
static bool child_frames(herd__relay *r, size_t h, herd__buf *in, char *why, size_t cap)
{
	herd__launch_link *l = herd__engine_link(r->engine, h);
	size_t clen;
	int cnode = child_node(r, h, &clen);

	for (;;) {
		const char *p;
		size_t len;
		herd__launch_type t;
		herd_status st;

		if (herd__launch_link_frame(l, &p, &len) != HERD_OK) {
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
			if (m.node <= cnode || m.node >= cnode + (int64_t)clen) {
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
				*finished_of(r, cnode) = true;
			st = herd__launch_enc_relay(r->up, cnode, p, len);
		}
		if (st != HERD_OK) {
			snprintf(why, cap, "%s", herd_last_error());
			return false;
		}
		herd__buf_consume(in, len + 4);
	}
}

/* What arrived from a child goes up first, then a broken frame ends it. */
static void child_input(void *userdata, size_t h, herd__buf *in)
{
	herd__relay *r = userdata;
	char why[1024];

	if (!child_frames(r, h, in, why, sizeof(why)))
		child_end(r, h, why);
}

static void child_ended(void *userdata, size_t h, const herd__engine_end *end)
{
	herd__relay *r = userdata;
	char says[HERD__LAUNCH_LINK_ERR_MAX + 8];
	size_t len;
	int node = child_node(r, h, &len);

	report_lost(r, node, len, end->why,
		    herd__engine_says(r->engine, h, says, sizeof(says)));
	herd__engine_kill(r->engine, h);
}

/* Nobody above listens any more: the children still open are ended. */
static void on_shut(herd__timer *t)
{
	herd__relay *r = t->data;

	for (size_t h = 0; h < herd__engine_helpers(r->engine); h++) {
		if (!herd__engine_ended(r->engine, h))
			herd__engine_kill(r->engine, h);
	}
}

herd_status herd__relay_start(herd__relay **out, const herd__node_spec *spec, herd__buf *up,
			      herd__loop *loop)
{
	herd__engine_client client = { .input = child_input, .ended = child_ended };
	herd__relay *r = NULL;
	const char **argv = NULL;
	size_t nrsh = 0, host_at, nkids;
	herd_status st;

	*out = NULL;
	if (spec->nsub < 1 || spec->rsh == NULL || spec->rcmd == NULL)
		return herd__error(HERD_EINVAL, "herd__relay_start: the spec has no subtree");
	while (spec->rsh[nrsh] != NULL)
		nrsh++;
	HERD_CHECK(herd__calloc(&r, 1, sizeof(*r), "a relay"));
	r->spec = spec;
	r->up = up;
	herd__timer_init(&r->shut_timer, on_shut, r);
	client.userdata = r;
	nkids = herd__launch_tree_groups((size_t)spec->nsub, spec->width);
	HERD_CHECK_GOTO(herd__calloc(&r->finished, (size_t)spec->nsub, sizeof(bool),
				     "a relay's nodes"), st, fail);
	HERD_CHECK_GOTO(herd__engine_create(&r->engine, NULL, &client, loop), st, fail);
	HERD_CHECK_GOTO(herd__calloc(&argv, nrsh + 3, sizeof(*argv), "the ssh command line"), st,
			fail);
	memcpy(argv, spec->rsh, nrsh * sizeof(*argv));
	host_at = nrsh;
	argv[nrsh + 1] = spec->rcmd;
	/* Every child at once, as the launcher does its first level. */
	for (size_t k = 0; k < nkids; k++) {
		herd__launch_channel ch;
		size_t off, len, h;

		herd__launch_tree_group((size_t)spec->nsub, spec->width, k, &off, &len);
		argv[host_at] = spec->sub[off];
		if (herd__launch_spawn_helper(argv, NULL, &ch) != HERD_OK) {
			char why[1024];

			snprintf(why, sizeof(why), "starting ssh: %s", herd_last_error());
			report_lost(r, spec->node_rank + 1 + (int)off, len, why, "");
			continue;
		}
		HERD_CHECK_GOTO(herd__engine_attach(r->engine, &ch, off, len,
						    HERD__LAUNCH_FRAME_MAX + 4, &h), st, fail);
	}
	free(argv);
	*out = r;
	return HERD_OK;
fail:
	free(argv);
	herd__relay_free(r);
	return st;
}

/* The child whose subtree holds node, or SIZE_MAX. */
static size_t child_for(herd__relay *r, int64_t node)
{
	for (size_t h = 0; h < herd__engine_helpers(r->engine); h++) {
		size_t len;
		int first = child_node(r, h, &len);

		if (node >= first && node < first + (int64_t)len)
			return h;
	}
	return SIZE_MAX;
}

herd_status herd__relay_down(herd__relay *r, const herd__launch_msg *m)
{
	size_t h = child_for(r, m->node), len;
	herd__launch_link *l;
	herd_status st;

	if (m->node <= r->spec->node_rank || m->node > r->spec->node_rank + r->spec->nsub)
		return herd__error(HERD_EFORMAT, "node protocol: relay frame for node %lld, which "
				   "is not below node %d", (long long)m->node,
				   r->spec->node_rank);
	if (h == SIZE_MAX || herd__engine_ended(r->engine, h))
		return HERD_OK;  /* reported lost already */
	l = herd__engine_link(r->engine, h);
	if (m->node == child_node(r, h, &len))
		st = append_frame(&l->out, m->frame, m->frame_len);
	else
		st = herd__launch_enc_relay(&l->out, (int)m->node, m->frame, m->frame_len);
	if (st != HERD_OK)
		return st;
	herd__engine_flush(r->engine, h);
	return HERD_OK;
}

void herd__relay_command(herd__relay *r, const char *payload, size_t len)
{
	for (size_t h = 0; h < herd__engine_helpers(r->engine); h++) {
		herd__launch_link *l = herd__engine_link(r->engine, h);

		if (!herd__engine_ended(r->engine, h) && l->ch.wfd >= 0 &&
		    append_frame(&l->out, payload, len) == HERD_OK)
			herd__engine_flush(r->engine, h);
	}
}

void herd__relay_hold(herd__relay *r, bool hold)
{
	if (r != NULL)
		herd__engine_hold_input(r->engine, hold);
}

void herd__relay_shut(herd__relay *r, int grace_ms)
{
	if (r == NULL || r->shut)
		return;
	r->shut = true;
	/* End of its stdin: that `herd exec` stops its ranks and, a relay
	 * itself, shuts its own children the same way. */
	for (size_t h = 0; h < herd__engine_helpers(r->engine); h++)
		herd__engine_close_input(r->engine, h);
	if (herd__loop_timer(herd__engine_loop(r->engine), &r->shut_timer,
			     herd__net_deadline(grace_ms + SHUT_SLACK_MS)) != HERD_OK)
		on_shut(&r->shut_timer);
}

bool herd__relay_done(const herd__relay *r)
{
	return r == NULL || herd__engine_live(r->engine) == 0;
}

void herd__relay_free(herd__relay *r)
{
	if (r == NULL)
		return;
	if (r->engine != NULL)
		herd__loop_timer_stop(herd__engine_loop(r->engine), &r->shut_timer);
	/* Closed stdin first: give them a moment to stop their ranks. */
	herd__engine_free(r->engine, SHUT_SLACK_MS);
	free(r->finished);
	free(r);
}
