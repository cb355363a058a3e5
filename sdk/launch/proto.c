/*
 * sdk/launch/proto.c - frames of the node protocol between the launcher and
 * `herd exec` (see launch_internal.h): encoding, and strict decoding.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"
#include "launch_internal.h"

static const char *const type_names[HERD__LAUNCH_T_COUNT] = {
	[HERD__LAUNCH_T_UNKNOWN] = "?",
#define HERD__LAUNCH_TYPE_NAME_(name, wire) [HERD__LAUNCH_T_##name] = wire,
	HERD__LAUNCH_TYPES(HERD__LAUNCH_TYPE_NAME_)
#undef HERD__LAUNCH_TYPE_NAME_
};

const char *herd__launch_type_name(herd__launch_type type)
{
	if ((unsigned)type >= HERD__LAUNCH_T_COUNT)
		return "?";
	return type_names[type];
}

/* ---- frames ------------------------------------------------------------- */

herd_status herd__launch_frame_peek(const herd__buf *b, size_t *payload_len)
{
	return herd__frame_peek(b, HERD__LAUNCH_FRAME_MAX, "node protocol", payload_len);
}

/* A byte that text holds: printable ASCII, a blank, the escape of a
 * terminal's colours (banners have them), or part of UTF-8. */
static bool text_byte(uint8_t c)
{
	return (c >= 0x20 && c < 0x7f) || c == '\t' || c == '\n' || c == '\r' || c == 0x1b ||
	       (c >= 0x80 && c != 0xc0 && c != 0xc1 && c < 0xf5);
}

bool herd__launch_frame_text(const herd__buf *b, char *quote, size_t cap)
{
	const uint8_t *p = b->data + b->off;
	size_t n = b->len - b->off, line, shown, i, k = 0;
	bool ended;

	/* A frame's length is under 16 MiB: its first byte is zero. */
	if (n == 0 || p[0] == 0 || cap < 8)
		return false;
	for (i = 0; i < n && i < 4 && p[i] != '\n'; i++)
		if (!text_byte(p[i]))
			return false;
	for (line = 0; line < n && p[line] != '\n'; line++)
		;
	ended = line < n;       /* else more of the line may be on its way */
	if (line > 0 && p[line - 1] == '\r')
		line--;
	shown = line;
	if (shown > 80) {
		/* Cut on a character's start, not inside one. */
		for (shown = 80; shown > 0 && (p[shown] & 0xc0) == 0x80; shown--)
			;
	}
	for (i = 0; i < shown && k + 8 < cap; i++) {
		if (p[i] >= 0x20 && p[i] != 0x7f)
			quote[k++] = (char)p[i];
		else
			k += (size_t)snprintf(quote + k, cap - k, "\\x%02x", p[i]);
	}
	herd__strlcpy(quote + k, i < line || !ended ? "..." : "", cap - k);
	return true;
}

herd_status herd__launch_text_error(const herd__buf *b, bool framed)
{
	char text[128];

	if (!herd__launch_frame_text(b, text, sizeof(text)))
		return HERD_OK;
	/* Text at the start is a login banner or a shell start-up file that
	 * prints (.bashrc); later, a stray print of the helper. */
	if (framed)
		return herd__error(HERD_EFORMAT, "printed text amid herd's protocol: '%s'", text);
	if (text[0] == '\0')
		return herd__error(HERD_EFORMAT, "printed an empty line before herd's protocol; "
				   "a login script's echo on stdout?");
	return herd__error(HERD_EFORMAT, "printed text before herd's protocol: '%s'; a login "
			   "banner on stdout?", text);
}

/* ---- decoding ------------------------------------------------------------- */

/*
 * The node protocol's envelope.  A spec holds up to four string arrays and
 * a rank array; everything else is a flat map of a few fields.
 */
