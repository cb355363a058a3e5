/*
 * tests/unit/test_schema.c - the field tables of sdk/base/schema.h on a
 * small document of every kind of value: the bytes the encoder writes, the
 * values the decoder reads back, what it ignores, and the message of each
 * refusal, with its path.
 */
#include "test.h"

#include "buf.h"
#include "mpjson.h"
#include "schema.h"

typedef struct part {
	char tag[8];
	int64_t n;
} part;

typedef struct doc {
	int count;
	uint32_t flags;
	bool on;
	double ratio;
	char *title;          /* required */
	char *note;           /* optional, nullable */
	uint8_t *blob;
	size_t nblob;
	int color;            /* an enum */
	int level;            /* added in version 2, default 5 */
	int ndims;
	uint16_t dims[3];
	part *parts;
	size_t nparts;
	char **words;
	size_t nwords;
	part main;
} doc;

static const herd__schema_name colors[] = { { "red", 1 }, { "green", 2 }, { "blue", 3 },
					    { NULL, 0 } };

static bool all_upper(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] < 'A' || s[i] > 'Z')
			return false;
	return true;
}

static const herd__schema_form tag_form = { "upper-case letters", all_upper };

/* A part's n is below the document's count. */
static void below_count(const herd__schema_dec *d, const void *obj, const void *parent,
			int64_t *min, uint64_t *max)
{
	const doc *root = d->ctx;

	*max = (uint64_t)root->count;
}

static herd_status no_empty_title(herd__schema_dec *d, void *obj, void *parent)
{
	const doc *x = obj;

	if (x->title[0] == '\0')
		return herd__schema_fail(d, "title", "a title, please");
	return HERD_OK;
}

static const herd__schema_field part_fields[] = {
	{ HERD__SCHEMA_CHARS("tag", part, tag), .form = &tag_form },
	{ HERD__SCHEMA_INT("n", part, n, -5, 100), .limits = below_count },
};
static const herd__schema part_schema = HERD__SCHEMA(part, part_fields, 8, NULL);

static const herd__schema_field dim_item = { HERD__SCHEMA_ITEM(HERD__SCHEMA_T_UINT, uint16_t),
					     .max = 1000 };
static const herd__schema_field word_item = { HERD__SCHEMA_ITEM(HERD__SCHEMA_T_STR, char *),
					      .max = 16 };

static const herd__schema_field doc_fields[] = {
	{ HERD__SCHEMA_CONST_INT("v", 2) },
	{ HERD__SCHEMA_CONST_STR("kind", "test") },
	{ HERD__SCHEMA_INT("count", doc, count, 0, 10) },
	{ HERD__SCHEMA_UINT("flags", doc, flags, 0, UINT32_MAX) },
	{ HERD__SCHEMA_BOOL("on", doc, on) },
	{ HERD__SCHEMA_DOUBLE("ratio", doc, ratio) },
	{ HERD__SCHEMA_STR("title", doc, title, 32) },
	{ HERD__SCHEMA_STR("note", doc, note, 32),
	  .flags = HERD__SCHEMA_OPTIONAL | HERD__SCHEMA_NULLABLE },
	{ HERD__SCHEMA_BYTES("blob", doc, blob, nblob, 4) },
	{ HERD__SCHEMA_ENUM("color", doc, color, colors) },
	{ HERD__SCHEMA_INT("level", doc, level, 0, 9), .since = 2, .def = 5 },
	{ HERD__SCHEMA_INLINE_ARRAY("dims", doc, dims, ndims, 1), .item = &dim_item },
	{ HERD__SCHEMA_ARRAY("parts", doc, parts, nparts, 0, 4), .sub = &part_schema },
	{ HERD__SCHEMA_ARRAY("words", doc, words, nwords, 0, 4), .item = &word_item,
	  .flags = HERD__SCHEMA_OPTIONAL | HERD__SCHEMA_OMIT_EMPTY },
	{ HERD__SCHEMA_STRUCT("main", doc, main, &part_schema) },
};
static const herd__schema doc_schema = HERD__SCHEMA(doc, doc_fields, 32, no_empty_title);

/* A full document in JSON, as the decoder reads it (mpjson converts it). */
static const char full_json[] =
	"{\"v\": 2, \"kind\": \"test\", \"count\": 7, \"flags\": 4000000000, \"on\": true, "
	"\"ratio\": 0.25, \"title\": \"hello\", \"note\": null, \"blob\": 0, "
	"\"color\": \"green\", \"level\": 3, \"dims\": [2, 999], "
	"\"parts\": [{\"tag\": \"AB\", \"n\": -5}, {\"tag\": \"C\", \"n\": 7}], "
	"\"words\": [\"x\", \"yz\"], \"main\": {\"tag\": \"M\", \"n\": 0}, \"extra\": [1]}";

