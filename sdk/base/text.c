/*
 * sdk/base/text.c - a growing string for messages and explanations.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

void herd__text_printf(herd__text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->failed)
		return;
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		t->failed = true;
		return;
	}
	if (t->len + (size_t)n + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 256;
		char *s;

		while (cap < t->len + (size_t)n + 1)
			cap *= 2;
		s = realloc(t->s, cap);
		if (s == NULL) {
			t->failed = true;
			return;
		}
		t->s = s;
		t->cap = cap;
	}
	va_start(ap, fmt);
	vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
	va_end(ap);
	t->len += (size_t)n;
}

herd_status herd__text_take(herd__text *t, char **out)
{
	*out = NULL;
	if (t->failed) {
		herd__text_free(t);
		return herd__error(HERD_ENOMEM, "out of memory writing a text");
	}
	if (t->s == NULL) {
		t->s = calloc(1, 1);
		if (t->s == NULL)
			return herd__error(HERD_ENOMEM, "out of memory writing a text");
	}
	*out = t->s;
	memset(t, 0, sizeof(*t));
	return HERD_OK;
}

void herd__text_free(herd__text *t)
{
	free(t->s);
	memset(t, 0, sizeof(*t));
}