static const herd__wire_proto proto = {
	.name = "node protocol",
	.version = HERD__LAUNCH_PROTOCOL_VERSION,
	.version_hint = "launcher and nodes must run the same herd",
	.types = type_names,
	.ntypes = HERD__LAUNCH_T_COUNT,
	.limits = { .max_depth = 2,
		    .max_objects = 4 * HERD__LAUNCH_MAX_STRINGS + HERD__LAUNCH_MAX_RANKS_PER_NODE +
				   128 },
};

/* An integer field in [min, max]; required unless optional (then *out stays). */
static herd_status get_int(const msgpack_object *root, herd__launch_type t, const char *name,
			   int64_t min, int64_t max, bool optional, int64_t *out)
{
	const msgpack_object *o = herd__wire_field(root, name);
	int64_t v;

	if (o == NULL || o->type == MSGPACK_OBJECT_NIL) {
		if (optional)
			return HERD_OK;
		return herd__error(HERD_EFORMAT, "node protocol: %s frame without \"%s\"",
				   type_names[t], name);
	}
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX)
		v = (int64_t)o->via.u64;
	else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		v = o->via.i64;
	else
		return herd__error(HERD_EFORMAT, "node protocol: %s frame: \"%s\" is not an "
				   "integer", type_names[t], name);
	if (v < min || v > max)
		return herd__error(HERD_EFORMAT, "node protocol: %s frame: \"%s\" is %lld, "
				   "expected %lld to %lld", type_names[t], name, (long long)v,
				   (long long)min, (long long)max);
	*out = v;
	return HERD_OK;
}

/* A string (or bin) field; optional ones may be absent or nil (*p NULL). */
static herd_status get_bytes(const msgpack_object *root, herd__launch_type t, const char *name,
			     size_t max, bool optional, const char **p, size_t *n)
{
	const msgpack_object *o = herd__wire_field(root, name);

	*p = NULL;
	*n = 0;
	if (o == NULL || o->type == MSGPACK_OBJECT_NIL) {
		if (optional)
			return HERD_OK;
		return herd__error(HERD_EFORMAT, "node protocol: %s frame without \"%s\"",
				   type_names[t], name);
	}
	if (o->type == MSGPACK_OBJECT_STR) {
		*p = o->via.str.ptr;
		*n = o->via.str.size;
	} else if (o->type == MSGPACK_OBJECT_BIN) {
		*p = o->via.bin.ptr;
		*n = o->via.bin.size;
	} else {
		return herd__error(HERD_EFORMAT, "node protocol: %s frame: \"%s\" is not a string",
				   type_names[t], name);
	}
	if (*n > max)
		return herd__error(HERD_EFORMAT, "node protocol: %s frame: \"%s\" of %zu bytes "
				   "(at most %zu)", type_names[t], name, *n, max);
	/* Zero-length strings get a valid pointer, so "present" is *p != NULL. */
	if (*p == NULL)
		*p = "";
	return HERD_OK;
}

#define TEXT_MAX 65536

/* A lines frame's data: lines each ending in '\n', none longer than
 * HERD_JOB_LINE_MAX bytes without it. */
static herd_status check_lines(const char *p, size_t n)
{
	if (n == 0 || p[n - 1] != '\n')
		return herd__error(HERD_EFORMAT, "node protocol: lines frame: \"data\" of %zu "
				   "bytes does not end a line", n);
	/* No line can be too long in what is not longer than one. */
	for (size_t at = 0; n > HERD_JOB_LINE_MAX + 1 && at < n;) {
		const char *nl = memchr(p + at, '\n', n - at);
		size_t len = (size_t)(nl - (p + at));

		if (len > HERD_JOB_LINE_MAX)
			return herd__error(HERD_EFORMAT, "node protocol: lines frame: a line of "
					   "%zu bytes (at most %d)", len, HERD_JOB_LINE_MAX);
		at += len + 1;
	}
	return HERD_OK;
}