/* msgpack of json, with the value of "blob" replaced by bin 0x01 0x02. */
static char *msgpack_of(const char *json, size_t *len)
{
	char *mp = NULL, *at;

	CHECK_OK(herd__mpjson_to_msgpack(json, strlen(json), 1 << 20, &mp, len));
	/* "blob" then 0x00: make it a bin of 2 bytes (0xc4 0x02 0x01 0x02). */
	at = memmem(mp, *len, "\xa4" "blob\x00", 6);
	if (at != NULL) {
		char *bigger = malloc(*len + 3);
		size_t head = (size_t)(at - mp) + 5;

		memcpy(bigger, mp, head);
		memcpy(bigger + head, "\xc4\x02\x01\x02", 4);
		memcpy(bigger + head + 4, at + 6, *len - head - 1);
		*len += 3;
		free(mp);
		mp = bigger;
	}
	return mp;
}

static herd_status decode(const char *json, doc *x, unsigned version)
{
	herd__schema_dec d = { .walk = { .origin = "doc" }, .version = version, .ctx = x };
	msgpack_unpacked up;
	size_t len = 0;
	char *mp = msgpack_of(json, &len);
	herd_status st;

	memset(x, 0, sizeof(*x));
	msgpack_unpacked_init(&up);
	st = herd__mpjson_unpack(&up, mp, len);
	if (st == HERD_OK)
		st = herd__schema_unpack(&d, &doc_schema, &up.data, x);
	msgpack_unpacked_destroy(&up);
	free(mp);
	return st;
}

static void encode(const doc *x, char **out, size_t *len)
{
	msgpack_packer pk;
	herd__buf b;

	herd__buf_init(&b, 0);
	msgpack_packer_init(&pk, &b, herd__buf_write);
	herd__schema_pack(&pk, &doc_schema, x, 0);
	CHECK_OK(herd__buf_take(&b, "doc", out, len));
}

static void test_schema_decodes_every_kind_and_ignores_unknown_keys(void)
{
	doc x;

	CHECK_OK(decode(full_json, &x, 2));
	CHECK_INT(x.count, 7);
	CHECK(x.flags == 4000000000u);
	CHECK(x.on);
	CHECK(x.ratio == 0.25);
	CHECK_STR(x.title, "hello");
	CHECK(x.note == NULL);
	CHECK_INT(x.nblob, 2);
	CHECK(x.blob != NULL && x.blob[0] == 1 && x.blob[1] == 2);
	CHECK_INT(x.color, 2);
	CHECK_INT(x.level, 3);
	CHECK_INT(x.ndims, 2);
	CHECK_INT(x.dims[1], 999);
	CHECK_INT(x.nparts, 2);
	CHECK_STR(x.parts[0].tag, "AB");
	CHECK_INT(x.parts[0].n, -5);
	CHECK_INT(x.nwords, 2);
	CHECK_STR(x.words[1], "yz");
	CHECK_STR(x.main.tag, "M");
	herd__schema_free(&doc_schema, &x);
	CHECK(x.title == NULL && x.parts == NULL && x.nparts == 0 && x.words == NULL);
}

/* Keys in table order, integers shortest, the constants written, an empty
 * OMIT_EMPTY array left out; decoding the bytes gives them back. */
static void test_schema_encodes_in_table_order_and_round_trips(void)
{
	static const char want_json[] =
		"{\"v\": 2, \"kind\": \"test\", \"count\": 3, \"flags\": 1, \"on\": false, "
		"\"ratio\": 1.5, \"title\": \"t\", \"note\": null, \"blob\": 0, "
		"\"color\": \"blue\", \"level\": 5, \"dims\": [4], \"parts\": [], "
		"\"main\": {\"tag\": \"Q\", \"n\": 1}}";
	doc x, y;
	char *mp = NULL, *again = NULL, *want;
	size_t len = 0, again_len = 0, want_len = 0;

	memset(&x, 0, sizeof(x));
	x.count = 3;
	x.flags = 1;
	x.ratio = 1.5;
	x.title = "t";
	x.blob = (uint8_t *)"\x01\x02";
	x.nblob = 2;
	x.color = 3;
	x.level = 5;
	x.ndims = 1;
	x.dims[0] = 4;
	herd__strlcpy(x.main.tag, "Q", sizeof(x.main.tag));
	x.main.n = 1;
	encode(&x, &mp, &len);
	want = msgpack_of(want_json, &want_len);
	CHECK(len == want_len && memcmp(mp, want, len) == 0);
	memset(&y, 0, sizeof(y));
	{
		herd__schema_dec d = { .walk = { .origin = "doc" }, .version = 2, .ctx = &y };
		msgpack_unpacked up;

		msgpack_unpacked_init(&up);
		CHECK_OK(herd__mpjson_unpack(&up, mp, len));
		CHECK_OK(herd__schema_unpack(&d, &doc_schema, &up.data, &y));
		msgpack_unpacked_destroy(&up);
	}
	encode(&y, &again, &again_len);
	CHECK(again_len == len && memcmp(again, mp, len) == 0);
	herd__schema_free(&doc_schema, &y);
	free(mp), free(again), free(want);
}

