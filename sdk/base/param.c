/*
 * sdk/base/param.c - the table of HERD_* variables (param.h) and its
 * readers: the one place libherd and the herd program call getenv for a
 * variable of their own.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

static const herd__param_info table[HERD__P_COUNT] = {
#define HERD__PARAM_ROW_(ID, TYPE, VALUES, MIN, MAX, DEFAULT, DOC, CONTRACT) \
	[HERD__P_##ID] = { "HERD_" #ID, HERD__PT_##TYPE, VALUES, MIN, MAX, DEFAULT, DOC, CONTRACT },
#define HERD__PARAM_SETTING_(ID, TYPE, VALUES, MIN, MAX, DEFAULT, DOC) \
	HERD__PARAM_ROW_(ID, TYPE, VALUES, MIN, MAX, DEFAULT, DOC, false)
#define HERD__PARAM_CONTRACT_(ID, TYPE, VALUES, MIN, MAX, DEFAULT, DOC) \
	HERD__PARAM_ROW_(ID, TYPE, VALUES, MIN, MAX, DEFAULT, DOC, true)
	HERD__PARAMS_SETTINGS(HERD__PARAM_SETTING_)
	HERD__PARAMS_CONTRACT(HERD__PARAM_CONTRACT_)
#undef HERD__PARAM_CONTRACT_
#undef HERD__PARAM_SETTING_
#undef HERD__PARAM_ROW_
};

const herd__param_info *herd__param_get(herd__param p)
{
	return (unsigned int)p < HERD__P_COUNT ? &table[p] : NULL;
}

const char *herd__param_raw(herd__param p)
{
	return getenv(table[p].name);
}

const char *herd__param_str(herd__param p)
{
	const char *v = getenv(table[p].name);

	return v != NULL && v[0] != '\0' ? v : NULL;
}

/* A default the reader applies: not "", not worked out at run time. */
static bool literal_default(const herd__param_info *in)
{
	return in->dflt[0] != '\0' && in->dflt[0] != '(';
}

/* A reader used on a variable of another type is a bug of the caller. */
static herd_status wrong_type(const herd__param_info *in, const char *reader)
{
	return herd__error(HERD_EINVAL, "%s is not read by %s (internal error)", in->name,
			   reader);
}

/* ---- parsing one text, for the readers and for the table's defaults ------- */

static bool parse_int(const herd__param_info *in, const char *v, long *out)
{
	char *end;
	long x;

	errno = 0;
	x = strtol(v, &end, 10);
	if (end == v || *end != '\0' || errno != 0 || x < in->min || x > in->max)
		return false;
	*out = x;
	return true;
}

static bool parse_size(const herd__param_info *in, const char *v, uint64_t *out)
{
	uint64_t x;

	if (herd_size_parse(v, &x) != HERD_OK || x < (uint64_t)in->min || x > (uint64_t)in->max)
		return false;
	*out = x;
	return true;
}

static bool parse_ms(const herd__param_info *in, const char *v, int *out)
{
	char *end;
	double s;

	errno = 0;
	s = strtod(v, &end);
	if (end == v || *end != '\0' || errno != 0 || !isfinite(s) || s <= (double)in->min ||
	    s > (double)in->max)
		return false;
	*out = (int)ceil(s * 1000.0);
	return true;
}

static bool parse_bool(const herd__param_info *in, const char *v, bool *out)
{
	(void)in;
	if (strcmp(v, "1") != 0 && strcmp(v, "0") != 0)
		return false;
	*out = v[0] == '1';
	return true;
}

int herd__param_choice_of(herd__param p, const char *word)
{
	const char *w = table[p].values;
	size_t len = strlen(word);

	if (table[p].type != HERD__PT_CHOICE || len == 0)
		return -1;
	for (int i = 0;; i++) {
		size_t wl = strcspn(w, "|");

		if (wl == len && strncmp(w, word, len) == 0)
			return i;
		if (w[wl] == '\0')
			return -1;
		w += wl + 1;
	}
}

