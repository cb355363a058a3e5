/*
 * sdk/base/yaml.c - a JSON document written as block-style YAML, as
 * Kubernetes' manifests are read by people: mappings and sequences in
 * blocks, strings double-quoted with JSON's escapes (YAML's double-quoted
 * style is a superset of them), numbers, booleans and null as they are.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "base.h"

/* A key that needs no quotes: letters, digits and "_./-", from a letter,
 * and not a word YAML 1.1 reads as a boolean or null (yes, on, y...). */
static bool plain_key(const char *k)
{
	static const char *const words[] = { "y", "yes", "n", "no", "on", "off", "true",
					     "false", "null" };

	if (!isalpha((unsigned char)k[0]))
		return false;
	for (const char *p = k; *p != '\0'; p++)
		if (!isalnum((unsigned char)*p) && strchr("_./-", *p) == NULL)
			return false;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strcasecmp(k, words[i]) == 0)
			return false;
	return true;
}

static void scalar(herd__text *t, const json_t *v)
{
	char *s;

	if (json_is_string(v) || json_is_number(v) || json_is_boolean(v) || json_is_null(v)) {
		/* ASCII only (\uXXXX beyond it, which YAML's double quotes
		 * take); DEL, which YAML does not print, as \x7F. */
		s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_ENSURE_ASCII);
		if (s == NULL) {
			t->failed = true;
			return;
		}
		for (const char *p = s; *p != '\0'; p++)
			herd__text_printf(t, *p == 0x7f ? "\\x7F" : "%c", *p);
		free(s);
	}
}

static bool is_block(const json_t *v)
{
	return (json_is_object(v) && json_object_size(v) > 0) ||
	       (json_is_array(v) && json_array_size(v) > 0);
}

static void node(herd__text *t, const json_t *v, int indent, bool in_item);

/* A value after "key:" or "- ": inline, or a block on the next lines. */
static void value(herd__text *t, const json_t *v, int indent)
{
	if (json_is_object(v) && json_object_size(v) == 0)
		herd__text_printf(t, " {}\n");
	else if (json_is_array(v) && json_array_size(v) == 0)
		herd__text_printf(t, " []\n");
	else if (is_block(v)) {
		herd__text_printf(t, "\n");
		node(t, v, indent, false);
	} else {
		herd__text_printf(t, " ");
		scalar(t, v);
		herd__text_printf(t, "\n");
	}
}

/* A block at indent; in_item: its first line follows "- " already written. */
static void node(herd__text *t, const json_t *v, int indent, bool in_item)
{
	if (json_is_object(v)) {
		const char *k;
		json_t *x;
		bool first = true;

		json_object_foreach((json_t *)v, k, x) {
			if (!(first && in_item))
				herd__text_printf(t, "%*s", indent, "");
			first = false;
			if (plain_key(k)) {
				herd__text_printf(t, "%s:", k);
			} else {
				json_t *q = json_string(k);

				if (q == NULL)
					t->failed = true;
				else
					scalar(t, q);
				json_decref(q);
				herd__text_printf(t, ":");
			}
			/* a sequence under a key sits at the key's indent, as kubectl writes it */
			value(t, x, json_is_array(x) ? indent : indent + 2);
		}
	} else if (json_is_array(v)) {
		size_t i;
		json_t *x;

		json_array_foreach(v, i, x) {
			if (!(i == 0 && in_item))
				herd__text_printf(t, "%*s", indent, "");
			herd__text_printf(t, "-");
			if (is_block(x) && json_is_object(x)) {
				herd__text_printf(t, " ");
				node(t, x, indent + 2, true);
			} else {
				value(t, x, indent + 2);
			}
		}
	}
}

herd_status herd__yaml(const json_t *doc, herd__text *out)
{
	if (!json_is_object(doc))
		return herd__error(HERD_EINVAL, "herd__yaml: a YAML document here is a mapping");
	node(out, doc, 0, false);
	return out->failed ? herd__error(HERD_ENOMEM, "out of memory writing YAML") : HERD_OK;
}
