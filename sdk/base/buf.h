/*
 * sdk/base/buf.h - herd's one growable byte buffer.  Not part of the public
 * API.
 *
 * Two ways to fill it:
 *
 *   - as a msgpack_packer write callback (herd__buf_write), which remembers
 *     the first failure instead of making every pack call checked; the
 *     bytes, or that one error, are then collected with herd__buf_take;
 *   - with herd__buf_reserve / herd__buf_append, which raise at once, and
 *     herd__buf_consume for a stream read from the front (the store's
 *     frames).
 *
 * The bytes not yet consumed are data[off, len).  A zeroed herd__buf is an
 * empty buffer without a limit, ready to use.  Not thread-safe.
 */
#ifndef HERD_BASE_BUF_H
#define HERD_BASE_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "base.h"

typedef struct herd__buf {
	uint8_t *data;
	size_t off, len, cap;
	size_t max;          /* most pending bytes it may hold; 0: no limit */
	herd_status failed;  /* first failure of herd__buf_write: HERD_OK, HERD_ENOMEM,
				or HERD_EFORMAT (max exceeded) */
} herd__buf;

/* An empty buffer that will hold at most max pending bytes (0: no limit). */
void herd__buf_init(herd__buf *buf, size_t max);

/*
 * Makes room for extra more bytes after len, moving the pending bytes to
 * the front first when that is enough.  HERD_EFORMAT when the pending
 * bytes would exceed max, HERD_ENOMEM when memory runs out.
 */
herd_status herd__buf_reserve(herd__buf *buf, size_t extra);

/* Appends n bytes (herd__buf_reserve's errors). */
herd_status herd__buf_append(herd__buf *buf, const void *p, size_t n);

/*
 * A msgpack_packer_write callback appending to the herd__buf data: 0, or
 * -1 after recording the failure in buf->failed.  Once a write has failed,
 * every later one fails too, so the output is never silently cut.
 */
int herd__buf_write(void *data, const char *bytes, size_t len);

/* Marks n pending bytes as consumed; the buffer rewinds once all are. */
void herd__buf_consume(herd__buf *buf, size_t n);

/*
 * Hands the pending bytes to the caller (*out, NUL-terminated, freed with
 * free; *len without the NUL), or raises the failure recorded by
 * herd__buf_write, naming what was being written.  Either way the buffer
 * is empty after, with the same max.
 */
herd_status herd__buf_take(herd__buf *buf, const char *what, char **out, size_t *len);

/* Frees the bytes; the buffer is empty, has the same max and is reusable. */
void herd__buf_free(herd__buf *buf);

#endif /* HERD_BASE_BUF_H */
