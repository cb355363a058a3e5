/*
 * sdk/topo/hostlist.c - hostlist expressions ("node[01-04,07]"): expanded
 * into names and names compressed back, in Slurm's notation.
 *
 * Expansion is in two passes over each item: the first parses it and works
 * out how many names it makes and how long the longest is, the second
 * makes them.  Limits are checked between the two, so no expression can
 * make herd allocate more than HERD__HOSTLIST_MAX_NAMES short names.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd/cluster.h"
#include "herd/hostlist.h"

#include "base.h"
#include "buf.h"
#include "hostlist.h"

/* Numbers in brackets have at most this many digits (fits 64 bits). */
#define NUM_DIGITS_MAX 18

struct range {
	unsigned long long lo, hi;
	int width; /* digits lo was written with: every number is printed as wide */
};

struct group {
	struct range *r;
	size_t n, cap;
	size_t count; /* numbers in all ranges */
	size_t maxlen; /* longest number printed */
};

/* An item: lit[0] grp[0] lit[1] grp[1] ... lit[ng]. */
struct item {
	const char *lit[HERD__HOSTLIST_MAX_GROUPS + 1];
	size_t litlen[HERD__HOSTLIST_MAX_GROUPS + 1];
	struct group grp[HERD__HOSTLIST_MAX_GROUPS];
	int ng;
	size_t start; /* offset of its first character */
};

struct parser {
	const char *expr;
	size_t pos;
};

static bool is_name_char(int c)
{
	return isalnum(c) || c == '.' || c == '-' || c == '_';
}

