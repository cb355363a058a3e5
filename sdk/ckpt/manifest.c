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
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <msgpack.h>
#include <xxhash.h>

#include "buf.h"
#include "ckpt_internal.h"
#include "mpjson.h"
#include "msgpack_check.h"
#include "schema.h"

/* The tail of every manifest: key "sum", then a 16-byte string header. */
static const char sum_tail[] = "\xa3sum\xb0";
#define SUM_TAIL_LEN 5
#define SUM_HEX_LEN 16

/* The comparisons of boxes the overlap check of a tensor's shards may
 * make, per shard: enough for the rows, columns and grids of blocks up to
 * 64 on a side that sharding makes, and a manifest's check takes time in
 * its size, whatever it holds.  A tensor of up to OVERLAP_ALL_PAIRS
 * shards may always take every pair (3-D grids of 16 on a side among
 * them).  Beyond the budget a tensor's shards are left unchecked for
 * overlap (their volumes must still add up). */
#define OVERLAP_BUDGET_PER_SHARD 64
#define OVERLAP_ALL_PAIRS 4096

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

bool herd__ckpt_parse_damaged(const char *name, int64_t *step)
{
	size_t n = strlen(HERD__CKPT_STEP_PREFIX) + 12, t = strlen(HERD__CKPT_DAMAGED_TAG);
	char canon[64];
	int64_t v;

	if (!herd__ckpt_parse_step(name, HERD__CKPT_STEP_PREFIX, &v))
		return false;
	herd__ckpt_step_name(canon, sizeof(canon), v);
	if (strncmp(name, canon, n) != 0 || strncmp(name + n, HERD__CKPT_DAMAGED_TAG, t) != 0 ||
	    name[n + t] == '\0')
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

/* The index of name among n items whose names are in the sorted order
 * (item i's name at names + i * stride), or n when absent. */
static size_t find_sorted(const size_t *order, size_t n, const void *names, size_t stride,
			  const char *name)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(*(char *const *)((const char *)names + order[mid] * stride), name);

		if (c == 0)
			return order[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return n;
}

const herd__ckpt_tensor *herd__ckpt_manifest_tensor(const herd__ckpt_manifest *m,
						    const char *name)
{
	size_t i;

	if (m->tensor_order != NULL) {
		i = find_sorted(m->tensor_order, m->ntensors, &m->tensors[0].name,
				sizeof(m->tensors[0]), name);
		return i < m->ntensors ? &m->tensors[i] : NULL;
	}
	for (i = 0; i < m->ntensors; i++)
		if (strcmp(m->tensors[i].name, name) == 0)
			return &m->tensors[i];
	return NULL;
}

const herd__ckpt_blob *herd__ckpt_manifest_blob(const herd__ckpt_manifest *m, const char *name)
{
	size_t i;

	if (m->blob_order != NULL) {
		i = find_sorted(m->blob_order, m->nblobs, &m->blobs[0].name, sizeof(m->blobs[0]),
				name);
		return i < m->nblobs ? &m->blobs[i] : NULL;
	}
	for (i = 0; i < m->nblobs; i++)
		if (strcmp(m->blobs[i].name, name) == 0)
			return &m->blobs[i];
	return NULL;
}

/* ---- the tables ---------------------------------------------------------
 *
 * The manifest's keys, in the order they are written, and what the decoder
 * checks beyond each value's own type and range: ranges that depend on what
 * came before (a file's rank, a shard's file, the number of chunk sums),
 * and rules across fields (a shard inside its tensor and within its file,
 * the shards tiling the tensor, names distinct).  The decoder's context is
 * the manifest being built.
 */

static void pack_hex(msgpack_packer *pk, const void *value)
{
	char hex[SUM_HEX_LEN + 1];

	herd__ckpt_sum_hex(hex, *(const uint64_t *)value);
	msgpack_pack_str(pk, SUM_HEX_LEN);
	msgpack_pack_str_body(pk, hex, SUM_HEX_LEN);
}

static herd_status unpack_hex(herd__mpwalk *w, const msgpack_object *o, void *value)
{
	const char *s = NULL;
	size_t n = 0;

	HERD_CHECK(herd__mpwalk_str(w, o, SIZE_MAX, &s, &n));
	if (!parse_hex(s, n, value))
		return herd__mpwalk_fail(w, HERD_EFORMAT, "expected a checksum of 16 lower-case hex digits");
	return HERD_OK;
}

/* A checksum: 16 hex digits rather than a 64-bit integer, which JSON could
 * not carry exactly. */
static const herd__schema_codec hex_codec = { pack_hex, unpack_hex };

static void pack_dtype(msgpack_packer *pk, const void *value)
{
	herd__mp_pack_str(pk, herd_dtype_name(*(const herd_dtype *)value));
}

static herd_status unpack_dtype(herd__mpwalk *w, const msgpack_object *o, void *value)
{
	herd_dtype *dtype = value;
	const char *s = NULL;
	char dname[32];
	size_t n = 0;

	HERD_CHECK(herd__mpwalk_str(w, o, SIZE_MAX, &s, &n));
	herd__strlcpy(dname, s, n + 1 < sizeof(dname) ? n + 1 : sizeof(dname));
	if (n >= sizeof(dname) || herd_dtype_parse(dname, dtype) != HERD_OK ||
	    strcmp(herd_dtype_name(*dtype), dname) != 0)
		return herd__mpwalk_fail(w, HERD_EFORMAT, "expected a type name such as \"float32\", "
					 "got \"%.*s\"", (int)(n > 32 ? 32 : n), s);
	return HERD_OK;
}

/* A type by the name herd_dtype_name gives it. */
static const herd__schema_codec dtype_codec = { pack_dtype, unpack_dtype };

static const herd__schema_name checksum_names[] = {
	{ "xxh3", HERD_CKPT_CHECKSUM_XXH3 },
	{ "none", HERD_CKPT_CHECKSUM_NONE },
	{ NULL, 0 },
};

static const herd__schema_name rule_names[] = {
	{ "same_rank", HERD_CKPT_BLOB_SAME_RANK },
	{ "rank0", HERD_CKPT_BLOB_RANK0 },
	{ "strict", HERD_CKPT_BLOB_STRICT },
	{ NULL, 0 },
};

static const herd__schema_form file_form = {
	"a file name of [A-Za-z0-9._-] not starting with '.'", herd__ckpt_name_is_safe_file
};
static const herd__schema_form name_form = {
	"a name of 1..255 printable ASCII characters", herd__ckpt_name_is_valid
};

static const herd__schema_field dim_item = {
	HERD__SCHEMA_ITEM(HERD__SCHEMA_T_UINT, uint64_t), .max = HERD__CKPT_MAX_DIM
};
static const herd__schema_field sum_item = {
	HERD__SCHEMA_ITEM(HERD__SCHEMA_T_VALUE, uint64_t), .codec = &hex_codec
};

/* A range of exactly n. */
static void exactly(int64_t n, int64_t *min, uint64_t *max)
{
	*min = n;
	*max = (uint64_t)n;
}

/* A file's rank is one of the ranks that saved the step. */
static void rank_limits(const herd__schema_dec *d, const void *obj, const void *parent,
			int64_t *min, uint64_t *max)
{
	const herd__ckpt_manifest *m = d->ctx;

	*max = (uint64_t)m->ranks - 1;
}

/* A shard or blob part names a file of the list; with none listed, the
 * check of the shard or part says so. */
static void file_limits(const herd__schema_dec *d, const void *obj, const void *parent,
			int64_t *min, uint64_t *max)
{
	const herd__ckpt_manifest *m = d->ctx;

	*max = m->nfiles > 0 ? m->nfiles - 1 : 0;
}

/* A shard's box has its tensor's dimensions. */
static void box_limits(const herd__schema_dec *d, const void *obj, const void *parent,
		       int64_t *min, uint64_t *max)
{
	exactly(((const herd__ckpt_tensor *)parent)->ndim, min, max);
}

/* One checksum per chunk of the shard's bytes, none without checksums. */
static void sums_limits(const herd__schema_dec *d, const void *obj, const void *parent,
			int64_t *min, uint64_t *max)
{
	const herd__ckpt_manifest *m = d->ctx;
	const herd__ckpt_shard *s = obj;

	exactly(m->checksum == HERD_CKPT_CHECKSUM_NONE
			? 0 : (int64_t)((s->len + m->chunk_bytes - 1) / m->chunk_bytes), min, max);
}

/* A blob has one part per saved rank, in rank order. */
static void parts_limits(const herd__schema_dec *d, const void *obj, const void *parent,
			 int64_t *min, uint64_t *max)
{
	exactly(((const herd__ckpt_manifest *)d->ctx)->ranks, min, max);
}

static void part_rank_limits(const herd__schema_dec *d, const void *obj, const void *parent,
			     int64_t *min, uint64_t *max)
{
	exactly((const herd__ckpt_blob_part *)obj - ((const herd__ckpt_blob *)parent)->parts, min,
		max);
}

/* Checks that [at, at+len) lies within file f of m. */
static herd_status check_range(herd__schema_dec *d, uint32_t f, uint64_t at, uint64_t len)
{
	const herd__ckpt_manifest *m = d->ctx;
	uint64_t size = m->files[f].size;

	if (at > size || len > size - at)
		return herd__schema_fail(d, NULL, "bytes %" PRIu64 "..%" PRIu64 " lie past the end "
					 "of %s (%" PRIu64 " bytes)", at, at + len, m->files[f].name,
					 size);
	return HERD_OK;
}

/* A shard lies inside its tensor, holds the bytes of its box, and lies
 * within its file. */
static herd_status check_shard(herd__schema_dec *d, void *obj, void *parent)
{
	const herd__ckpt_manifest *m = d->ctx;
	const herd__ckpt_tensor *t = parent;
	const herd__ckpt_shard *s = obj;
	uint64_t vol = 0;

	for (int i = 0; i < t->ndim; i++)
		if (s->box.shape[i] > t->shape[i] || s->box.offset[i] > t->shape[i] - s->box.shape[i])
			return herd__schema_fail(d, NULL, "dimension %d of the shard (%" PRIu64 " at %"
						 PRIu64 ") lies outside the tensor's %" PRIu64, i,
						 s->box.shape[i], s->box.offset[i], t->shape[i]);
	if (m->nfiles == 0)
		return herd__schema_fail(d, NULL, "a shard refers to a file, but the step lists none");
	/* The tensor's volume bounded this one, so no overflow here. */
	herd__ckpt_volume(s->box.shape, t->ndim, HERD__CKPT_MAX_BYTES, &vol);
	if (s->len != vol * herd_dtype_size(t->dtype))
		return herd__schema_fail(d, NULL, "len is %" PRIu64 " bytes, but the shard's shape "
					 "holds %" PRIu64, s->len, vol * herd_dtype_size(t->dtype));
	return check_range(d, s->file, s->at, s->len);
}

static herd_status check_part(herd__schema_dec *d, void *obj, void *parent)
{
	const herd__ckpt_manifest *m = d->ctx;
	const herd__ckpt_blob_part *p = obj;

	if (m->nfiles == 0)
		return herd__schema_fail(d, NULL, "a blob refers to a file, but the step lists none");
	return check_range(d, p->file, p->at, p->len);
}

/* The tensor's size, which must stay below HERD__CKPT_MAX_BYTES. */
static herd_status check_volume(herd__schema_dec *d, void *obj, void *parent)
{
	herd__ckpt_tensor *t = obj;
	uint64_t vol = 0;

	if (!herd__ckpt_volume(t->shape, t->ndim, HERD__CKPT_MAX_BYTES / herd_dtype_size(t->dtype),
			       &vol))
		return herd__schema_fail(d, NULL, "the tensor would hold more than %" PRIu64 " bytes",
					 HERD__CKPT_MAX_BYTES);
	t->bytes = vol * herd_dtype_size(t->dtype);
	return HERD_OK;
}

/* The shards must tile the tensor: volumes add up, and no two overlap. */
static herd_status check_tiling(herd__schema_dec *d, void *obj, void *parent)
{
	const herd__ckpt_tensor *t = obj;
	uint64_t total = 0, vol = 0, want = 0, budget;
	size_t a = 0, b = 0;
	int found = 0;

	herd__ckpt_volume(t->shape, t->ndim, HERD__CKPT_MAX_BYTES, &want);
	for (size_t i = 0; i < t->nshards; i++) {
		herd__ckpt_volume(t->shards[i].box.shape, t->ndim, HERD__CKPT_MAX_BYTES, &vol);
		total += vol;   /* each at most want, at most 2^24 of them: no overflow */
	}
	if (total != want)
		return herd__schema_fail(d, NULL, "the shards hold %" PRIu64 " elements, but the "
					 "tensor has %" PRIu64, total, want);
	if (t->nshards < 2)
		return HERD_OK;
	budget = (uint64_t)t->nshards * OVERLAP_BUDGET_PER_SHARD;
	if (t->nshards <= OVERLAP_ALL_PAIRS &&
	    budget < (uint64_t)t->nshards * (t->nshards - 1) / 2)
		budget = (uint64_t)t->nshards * (t->nshards - 1) / 2;
	HERD_CHECK(herd__ckpt_boxes_overlap(&t->shards[0].box, sizeof(t->shards[0]), t->nshards,
					    budget, &found, &a, &b));
	if (found == 1)
		return herd__schema_fail(d, NULL, "shards %zu and %zu overlap", a, b);
	return HERD_OK;
}

/* qsort_r's comparison of two indices by the names they have. */
struct name_list {
	const char *names;   /* item i's name pointer at names + i * stride */
	size_t stride;
};

static int cmp_index_name(const void *a, const void *b, void *arg)
{
	const struct name_list *l = arg;

	return strcmp(*(char *const *)(l->names + *(const size_t *)a * l->stride),
		      *(char *const *)(l->names + *(const size_t *)b * l->stride));
}

/*
 * Names within one list must be distinct (a reader would pick either):
 * the n items' indices sorted by name into *order (free; NULL when n is
 * 0), and neighbours compared.  n log n, for a step of many tensors.
 */
static herd_status check_unique(herd__schema_dec *d, const char *what, const void *names,
				size_t stride, size_t n, size_t **order)
{
	struct name_list l = { names, stride };
	size_t *o = NULL;

	*order = NULL;
	if (n == 0)
		return HERD_OK;
	HERD_CHECK(herd__calloc(&o, n, sizeof(size_t), "names"));
	for (size_t i = 0; i < n; i++)
		o[i] = i;
	qsort_r(o, n, sizeof(size_t), cmp_index_name, &l);
	for (size_t i = 1; i < n; i++)
		if (cmp_index_name(&o[i - 1], &o[i], &l) == 0) {
			herd_status st = herd__schema_fail(d, NULL, "%s \"%.64s\" appears twice", what,
							   *(char *const *)(l.names + o[i] * stride));

			free(o);
			return st;
		}
	*order = o;
	return HERD_OK;
}

/* Distinct names in each list; the tensors' and blobs' sorted orders are
 * kept for lookups by name (herd__ckpt_manifest_tensor). */
static herd_status check_names(herd__schema_dec *d, void *obj, void *parent)
{
	herd__ckpt_manifest *m = obj;
	size_t *files = NULL;

	HERD_CHECK(check_unique(d, "file", m->nfiles ? (const void *)&m->files[0].name : NULL,
				sizeof(m->files[0]), m->nfiles, &files));
	free(files);
	HERD_CHECK(check_unique(d, "tensor", m->ntensors ? (const void *)&m->tensors[0].name : NULL,
				sizeof(m->tensors[0]), m->ntensors, &m->tensor_order));
	return check_unique(d, "blob", m->nblobs ? (const void *)&m->blobs[0].name : NULL,
			    sizeof(m->blobs[0]), m->nblobs, &m->blob_order);
}

#define MAX_BYTES HERD__CKPT_MAX_BYTES
#define MAX_ITEMS HERD__CKPT_MAX_ITEMS

static const herd__schema_field file_fields[] = {
	{ HERD__SCHEMA_STR("name", herd__ckpt_file, name, SIZE_MAX), .form = &file_form },
	{ HERD__SCHEMA_UINT("rank", herd__ckpt_file, rank, 0, HERD__CKPT_MAX_RANKS),
	  .limits = rank_limits },
	{ HERD__SCHEMA_UINT("size", herd__ckpt_file, size, 0, MAX_BYTES) },
};
static const herd__schema file_schema = HERD__SCHEMA(herd__ckpt_file, file_fields, SIZE_MAX, NULL);

static const herd__schema_field shard_fields[] = {
	{ HERD__SCHEMA_INLINE_ARRAY("offset", herd__ckpt_shard, box.offset, box.ndim, 0),
	  .item = &dim_item, .limits = box_limits },
	{ HERD__SCHEMA_INLINE_ARRAY("shape", herd__ckpt_shard, box.shape, box.ndim, 0),
	  .item = &dim_item, .limits = box_limits },
	{ HERD__SCHEMA_UINT("file", herd__ckpt_shard, file, 0, UINT32_MAX), .limits = file_limits },
	{ HERD__SCHEMA_UINT("at", herd__ckpt_shard, at, 0, MAX_BYTES) },
	{ HERD__SCHEMA_UINT("len", herd__ckpt_shard, len, 0, MAX_BYTES) },
	{ HERD__SCHEMA_ARRAY("sums", herd__ckpt_shard, sums, nsums, 0, MAX_ITEMS),
	  .item = &sum_item, .limits = sums_limits },
};
static const herd__schema shard_schema =
	HERD__SCHEMA(herd__ckpt_shard, shard_fields, SIZE_MAX, check_shard);

static const herd__schema_field tensor_fields[] = {
	{ HERD__SCHEMA_STR("name", herd__ckpt_tensor, name, SIZE_MAX), .form = &name_form },
	{ HERD__SCHEMA_VALUE("dtype", herd__ckpt_tensor, dtype, &dtype_codec) },
	{ HERD__SCHEMA_INLINE_ARRAY("shape", herd__ckpt_tensor, shape, ndim, 1),
	  .item = &dim_item, .check = check_volume },
	{ HERD__SCHEMA_ARRAY("shards", herd__ckpt_tensor, shards, nshards, 1, MAX_ITEMS),
	  .sub = &shard_schema, .check = check_tiling },
};
static const herd__schema tensor_schema =
	HERD__SCHEMA(herd__ckpt_tensor, tensor_fields, SIZE_MAX, NULL);

static const herd__schema_field part_fields[] = {
	{ HERD__SCHEMA_UINT("rank", herd__ckpt_blob_part, rank, 0, HERD__CKPT_MAX_RANKS),
	  .limits = part_rank_limits },
	{ HERD__SCHEMA_UINT("file", herd__ckpt_blob_part, file, 0, UINT32_MAX),
	  .limits = file_limits },
	{ HERD__SCHEMA_UINT("at", herd__ckpt_blob_part, at, 0, MAX_BYTES) },
	{ HERD__SCHEMA_UINT("len", herd__ckpt_blob_part, len, 1, HERD_CKPT_BLOB_MAX) },
	{ HERD__SCHEMA_VALUE("sum", herd__ckpt_blob_part, sum, &hex_codec) },
};
static const herd__schema part_schema =
	HERD__SCHEMA(herd__ckpt_blob_part, part_fields, SIZE_MAX, check_part);

static const herd__schema_field blob_fields[] = {
	{ HERD__SCHEMA_STR("name", herd__ckpt_blob, name, SIZE_MAX), .form = &name_form },
	{ HERD__SCHEMA_ENUM("rule", herd__ckpt_blob, rule, rule_names) },
	{ HERD__SCHEMA_ARRAY("parts", herd__ckpt_blob, parts, nparts, 0, HERD__CKPT_MAX_RANKS),
	  .sub = &part_schema, .limits = parts_limits },
};
static const herd__schema blob_schema = HERD__SCHEMA(herd__ckpt_blob, blob_fields, SIZE_MAX, NULL);

/* "v" is checked before anything else; "format" is for people and tools;
 * "sum" follows as the last entry (herd__ckpt_manifest_encode). */
static const herd__schema_field manifest_fields[] = {
	{ HERD__SCHEMA_CONST_INT("v", HERD__CKPT_MANIFEST_VERSION) },
	{ HERD__SCHEMA_CONST_STR("format", "herd-checkpoint") },
	{ HERD__SCHEMA_UINT("step", herd__ckpt_manifest, step, 0, HERD_CKPT_STEP_MAX) },
	{ HERD__SCHEMA_UINT("ranks", herd__ckpt_manifest, ranks, 1, HERD__CKPT_MAX_RANKS) },
	{ HERD__SCHEMA_UINT("time", herd__ckpt_manifest, time, 0, INT64_MAX) },
	{ HERD__SCHEMA_ENUM("checksum", herd__ckpt_manifest, checksum, checksum_names) },
	{ HERD__SCHEMA_UINT("chunk", herd__ckpt_manifest, chunk_bytes, HERD__CKPT_CHUNK_MIN,
			    HERD__CKPT_CHUNK_MAX) },
	{ HERD__SCHEMA_ARRAY("files", herd__ckpt_manifest, files, nfiles, 0, MAX_ITEMS),
	  .sub = &file_schema },
	{ HERD__SCHEMA_ARRAY("tensors", herd__ckpt_manifest, tensors, ntensors, 0, MAX_ITEMS),
	  .sub = &tensor_schema },
	{ HERD__SCHEMA_ARRAY("blobs", herd__ckpt_manifest, blobs, nblobs, 0, MAX_ITEMS),
	  .sub = &blob_schema },
};
static const herd__schema manifest_schema =
	HERD__SCHEMA(herd__ckpt_manifest, manifest_fields, SIZE_MAX, check_names);

void herd__ckpt_manifest_free(herd__ckpt_manifest *m)
{
	if (m == NULL)
		return;
	free(m->tensor_order);
	free(m->blob_order);
	herd__schema_free(&manifest_schema, m);
	free(m);
}

/* ---- encoder ----------------------------------------------------------- */

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
	herd__schema_pack(&pk, &manifest_schema, m, 1);
	/* The last entry: "sum", and the checksum of every byte before it. */
	msgpack_pack_str(&pk, 3);
	msgpack_pack_str_body(&pk, "sum", 3);
	msgpack_pack_str(&pk, SUM_HEX_LEN);
	if (buf.failed == HERD_OK) {
		herd__ckpt_sum_hex(hex, herd__ckpt_sum(buf.data + buf.off, buf.len - buf.off));
		herd__buf_write(&buf, hex, SUM_HEX_LEN);
	}
	st = herd__buf_take(&buf, "the checkpoint manifest", out, len);
	herd__buf_free(&buf);
	return st;
}