/* The error for a malformed value: the variable, the value, what is expected. */
static herd_status malformed(const herd__param_info *in, const char *v)
{
	switch (in->type) {
	case HERD__PT_INT:
		return herd__error(HERD_EINVAL, "%s=%s: expected a whole number from %lld to %lld",
				   in->name, v, in->min, in->max);
	case HERD__PT_SIZE:
		if (in->min <= 1 && in->max == INT64_MAX)
			return herd__error(HERD_EINVAL, "%s=\"%s\" is not a positive size in bytes "
					   "(as 268435456, 256M or 1.5GiB)", in->name, v);
		return herd__error(HERD_EINVAL, "%s=\"%s\" is not a size in bytes from %lld to "
				   "%lld (as 268435456, 256M or 1.5GiB)", in->name, v, in->min,
				   in->max);
	case HERD__PT_SECONDS:
		return herd__error(HERD_EINVAL, "%s=%s: expected a number of seconds greater than "
				   "%lld and at most %lld (\"300\", \"0.5\")", in->name, v, in->min,
				   in->max);
	case HERD__PT_BOOL:
		return herd__error(HERD_EINVAL, "%s=%s: expected 1 or 0", in->name, v);
	case HERD__PT_CHOICE:
		return herd__error(HERD_EINVAL, "%s=%s: expected %s", in->name, v, in->values);
	default:
		return herd__error(HERD_EINVAL, "%s=%s: malformed", in->name, v);
	}
}

/* ---- the readers ------------------------------------------------------------ */

/*
 * The one shape of every typed reader: the table's default first (when the
 * reader applies it), then the variable's value when it is set.
 */