/* An edit of the full document (the first from replaced by to) and the
 * message its decoding fails with. */
static const struct refusal {
	const char *from, *to, *needle;
} refusals[] = {
	{ "\"title\": \"hello\", ", "", "doc: top level: missing required key \"title\"" },
	{ "\"level\": 3, ", "", "doc: top level: missing required key \"level\"" },
	{ "{\"tag\": \"C\", \"n\": 7}", "{\"n\": 7}", "doc: parts[1]: missing required key \"tag\"" },
	{ "\"tag\": \"C\"", "\"tag\": \"c\"",
	  "doc: parts[1].tag: expected upper-case letters, got \"c\"" },
	{ "\"tag\": \"C\"", "\"tag\": \"CCCCCCCC\"",
	  "doc: parts[1].tag: expected a string of at most 7 bytes, got one of 8 bytes" },
	/* A range from the limits callback: n at most count (7). */
	{ "\"n\": 7}", "\"n\": 8}", "doc: parts[1].n: expected an integer in -5..7, got 8" },
	{ "\"count\": 7", "\"count\": 11", "doc: count: expected an integer in 0..10, got 11" },
	{ "\"flags\": 4000000000", "\"flags\": -1",
	  "doc: flags: expected a non-negative integer, got an integer" },
	{ "\"on\": true", "\"on\": 1", "doc: on: expected a boolean, got an integer" },
	{ "\"ratio\": 0.25", "\"ratio\": \"x\"", "doc: ratio: expected a number, got a string" },
	{ "\"note\": null", "\"note\": 4", "doc: note: expected a string or null, got an integer" },
	{ "\"color\": \"green\"", "\"color\": \"pink\"",
	  "doc: color: expected \"red\", \"green\" or \"blue\"" },
	{ "\"dims\": [2, 999]", "\"dims\": []", "doc: dims: expected an array of 1..3 items, got 0" },
	{ "\"dims\": [2, 999]", "\"dims\": [2, 1001]",
	  "doc: dims[1]: expected an integer in 0..1000, got 1001" },
	{ "\"words\": [\"x\", \"yz\"]", "\"words\": [\"x\", 5]",
	  "doc: words[1]: expected a string of at most 16 bytes, got an integer" },
	{ "\"main\": {\"tag\": \"M\", \"n\": 0}", "\"main\": []",
	  "doc: main: expected a map, got an array" },
	/* The struct's own check. */
	{ "\"title\": \"hello\"", "\"title\": \"\"", "doc: title: a title, please" },
};

static void test_schema_refusals_name_the_path(void)
{
	doc x;

	for (size_t i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
		const struct refusal *r = &refusals[i];
		const char *at = strstr(full_json, r->from);
		char edited[2048];

		if (at == NULL) {
			fprintf(stderr, "not in the document: %s\n", r->from);
			exit(1);
		}
		snprintf(edited, sizeof(edited), "%.*s%s%s", (int)(at - full_json), full_json,
			 r->to, at + strlen(r->from));
		CHECK_ERR(decode(edited, &x, 2), HERD_EFORMAT, r->needle);
		herd__schema_free(&doc_schema, &x);
	}

	/* Absent: optional keys and keys newer than the document. */
	CHECK_OK(decode("{\"count\": 1, \"flags\": 0, \"on\": false, \"ratio\": 0, "
			"\"title\": \"a\", \"blob\": 0, \"color\": \"red\", \"dims\": [1], "
			"\"parts\": [], \"main\": {\"tag\": \"A\", \"n\": 0}}", &x, 1));
	CHECK_INT(x.level, 5);
	CHECK(x.note == NULL && x.nwords == 0 && x.words == NULL);
	CHECK(x.ratio == 0.0);
	herd__schema_free(&doc_schema, &x);
}

int main(void)
{
	TEST_RUN(test_schema_decodes_every_kind_and_ignores_unknown_keys);
	TEST_RUN(test_schema_encodes_in_table_order_and_round_trips);
	TEST_RUN(test_schema_refusals_name_the_path);
	return TEST_DONE();
}