static bool is_blank(int c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Raises HERD_EFORMAT for the expression at 0-based offset at. */
static herd_status HERD_PRINTF(3, 4) parse_error(const struct parser *p, size_t at,
						 const char *fmt, ...)
{
	char what[160];
	va_list ap;
	size_t len = strlen(p->expr);

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	/* A huge expression is quoted by its start; the column still says where. */
	if (len > 80)
		return herd__error(HERD_EFORMAT, "hostlist \"%.72s...\" (%zu bytes): column %zu: %s",
				   p->expr, len, at + 1, what);
	return herd__error(HERD_EFORMAT, "hostlist \"%s\": column %zu: %s", p->expr, at + 1,
			   what);
}

/* Describes the character at offset at for a message ("'%'", "end of text"). */
static void describe_char(const struct parser *p, size_t at, char *out, size_t cap)
{
	unsigned char c = (unsigned char)p->expr[at];

	if (c == '\0')
		snprintf(out, cap, "end of text");
	else if (isprint(c))
		snprintf(out, cap, "'%c'", c);
	else
		snprintf(out, cap, "byte 0x%02x", c);
}

static void item_free(struct item *it)
{
	/* A group that failed half-parsed is past ng: free them all. */
	for (int g = 0; g < HERD__HOSTLIST_MAX_GROUPS; g++)
		free(it->grp[g].r);
	memset(it, 0, sizeof(*it));
}

static herd_status parse_number(struct parser *p, const char *after,
				unsigned long long *value, int *width)
{
	const char *s = p->expr;
	size_t start = p->pos;
	unsigned long long v = 0;

	if (!isdigit((unsigned char)s[p->pos])) {
		char got[32];

		describe_char(p, p->pos, got, sizeof(got));
		return parse_error(p, p->pos, "expected a number%s, got %s", after, got);
	}
	while (isdigit((unsigned char)s[p->pos])) {
		if (p->pos - start == NUM_DIGITS_MAX)
			return parse_error(p, start, "number longer than %d digits",
					   NUM_DIGITS_MAX);
		v = v * 10 + (unsigned long long)(s[p->pos] - '0');
		p->pos++;
	}
	*value = v;
	*width = (int)(p->pos - start);
	return HERD_OK;
}

static int digits_of(unsigned long long v)
{
	int d = 1;

	while (v >= 10) {
		v /= 10;
		d++;
	}
	return d;
}

/* Parses "[...]" at p->pos into g; bracket is the offset of '['. */
static herd_status parse_group(struct parser *p, struct group *g)
{
	size_t bracket = p->pos++;

	for (;;) {
		struct range r;
		size_t at = p->pos;
		char got[32];

		HERD_CHECK(parse_number(p, "", &r.lo, &r.width));
		r.hi = r.lo;
		if (p->expr[p->pos] == '-') {
			int hi_width;

			p->pos++;
			at = p->pos;
			HERD_CHECK(parse_number(p, " after '-'", &r.hi, &hi_width));
			/* "node[01-0" was cut short: it is unclosed, not a range
			 * that goes backwards. */
			if (r.hi < r.lo && strchr(p->expr + bracket, ']') == NULL)
				return parse_error(p, p->pos, "expected ']' to close the '[' at "
						   "column %zu", bracket + 1);
			if (r.hi < r.lo)
				return parse_error(p, at, "range %llu-%llu goes backwards", r.lo,
						   r.hi);
		}
		if (r.hi - r.lo >= HERD__HOSTLIST_MAX_NAMES ||
		    g->count + (size_t)(r.hi - r.lo) + 1 > HERD__HOSTLIST_MAX_NAMES)
			return parse_error(p, bracket, "group expands to more than %d names",
					   HERD__HOSTLIST_MAX_NAMES);
		if (g->n == g->cap) {
			size_t cap = g->cap ? g->cap * 2 : 4;
			struct range *nr = realloc(g->r, cap * sizeof(*nr));

			if (nr == NULL)
				return herd__error(HERD_ENOMEM, "out of memory parsing a hostlist");
			g->r = nr;
			g->cap = cap;
		}
		g->r[g->n++] = r;
		g->count += (size_t)(r.hi - r.lo) + 1;
		{
			size_t len = (size_t)digits_of(r.hi);

			if ((size_t)r.width > len)
				len = (size_t)r.width;
			if (len > g->maxlen)
				g->maxlen = len;
		}
		if (p->expr[p->pos] == ',') {
			p->pos++;
			continue;
		}
		if (p->expr[p->pos] == ']') {
			p->pos++;
			return HERD_OK;
		}
		if (p->expr[p->pos] == '\0')
			return parse_error(p, p->pos, "expected ']' to close the '[' at column %zu",
					   bracket + 1);
		describe_char(p, p->pos, got, sizeof(got));
		return parse_error(p, p->pos, "expected ',' or ']', got %s", got);
	}
}

/* Parses one item at p->pos (not a separator, not the end). */
static herd_status parse_item(struct parser *p, struct item *it)
{
	const char *s = p->expr;
	char got[32];

	memset(it, 0, sizeof(*it));
	it->start = p->pos;
	if (s[p->pos] == '-' || s[p->pos] == '.')
		return parse_error(p, p->pos, "a host name cannot start with '%c'", s[p->pos]);
	it->lit[0] = s + p->pos;
	for (;;) {
		int c = (unsigned char)s[p->pos];

		if (is_name_char(c)) {
			it->litlen[it->ng]++;
			p->pos++;
		} else if (c == '[') {
			if (it->ng == HERD__HOSTLIST_MAX_GROUPS)
				return parse_error(p, p->pos, "more than %d bracket groups in one name",
						   HERD__HOSTLIST_MAX_GROUPS);
			HERD_CHECK(parse_group(p, &it->grp[it->ng]));
			it->ng++;
			it->lit[it->ng] = s + p->pos;
		} else if (c == '\0' || c == ',' || is_blank(c)) {
			return HERD_OK;
		} else if (c == ']') {
			return parse_error(p, p->pos, "']' without a '[' before it");
		} else {
			describe_char(p, p->pos, got, sizeof(got));
			return parse_error(p, p->pos, "%s cannot be part of a host name", got);
		}
	}
}

/* How many names an item makes, and the longest; limits checked. */
static herd_status item_size(const struct parser *p, const struct item *it, size_t have,
			     size_t *count)
{
	size_t n = 1, len = 0;

	for (int g = 0; g <= it->ng; g++)
		len += it->litlen[g];
	for (int g = 0; g < it->ng; g++) {
		/* Each factor is at most the limit, so this cannot overflow first. */
		if (it->grp[g].count > HERD__HOSTLIST_MAX_NAMES / n)
			n = HERD__HOSTLIST_MAX_NAMES + 1;
		else
			n *= it->grp[g].count;
		len += it->grp[g].maxlen;
	}
	if (n > HERD__HOSTLIST_MAX_NAMES - have)
		return parse_error(p, it->start, "expands to more than %d names",
				   HERD__HOSTLIST_MAX_NAMES);
	if (len > HERD__HOSTNAME_MAX)
		return parse_error(p, it->start, "makes names longer than %d characters",
				   HERD__HOSTNAME_MAX);
	*count = n;
	return HERD_OK;
}

/* Appends name, which the list then owns (freed here when that fails). */
static herd_status push_owned(herd__hostlist *hl, char *name)
{
	if (hl->n == hl->cap) {
		size_t cap = hl->cap ? hl->cap * 2 : 8;
		char **nn = realloc(hl->names, cap * sizeof(*nn));

		if (nn == NULL) {
			free(name);
			return herd__error(HERD_ENOMEM, "out of memory for a list of %zu hosts",
					   hl->n + 1);
		}
		hl->names = nn;
		hl->cap = cap;
	}
	hl->names[hl->n++] = name;
	return HERD_OK;
}

/* Makes the names of an item, the last group varying fastest. */
static herd_status item_emit(const struct item *it, size_t count, herd__hostlist *out)
{
	size_t ri[HERD__HOSTLIST_MAX_GROUPS] = { 0 };
	unsigned long long val[HERD__HOSTLIST_MAX_GROUPS];
	char name[HERD__HOSTNAME_MAX + 1];

	for (int g = 0; g < it->ng; g++)
		val[g] = it->grp[g].r[0].lo;
	for (size_t k = 0; k < count; k++) {
		size_t len = 0;
		char *copy;

		for (int g = 0; g <= it->ng; g++) {
			memcpy(name + len, it->lit[g], it->litlen[g]);
			len += it->litlen[g];
			if (g < it->ng)
				len += (size_t)snprintf(name + len, sizeof(name) - len, "%0*llu",
							it->grp[g].r[ri[g]].width, val[g]);
		}
		name[len] = '\0';
		HERD_CHECK(herd__strdup(&copy, name));
		HERD_CHECK(push_owned(out, copy));
		/* Odometer step: the last group first, carrying leftwards. */
		for (int g = it->ng - 1; g >= 0; g--) {
			const struct group *gr = &it->grp[g];

			if (val[g] < gr->r[ri[g]].hi) {
				val[g]++;
				break;
			}
			if (++ri[g] < gr->n) {
				val[g] = gr->r[ri[g]].lo;
				break;
			}
			ri[g] = 0;
			val[g] = gr->r[0].lo;
		}
	}
	return HERD_OK;
}

herd_status herd__hostlist_expand(herd__hostlist *out, const char *expr)
{
	struct parser p = { expr, 0 };
	struct item it;
	herd_status st = HERD_OK;

	memset(out, 0, sizeof(*out));
	memset(&it, 0, sizeof(it));
	if (expr == NULL)
		return herd__error(HERD_EINVAL, "hostlist: no expression given");
	for (;;) {
		size_t count = 0;

		/* Empty items ("a,,b", "a[1-2],", ",a") are dropped, as Slurm
		 * drops them: node lists are pasted from its output. */
		while (expr[p.pos] == ',' || is_blank((unsigned char)expr[p.pos]))
			p.pos++;
		if (expr[p.pos] == '\0')
			break;
		HERD_CHECK_GOTO(parse_item(&p, &it), st, out);
		HERD_CHECK_GOTO(item_size(&p, &it, out->n, &count), st, out);
		HERD_CHECK_GOTO(item_emit(&it, count, out), st, out);
		item_free(&it);
	}
	if (out->n == 0)
		st = herd__error(HERD_EFORMAT, "hostlist \"%.72s%s\": no host names", expr,
				 strlen(expr) > 72 ? "..." : "");
out:
	item_free(&it);
	if (st != HERD_OK)
		herd__hostlist_free(out);
	return st;
}

void herd__hostlist_free(herd__hostlist *hl)
{
	if (hl == NULL)
		return;
	for (size_t i = 0; i < hl->n; i++)
		free(hl->names[i]);
	free(hl->names);
	hl->names = NULL;
	hl->n = 0;
	hl->cap = 0;
}

int herd__hostlist_name_ok(const char *name, const char **why)
{
	const char *dummy;
	size_t len;

	if (why == NULL)
		why = &dummy;
	if (name == NULL || name[0] == '\0') {
		*why = "an empty name";
		return 0;
	}
	len = strlen(name);
	if (len > HERD__HOSTNAME_MAX) {
		*why = "longer than 253 characters";
		return 0;
	}
	if (name[0] == '-' || name[0] == '.') {
		*why = "starts with '-' or '.'";
		return 0;
	}
	for (size_t i = 0; i < len; i++) {
		if (!is_name_char((unsigned char)name[i])) {
			*why = "holds a character other than letters, digits, '.', '-' and '_'";
			return 0;
		}
	}
	return 1;
}

herd_status herd__hostlist_push(herd__hostlist *hl, const char *name)
{
	const char *why;
	char *copy;

	if (!herd__hostlist_name_ok(name, &why))
		return herd__error(HERD_EINVAL, "host name \"%s\": %s", name ? name : "", why);
	if (hl->n >= HERD__HOSTLIST_MAX_NAMES)
		return herd__error(HERD_EINVAL, "more than %d hosts", HERD__HOSTLIST_MAX_NAMES);
	HERD_CHECK(herd__strdup(&copy, name));
	return push_owned(hl, copy);
}

/*
 * Compression writes what Slurm's `scontrol show hostlist` writes, so that
 * Slurm reads it back: a name ending in a number is its prefix and that
 * number (a name with text after its last number is taken whole, as Slurm
 * takes it); names next to each other in the list with the same prefix
 * share one bracket; in it, a number one above the one before continues
 * that range when both are written unpadded, or with as many digits as the
 * range's first, zero-padded, one ("n[08-10]", "n[098-100]", "n[9-11]",
 * but "n[09,010]"); the order of the list is kept ("n[5,3-4]").
 */
struct split {
	const char *name;
	size_t pre;  /* length of the prefix */
	size_t ndig; /* digits as written; 0: no trailing number (or one too long) */
	unsigned long long num;
	bool padded; /* written with a leading zero (and more than one digit) */
};

static void split_name(const char *name, struct split *s)
{
	size_t len = strlen(name), start = len;

	memset(s, 0, sizeof(*s));
	s->name = name;
	while (start > 0 && isdigit((unsigned char)name[start - 1]))
		start--;
	s->pre = start;
	if (start == len || len - start > NUM_DIGITS_MAX)
		return;
	s->ndig = len - start;
	for (size_t i = start; i < len; i++)
		s->num = s->num * 10 + (unsigned long long)(name[i] - '0');
	s->padded = s->ndig > 1 && name[start] == '0';
}

/* Whether b shares a's bracket: both numbered, the same prefix. */
static bool same_prefix(const struct split *a, const struct split *b)
{
	return a->ndig > 0 && b->ndig > 0 && a->pre == b->pre &&
	       memcmp(a->name, b->name, a->pre) == 0;
}

/* Whether b continues the range that first began and last ends. */
static bool continues(const struct split *first, const struct split *last, const struct split *b)
{
	if (b->num != last->num + 1)
		return false;
	if (!first->padded)
		return !b->padded && !last->padded;
	return b->ndig == first->ndig;
}

static herd_status put_number(herd__buf *b, const struct split *s, unsigned long long v)
{
	char num[32];
	int len = snprintf(num, sizeof(num), "%0*llu", s->padded ? (int)s->ndig : 0, v);

	return herd__buf_append(b, num, (size_t)len);
}

herd_status herd__hostlist_compress(char **out, const char *const *names, size_t n)
{
	herd__buf b = { 0 };
	herd_status st = HERD_OK;
	size_t len, i = 0;

	*out = NULL;
	for (size_t k = 0; k < n; k++) {
		const char *why;

		if (!herd__hostlist_name_ok(names[k], &why))
			return herd__error(HERD_EINVAL, "host name \"%s\": %s",
					   names[k] ? names[k] : "", why);
	}
	while (i < n) {
		struct split head, cur;
		size_t j = i + 1;

		split_name(names[i], &head);
		while (j < n) {
			split_name(names[j], &cur);
			if (!same_prefix(&head, &cur))
				break;
			j++;
		}
		if (i > 0)
			HERD_CHECK_GOTO(herd__buf_append(&b, ",", 1), st, out);
		if (j - i == 1) {
			HERD_CHECK_GOTO(herd__buf_append(&b, names[i], strlen(names[i])), st, out);
			i = j;
			continue;
		}
		/* names[i..j) differ only in their trailing number */
		HERD_CHECK_GOTO(herd__buf_append(&b, names[i], head.pre), st, out);
		HERD_CHECK_GOTO(herd__buf_append(&b, "[", 1), st, out);
		for (size_t k = i; k < j;) {
			struct split first, last;
			size_t m = k + 1;

			split_name(names[k], &first);
			last = first;
			while (m < j) {
				struct split next;

				split_name(names[m], &next);
				if (!continues(&first, &last, &next))
					break;
				last = next;
				m++;
			}
			if (k > i)
				HERD_CHECK_GOTO(herd__buf_append(&b, ",", 1), st, out);
			HERD_CHECK_GOTO(put_number(&b, &first, first.num), st, out);
			if (m > k + 1) {
				HERD_CHECK_GOTO(herd__buf_append(&b, "-", 1), st, out);
				HERD_CHECK_GOTO(put_number(&b, &first, last.num), st, out);
			}
			k = m;
		}
		HERD_CHECK_GOTO(herd__buf_append(&b, "]", 1), st, out);
		i = j;
	}
	if (n == 0)
		HERD_CHECK_GOTO(herd__buf_append(&b, "", 0), st, out);
	st = herd__buf_take(&b, "a hostlist", out, &len);
out:
	herd__buf_free(&b);
	return st;
}

/* ---- the public calls ----------------------------------------------------- */

herd_status herd_hostlist_expand(const char *expr, char ***names, size_t *n)
{
	herd__hostlist hl = { 0 };
	size_t bytes;
	char **block, *at;
	herd_status st;

	if (names == NULL || n == NULL)
		return herd__error(HERD_EINVAL, "herd_hostlist_expand: names and n are required");
	*names = NULL;
	*n = 0;
	if (expr == NULL)
		return herd__error(HERD_EINVAL, "herd_hostlist_expand: expr is NULL");
	HERD_CHECK(herd__hostlist_expand(&hl, expr));
	bytes = (hl.n + 1) * sizeof(char *);
	for (size_t i = 0; i < hl.n; i++)
		bytes += strlen(hl.names[i]) + 1;
	st = herd__calloc(&block, 1, bytes, "the names of a hostlist");
	if (st == HERD_OK) {
		at = (char *)(block + hl.n + 1);
		for (size_t i = 0; i < hl.n; i++) {
			size_t len = strlen(hl.names[i]) + 1;

			memcpy(at, hl.names[i], len);
			block[i] = at;
			at += len;
		}
		*names = block;
		*n = hl.n;
	}
	herd__hostlist_free(&hl);
	return st;
}

herd_status herd_hostlist_compress(const char *const *names, size_t n, char **expr)
{
	if (expr == NULL || (names == NULL && n > 0))
		return herd__error(HERD_EINVAL, "herd_hostlist_compress: %s is NULL",
				   expr == NULL ? "expr" : "names");
	*expr = NULL;
	return herd__hostlist_compress(expr, names, n);
}