/* ---- decoder ----------------------------------------------------------- */

/* "v" first: a newer format may change anything else. */
static herd_status decode_root(herd__schema_dec *d, const msgpack_object *root,
			       herd__ckpt_manifest *m)
{
	herd__mpwalk *w = &d->walk;
	const msgpack_object *v;

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
	d->version = (unsigned)v->via.u64;
	return herd__schema_unpack(d, &manifest_schema, root, m);
}

herd_status herd__ckpt_manifest_decode(herd__ckpt_manifest **out, const void *data, size_t len,
				       const char *origin)
{
	const uint8_t *bytes = data;
	herd__ckpt_manifest *m = NULL;
	msgpack_unpacked unpacked;
	uint64_t want, got;
	herd_status st;
	herd__schema_dec d;

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
	memset(&d, 0, sizeof(d));
	d.walk.origin = origin;
	d.ctx = m;
	HERD_CHECK_GOTO(decode_root(&d, &unpacked.data, m), st, out);
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
	char path[4096], why[160];
	herd_status st;
	char *data = NULL;
	uint64_t len = 0;
	int fd, err;

	*out = NULL;
	if ((size_t)snprintf(path, sizeof(path), "%s/%s", stepdir, HERD__CKPT_MANIFEST) >=
	    sizeof(path))
		return herd__error(HERD_EINVAL, "path too long: %s", stepdir);
	if (herd__ckpt_open_file(AT_FDCWD, path, &fd, &len, &err, why, sizeof(why)) != 0)
		return herd__error(err == ENOENT ? HERD_ENOTFOUND : err != 0 ? HERD_EIO
										 : HERD_EFORMAT,
				   "%s: %s", path, why);
	if (len > HERD__CKPT_MANIFEST_MAX) {
		close(fd);
		return herd__error(HERD_EFORMAT, "%s: %" PRIu64 " bytes is more than a manifest may "
				   "have", path, len);
	}
	st = herd__calloc(&data, (size_t)len + 1, 1, "a manifest");
	if (st == HERD_OK)
		st = herd__ckpt_pread(fd, data, (size_t)len, 0, path);
	close(fd);
	if (st == HERD_OK)
		st = herd__ckpt_manifest_decode(out, data, (size_t)len, path);
	free(data);
	return st;
}