herd_status herd__launch_msg_decode(herd__launch_msg *m, const void *data, size_t len)
{
	const msgpack_object *root;
	herd__launch_type t;
	int type = 0;
	herd_status st;

	memset(m, 0, sizeof(*m));
	HERD_CHECK_GOTO(herd__wire_open(&proto, &m->up, data, len, &type), st, fail);
	t = (herd__launch_type)type;
	root = &m->up.data;
	m->type = t;
	switch (t) {
	case HERD__LAUNCH_T_SPEC:
		st = herd__error(HERD_EINTERNAL, "node protocol: a spec frame among the node's "
				 "messages");
		goto fail;
	case HERD__LAUNCH_T_SIGNAL:
		HERD_CHECK_GOTO(get_int(root, t, "sig", 1, 64, false, &m->sig), st, fail);
		break;
	case HERD__LAUNCH_T_STOP:
		HERD_CHECK_GOTO(get_int(root, t, "grace", 0, INT_MAX, false, &m->grace), st, fail);
		break;
	case HERD__LAUNCH_T_READY:
		HERD_CHECK_GOTO(get_bytes(root, t, "host", 255, false, &m->host, &m->host_len), st,
				fail);
		HERD_CHECK_GOTO(get_int(root, t, "pid", 1, INT_MAX, false, &m->pid), st, fail);
		HERD_CHECK_GOTO(get_int(root, t, "copies", 0, 1, true, &m->copies), st, fail);
		break;
	case HERD__LAUNCH_T_ERROR:
		HERD_CHECK_GOTO(get_int(root, t, "st", INT_MIN, -1, false, &m->st), st, fail);
		HERD_CHECK_GOTO(get_bytes(root, t, "msg", TEXT_MAX, false, &m->msg, &m->msg_len),
				st, fail);
		break;
	case HERD__LAUNCH_T_STARTED:
		HERD_CHECK_GOTO(get_int(root, t, "rank", 0, INT_MAX - 1, false, &m->rank), st,
				fail);
		HERD_CHECK_GOTO(get_int(root, t, "pid", 1, INT_MAX, false, &m->pid), st, fail);
		break;
	case HERD__LAUNCH_T_OUT:
		HERD_CHECK_GOTO(get_int(root, t, "rank", 0, INT_MAX - 1, false, &m->rank), st,
				fail);
		HERD_CHECK_GOTO(get_int(root, t, "s", HERD_JOB_STDOUT, HERD_JOB_STDERR, false,
					&m->s), st, fail);
		HERD_CHECK_GOTO(get_bytes(root, t, "data", HERD_JOB_LINE_MAX, false, &m->data,
					  &m->data_len), st, fail);
		break;
	case HERD__LAUNCH_T_LINES:
		HERD_CHECK_GOTO(get_int(root, t, "rank", 0, INT_MAX - 1, false, &m->rank), st,
				fail);
		HERD_CHECK_GOTO(get_int(root, t, "s", HERD_JOB_STDOUT, HERD_JOB_STDERR, false,
					&m->s), st, fail);
		HERD_CHECK_GOTO(get_bytes(root, t, "data", HERD__LAUNCH_LINES_MAX, false, &m->data,
					  &m->data_len), st, fail);
		HERD_CHECK_GOTO(check_lines(m->data, m->data_len), st, fail);
		break;
	case HERD__LAUNCH_T_EXITED:
		HERD_CHECK_GOTO(get_int(root, t, "rank", 0, INT_MAX - 1, false, &m->rank), st,
				fail);
		HERD_CHECK_GOTO(get_int(root, t, "state", HERD_JOB_RANK_EXITED,
					HERD_JOB_RANK_FAILED_START, false, &m->state),
				st, fail);
		HERD_CHECK_GOTO(get_int(root, t, "code", 0, 255, false, &m->code), st, fail);
		HERD_CHECK_GOTO(get_int(root, t, "sig", 0, 64, false, &m->sig), st, fail);
		HERD_CHECK_GOTO(get_bytes(root, t, "err", TEXT_MAX, true, &m->err, &m->err_len),
				st, fail);
		break;
	case HERD__LAUNCH_T_PAUSED:
		HERD_CHECK_GOTO(get_int(root, t, "rank", 0, INT_MAX - 1, false, &m->rank), st,
				fail);
		HERD_CHECK_GOTO(get_int(root, t, "sig", 0, 64, false, &m->sig), st, fail);
		break;
	case HERD__LAUNCH_T_DONE:
	case HERD__LAUNCH_T_GO:
		break;
	case HERD__LAUNCH_T_RINGS:
		HERD_CHECK_GOTO(get_int(root, t, "seq", 0, INT_MAX, true, &m->seq), st, fail);
		HERD_CHECK_GOTO(get_bytes(root, t, "msg", TEXT_MAX, true, &m->msg, &m->msg_len),
				st, fail);
		break;
	case HERD__LAUNCH_T_RING:
		HERD_CHECK_GOTO(get_bytes(root, t, "data", HERD__LAUNCH_RING_MAX, false, &m->data,
					  &m->data_len), st, fail);
		break;
	case HERD__LAUNCH_T_RELAY:
		HERD_CHECK_GOTO(get_int(root, t, "node", 0, INT_MAX - 1, false, &m->node), st,
				fail);
		HERD_CHECK_GOTO(get_bytes(root, t, "frame", HERD__LAUNCH_FRAME_MAX, false,
					  &m->frame, &m->frame_len), st, fail);
		break;
	default:
		st = herd__error(HERD_EFORMAT, "node protocol: unexpected frame type");
		goto fail;
	}
	return HERD_OK;
fail:
	herd__launch_msg_free(m);
	return st;
}

