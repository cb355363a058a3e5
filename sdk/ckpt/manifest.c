/*
 * sdk/ckpt/manifest.c - the manifest of a step: encoder, strict decoder,
 * and the names it may contain.
 *
 * The manifest is one msgpack map whose last entry is "sum": the XXH3 of
 * every byte before that value, as 16 hex digits.  Keeping the checksum
 * inside the map (rather than in a wrapper) leaves the file a plain msgpack
 * map that herd's JSON converter shows as it is; keeping it last, in a
 * fixed form, lets the reader check it before it parses anything.
 *
 * The decoder is the one definition of a valid manifest, and the manifest
 * is hostile input (a tool may be pointed at any directory): every field
 * has its type and range, names cannot leave the step directory, every
 * byte range lies within its file, sizes are computed without overflow,
 * and the shards of a tensor tile it.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>
#include <xxhash.h>

#include "buf.h"
#include "ckpt_internal.h"
#include "mpjson.h"
#include "mpwalk.h"
#include "msgpack_check.h"

/* The tail of every manifest: key "sum", then a 16-byte string header. */
static const char sum_tail[] = "\xa3sum\xb0";
#define SUM_TAIL_LEN 5
#define SUM_HEX_LEN 16

/* Above this many shards, a tensor's shards are not compared pairwise for
 * overlap (their volumes must still add up). */
#define PAIRWISE_MAX 4096

/* ---- names and small helpers ------------------------------------------ */

