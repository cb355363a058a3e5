/*
 * sdk/launch/hostfile.c - Open MPI / DeepSpeed hostfiles ("host slots=N"),
 * read line by line with errors at PATH:LINE:COLUMN.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base.h"
#include "launch/hostfile.h"
#include "topo/hostlist.h"

struct parser {
	const char *origin;
	const char *text;
	size_t len;
	int line;
	size_t line_start; /* offset of the current line */
	/* Index of hosts by name, for merging duplicates: open addressing,
	 * slot = host index + 1, 0 = empty. */
	size_t *index;
	size_t index_cap;
};

static herd_status HERD_PRINTF(3, 4) line_error(const struct parser *p, size_t at,
						const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return herd__error(HERD_EFORMAT, "%s:%d:%zu: %s", p->origin, p->line,
			   at - p->line_start + 1, what);
}

/* n bytes of s quoted for a message (cap >= 8), cut with "..." when long. */
static void quote(const char *s, size_t n, char *out, size_t cap)
{
	size_t k = 0, i;

	/* Each piece takes at most 4 bytes ("\xff"); "..." and the NUL 4 more. */
	for (i = 0; i < n && k + 8 <= cap; i++) {
		unsigned char c = (unsigned char)s[i];

		if (isprint(c)) {
			out[k++] = (char)c;
		} else {
			snprintf(out + k, 5, "\\x%02x", c);
			k += 4;
		}
	}
	if (i < n) {
		memcpy(out + k, "...", 3);
		k += 3;
	}
	out[k] = '\0';
}

static bool is_blank(int c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static uint64_t hash_name(const char *s)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ull;
	return h;
}

/* The index of name in hf, or SIZE_MAX; *slot is where it would go. */
static size_t index_find(const struct parser *p, const herd__hostfile *hf, const char *name,
			 size_t *slot)
{
	size_t mask = p->index_cap - 1, i = (size_t)hash_name(name) & mask;

	while (p->index[i] != 0) {
		if (strcmp(hf->hosts[p->index[i] - 1].name, name) == 0)
			return p->index[i] - 1;
		i = (i + 1) & mask;
	}
	*slot = i;
	return SIZE_MAX;
}

/* Keeps the index at most half full. */
static herd_status index_grow(struct parser *p, const herd__hostfile *hf)
{
	size_t cap = p->index_cap ? p->index_cap * 2 : 64, *old = p->index;

	if (p->index_cap != 0 && hf->n + 1 <= p->index_cap / 2)
		return HERD_OK;
	HERD_CHECK(herd__calloc(&p->index, cap, sizeof(size_t), "a hostfile index"));
	free(old);
	p->index_cap = cap;
	for (size_t k = 0; k < hf->n; k++) {
		size_t slot = 0;

		(void)index_find(p, hf, hf->hosts[k].name, &slot);
		p->index[slot] = k + 1;
	}
	return HERD_OK;
}

/* Reads "N" at [at, end) as 1..HERD__HOSTFILE_MAX_SLOTS. */
static herd_status parse_count(const struct parser *p, const char *key, size_t at, size_t end,
			       int *out)
{
	long v = 0;
	char q[48];

	for (size_t i = at; i < end; i++) {
		if (!isdigit((unsigned char)p->text[i]) || v > HERD__HOSTFILE_MAX_SLOTS)
			goto bad;
		v = v * 10 + (p->text[i] - '0');
	}
	if (at == end || v < 1 || v > HERD__HOSTFILE_MAX_SLOTS)
		goto bad;
	*out = (int)v;
	return HERD_OK;
bad:
	quote(p->text + at, end - at, q, sizeof(q));
	return line_error(p, at, "%s: expected a whole number from 1 to %d, got '%s'", key,
			  HERD__HOSTFILE_MAX_SLOTS, q);
}

/* Parses one "key=value" field at [at, end). */
static herd_status parse_field(const struct parser *p, size_t at, size_t end,
			       herd__hostfile_host *h)
{
	const char *s = p->text + at;
	const char *eq = memchr(s, '=', end - at);
	size_t klen = eq ? (size_t)(eq - s) : end - at;
	char q[48];

	if (eq != NULL && klen == 5 && memcmp(s, "slots", 5) == 0)
		return parse_count(p, "slots", at + 6, end, &h->slots);
	if (eq != NULL && klen == 9 &&
	    (memcmp(s, "max_slots", 9) == 0 || memcmp(s, "max-slots", 9) == 0))
		return parse_count(p, "max_slots", at + 10, end, &h->max_slots);
	quote(s, klen, q, sizeof(q));
	if (eq == NULL)
		return line_error(p, at, "expected slots=N or max_slots=N, got '%s'", q);
	return line_error(p, at, "unknown field '%s' (known: slots, max_slots)", q);
}