void herd__launch_msg_free(herd__launch_msg *m)
{
	if (m->up.zone != NULL)
		msgpack_unpacked_destroy(&m->up);
	memset(m, 0, sizeof(*m));
}

herd__launch_type herd__launch_payload_type(const void *data, size_t len)
{
	msgpack_unpacked up;
	int t = HERD__LAUNCH_T_UNKNOWN;

	memset(&up, 0, sizeof(up));
	if (herd__wire_open(&proto, &up, data, len, &t) != HERD_OK)
		t = HERD__LAUNCH_T_UNKNOWN;
	if (up.zone != NULL)
		msgpack_unpacked_destroy(&up);
	return (herd__launch_type)t;
}

/* A C string copy of a field: no NUL bytes inside. */
static herd_status get_str(const msgpack_object *root, const char *name, size_t max,
			   bool optional, char **out)
{
	const char *p;
	size_t n;

	*out = NULL;
	HERD_CHECK(get_bytes(root, HERD__LAUNCH_T_SPEC, name, max, optional, &p, &n));
	if (p == NULL)
		return HERD_OK;
	if (memchr(p, '\0', n) != NULL)
		return herd__error(HERD_EFORMAT, "node protocol: spec frame: \"%s\" holds a NUL "
				   "byte", name);
	HERD_CHECK(herd__calloc(out, n + 1, 1, "a spec string"));
	memcpy(*out, p, n);
	return HERD_OK;
}