bool herd__ckpt_name_is_valid(const char *s, size_t n)
{
	if (n == 0 || n > HERD_CKPT_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return false;
	return true;
}

bool herd__ckpt_name_is_safe_file(const char *s, size_t n)
{
	if (n == 0 || n > 64 || s[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return false;
	}
	return true;
}

void herd__ckpt_step_name(char *buf, size_t cap, int64_t step)
{
	snprintf(buf, cap, HERD__CKPT_STEP_PREFIX "%012" PRId64, step);
}

bool herd__ckpt_parse_step(const char *name, const char *prefix, int64_t *step)
{
	size_t plen = strlen(prefix), i;
	int64_t v = 0;

	if (strncmp(name, prefix, plen) != 0)
		return false;
	for (i = plen; name[i] >= '0' && name[i] <= '9'; i++) {
		if (i - plen >= 12)
			return false;
		v = v * 10 + (name[i] - '0');
	}
	if (i == plen || (name[i] != '\0' && name[i] != '.'))
		return false;
	*step = v;
	return true;
}

void herd__ckpt_rank_file_name(char *buf, size_t cap, int rank)
{
	snprintf(buf, cap, "rank-%05d.data", rank);
}

uint64_t herd__ckpt_sum(const void *p, size_t len)
{
	return XXH3_64bits(p, len);
}

void herd__ckpt_sum_hex(char *buf, uint64_t sum)
{
	snprintf(buf, SUM_HEX_LEN + 1, "%016" PRIx64, sum);
}

static bool parse_hex(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n != SUM_HEX_LEN)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		unsigned d;

		if (c >= '0' && c <= '9')
			d = (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			d = (unsigned)(c - 'a' + 10);
		else
			return false;
		v = v << 4 | d;
	}
	*out = v;
	return true;
}

bool herd__ckpt_volume(const uint64_t *shape, int ndim, uint64_t limit, uint64_t *out)
{
	uint64_t v = 1;

	for (int i = 0; i < ndim; i++) {
		if (shape[i] == 0) {
			*out = 0;
			return true;
		}
		if (v > limit / shape[i])
			return false;
		v *= shape[i];
	}
	*out = v;
	return v <= limit;
}

static const char *rule_name(herd_ckpt_blob_rule rule)
{
	switch (rule) {
	case HERD_CKPT_BLOB_SAME_RANK:
		return "same_rank";
	case HERD_CKPT_BLOB_RANK0:
		return "rank0";
	case HERD_CKPT_BLOB_STRICT:
		return "strict";
	}
	return "unknown";
}

void herd__ckpt_manifest_free(herd__ckpt_manifest *m)
{
	if (m == NULL)
		return;
	for (size_t i = 0; i < m->nfiles; i++)
		free(m->files[i].name);
	for (size_t i = 0; i < m->ntensors; i++) {
		for (size_t j = 0; j < m->tensors[i].nshards; j++)
			free(m->tensors[i].shards[j].sums);
		free(m->tensors[i].shards);
		free(m->tensors[i].name);
	}
	for (size_t i = 0; i < m->nblobs; i++) {
		free(m->blobs[i].parts);
		free(m->blobs[i].name);
	}
	free(m->files);
	free(m->tensors);
	free(m->blobs);
	free(m);
}

const herd__ckpt_tensor *herd__ckpt_manifest_tensor(const herd__ckpt_manifest *m,
						    const char *name)
{
	for (size_t i = 0; i < m->ntensors; i++)
		if (strcmp(m->tensors[i].name, name) == 0)
			return &m->tensors[i];
	return NULL;
}

const herd__ckpt_blob *herd__ckpt_manifest_blob(const herd__ckpt_manifest *m, const char *name)
{
	for (size_t i = 0; i < m->nblobs; i++)
		if (strcmp(m->blobs[i].name, name) == 0)
			return &m->blobs[i];
	return NULL;
}

/* ---- encoder ----------------------------------------------------------- */

static void pack_hex(msgpack_packer *pk, uint64_t sum)
{
	char hex[SUM_HEX_LEN + 1];

	herd__ckpt_sum_hex(hex, sum);
	msgpack_pack_str(pk, SUM_HEX_LEN);
	msgpack_pack_str_body(pk, hex, SUM_HEX_LEN);
}

static void pack_dims(msgpack_packer *pk, const uint64_t *dims, int ndim)
{
	msgpack_pack_array(pk, (size_t)ndim);
	for (int i = 0; i < ndim; i++)
		msgpack_pack_uint64(pk, dims[i]);
}

static void pack_shard(msgpack_packer *pk, const herd__ckpt_shard *s)
{
	msgpack_pack_map(pk, 6);
	herd__mp_pack_str(pk, "offset");
	pack_dims(pk, s->box.offset, s->box.ndim);
	herd__mp_pack_str(pk, "shape");
	pack_dims(pk, s->box.shape, s->box.ndim);
	herd__mp_pack_str(pk, "file");
	msgpack_pack_uint32(pk, s->file);
	herd__mp_pack_str(pk, "at");
	msgpack_pack_uint64(pk, s->at);
	herd__mp_pack_str(pk, "len");
	msgpack_pack_uint64(pk, s->len);
	herd__mp_pack_str(pk, "sums");
	msgpack_pack_array(pk, s->nsums);
	for (size_t i = 0; i < s->nsums; i++)
		pack_hex(pk, s->sums[i]);
}

static void pack_manifest(msgpack_packer *pk, const herd__ckpt_manifest *m)
{
	msgpack_pack_map(pk, 11);
	herd__mp_pack_str(pk, "v");
	msgpack_pack_int(pk, HERD__CKPT_MANIFEST_VERSION);
	herd__mp_pack_str(pk, "format");
	herd__mp_pack_str(pk, "herd-checkpoint");
	herd__mp_pack_str(pk, "step");
	msgpack_pack_int64(pk, m->step);
	herd__mp_pack_str(pk, "ranks");
	msgpack_pack_int(pk, m->ranks);
	herd__mp_pack_str(pk, "time");
	msgpack_pack_int64(pk, m->time);
	herd__mp_pack_str(pk, "checksum");
	herd__mp_pack_str(pk, m->checksum == HERD_CKPT_CHECKSUM_NONE ? "none" : "xxh3");
	herd__mp_pack_str(pk, "chunk");
	msgpack_pack_uint64(pk, m->chunk_bytes);
	herd__mp_pack_str(pk, "files");
	msgpack_pack_array(pk, m->nfiles);
	for (size_t i = 0; i < m->nfiles; i++) {
		msgpack_pack_map(pk, 3);
		herd__mp_pack_str(pk, "name");
		herd__mp_pack_str(pk, m->files[i].name);
		herd__mp_pack_str(pk, "rank");
		msgpack_pack_int(pk, m->files[i].rank);
		herd__mp_pack_str(pk, "size");
		msgpack_pack_uint64(pk, m->files[i].size);
	}
	herd__mp_pack_str(pk, "tensors");
	msgpack_pack_array(pk, m->ntensors);
	for (size_t i = 0; i < m->ntensors; i++) {
		const herd__ckpt_tensor *t = &m->tensors[i];

		msgpack_pack_map(pk, 4);
		herd__mp_pack_str(pk, "name");
		herd__mp_pack_str(pk, t->name);
		herd__mp_pack_str(pk, "dtype");
		herd__mp_pack_str(pk, herd_dtype_name(t->dtype));
		herd__mp_pack_str(pk, "shape");
		pack_dims(pk, t->shape, t->ndim);
		herd__mp_pack_str(pk, "shards");
		msgpack_pack_array(pk, t->nshards);
		for (size_t j = 0; j < t->nshards; j++)
			pack_shard(pk, &t->shards[j]);
	}
	herd__mp_pack_str(pk, "blobs");
	msgpack_pack_array(pk, m->nblobs);
	for (size_t i = 0; i < m->nblobs; i++) {
		const herd__ckpt_blob *b = &m->blobs[i];

		msgpack_pack_map(pk, 3);
		herd__mp_pack_str(pk, "name");
		herd__mp_pack_str(pk, b->name);
		herd__mp_pack_str(pk, "rule");
		herd__mp_pack_str(pk, rule_name(b->rule));
		herd__mp_pack_str(pk, "parts");
		msgpack_pack_array(pk, b->nparts);
		for (size_t j = 0; j < b->nparts; j++) {
			const herd__ckpt_blob_part *p = &b->parts[j];

			msgpack_pack_map(pk, 5);
			herd__mp_pack_str(pk, "rank");
			msgpack_pack_int(pk, p->rank);
			herd__mp_pack_str(pk, "file");
			msgpack_pack_uint32(pk, p->file);
			herd__mp_pack_str(pk, "at");
			msgpack_pack_uint64(pk, p->at);
			herd__mp_pack_str(pk, "len");
			msgpack_pack_uint64(pk, p->len);
			herd__mp_pack_str(pk, "sum");
			pack_hex(pk, p->sum);
		}
	}
	/* The last entry: "sum", whose value is appended by the caller. */
	msgpack_pack_str(pk, 3);
	msgpack_pack_str_body(pk, "sum", 3);
	msgpack_pack_str(pk, SUM_HEX_LEN);
}

herd_status herd__ckpt_manifest_encode(const herd__ckpt_manifest *m, char **out, size_t *len)
{
	char hex[SUM_HEX_LEN + 1];
	msgpack_packer pk;
	herd__buf buf;
	herd_status st;

	*out = NULL;
	*len = 0;
	herd__buf_init(&buf, HERD__CKPT_MANIFEST_MAX);
	msgpack_packer_init(&pk, &buf, herd__buf_write);
	pack_manifest(&pk, m);
	if (buf.failed == HERD_OK) {
		herd__ckpt_sum_hex(hex, herd__ckpt_sum(buf.data + buf.off, buf.len - buf.off));
		herd__buf_write(&buf, hex, SUM_HEX_LEN);
	}
	st = herd__buf_take(&buf, "the checkpoint manifest", out, len);
	herd__buf_free(&buf);
	return st;
}

/* ---- decoder ----------------------------------------------------------- */

static herd_status get_name(herd__mpwalk *w, const msgpack_object *map, const char *key,
			    bool (*valid)(const char *, size_t), const char *what, char **out)
{
	const char *s;
	size_t n, mark;

	HERD_CHECK(herd__mpwalk_get_str(w, map, key, SIZE_MAX, &s, &n));
	if (!valid(s, n)) {
		herd_status st;

		mark = herd__mpwalk_key(w, key);
		st = herd__mpwalk_fail(w, HERD_EFORMAT, "expected %s, got \"%.*s\"%s", what,
				       (int)(n > 64 ? 64 : n), s, n > 64 ? "..." : "");
		herd__mpwalk_pop(w, mark);
		return st;
	}
	*out = malloc(n + 1);
	if (*out == NULL)
		return herd__error(HERD_ENOMEM, "out of memory decoding a name of %zu bytes", n);
	memcpy(*out, s, n);
	(*out)[n] = '\0';
	return HERD_OK;
}

static herd_status get_hex(herd__mpwalk *w, const msgpack_object *o, uint64_t *out)
{
	const char *s = NULL;
	size_t n = 0;

	HERD_CHECK(herd__mpwalk_str(w, o, SIZE_MAX, &s, &n));
	if (!parse_hex(s, n, out))
		return herd__mpwalk_fail(w, HERD_EFORMAT, "expected a checksum of 16 lower-case hex digits");
	return HERD_OK;
}

/* An array of ndim dimensions, each at most max. */
static herd_status get_dims(herd__mpwalk *w, const msgpack_object *map, const char *key,
			    int ndim_lo, int ndim_hi, uint64_t max, uint64_t *dims, int *ndim)
{
	const msgpack_object *o;
	herd_status st;
	size_t mark, n = 0;

	HERD_CHECK(herd__mpwalk_need(w, map, key, &o));
	mark = herd__mpwalk_key(w, key);
	st = herd__mpwalk_array(w, o, (size_t)ndim_lo, (size_t)ndim_hi, &n);
	for (size_t i = 0; st == HERD_OK && i < n; i++) {
		size_t m2 = herd__mpwalk_index(w, i);

		st = herd__mpwalk_uint(w, &o->via.array.ptr[i], 0, max, &dims[i]);
		herd__mpwalk_pop(w, m2);
	}
	herd__mpwalk_pop(w, mark);
	*ndim = (int)n;
	return st;
}

/* Checks that [at, at+len) lies within file f of m. */
static herd_status check_range(herd__mpwalk *w, const herd__ckpt_manifest *m, uint32_t f,
			       uint64_t at, uint64_t len)
{
	uint64_t size = m->files[f].size;

	if (at > size || len > size - at)
		return herd__mpwalk_fail(w, HERD_EFORMAT, "bytes %" PRIu64 "..%" PRIu64 " lie past "
					 "the end of %s (%" PRIu64 " bytes)", at, at + len,
					 m->files[f].name, size);
	return HERD_OK;
}

static herd_status decode_file(herd__mpwalk *w, const msgpack_object *o, herd__ckpt_manifest *m,
			       herd__ckpt_file *f)
{
	uint64_t v;

	HERD_CHECK(herd__mpwalk_map(w, o, SIZE_MAX));
	HERD_CHECK(get_name(w, o, "name", herd__ckpt_name_is_safe_file,
			    "a file name of [A-Za-z0-9._-] not starting with '.'", &f->name));
	HERD_CHECK(herd__mpwalk_get_uint(w, o, "rank", 0, (uint64_t)m->ranks - 1, &v));
	f->rank = (int)v;
	return herd__mpwalk_get_uint(w, o, "size", 0, HERD__CKPT_MAX_BYTES, &f->size);
}

static herd_status decode_shard(herd__mpwalk *w, const msgpack_object *o, herd__ckpt_manifest *m,
				const herd__ckpt_tensor *t, herd__ckpt_shard *s)
{
	const msgpack_object *sums;
	uint64_t v = 0, vol = 0, want_sums;
	size_t mark, n = 0;
	herd_status st;
	int nd = 0;

	HERD_CHECK(herd__mpwalk_map(w, o, SIZE_MAX));
	s->box.ndim = t->ndim;
	HERD_CHECK(get_dims(w, o, "offset", t->ndim, t->ndim, HERD__CKPT_MAX_DIM, s->box.offset,
			    &nd));
	HERD_CHECK(get_dims(w, o, "shape", t->ndim, t->ndim, HERD__CKPT_MAX_DIM, s->box.shape,
			    &nd));
	for (int d = 0; d < t->ndim; d++)
		if (s->box.shape[d] > t->shape[d] || s->box.offset[d] > t->shape[d] - s->box.shape[d])
			return herd__mpwalk_fail(w, HERD_EFORMAT, "dimension %d of the shard (%"
						 PRIu64 " at %" PRIu64 ") lies outside the tensor's %"
						 PRIu64, d, s->box.shape[d], s->box.offset[d],
						 t->shape[d]);
	HERD_CHECK(herd__mpwalk_get_uint(w, o, "file", 0, m->nfiles > 0 ? m->nfiles - 1 : 0,
					 &v));
	if (m->nfiles == 0)
		return herd__mpwalk_fail(w, HERD_EFORMAT, "a shard refers to a file, but the step lists none");
	s->file = (uint32_t)v;
	HERD_CHECK(herd__mpwalk_get_uint(w, o, "at", 0, HERD__CKPT_MAX_BYTES, &s->at));
	HERD_CHECK(herd__mpwalk_get_uint(w, o, "len", 0, HERD__CKPT_MAX_BYTES, &s->len));
	/* The tensor's volume bounded this one, so no overflow here. */
	herd__ckpt_volume(s->box.shape, t->ndim, HERD__CKPT_MAX_BYTES, &vol);
	if (s->len != vol * herd_dtype_size(t->dtype))
		return herd__mpwalk_fail(w, HERD_EFORMAT, "len is %" PRIu64 " bytes, but the shard's "
					 "shape holds %" PRIu64, s->len,
					 vol * herd_dtype_size(t->dtype));
	HERD_CHECK(check_range(w, m, s->file, s->at, s->len));
	want_sums = m->checksum == HERD_CKPT_CHECKSUM_NONE
			    ? 0 : (s->len + m->chunk_bytes - 1) / m->chunk_bytes;
	HERD_CHECK(herd__mpwalk_need(w, o, "sums", &sums));
	mark = herd__mpwalk_key(w, "sums");
	st = herd__mpwalk_array(w, sums, (size_t)want_sums, (size_t)want_sums, &n);
	if (st == HERD_OK)
		st = herd__calloc(&s->sums, n, sizeof(uint64_t), "chunk checksums");
	s->nsums = st == HERD_OK ? n : 0;
	for (size_t i = 0; st == HERD_OK && i < n; i++) {
		size_t m2 = herd__mpwalk_index(w, i);

		st = get_hex(w, &sums->via.array.ptr[i], &s->sums[i]);
		herd__mpwalk_pop(w, m2);
	}
	herd__mpwalk_pop(w, mark);
	return st;
}

static bool boxes_overlap(const herd__ckpt_box *a, const herd__ckpt_box *b)
{
	herd__ckpt_box x;

	return herd__ckpt_box_intersect(a, b, &x);
}

/* The shards must tile the tensor: volumes add up, and no two overlap. */
static herd_status check_tiling(herd__mpwalk *w, const herd__ckpt_tensor *t)
{
	uint64_t total = 0, vol = 0, want = 0;

	herd__ckpt_volume(t->shape, t->ndim, HERD__CKPT_MAX_BYTES, &want);
	for (size_t i = 0; i < t->nshards; i++) {
		herd__ckpt_volume(t->shards[i].box.shape, t->ndim, HERD__CKPT_MAX_BYTES, &vol);
		total += vol;   /* each at most want, at most 2^24 of them: no overflow */
	}
	if (total != want)
		return herd__mpwalk_fail(w, HERD_EFORMAT, "the shards hold %" PRIu64 " elements, but "
					 "the tensor has %" PRIu64, total, want);
	if (t->nshards > PAIRWISE_MAX)
		return HERD_OK;
	for (size_t i = 0; i < t->nshards; i++)
		for (size_t j = i + 1; j < t->nshards; j++)
			if (boxes_overlap(&t->shards[i].box, &t->shards[j].box))
				return herd__mpwalk_fail(w, HERD_EFORMAT, "shards %zu and %zu overlap", i, j);
	return HERD_OK;
}

static herd_status decode_tensor(herd__mpwalk *w, const msgpack_object *o, herd__ckpt_manifest *m,
				 herd__ckpt_tensor *t)
{
	const msgpack_object *shards;
	const char *s = NULL;
	size_t n = 0, mark;
	herd_status st;
	char dname[32];
	uint64_t vol = 0;

	HERD_CHECK(herd__mpwalk_map(w, o, SIZE_MAX));
	HERD_CHECK(get_name(w, o, "name", herd__ckpt_name_is_valid,
			    "a name of 1..255 printable ASCII characters", &t->name));
	HERD_CHECK(herd__mpwalk_get_str(w, o, "dtype", SIZE_MAX, &s, &n));
	herd__strlcpy(dname, s, n + 1 < sizeof(dname) ? n + 1 : sizeof(dname));
	if (n >= sizeof(dname) || herd_dtype_parse(dname, &t->dtype) != HERD_OK ||
	    strcmp(herd_dtype_name(t->dtype), dname) != 0) {
		mark = herd__mpwalk_key(w, "dtype");
		st = herd__mpwalk_fail(w, HERD_EFORMAT, "expected a type name such as \"float32\", got \"%.*s\"",
				       (int)(n > 32 ? 32 : n), s);
		herd__mpwalk_pop(w, mark);
		return st;
	}
	HERD_CHECK(get_dims(w, o, "shape", 1, HERD_CKPT_MAX_DIMS, HERD__CKPT_MAX_DIM, t->shape,
			    &t->ndim));
	if (!herd__ckpt_volume(t->shape, t->ndim, HERD__CKPT_MAX_BYTES / herd_dtype_size(t->dtype),
			       &vol)) {
		mark = herd__mpwalk_key(w, "shape");
		st = herd__mpwalk_fail(w, HERD_EFORMAT, "the tensor would hold more than %" PRIu64 " bytes",
				       HERD__CKPT_MAX_BYTES);
		herd__mpwalk_pop(w, mark);
		return st;
	}
	t->bytes = vol * herd_dtype_size(t->dtype);
	HERD_CHECK(herd__mpwalk_need(w, o, "shards", &shards));
	mark = herd__mpwalk_key(w, "shards");
	st = herd__mpwalk_array(w, shards, 1, HERD__CKPT_MAX_ITEMS, &n);
	if (st == HERD_OK)
		st = herd__calloc(&t->shards, n, sizeof(*t->shards), "shards");
	t->nshards = st == HERD_OK ? n : 0;
	for (size_t i = 0; st == HERD_OK && i < n; i++) {
		size_t m2 = herd__mpwalk_index(w, i);

		st = decode_shard(w, &shards->via.array.ptr[i], m, t, &t->shards[i]);
		herd__mpwalk_pop(w, m2);
	}
	if (st == HERD_OK)
		st = check_tiling(w, t);
	herd__mpwalk_pop(w, mark);
	return st;
}

static herd_status decode_blob(herd__mpwalk *w, const msgpack_object *o, herd__ckpt_manifest *m,
			       herd__ckpt_blob *b)
{
	const msgpack_object *parts;
	const char *s = NULL;
	size_t n = 0, mark;
	herd_status st;

	HERD_CHECK(herd__mpwalk_map(w, o, SIZE_MAX));
	HERD_CHECK(get_name(w, o, "name", herd__ckpt_name_is_valid,
			    "a name of 1..255 printable ASCII characters", &b->name));
	HERD_CHECK(herd__mpwalk_get_str(w, o, "rule", SIZE_MAX, &s, &n));
	if (n == 9 && memcmp(s, "same_rank", 9) == 0)
		b->rule = HERD_CKPT_BLOB_SAME_RANK;
	else if (n == 5 && memcmp(s, "rank0", 5) == 0)
		b->rule = HERD_CKPT_BLOB_RANK0;
	else if (n == 6 && memcmp(s, "strict", 6) == 0)
		b->rule = HERD_CKPT_BLOB_STRICT;
	else {
		mark = herd__mpwalk_key(w, "rule");
		st = herd__mpwalk_fail(w, HERD_EFORMAT, "expected \"same_rank\", \"rank0\" or \"strict\"");
		herd__mpwalk_pop(w, mark);
		return st;
	}
	HERD_CHECK(herd__mpwalk_need(w, o, "parts", &parts));
	mark = herd__mpwalk_key(w, "parts");
	/* One part per saved rank, in rank order. */
	st = herd__mpwalk_array(w, parts, (size_t)m->ranks, (size_t)m->ranks, &n);
	if (st == HERD_OK)
		st = herd__calloc(&b->parts, n, sizeof(*b->parts), "blob parts");
	b->nparts = st == HERD_OK ? n : 0;
	for (size_t i = 0; st == HERD_OK && i < n; i++) {
		const msgpack_object *p = &parts->via.array.ptr[i], *sum;
		herd__ckpt_blob_part *part = &b->parts[i];
		size_t m2 = herd__mpwalk_index(w, i);
		uint64_t v = 0;

		st = herd__mpwalk_map(w, p, SIZE_MAX);
		if (st == HERD_OK)
			st = herd__mpwalk_get_uint(w, p, "rank", i, i, &v);
		part->rank = (int)i;
		if (st == HERD_OK)
			st = herd__mpwalk_get_uint(w, p, "file", 0,
						   m->nfiles > 0 ? m->nfiles - 1 : 0, &v);
		if (st == HERD_OK && m->nfiles == 0)
			st = herd__mpwalk_fail(w, HERD_EFORMAT, "a blob refers to a file, but the step "
					       "lists none");
		part->file = (uint32_t)v;
		if (st == HERD_OK)
			st = herd__mpwalk_get_uint(w, p, "at", 0, HERD__CKPT_MAX_BYTES, &part->at);
		if (st == HERD_OK)
			st = herd__mpwalk_get_uint(w, p, "len", 1, HERD_CKPT_BLOB_MAX, &part->len);
		if (st == HERD_OK)
			st = check_range(w, m, part->file, part->at, part->len);
		if (st == HERD_OK)
			st = herd__mpwalk_need(w, p, "sum", &sum);
		if (st == HERD_OK) {
			size_t m3 = herd__mpwalk_key(w, "sum");

			st = get_hex(w, sum, &part->sum);
			herd__mpwalk_pop(w, m3);
		}
		herd__mpwalk_pop(w, m2);
	}
	herd__mpwalk_pop(w, mark);
	return st;
}

/* Decodes the array at key into count items of size bytes each. */
typedef herd_status (*item_fn)(herd__mpwalk *w, const msgpack_object *o, herd__ckpt_manifest *m,
			       void *item);

static herd_status decode_file_item(herd__mpwalk *w, const msgpack_object *o,
				    herd__ckpt_manifest *m, void *item)
{
	return decode_file(w, o, m, item);
}

static herd_status decode_tensor_item(herd__mpwalk *w, const msgpack_object *o,
				      herd__ckpt_manifest *m, void *item)
{
	return decode_tensor(w, o, m, item);
}

static herd_status decode_blob_item(herd__mpwalk *w, const msgpack_object *o,
				    herd__ckpt_manifest *m, void *item)
{
	return decode_blob(w, o, m, item);
}

/*
 * Decodes an array field: the items are allocated zeroed and stored with
 * their count before they are decoded, so that what a failure leaves
 * half-built is freed by herd__ckpt_manifest_free.
 */
static herd_status get_items(herd__mpwalk *w, const msgpack_object *map, const char *key,
			     herd__ckpt_manifest *m, size_t size, void *items, size_t *count,
			     item_fn fn)
{
	const msgpack_object *o;
	herd_status st;
	size_t mark, n = 0;
	char *p = NULL;

	HERD_CHECK(herd__mpwalk_need(w, map, key, &o));
	mark = herd__mpwalk_key(w, key);
	HERD_CHECK_GOTO(herd__mpwalk_array(w, o, 0, HERD__CKPT_MAX_ITEMS, &n), st, out);
	HERD_CHECK_GOTO(herd__calloc(&p, n, size, key), st, out);
	*(void **)items = p;
	*count = n;
	for (size_t i = 0; i < n; i++) {
		size_t m2 = herd__mpwalk_index(w, i);

		st = fn(w, &o->via.array.ptr[i], m, p + i * size);
		herd__mpwalk_pop(w, m2);
		if (st != HERD_OK)
			goto out;
	}
out:
	herd__mpwalk_pop(w, mark);
	return st;
}

static int cmp_str_ptr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names within one list must be distinct: a reader would pick either. */
static herd_status check_unique(herd__mpwalk *w, const char *what, char **names, size_t n)
{
	herd_status st = HERD_OK;
	char **sorted = NULL;

	if (n < 2)
		return HERD_OK;
	HERD_CHECK(herd__calloc(&sorted, n, sizeof(char *), "names"));
	memcpy(sorted, names, n * sizeof(char *));
	qsort(sorted, n, sizeof(char *), cmp_str_ptr);
	for (size_t i = 1; i < n; i++)
		if (strcmp(sorted[i - 1], sorted[i]) == 0) {
			st = herd__mpwalk_fail(w, HERD_EFORMAT, "%s \"%.64s\" appears twice", what, sorted[i]);
			break;
		}
	free(sorted);
	return st;
}

static herd_status check_names(herd__mpwalk *w, const herd__ckpt_manifest *m)
{
	size_t most = m->nfiles > m->ntensors ? m->nfiles : m->ntensors;
	herd_status st = HERD_OK;
	char **names = NULL;

	if (m->nblobs > most)
		most = m->nblobs;
	HERD_CHECK(herd__calloc(&names, most + 1, sizeof(char *), "names"));
	for (size_t i = 0; i < m->nfiles; i++)
		names[i] = m->files[i].name;
	st = check_unique(w, "file", names, m->nfiles);
	for (size_t i = 0; st == HERD_OK && i < m->ntensors; i++)
		names[i] = m->tensors[i].name;
	if (st == HERD_OK)
		st = check_unique(w, "tensor", names, m->ntensors);
	for (size_t i = 0; st == HERD_OK && i < m->nblobs; i++)
		names[i] = m->blobs[i].name;
	if (st == HERD_OK)
		st = check_unique(w, "blob", names, m->nblobs);
	free(names);
	return st;
}

static herd_status decode_root(herd__mpwalk *w, const msgpack_object *root, herd__ckpt_manifest *m)
{
	const msgpack_object *v;
	const char *s = NULL;
	uint64_t u = 0;
	size_t n = 0;

	HERD_CHECK(herd__mpwalk_map(w, root, SIZE_MAX));
	HERD_CHECK(herd__mpwalk_lookup(w, root, "v", &v));
	if (v == NULL)
		return herd__mpwalk_fail(w, HERD_EFORMAT, "missing required key \"v\" (the manifest "
					 "format version): not a checkpoint manifest");
	if (v->type != MSGPACK_OBJECT_POSITIVE_INTEGER || v->via.u64 < 1)
		return herd__mpwalk_fail(w, HERD_EFORMAT, "\"v\" must be a positive integer");
	if (v->via.u64 > HERD__CKPT_MANIFEST_VERSION)
		return herd__error(HERD_EVERSION, "%s: manifest format version %" PRIu64 " is newer "
				   "than version %d, the newest this library reads", w->origin,
				   v->via.u64, HERD__CKPT_MANIFEST_VERSION);
	HERD_CHECK(herd__mpwalk_get_uint(w, root, "step", 0, (uint64_t)HERD_CKPT_STEP_MAX, &u));
	m->step = (int64_t)u;
	HERD_CHECK(herd__mpwalk_get_uint(w, root, "ranks", 1, HERD__CKPT_MAX_RANKS, &u));
	m->ranks = (int)u;
	HERD_CHECK(herd__mpwalk_get_uint(w, root, "time", 0, INT64_MAX, &u));
	m->time = (int64_t)u;
	HERD_CHECK(herd__mpwalk_get_str(w, root, "checksum", SIZE_MAX, &s, &n));
	if (n == 4 && memcmp(s, "xxh3", 4) == 0)
		m->checksum = HERD_CKPT_CHECKSUM_XXH3;
	else if (n == 4 && memcmp(s, "none", 4) == 0)
		m->checksum = HERD_CKPT_CHECKSUM_NONE;
	else
		return herd__mpwalk_fail(w, HERD_EFORMAT, "checksum: expected \"xxh3\" or \"none\"");
	HERD_CHECK(herd__mpwalk_get_uint(w, root, "chunk", HERD__CKPT_CHUNK_MIN, HERD__CKPT_CHUNK_MAX,
			    &m->chunk_bytes));
	HERD_CHECK(get_items(w, root, "files", m, sizeof(herd__ckpt_file), &m->files, &m->nfiles,
			     decode_file_item));
	HERD_CHECK(get_items(w, root, "tensors", m, sizeof(herd__ckpt_tensor), &m->tensors,
			     &m->ntensors, decode_tensor_item));
	HERD_CHECK(get_items(w, root, "blobs", m, sizeof(herd__ckpt_blob), &m->blobs, &m->nblobs,
			     decode_blob_item));
	return check_names(w, m);
}

herd_status herd__ckpt_manifest_decode(herd__ckpt_manifest **out, const void *data, size_t len,
				       const char *origin)
{
	const uint8_t *bytes = data;
	herd__ckpt_manifest *m = NULL;
	msgpack_unpacked unpacked;
	uint64_t want, got;
	herd_status st;
	herd__mpwalk w;

	*out = NULL;
	if (len > HERD__CKPT_MANIFEST_MAX)
		return herd__error(HERD_EFORMAT, "%s: %zu bytes is more than a manifest may have",
				   origin, len);
	if (len < SUM_TAIL_LEN + SUM_HEX_LEN ||
	    memcmp(bytes + len - SUM_HEX_LEN - SUM_TAIL_LEN, sum_tail, SUM_TAIL_LEN) != 0)
		return herd__error(HERD_EFORMAT, "%s: truncated or not a checkpoint manifest (it "
				   "does not end with its \"sum\" entry)", origin);
	if (!parse_hex((const char *)bytes + len - SUM_HEX_LEN, SUM_HEX_LEN, &want))
		return herd__error(HERD_EFORMAT, "%s: the manifest's own checksum is not 16 hex "
				   "digits", origin);
	got = herd__ckpt_sum(bytes, len - SUM_HEX_LEN);
	if (got != want)
		return herd__error(HERD_EFORMAT, "%s: checksum mismatch: the manifest says %016" PRIx64
				   ", its bytes give %016" PRIx64 " (the manifest is corrupt)",
				   origin, want, got);
	msgpack_unpacked_init(&unpacked);
	HERD_CHECK_GOTO(herd__mpjson_unpack(&unpacked, data, len), st, wrap);
	HERD_CHECK_GOTO(herd__calloc(&m, 1, sizeof(*m), "a manifest"), st, out);
	memset(&w, 0, sizeof(w));
	w.origin = origin;
	HERD_CHECK_GOTO(decode_root(&w, &unpacked.data, m), st, out);
	*out = m;
	m = NULL;
	goto out;
wrap:
	herd__error_wrap(st, "%s: ", origin);
out:
	herd__ckpt_manifest_free(m);
	msgpack_unpacked_destroy(&unpacked);
	return st;
}

herd_status herd__ckpt_manifest_load(herd__ckpt_manifest **out, const char *stepdir)
{
	char path[4096];
	herd_status st;
	char *data = NULL;
	size_t len = 0;

	*out = NULL;
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", stepdir, HERD__CKPT_MANIFEST) >=
	    sizeof(path))
		return herd__error(HERD_EINVAL, "path too long: %s", stepdir);
	HERD_CHECK(herd__read_file(path, HERD__CKPT_MANIFEST_MAX, &data, &len));
	st = herd__ckpt_manifest_decode(out, data, len, path);
	free(data);
	return st;
}