#define HERD__PARAM_READ_(p, T, out, parse)                                       \
	do {                                                                      \
		const herd__param_info *in_ = &table[p];                          \
		const char *v_ = herd__param_str(p);                              \
		if (in_->type != HERD__PT_##T)                                    \
			return wrong_type(in_, __func__);                         \
		if (literal_default(in_))                                         \
			(void)(parse(in_, in_->dflt, out));                       \
		if (v_ != NULL && !(parse(in_, v_, out)))                         \
			return malformed(in_, v_);                                \
		return HERD_OK;                                                   \
	} while (0)

herd_status herd__param_int(herd__param p, long *out)
{
	HERD__PARAM_READ_(p, INT, out, parse_int);
}

herd_status herd__param_size(herd__param p, uint64_t *out)
{
	HERD__PARAM_READ_(p, SIZE, out, parse_size);
}

herd_status herd__param_ms(herd__param p, int *out)
{
	HERD__PARAM_READ_(p, SECONDS, out, parse_ms);
}

herd_status herd__param_bool(herd__param p, bool *out)
{
	HERD__PARAM_READ_(p, BOOL, out, parse_bool);
}

herd_status herd__param_choice(herd__param p, int *out)
{
	int dflt = herd__param_choice_of(p, table[p].dflt);
	const char *v = herd__param_str(p);

	if (table[p].type != HERD__PT_CHOICE)
		return wrong_type(&table[p], __func__);
	*out = dflt;
	if (v != NULL && (*out = herd__param_choice_of(p, v)) < 0) {
		*out = dflt;
		return malformed(&table[p], v);
	}
	return HERD_OK;
}

herd_status herd__param_words(herd__param p, char *buf, size_t cap, const char **words,
			      size_t max, size_t *n)
{
	*n = 0;
	if (table[p].type != HERD__PT_WORDS)
		return wrong_type(&table[p], __func__);
	return herd__param_split_words(table[p].name, herd__param_str(p), buf, cap, words, max,
				       n);
}

herd_status herd__param_split_words(const char *name, const char *value, char *buf, size_t cap,
				    const char **words, size_t max, size_t *n)
{
	size_t k = 0;

	*n = 0;
	if (value == NULL)
		return HERD_OK;
	if (strlen(value) >= cap)
		return herd__error(HERD_EINVAL, "%s is longer than %zu bytes", name, cap - 1);
	for (const char *p = value;;) {
		char quote = 0;

		while (*p == ' ' || *p == '\t' || *p == '\n')
			p++;
		if (*p == '\0')
			return HERD_OK;
		if (*n == max)
			return herd__error(HERD_EINVAL, "%s has more than %zu words", name, max);
		words[(*n)++] = buf + k;
		/* A word runs to the next blank outside quotes. */
		for (; *p != '\0'; p++) {
			if (quote != 0 && *p == quote)
				quote = 0;
			else if (quote == 0 && (*p == '\'' || *p == '"'))
				quote = *p;
			else if (quote == 0 && (*p == ' ' || *p == '\t' || *p == '\n'))
				break;
			else
				buf[k++] = *p;
		}
		if (quote != 0)
			return herd__error(HERD_EINVAL, "%s=%s: unclosed %c quote", name, value,
					   quote);
		buf[k++] = '\0';
	}
}

/* ---- the table as text ------------------------------------------------------ */

/* The type column of a row: "integer 1..8", "auto|tcp", "file". */
static void type_text(const herd__param_info *in, char *out, size_t cap)
{
	switch (in->type) {
	case HERD__PT_INT:
		snprintf(out, cap, "integer %lld..%lld", in->min, in->max);
		break;
	case HERD__PT_SIZE:
		snprintf(out, cap, "size");
		break;
	case HERD__PT_SECONDS:
		snprintf(out, cap, "seconds");
		break;
	case HERD__PT_BOOL:
		snprintf(out, cap, "1|0");
		break;
	default:
		snprintf(out, cap, "%s", in->values);
		break;
	}
}

static void rows(FILE *f, bool contract, int wname, int wtype, int wdflt)
{
	char type[64];

	for (int i = 0; i < HERD__P_COUNT; i++) {
		const herd__param_info *in = &table[i];

		if (in->contract != contract)
			continue;
		type_text(in, type, sizeof(type));
		fprintf(f, "%-*s  %-*s  %-*s  %s\n", wname, in->name, wtype, type, wdflt,
			in->dflt[0] != '\0' ? in->dflt : "-", in->doc);
	}
}

char *herd__param_table_text(void)
{
	int wname = (int)strlen("VARIABLE"), wtype = (int)strlen("TYPE");
	int wdflt = (int)strlen("DEFAULT");
	char type[64], *text = NULL;
	size_t len = 0;
	FILE *f;

	for (int i = 0; i < HERD__P_COUNT; i++) {
		type_text(&table[i], type, sizeof(type));
		if ((int)strlen(table[i].name) > wname)
			wname = (int)strlen(table[i].name);
		if ((int)strlen(type) > wtype)
			wtype = (int)strlen(type);
		if ((int)strlen(table[i].dflt) > wdflt)
			wdflt = (int)strlen(table[i].dflt);
	}
	f = open_memstream(&text, &len);
	if (f == NULL)
		return NULL;
	fprintf(f, "herd's settings.  Unset or empty, a variable has its default; a default in\n"
		"parentheses is worked out at run time (docs/cli.md, \"Environment\").\n\n");
	fprintf(f, "%-*s  %-*s  %-*s  %s\n", wname, "VARIABLE", wtype, "TYPE", wdflt, "DEFAULT",
		"MEANING");
	rows(f, false, wname, wtype, wdflt);
	fprintf(f, "\nSet by herd for the processes it starts (herd launch's ranks).  Set by "
		"hand,\nthe first ones join ranks that another tool started to a job's store.\n\n");
	rows(f, true, wname, wtype, wdflt);
	if (ferror(f)) {
		fclose(f);
		free(text);
		return NULL;
	}
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}

const char *herd_env_get(const char *name)
{
	for (int i = 0; name != NULL && i < HERD__P_COUNT; i++)
		if (strcmp(table[i].name, name) == 0)
			return getenv(table[i].name);
	herd__error(HERD_EINVAL, "herd_env_get: %s is not one of herd's settings (herd help env "
		    "lists them)", name != NULL ? name : "NULL");
	return NULL;
}

char *herd_env_table(void)
{
	return herd__param_table_text();
}