/* A NULL-terminated copy of an array of strings. */
static herd_status get_strv(const msgpack_object *root, const char *name, size_t min,
			    char ***out)
{
	const msgpack_object *o = herd__wire_field(root, name);
	char **v;

	*out = NULL;
	if (o == NULL || o->type != MSGPACK_OBJECT_ARRAY)
		return herd__error(HERD_EFORMAT, "node protocol: spec frame: \"%s\" is %s", name,
				   o == NULL ? "missing" : "not an array");
	if (o->via.array.size < min)
		return herd__error(HERD_EFORMAT, "node protocol: spec frame: \"%s\" is empty",
				   name);
	HERD_CHECK(herd__calloc(&v, o->via.array.size + 1, sizeof(*v), "a spec array"));
	*out = v;
	for (uint32_t i = 0; i < o->via.array.size; i++) {
		const msgpack_object *e = &o->via.array.ptr[i];

		if (e->type != MSGPACK_OBJECT_STR || memchr(e->via.str.ptr, '\0',
							    e->via.str.size) != NULL)
			return herd__error(HERD_EFORMAT, "node protocol: spec frame: \"%s\"[%u] is "
					   "not a string without NUL bytes", name, i);
		HERD_CHECK(herd__calloc(&v[i], e->via.str.size + 1, 1, "a spec string"));
		memcpy(v[i], e->via.str.ptr, e->via.str.size);
	}
	return HERD_OK;
}

/* An optional array of strings: absent or nil leaves *out NULL. */
static herd_status get_strv_opt(const msgpack_object *root, const char *name, char ***out)
{
	const msgpack_object *o = herd__wire_field(root, name);

	*out = NULL;
	if (o == NULL || o->type == MSGPACK_OBJECT_NIL)
		return HERD_OK;
	return get_strv(root, name, 0, out);
}

static herd_status get_int_field(const msgpack_object *root, const char *name, int64_t min,
				 int64_t max, int *out)
{
	int64_t v = 0;

	HERD_CHECK(get_int(root, HERD__LAUNCH_T_SPEC, name, min, max, false, &v));
	*out = (int)v;
	return HERD_OK;
}

static herd_status decode_spec(herd__node_spec *s, const msgpack_object *root)
{
	const msgpack_object *r;

	HERD_CHECK(get_str(root, "job", 255, false, &s->job_id));
	HERD_CHECK(get_str(root, "store", 300, false, &s->store));
	HERD_CHECK(get_str(root, "secret", 1024, false, &s->secret));
	HERD_CHECK(get_str(root, "host", 255, false, &s->host));
	HERD_CHECK(get_str(root, "maddr", 255, false, &s->master_addr));
	HERD_CHECK(get_str(root, "workdir", PATH_MAX, true, &s->workdir));
	HERD_CHECK(get_str(root, "logdir", PATH_MAX, true, &s->log_dir));
	HERD_CHECK(get_str(root, "trace", 64, true, &s->trace_token));
	{
		int64_t health = 0;

		HERD_CHECK(get_int(root, HERD__LAUNCH_T_SPEC, "health", 0, 2, true, &health));
		s->health = (int)health;
		HERD_CHECK(get_int(root, HERD__LAUNCH_T_SPEC, "start", 0, INT64_MAX, true,
				   &s->job_start_ms));
	}
	HERD_CHECK(get_int_field(root, "mport", 0, 65535, &s->master_port));
	HERD_CHECK(get_int_field(root, "restart", 0, INT_MAX, &s->restart_count));
	HERD_CHECK(get_int_field(root, "world", 1, INT_MAX, &s->world_size));
	HERD_CHECK(get_int_field(root, "nnodes", 1, INT_MAX, &s->nnodes));
	HERD_CHECK(get_int_field(root, "node", 0, s->nnodes - 1, &s->node_rank));
	HERD_CHECK(get_int_field(root, "grace", 0, INT_MAX, &s->grace_ms));
	HERD_CHECK(get_int_field(root, "gpus", 0, 4096, &s->gpus_per_rank));
	{
		int64_t lines = 0;

		HERD_CHECK(get_int(root, HERD__LAUNCH_T_SPEC, "lines", 0, 1, true, &lines));
		s->lines = lines != 0;
	}
	HERD_CHECK(get_strv(root, "argv", 1, &s->argv));
	HERD_CHECK(get_strv(root, "env", 0, &s->env));
	r = herd__wire_field(root, "ranks");
	if (r == NULL || r->type != MSGPACK_OBJECT_ARRAY || r->via.array.size == 0 ||
	    r->via.array.size > HERD__LAUNCH_MAX_RANKS_PER_NODE)
		return herd__error(HERD_EFORMAT, "node protocol: spec frame: \"ranks\" is not an "
				   "array of 1 to %d ranks", HERD__LAUNCH_MAX_RANKS_PER_NODE);
	HERD_CHECK(herd__calloc(&s->ranks, r->via.array.size, sizeof(int), "a spec's ranks"));
	s->nranks = (int)r->via.array.size;
	for (int i = 0; i < s->nranks; i++) {
		const msgpack_object *e = &r->via.array.ptr[i];

		if (e->type != MSGPACK_OBJECT_POSITIVE_INTEGER ||
		    e->via.u64 >= (uint64_t)s->world_size ||
		    (i > 0 && (int)e->via.u64 <= s->ranks[i - 1]))
			return herd__error(HERD_EFORMAT, "node protocol: spec frame: \"ranks\"[%d] "
					   "is not a rank below %d greater than the one before",
					   i, s->world_size);
		s->ranks[i] = (int)e->via.u64;
	}
	/* A relay's subtree: all three fields or none. */
	HERD_CHECK(get_strv_opt(root, "sub", &s->sub));
	while (s->sub != NULL && s->sub[s->nsub] != NULL)
		s->nsub++;
	if (s->nsub == 0)
		return HERD_OK;
	if (s->nsub > s->nnodes - 1 - s->node_rank)
		return herd__error(HERD_EFORMAT, "node protocol: spec frame: \"sub\" has %d hosts "
				   "after node %d of %d", s->nsub, s->node_rank, s->nnodes);
	HERD_CHECK(get_int_field(root, "width", 1, INT_MAX, &s->width));
	HERD_CHECK(get_strv(root, "rsh", 1, &s->rsh));
	return get_str(root, "rcmd", 65536, false, &s->rcmd);
}