static herd_status add_host(struct parser *p, herd__hostfile *hf, herd__hostfile_host *h,
			    size_t at)
{
	size_t slot = 0, k;

	HERD_CHECK(index_grow(p, hf));
	k = index_find(p, hf, h->name, &slot);
	if (k != SIZE_MAX) {
		herd__hostfile_host *o = &hf->hosts[k];

		/* Listed again: one node, the slots of both lines. */
		if (o->slots + h->slots > HERD__HOSTFILE_MAX_SLOTS)
			return line_error(p, at, "host %s: more than %d slots in all", h->name,
					  HERD__HOSTFILE_MAX_SLOTS);
		o->slots += h->slots;
		/* A limit on only some of the lines limits nothing. */
		o->max_slots = o->max_slots != 0 && h->max_slots != 0
				       ? o->max_slots + h->max_slots
				       : 0;
		free(h->name);
		h->name = NULL;
		return HERD_OK;
	}
	if (hf->n == HERD__HOSTFILE_MAX_HOSTS)
		return line_error(p, at, "more than %d hosts", HERD__HOSTFILE_MAX_HOSTS);
	if (hf->n == hf->cap) {
		size_t cap = hf->cap ? hf->cap * 2 : 16;
		herd__hostfile_host *nh = realloc(hf->hosts, cap * sizeof(*nh));

		if (nh == NULL)
			return herd__error(HERD_ENOMEM, "out of memory reading %s", p->origin);
		hf->hosts = nh;
		hf->cap = cap;
	}
	hf->hosts[hf->n++] = *h;
	p->index[slot] = hf->n;
	h->name = NULL;
	return HERD_OK;
}

/* Parses the line [p->line_start, end). */
static herd_status parse_line(struct parser *p, herd__hostfile *hf, size_t end)
{
	const char *s = p->text;
	size_t i = p->line_start, name_at, name_end;
	herd__hostfile_host h = { NULL, 1, 0, p->line };
	herd_status st = HERD_OK;
	const char *why;
	char q[80];

	/* A comment runs to the end of the line. */
	for (size_t k = i; k < end; k++) {
		if (s[k] == '#') {
			end = k;
			break;
		}
	}
	while (i < end && is_blank((unsigned char)s[i]))
		i++;
	if (i == end)
		return HERD_OK;
	name_at = i;
	while (i < end && !is_blank((unsigned char)s[i]))
		i++;
	name_end = i;
	if (name_end - name_at > HERD__HOSTNAME_MAX)
		return line_error(p, name_at, "host name longer than %d characters",
				  HERD__HOSTNAME_MAX);
	h.name = malloc(name_end - name_at + 1);
	if (h.name == NULL)
		return herd__error(HERD_ENOMEM, "out of memory reading %s", p->origin);
	memcpy(h.name, s + name_at, name_end - name_at);
	h.name[name_end - name_at] = '\0';
	if (strlen(h.name) != name_end - name_at || !herd__hostlist_name_ok(h.name, &why)) {
		size_t bad = name_at;

		/* Point at the first character that is wrong. */
		if (s[name_at] != '-' && s[name_at] != '.') {
			while (bad < name_end && (isalnum((unsigned char)s[bad]) || s[bad] == '.' ||
						  s[bad] == '-' || s[bad] == '_'))
				bad++;
		}
		if (bad == name_end)
			bad = name_at;
		quote(s + name_at, name_end - name_at, q, sizeof(q));
		st = line_error(p, bad, "host name '%s': %s", q,
				strlen(h.name) != name_end - name_at ? "holds a NUL byte" : why);
		goto out;
	}
	for (;;) {
		size_t at;

		while (i < end && is_blank((unsigned char)s[i]))
			i++;
		if (i == end)
			break;
		at = i;
		while (i < end && !is_blank((unsigned char)s[i]))
			i++;
		HERD_CHECK_GOTO(parse_field(p, at, i, &h), st, out);
	}
	if (h.max_slots != 0 && h.max_slots < h.slots) {
		st = line_error(p, name_at, "host %s: max_slots=%d is less than slots=%d", h.name,
				h.max_slots, h.slots);
		goto out;
	}
	st = add_host(p, hf, &h, name_at);
out:
	free(h.name);
	return st;
}

herd_status herd__hostfile_parse(herd__hostfile *out, const char *text, size_t len,
				 const char *origin)
{
	struct parser p = { origin ? origin : "hostfile", text, len, 0, 0, NULL, 0 };
	herd_status st = HERD_OK;
	size_t i = 0;

	memset(out, 0, sizeof(*out));
	while (i < len) {
		const char *nl = memchr(text + i, '\n', len - i);
		size_t end = nl ? (size_t)(nl - text) : len;

		p.line++;
		p.line_start = i;
		HERD_CHECK_GOTO(parse_line(&p, out, end), st, out);
		i = end + 1;
	}
	if (out->n == 0)
		st = herd__error(HERD_EFORMAT, "%s: no hosts (expected lines of \"host slots=N\")",
				 p.origin);
out:
	free(p.index);
	if (st != HERD_OK)
		herd__hostfile_free(out);
	return st;
}

herd_status herd__hostfile_load(herd__hostfile *out, const char *path)
{
	char *text = NULL;
	size_t len = 0;
	struct stat sb;
	herd_status st;

	memset(out, 0, sizeof(*out));
	st = herd__read_file(path, HERD__HOSTFILE_MAX_BYTES, &text, &len);
	if (st == HERD_EIO && stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
		/* Not a file of hosts at all: the caller named the wrong thing. */
		char why[600];

		herd__strlcpy(why, herd_last_error(), sizeof(why));
		return herd__error(HERD_EINVAL, "%s", why);
	}
	HERD_CHECK(st);
	st = herd__hostfile_parse(out, text, len, path);
	free(text);
	return st;
}

void herd__hostfile_free(herd__hostfile *hf)
{
	if (hf == NULL)
		return;
	for (size_t i = 0; i < hf->n; i++)
		free(hf->hosts[i].name);
	free(hf->hosts);
	memset(hf, 0, sizeof(*hf));
}

size_t herd__hostfile_slots(const herd__hostfile *hf)
{
	size_t n = 0;

	for (size_t i = 0; i < hf->n; i++)
		n += (size_t)hf->hosts[i].slots;
	return n;
}
