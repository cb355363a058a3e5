/*
 * shell/safetensors.c - reading safetensors files for `herd ckpt import`
 * (the format and the checks: safetensors.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"

void shell_safe_name(const char *s, size_t len, char *buf, size_t cap)
{
	size_t n = 0;

	for (size_t i = 0; i < len && n + 8 < cap && n < 80; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c >= 0x20 && c < 0x7f && c != '\\')
			buf[n++] = (char)c;
		else
			n += (size_t)snprintf(buf + n, cap - n, "\\x%02x", c);
	}
	buf[n] = '\0';
}

static const struct st_dtype {
	herd_dtype dtype;
	const char *name;
} st_dtypes[] = {
	{ HERD_FLOAT16, "F16" }, { HERD_BFLOAT16, "BF16" }, { HERD_FLOAT32, "F32" },
	{ HERD_FLOAT64, "F64" }, { HERD_INT8, "I8" },       { HERD_UINT8, "U8" },
	{ HERD_INT32, "I32" },   { HERD_UINT32, "U32" },    { HERD_INT64, "I64" },
	{ HERD_UINT64, "U64" },  { HERD_FLOAT8_E4M3, "F8_E4M3" }, { HERD_FLOAT8_E5M2, "F8_E5M2" },
};

#define ST_NDTYPES (sizeof(st_dtypes) / sizeof(st_dtypes[0]))

const char *st_dtype_name(herd_dtype dtype)
{
	for (size_t i = 0; i < ST_NDTYPES; i++)
		if (st_dtypes[i].dtype == dtype)
			return st_dtypes[i].name;
	return NULL;
}

/* Refuses the file: f->error becomes "PATH: what". */
static int st_bad(struct st_file *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int st_bad(struct st_file *f, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(f->error, sizeof(f->error), "%s: ", f->path);

	if (n < 0 || (size_t)n >= sizeof(f->error))
		return -1;
	va_start(ap, fmt);
	vsnprintf(f->error + n, sizeof(f->error) - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static bool get_u64(const json_t *v, uint64_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = (uint64_t)json_integer_value(v);
	return true;
}

/* Checks one header entry into e. */
static int st_entry_parse(struct st_file *f, const char *key, json_t *v,
			  struct st_entry *e)
{
	json_t *dtype = json_object_get(v, "dtype"), *shape = json_object_get(v, "shape");
	json_t *offs = json_object_get(v, "data_offsets");
	size_t klen = strlen(key), esz;
	uint64_t count = 1;
	char name[128];

	shell_safe_name(key, klen, name, sizeof(name));
	memset(e, 0, sizeof(*e));
	e->name = key;
	if (!json_is_object(v))
		return st_bad(f, "tensor \"%s\": expected an object", name);
	if (klen == 0 || klen > HERD_CKPT_NAME_MAX)
		return st_bad(f, "tensor \"%s\": a herd tensor name has 1..%d characters", name,
			      HERD_CKPT_NAME_MAX);
	for (size_t i = 0; i < klen; i++)
		if ((unsigned char)key[i] < 0x20 || (unsigned char)key[i] > 0x7e)
			return st_bad(f, "tensor \"%s\": a herd tensor name is printable ASCII",
				      name);
	if (!json_is_string(dtype))
		return st_bad(f, "tensor \"%s\": \"dtype\" must be a string", name);
	e->dtype = HERD_DTYPE_COUNT;
	for (size_t i = 0; i < ST_NDTYPES; i++)
		if (strcmp(json_string_value(dtype), st_dtypes[i].name) == 0)
			e->dtype = st_dtypes[i].dtype;
	if (e->dtype == HERD_DTYPE_COUNT) {
		char d[64];

		shell_safe_name(json_string_value(dtype), json_string_length(dtype), d, sizeof(d));
		return st_bad(f, "tensor \"%s\": dtype \"%s\" is not one herd holds (F16 BF16 F32 "
			      "F64 F8_E4M3 F8_E5M2 I8 U8 I32 U32 I64 U64)", name, d);
	}
	if (!json_is_array(shape) || json_array_size(shape) > HERD_CKPT_MAX_DIMS)
		return st_bad(f, "tensor \"%s\": \"shape\" must be an array of at most %d sizes",
			      name, HERD_CKPT_MAX_DIMS);
	e->ndim = (int)json_array_size(shape);
	esz = herd_dtype_size(e->dtype);
	for (int d = 0; d < e->ndim; d++) {
		if (!get_u64(json_array_get(shape, (size_t)d), &e->shape[d]))
			return st_bad(f, "tensor \"%s\": shape[%d] must be an integer of 0 or more",
				      name, d);
		if (e->shape[d] != 0 && count > UINT64_MAX / esz / e->shape[d])
			return st_bad(f, "tensor \"%s\": shape %d: the size overflows", name, d);
		count *= e->shape[d];
	}
	if (!json_is_array(offs) || json_array_size(offs) != 2 ||
	    !get_u64(json_array_get(offs, 0), &e->begin) ||
	    !get_u64(json_array_get(offs, 1), &e->end) || e->begin > e->end)
		return st_bad(f, "tensor \"%s\": \"data_offsets\" must be [BEGIN, END] with 0 <= "
			      "BEGIN <= END", name);
	if (e->end - e->begin != count * esz)
		return st_bad(f, "tensor \"%s\": data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
			      " bytes; its shape and dtype need %" PRIu64, name, e->begin, e->end,
			      e->end - e->begin, count * esz);
	if (e->end > f->data_len)
		return st_bad(f, "tensor \"%s\": data_offsets end %" PRIu64 " lies beyond the %" PRIu64
			      " data bytes of the file", name, e->end, f->data_len);
	if (e->ndim == 0) {
		/* herd tensors have at least one dimension: a scalar is saved with
		 * shape [1], and the kept header says it was one. */
		e->scalar = true;
		e->ndim = 1;
		e->shape[0] = 1;
	}
	return 0;
}

static int cmp_entry(const void *a, const void *b)
{
	const struct st_entry *x = a, *y = b;

	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return (x->end > y->end) - (x->end < y->end);
}

void st_close(struct st_file *f)
{
	free(f->entries);
	json_decref(f->header);
	if (f->map != NULL && f->map != MAP_FAILED)
		munmap(f->map, f->size);
	if (f->fd >= 0)
		close(f->fd);
}

/* Checks the bytes of the file f names. */
static int st_check(struct st_file *f, const uint8_t *b, size_t size)
{
	json_error_t jerr;
	uint64_t hlen = 0;
	const char *key;
	json_t *v;
	size_t i = 0, ntensors;

	if (size < 8)
		return st_bad(f, "%zu bytes: too short for a safetensors file (8-byte header "
			      "length, then the header)", size);
	for (int k = 7; k >= 0; k--)
		hlen = hlen << 8 | b[k];
	if (hlen < 2 || hlen > ST_HEADER_MAX || hlen > size - 8)
		return st_bad(f, "header length %" PRIu64 ": expected 2..%u bytes within the "
			      "file's %zu", hlen, ST_HEADER_MAX, size);
	if (b[8] != '{')
		return st_bad(f, "the header does not start with '{'");
	f->header = json_loadb((const char *)b + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
	if (f->header == NULL)
		return st_bad(f, "header JSON, byte %d: %s", jerr.position, jerr.text);
	if (!json_is_object(f->header))
		return st_bad(f, "the header is not a JSON object");
	f->data = b + 8 + hlen;
	f->data_len = size - 8 - hlen;
	/* Beyond every real file, bounded before anything is allocated for it
	 * (__metadata__ is not a tensor). */
	ntensors = json_object_size(f->header) -
		   (json_object_get(f->header, "__metadata__") != NULL);
	if (ntensors > ST_TENSORS_MAX)
		return st_bad(f, "%zu tensors: more than the %u that herd imports from one file",
			      ntensors, ST_TENSORS_MAX);
	f->entries = calloc(json_object_size(f->header) + 1, sizeof(*f->entries));
	if (f->entries == NULL)
		return st_bad(f, "out of memory");
	json_object_foreach(f->header, key, v) {
		if (strcmp(key, "__metadata__") == 0) {
			const char *mk;
			json_t *mv;

			if (!json_is_object(v))
				return st_bad(f, "\"__metadata__\" must be an object of strings");
			json_object_foreach(v, mk, mv)
				if (!json_is_string(mv))
					return st_bad(f, "\"__metadata__\" must be an object of "
						      "strings");
			continue;
		}
		if (st_entry_parse(f, key, v, &f->entries[i]) != 0)
			return -1;
		i++;
	}
	f->n = i;
	/* The tensors tile the data: sorted by offset, each starts where the
	 * one before ends, the first at 0 and the last at the end. */
	qsort(f->entries, f->n, sizeof(*f->entries), cmp_entry);
	for (uint64_t at = 0, k = 0; k <= f->n; k++) {
		char name[128];

		if (k == f->n) {
			if (at != f->data_len)
				return st_bad(f, "%" PRIu64 " bytes after the last tensor's data "
					      "(the tensors end at %" PRIu64 " of %" PRIu64 ")",
					      f->data_len - at, at, f->data_len);
			break;
		}
		shell_safe_name(f->entries[k].name, strlen(f->entries[k].name), name, sizeof(name));
		if (f->entries[k].begin != at)
			return st_bad(f, "tensor \"%s\": data_offsets begin %" PRIu64 " where %" PRIu64
				      " was expected (the tensors' data must follow one another "
				      "without gaps or overlaps)", name, f->entries[k].begin, at);
		at = f->entries[k].end;
	}
	return 0;
}

int st_parse(struct st_file *f, const void *bytes, size_t size, const char *path)
{
	memset(f, 0, sizeof(*f));
	f->fd = -1;
	f->path = path;
	return st_check(f, bytes, size);
}

/* "a FIFO", "a directory"... for a st_mode that is not a regular file's. */
static const char *st_file_kind(mode_t mode)
{
	return S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO"
	     : S_ISCHR(mode) ? "a character device" : S_ISBLK(mode) ? "a block device"
	     : S_ISSOCK(mode) ? "a socket" : "not a regular file";
}

int st_open(struct st_file *f, const char *path)
{
	struct stat sb;

	memset(f, 0, sizeof(*f));
	f->path = path;
	/* O_NONBLOCK: a FIFO or a device opens at once (no writer awaited),
	 * and fstat of what was opened, not of a path that may change after
	 * a stat, refuses it. */
	f->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (f->fd < 0)
		return st_bad(f, "cannot open: %s", strerror(errno));
	if (fstat(f->fd, &sb) != 0)
		return st_bad(f, "cannot stat: %s", strerror(errno));
	if (!S_ISREG(sb.st_mode)) {
		snprintf(f->error, sizeof(f->error), "%s is %s, not a regular file", path,
			 st_file_kind(sb.st_mode));
		return -1;
	}
	if (sb.st_size < 8)     /* too short: st_check says so (nothing to map) */
		return st_check(f, (const uint8_t *)"", (size_t)sb.st_size);
	f->size = (size_t)sb.st_size;
	f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, f->fd, 0);
	if (f->map == MAP_FAILED)
		return st_bad(f, "cannot map: %s", strerror(errno));
	return st_check(f, f->map, f->size);
}