herd_status herd__launch_spec_decode(herd__node_spec *out, const void *data, size_t len)
{
	msgpack_unpacked up;
	int t = HERD__LAUNCH_T_UNKNOWN;
	herd_status st;

	memset(out, 0, sizeof(*out));
	memset(&up, 0, sizeof(up));
	HERD_CHECK_GOTO(herd__wire_open(&proto, &up, data, len, &t), st, out);
	if (t != HERD__LAUNCH_T_SPEC) {
		st = herd__error(HERD_EFORMAT, "node protocol: expected a spec frame, got %s",
				 type_names[t]);
		goto out;
	}
	st = decode_spec(out, &up.data);
out:
	if (up.zone != NULL)
		msgpack_unpacked_destroy(&up);
	if (st != HERD_OK)
		herd__node_spec_free(out);
	return st;
}

static void free_strv(char **v)
{
	if (v == NULL)
		return;
	for (size_t i = 0; v[i] != NULL; i++)
		free(v[i]);
	free(v);
}

void herd__node_spec_free(herd__node_spec *s)
{
	if (s == NULL)
		return;
	free(s->job_id);
	free(s->store);
	free(s->secret);
	free(s->host);
	free(s->master_addr);
	free(s->workdir);
	free(s->log_dir);
	free(s->trace_token);
	free(s->ranks);
	free_strv(s->argv);
	free_strv(s->env);
	free_strv(s->sub);
	free_strv(s->rsh);
	free(s->rcmd);
	memset(s, 0, sizeof(*s));
}

/* ---- encoding ------------------------------------------------------------- */

static void enc_str(herd__frame_enc *e, const char *name, const char *s)
{
	if (s == NULL) {
		herd__frame_key(e, name);
		msgpack_pack_nil(&e->pk);
		return;
	}
	herd__frame_str(e, name, s, strlen(s));
}

static void enc_begin(herd__frame_enc *e, herd__buf *buf, herd__launch_type type)
{
	herd__wire_begin(&proto, e, buf, (int)type);
}

