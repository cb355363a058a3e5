/*
 * sdk/base/buf.c - the growable byte buffer (see buf.h).
 */
#include <stdlib.h>
#include <string.h>

#include "buf.h"

void herd__buf_init(herd__buf *buf, size_t max)
{
	memset(buf, 0, sizeof(*buf));
	buf->max = max;
}

/* Moves the pending bytes to the front. */
static void compact(herd__buf *buf)
{
	size_t pending = buf->len - buf->off;

	if (buf->off == 0)
		return;
	memmove(buf->data, buf->data + buf->off, pending);
	buf->off = 0;
	buf->len = pending;
}

/*
 * Makes cap - len > extra: the room asked for and one byte more, for the
 * NUL that herd__buf_take adds.  Raises nothing, so that herd__buf_write
 * can record the failure and herd__buf_reserve can explain it.
 */
static herd_status grow(herd__buf *buf, size_t extra)
{
	size_t want;
	uint8_t *p;

	if (buf->max != 0 && extra > buf->max - (buf->len - buf->off))
		return HERD_EFORMAT;
	if (buf->cap - buf->len > extra)
		return HERD_OK;
	compact(buf);
	if (buf->cap - buf->len > extra)
		return HERD_OK;
	if (extra >= SIZE_MAX / 2 - buf->len)
		return HERD_ENOMEM;
	want = buf->cap < 256 ? 256 : buf->cap;
	while (want - buf->len <= extra)
		want *= 2;
	p = realloc(buf->data, want);
	if (p == NULL)
		return HERD_ENOMEM;
	buf->data = p;
	buf->cap = want;
	return HERD_OK;
}

herd_status herd__buf_reserve(herd__buf *buf, size_t extra)
{
	herd_status st = grow(buf, extra);

	if (st == HERD_EFORMAT)
		return herd__error(st, "%zu more bytes would exceed the buffer's limit of %zu bytes "
				   "(%zu held)", extra, buf->max, buf->len - buf->off);
	if (st != HERD_OK)
		return herd__error(st, "out of memory growing a buffer of %zu bytes by %zu bytes",
				   buf->len - buf->off, extra);
	return HERD_OK;
}

herd_status herd__buf_append(herd__buf *buf, const void *p, size_t n)
{
	if (n == 0)
		return HERD_OK;
	HERD_CHECK(herd__buf_reserve(buf, n));
	memcpy(buf->data + buf->len, p, n);
	buf->len += n;
	return HERD_OK;
}

int herd__buf_write(void *data, const char *bytes, size_t len)
{
	herd__buf *buf = data;

	if (buf->failed == HERD_OK)
		buf->failed = grow(buf, len);
	if (buf->failed != HERD_OK)
		return -1;
	if (len > 0)
		memcpy(buf->data + buf->len, bytes, len);
	buf->len += len;
	return 0;
}

void herd__buf_consume(herd__buf *buf, size_t n)
{
	buf->off += n;
	if (buf->off >= buf->len)
		buf->off = buf->len = 0;
}

herd_status herd__buf_take(herd__buf *buf, const char *what, char **out, size_t *len)
{
	herd_status st = buf->failed;

	*out = NULL;
	*len = 0;
	compact(buf);
	/* Nothing written still hands back an empty, NUL-terminated string. */
	if (st == HERD_OK)
		st = grow(buf, 0);
	if (st == HERD_ENOMEM) {
		st = herd__error(HERD_ENOMEM, "out of memory writing %s (%zu bytes so far)",
				 what, buf->len);
	} else if (st != HERD_OK) {
		st = herd__error(st, "%s would exceed the limit of %zu bytes", what, buf->max);
	} else {
		buf->data[buf->len] = '\0';
		*out = (char *)buf->data;
		*len = buf->len;
		buf->data = NULL;
	}
	herd__buf_free(buf);
	return st;
}

void herd__buf_free(herd__buf *buf)
{
	free(buf->data);
	herd__buf_init(buf, buf->max);
}