static herd_status enc_end(herd__frame_enc *e)
{
	return herd__frame_end(e, HERD__LAUNCH_FRAME_MAX, "node protocol");
}

static void enc_strv(herd__frame_enc *e, const char *name, char *const *v)
{
	size_t n = 0;

	while (v != NULL && v[n] != NULL)
		n++;
	herd__frame_key(e, name);
	msgpack_pack_array(&e->pk, n);
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(v[i]);

		msgpack_pack_str(&e->pk, l);
		msgpack_pack_str_body(&e->pk, v[i], l);
	}
}

herd_status herd__launch_enc_spec(herd__buf *buf, const herd__node_spec *s)
{
	herd__frame_enc e;
	herd_status st;

	enc_begin(&e, buf, HERD__LAUNCH_T_SPEC);
	enc_str(&e, "job", s->job_id);
	enc_str(&e, "store", s->store);
	enc_str(&e, "secret", s->secret);
	enc_str(&e, "host", s->host);
	enc_str(&e, "maddr", s->master_addr);
	herd__frame_int(&e, "mport", s->master_port);
	herd__frame_int(&e, "restart", s->restart_count);
	if (s->job_start_ms > 0)
		herd__frame_int(&e, "start", s->job_start_ms);
	herd__frame_int(&e, "world", s->world_size);
	herd__frame_int(&e, "nnodes", s->nnodes);
	herd__frame_int(&e, "node", s->node_rank);
	herd__frame_int(&e, "grace", s->grace_ms);
	herd__frame_int(&e, "gpus", s->gpus_per_rank);
	enc_str(&e, "workdir", s->workdir);
	enc_str(&e, "logdir", s->log_dir);
	/* Only when set, as lines below. */
	if (s->trace_token != NULL)
		enc_str(&e, "trace", s->trace_token);
	if (s->health > 0)
		herd__frame_int(&e, "health", s->health);
	enc_strv(&e, "argv", s->argv);
	enc_strv(&e, "env", s->env);
	herd__frame_key(&e, "ranks");
	msgpack_pack_array(&e.pk, (size_t)s->nranks);
	for (int i = 0; i < s->nranks; i++)
		msgpack_pack_int64(&e.pk, s->ranks[i]);
	/* Only when set: a spec without it is what an earlier launcher sent. */
	if (s->lines)
		herd__frame_int(&e, "lines", 1);
	if (s->nsub > 0) {
		enc_strv(&e, "sub", s->sub);
		herd__frame_int(&e, "width", s->width);
		enc_strv(&e, "rsh", s->rsh);
		enc_str(&e, "rcmd", s->rcmd);
	}
	st = enc_end(&e);
	if (st == HERD_EINVAL)
		herd__error_wrap(st, "the node spec (argv and env too large?): ");
	return st;
}

herd_status herd__launch_enc_signal(herd__buf *buf, int sig)
{
	herd__frame_enc e;

	enc_begin(&e, buf, HERD__LAUNCH_T_SIGNAL);
	herd__frame_int(&e, "sig", sig);
	return enc_end(&e);
}

herd_status herd__launch_enc_stop(herd__buf *buf, int grace_ms)
{
	herd__frame_enc e;

	enc_begin(&e, buf, HERD__LAUNCH_T_STOP);
	herd__frame_int(&e, "grace", grace_ms);
	return enc_end(&e);
}

herd_status herd__launch_enc_ready(herd__buf *buf, const char *host, long pid, bool copies)
{
	herd__frame_enc e;

	enc_begin(&e, buf, HERD__LAUNCH_T_READY);
	enc_str(&e, "host", host);
	herd__frame_int(&e, "pid", pid);
	if (copies)
		herd__frame_int(&e, "copies", 1);
	return enc_end(&e);
}

herd_status herd__launch_enc_error(herd__buf *buf, herd_status st, const char *msg)
{
	herd__frame_enc e;
	size_t n = strlen(msg);

	enc_begin(&e, buf, HERD__LAUNCH_T_ERROR);
	herd__frame_int(&e, "st", st);
	herd__frame_str(&e, "msg", msg, n > TEXT_MAX ? TEXT_MAX : n);
	return enc_end(&e);
}

herd_status herd__launch_enc_started(herd__buf *buf, int rank, long pid)
{
	herd__frame_enc e;

	enc_begin(&e, buf, HERD__LAUNCH_T_STARTED);
	herd__frame_int(&e, "rank", rank);
	herd__frame_int(&e, "pid", pid);
	return enc_end(&e);
}

herd_status herd__launch_enc_out(herd__buf *buf, int rank, herd_job_stream s, const char *data,
				 size_t len)
{
	herd__frame_enc e;

	enc_begin(&e, buf, HERD__LAUNCH_T_OUT);
	herd__frame_int(&e, "rank", rank);
	herd__frame_int(&e, "s", s);
	/* bin, not str: a rank's output need not be UTF-8. */
	herd__frame_bin(&e, "data", data, len);
	return enc_end(&e);
}

herd_status herd__launch_enc_lines(herd__buf *buf, int rank, herd_job_stream s,
				   const char *data, size_t len)
{
	herd__frame_enc e;

	enc_begin(&e, buf, HERD__LAUNCH_T_LINES);
	herd__frame_int(&e, "rank", rank);
	herd__frame_int(&e, "s", s);
	herd__frame_bin(&e, "data", data, len);
	return enc_end(&e);
}

herd_status herd__launch_enc_exited(herd__buf *buf, int rank, herd_job_rank_state state, int code,
				    int sig, const char *err)
{
	herd__frame_enc e;

	enc_begin(&e, buf, HERD__LAUNCH_T_EXITED);
	herd__frame_int(&e, "rank", rank);
	herd__frame_int(&e, "state", state);
	herd__frame_int(&e, "code", code);
	herd__frame_int(&e, "sig", sig);
	if (err != NULL)
		enc_str(&e, "err", err);
	return enc_end(&e);
}

herd_status herd__launch_enc_paused(herd__buf *buf, int rank, int sig)
{
	herd__frame_enc e;

	enc_begin(&e, buf, HERD__LAUNCH_T_PAUSED);
	herd__frame_int(&e, "rank", rank);
	herd__frame_int(&e, "sig", sig);
	return enc_end(&e);
}

herd_status herd__launch_enc_go(herd__buf *buf)
{
	herd__frame_enc e;

	enc_begin(&e, buf, HERD__LAUNCH_T_GO);
	return enc_end(&e);
}

herd_status herd__launch_enc_rings(herd__buf *buf, int seq, const char *words)
{
	herd__frame_enc e;

	enc_begin(&e, buf, HERD__LAUNCH_T_RINGS);
	if (seq > 0)
		herd__frame_int(&e, "seq", seq);
	if (words != NULL)
		enc_str(&e, "msg", words);
	return enc_end(&e);
}

herd_status herd__launch_enc_ring(herd__buf *buf, const void *image, size_t len)
{
	herd__frame_enc e;

	enc_begin(&e, buf, HERD__LAUNCH_T_RING);
	herd__frame_bin(&e, "data", image, len);
	return enc_end(&e);
}

herd_status herd__launch_enc_done(herd__buf *buf)
{
	herd__frame_enc e;

	enc_begin(&e, buf, HERD__LAUNCH_T_DONE);
	return enc_end(&e);
}

herd_status herd__launch_enc_relay(herd__buf *buf, int node, const char *payload, size_t len)
{
	herd__frame_enc e;

	enc_begin(&e, buf, HERD__LAUNCH_T_RELAY);
	herd__frame_int(&e, "node", node);
	herd__frame_bin(&e, "frame", payload, len);
	return enc_end(&e);
}
