/*
 * tests/unit/test_msgpack.c - the raw-bytes check that every msgpack input
 * passes before msgpack-c unpacks it, and the growable buffer that
 * msgpack_packer writes into.
 */
#include <stdint.h>

#include <msgpack.h>

#include "test.h"
#include "buf.h"
#include "msgpack_check.h"

/* ---- the check ----------------------------------------------------------- */

/* One valid encoding of each msgpack format. */
static const struct encoding {
	const char *name;
	const char *bytes;
	size_t len;
	size_t hdr;     /* type byte and length/count field, when it has one; else 0 */
} encodings[] = {
	{ "positive fixint", "\x05", 1, 0 },
	{ "negative fixint", "\xe0", 1, 0 },
	{ "nil", "\xc0", 1, 0 },
	{ "false", "\xc2", 1, 0 },
	{ "true", "\xc3", 1, 0 },
	{ "uint 8", "\xcc\xff", 2, 0 },
	{ "uint 16", "\xcd\x01\x00", 3, 0 },
	{ "uint 32", "\xce\x00\x01\x00\x00", 5, 0 },
	{ "uint 64", "\xcf\x00\x00\x00\x01\x00\x00\x00\x00", 9, 0 },
	{ "int 8", "\xd0\x80", 2, 0 },
	{ "int 16", "\xd1\x80\x00", 3, 0 },
	{ "int 32", "\xd2\x80\x00\x00\x00", 5, 0 },
	{ "int 64", "\xd3\x80\x00\x00\x00\x00\x00\x00\x00", 9, 0 },
	{ "float 32", "\xca\x3f\xc0\x00\x00", 5, 0 },
	{ "float 64", "\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00", 9, 0 },
	{ "fixstr", "\xa3" "abc", 4, 0 },
	{ "str 8", "\xd9\x03" "abc", 5, 2 },
	{ "str 16", "\xda\x00\x03" "abc", 6, 3 },
	{ "str 32", "\xdb\x00\x00\x00\x03" "abc", 8, 5 },
	{ "bin 8", "\xc4\x02\x00\xff", 4, 2 },
	{ "bin 16", "\xc5\x00\x02\x00\xff", 5, 3 },
	{ "bin 32", "\xc6\x00\x00\x00\x02\x00\xff", 7, 5 },
	{ "fixext 1", "\xd4\x01\xaa", 3, 0 },
	{ "fixext 2", "\xd5\x01\xaa\xbb", 4, 0 },
	{ "fixext 4", "\xd6\x01\xaa\xbb\xcc\xdd", 6, 0 },
	{ "fixext 8", "\xd7\x01" "01234567", 10, 0 },
	{ "fixext 16", "\xd8\x01" "0123456789abcdef", 18, 0 },
	{ "ext 8", "\xc7\x02\x01\xaa\xbb", 5, 2 },
	{ "ext 16", "\xc8\x00\x02\x01\xaa\xbb", 6, 3 },
	{ "ext 32", "\xc9\x00\x00\x00\x02\x01\xaa\xbb", 8, 5 },
	{ "fixarray", "\x92\x01\x02", 3, 0 },
	{ "array 16", "\xdc\x00\x02\x01\x02", 5, 3 },
	{ "array 32", "\xdd\x00\x00\x00\x02\x01\x02", 7, 5 },
	{ "fixmap", "\x81\xa1k\x01", 4, 0 },
	{ "map 16", "\xde\x00\x01\xa1k\x01", 6, 3 },
	{ "map 32", "\xdf\x00\x00\x00\x01\xa1k\x01", 8, 5 },
};

#define NENCODINGS (sizeof(encodings) / sizeof(encodings[0]))

static void test_check_accepts_every_format_that_msgpack_c_unpacks(void)
{
	for (size_t i = 0; i < NENCODINGS; i++) {
		const struct encoding *e = &encodings[i];
		msgpack_unpacked u;
		size_t off = 0;

		if (herd__msgpack_check(e->bytes, e->len, NULL) != HERD_OK)
			TEST_FAIL_("%s refused: %s", e->name, herd_last_error());
		msgpack_unpacked_init(&u);
		CHECK_INT(msgpack_unpack_next(&u, e->bytes, e->len, &off), MSGPACK_UNPACK_SUCCESS);
		CHECK_INT(off, e->len);
		msgpack_unpacked_destroy(&u);
	}
}

static void test_check_refuses_every_format_cut_short(void)
{
	char want[128];

	for (size_t i = 0; i < NENCODINGS; i++) {
		const struct encoding *e = &encodings[i];

		for (size_t cut = 1; cut < e->len; cut++)
			CHECK_ERR(herd__msgpack_check(e->bytes, cut, NULL), HERD_EFORMAT,
				  "msgpack: truncated");
		/* A length or count field that is not all there is named as such. */
		if (e->hdr > 1) {
			snprintf(want, sizeof(want), "msgpack: truncated: the header at offset 0 "
				 "needs %zu bytes, 1 remain", e->hdr);
			CHECK_ERR(herd__msgpack_check(e->bytes, 1, NULL), HERD_EFORMAT, want);
		}
	}
	CHECK_ERR(herd__msgpack_check("\xcb\x00\x00", 3, NULL), HERD_EFORMAT,
		  "msgpack: truncated: the value at offset 0 claims 8 bytes, 2 remain");
	CHECK_ERR(herd__msgpack_check("\x92\xcc\x01", 3, NULL), HERD_EFORMAT,
		  "msgpack: truncated: 3 bytes end in the middle of the data");
	CHECK_ERR(herd__msgpack_check("", 0, NULL), HERD_EFORMAT, "msgpack: no data");
}

static void test_check_refuses_counts_and_lengths_the_bytes_cannot_hold(void)
{
	/* 5-byte headers claiming 2^32 - 1 items or bytes: msgpack-c would
	 * allocate for them before finding out. */
	CHECK_ERR(herd__msgpack_check("\xdd\xff\xff\xff\xff", 5, NULL), HERD_EFORMAT,
		  "msgpack: truncated: the array at offset 0 claims 4294967295 values, "
		  "only 0 bytes remain");
	CHECK_ERR(herd__msgpack_check("\xdf\xff\xff\xff\xff\xc0\xc0\xc0", 8, NULL), HERD_EFORMAT,
		  "msgpack: truncated: the map at offset 0 claims 8589934590 values, "
		  "only 3 bytes remain");
	CHECK_ERR(herd__msgpack_check("\x91\xdb\xff\xff\xff\xff" "abc", 9, NULL), HERD_EFORMAT,
		  "msgpack: truncated: the string at offset 1 claims 4294967295 bytes, 3 remain");
	CHECK_ERR(herd__msgpack_check("\xc6\xff\xff\xff\xff\x00", 6, NULL), HERD_EFORMAT,
		  "the binary value at offset 0 claims 4294967295 bytes, 1 remain");
	CHECK_ERR(herd__msgpack_check("\x92\x81\xc0", 3, NULL), HERD_EFORMAT,
		  "the map at offset 1 claims 2 values, only 1 bytes remain");
}

static void test_check_refuses_the_unused_type_byte(void)
{
	CHECK_ERR(herd__msgpack_check("\x92\x01\xc1", 3, NULL), HERD_EFORMAT,
		  "msgpack: byte 0xc1 at offset 2 is not a valid type");
}

static void test_check_refuses_trailing_bytes(void)
{
	CHECK_ERR(herd__msgpack_check("\xc0\xc0", 2, NULL), HERD_EFORMAT,
		  "msgpack: 1 bytes of trailing data after the object at offset 1");
	CHECK_ERR(herd__msgpack_check("\x91\x92\xc0\xc0\x01\x02", 6, NULL), HERD_EFORMAT,
		  "msgpack: 2 bytes of trailing data after the object at offset 4");
}

/* depth arrays, one inside the other, around a nil: depth + 1 bytes. */
static size_t nested(char *buf, size_t depth)
{
	memset(buf, 0x91, depth);
	buf[depth] = (char)0xc0;
	return depth + 1;
}

static void test_check_limits_nesting_depth(void)
{
	herd__msgpack_limits three = { .max_depth = 3 }, huge = { .max_depth = 1000 };
	char buf[64];

	CHECK_OK(herd__msgpack_check(buf, nested(buf, 3), &three));
	CHECK_ERR(herd__msgpack_check(buf, nested(buf, 4), &three), HERD_EFORMAT,
		  "msgpack: containers nested deeper than 3 at offset 3");
	/* An empty container counts as a level too. */
	CHECK_ERR(herd__msgpack_check("\x91\x91\x91\x80", 4, &three), HERD_EFORMAT,
		  "nested deeper than 3 at offset 3");
	/* The default, and the ceiling: as deep as msgpack-c can unpack. */
	CHECK_OK(herd__msgpack_check(buf, nested(buf, HERD__MSGPACK_DEPTH_MAX), NULL));
	CHECK_ERR(herd__msgpack_check(buf, nested(buf, HERD__MSGPACK_DEPTH_MAX + 1), NULL),
		  HERD_EFORMAT, "msgpack: containers nested deeper than 32 at offset 32");
	CHECK_ERR(herd__msgpack_check(buf, nested(buf, HERD__MSGPACK_DEPTH_MAX + 1), &huge),
		  HERD_EFORMAT, "nested deeper than 32 at offset 32");
}

static void test_check_limits_the_number_of_values(void)
{
	herd__msgpack_limits four = { .max_objects = 4 }, five = { .max_objects = 5 };
	static const char map[] = "\x82\xa1" "a" "\x01\xa1" "b" "\x02";

	/* The array counts, and so does each element. */
	CHECK_OK(herd__msgpack_check("\x93\x01\x02\x03", 4, &four));
	CHECK_ERR(herd__msgpack_check("\x94\x01\x02\x03\x04", 5, &four), HERD_EFORMAT,
		  "msgpack: more than 4 values, the value at offset 4 is one too many");
	/* A map's keys count as values. */
	CHECK_OK(herd__msgpack_check(map, sizeof(map) - 1, &five));
	CHECK_ERR(herd__msgpack_check(map, sizeof(map) - 1, &four), HERD_EFORMAT,
		  "more than 4 values, the value at offset 6 is one too many");
	/* No limit by default. */
	CHECK_OK(herd__msgpack_check("\x94\x01\x02\x03\x04", 5, NULL));
}

static void test_check_requires_utf8_only_when_asked(void)
{
	herd__msgpack_limits utf8 = { .require_utf8 = true };

	CHECK_OK(herd__msgpack_check("\xa2\xc3\x28", 3, NULL));
	CHECK_ERR(herd__msgpack_check("\xa2\xc3\x28", 3, &utf8), HERD_EFORMAT,
		  "msgpack: the string at offset 0 is not valid UTF-8");
	CHECK_ERR(herd__msgpack_check("\x92\xa1x\xd9\x01\xff", 6, &utf8), HERD_EFORMAT,
		  "msgpack: the string at offset 3 is not valid UTF-8");
	CHECK_OK(herd__msgpack_check("\xa2\xc3\xa9", 3, &utf8));
	/* Binary values hold any bytes. */
	CHECK_OK(herd__msgpack_check("\xc4\x02\xc3\x28", 4, &utf8));
}

static void test_utf8_validation_refuses_overlongs_and_surrogates(void)
{
	static const char *const valid[] = { "", "a", "\xc3\xa9", "\xe2\x82\xac",
					      "\xf0\x9d\x84\x9e", "\xef\xbf\xbf" };
	static const char *const invalid[] = {
		"\x80", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80",
		"\xf5\x80\x80\x80", "\xe2\x82", "\xc3\x28", "\xff",
	};

	for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++)
		CHECK(herd__msgpack_utf8_valid(valid[i], strlen(valid[i])));
	for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++)
		CHECK(!herd__msgpack_utf8_valid(invalid[i], strlen(invalid[i])));
}

static void pack_key(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str_with_body(pk, s, strlen(s));
}

/* A node record packed by msgpack-c into a herd__buf: three levels deep. */
static void pack_node(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 6);
	pack_key(pk, "host");
	pack_key(pk, "n\xc3\xb6" "de7");
	pack_key(pk, "gpus");
	msgpack_pack_array(pk, 2);
	for (int i = 0; i < 2; i++) {
		msgpack_pack_map(pk, 2);
		pack_key(pk, "id");
		msgpack_pack_int(pk, i);
		pack_key(pk, "mem");
		msgpack_pack_uint64(pk, 80ull * 1000 * 1000 * 1000);
	}
	pack_key(pk, "load");
	msgpack_pack_double(pk, 0.5);
	pack_key(pk, "uuid");
	msgpack_pack_bin_with_body(pk, "\x00\xff\x10", 3);
	pack_key(pk, "up");
	msgpack_pack_true(pk);
	pack_key(pk, "skew");
	msgpack_pack_int64(pk, -300);
}

static void test_check_accepts_a_valid_nested_object(void)
{
	herd__msgpack_limits limits = { .max_depth = 3, .max_objects = 64, .require_utf8 = true };
	herd__msgpack_limits shallow = { .max_depth = 2 };
	herd__buf buf;
	msgpack_packer pk;
	msgpack_unpacked u;
	char *mp = NULL;
	size_t len = 0, off = 0;

	herd__buf_init(&buf, 4096);
	msgpack_packer_init(&pk, &buf, herd__buf_write);
	pack_node(&pk);
	CHECK_OK(herd__buf_take(&buf, "the node", &mp, &len));
	CHECK_OK(herd__msgpack_check(mp, len, &limits));
	CHECK_OK(herd__msgpack_check(mp, len, NULL));
	CHECK_ERR(herd__msgpack_check(mp, len, &shallow), HERD_EFORMAT,
		  "msgpack: containers nested deeper than 2 at offset");
	msgpack_unpacked_init(&u);
	CHECK_INT(msgpack_unpack_next(&u, mp, len, &off), MSGPACK_UNPACK_SUCCESS);
	CHECK_INT(off, len);
	CHECK_INT(u.data.type, MSGPACK_OBJECT_MAP);
	CHECK_INT(u.data.via.map.size, 6);
	CHECK_INT(u.data.via.map.ptr[1].val.via.array.ptr[1].via.map.ptr[1].val.via.u64,
		  80000000000ll);
	msgpack_unpacked_destroy(&u);
	free(mp);
}

/* ---- the buffer ---------------------------------------------------------- */

static void test_buf_grows_and_keeps_every_byte(void)
{
	herd__buf buf = { 0 };
	uint8_t piece[7];
	char *out = NULL;
	size_t len = 0, bad = 0;

	for (size_t i = 0; i < 1000; i++) {
		for (size_t j = 0; j < sizeof(piece); j++)
			piece[j] = (uint8_t)(i * 7 + j);
		CHECK_OK(herd__buf_append(&buf, piece, sizeof(piece)));
	}
	CHECK_INT(buf.len, 7000);
	CHECK(buf.cap > buf.len);
	for (size_t k = 0; k < buf.len; k++)
		bad += buf.data[k] != (uint8_t)k;
	CHECK_INT(bad, 0);
	CHECK_OK(herd__buf_take(&buf, "the pieces", &out, &len));
	CHECK_INT(len, 7000);
	CHECK(out != NULL && (uint8_t)out[6999] == (uint8_t)6999 && out[7000] == '\0');
	CHECK(buf.data == NULL && buf.len == 0 && buf.cap == 0);
	free(out);
}

static void test_buf_write_past_max_records_the_failure(void)
{
	herd__buf buf;
	msgpack_packer pk;
	char *out = NULL;
	size_t len = 99;

	herd__buf_init(&buf, 16);
	CHECK_INT(herd__buf_write(&buf, "0123456789", 10), 0);
	CHECK_INT(herd__buf_write(&buf, "abcdef", 6), 0);   /* exactly the limit */
	CHECK_INT(buf.failed, HERD_OK);
	CHECK_INT(herd__buf_write(&buf, "!", 1), -1);
	CHECK_INT(buf.failed, HERD_EFORMAT);
	/* Once failed, nothing more is written: the output is never cut silently. */
	CHECK_INT(herd__buf_write(&buf, "", 0), -1);
	CHECK_INT(buf.len, 16);
	CHECK_ERR(herd__buf_take(&buf, "the record", &out, &len), HERD_EFORMAT,
		  "the record would exceed the limit of 16 bytes");
	CHECK(out == NULL && len == 0);
	/* Taking empties the buffer and keeps its limit. */
	CHECK(buf.data == NULL && buf.len == 0 && buf.failed == HERD_OK && buf.max == 16);

	/* The same through msgpack_packer. */
	msgpack_packer_init(&pk, &buf, herd__buf_write);
	CHECK_INT(msgpack_pack_str_with_body(&pk, "a string longer than sixteen bytes", 34), -1);
	CHECK_INT(buf.failed, HERD_EFORMAT);
	CHECK_ERR(herd__buf_take(&buf, "the string", &out, &len), HERD_EFORMAT, "the string");
	CHECK_INT(msgpack_pack_str_with_body(&pk, "short", 5), 0);
	CHECK_OK(herd__buf_take(&buf, "the string", &out, &len));
	CHECK_INT(len, 6);
	CHECK(out != NULL && memcmp(out, "\xa5short", 7) == 0);
	free(out);
}

static void test_buf_take_of_nothing_is_an_empty_string(void)
{
	herd__buf buf;
	char *out = NULL;
	size_t len = 99;

	herd__buf_init(&buf, 16);
	CHECK_OK(herd__buf_take(&buf, "nothing", &out, &len));
	CHECK(out != NULL && out[0] == '\0');
	CHECK_INT(len, 0);
	free(out);
}

static void test_buf_reserve_past_max_raises(void)
{
	herd__buf buf;

	herd__buf_init(&buf, 8);
	CHECK_OK(herd__buf_append(&buf, "12345678", 8));
	CHECK_ERR(herd__buf_append(&buf, "9", 1), HERD_EFORMAT,
		  "1 more bytes would exceed the buffer's limit of 8 bytes (8 held)");
	/* The limit is on bytes held: consumed ones make room again. */
	herd__buf_consume(&buf, 4);
	CHECK_OK(herd__buf_append(&buf, "9abc", 4));
	CHECK_INT(buf.len - buf.off, 8);
	CHECK(memcmp(buf.data + buf.off, "56789abc", 8) == 0);
	herd__buf_free(&buf);
	CHECK(buf.data == NULL && buf.max == 8);
	/* Without a limit, a size no memory could hold is still refused. */
	herd__buf_init(&buf, 0);
	CHECK_ERR(herd__buf_reserve(&buf, SIZE_MAX), HERD_ENOMEM, "out of memory growing");
	herd__buf_free(&buf);
}

static void test_buf_consume_reads_from_the_front(void)
{
	herd__buf buf = { 0 };
	uint8_t bytes[200];
	size_t cap;

	CHECK_OK(herd__buf_append(&buf, "hello world", 11));
	herd__buf_consume(&buf, 6);
	CHECK_INT(buf.off, 6);
	CHECK(memcmp(buf.data + buf.off, "world", 5) == 0);
	/* Consuming everything rewinds. */
	herd__buf_consume(&buf, 5);
	CHECK(buf.off == 0 && buf.len == 0);
	herd__buf_free(&buf);

	/* Reserving moves the pending bytes to the front rather than growing. */
	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (uint8_t)i;
	CHECK_OK(herd__buf_append(&buf, bytes, sizeof(bytes)));
	cap = buf.cap;
	herd__buf_consume(&buf, 150);
	CHECK_OK(herd__buf_reserve(&buf, cap - 60));
	CHECK_INT(buf.off, 0);
	CHECK_INT(buf.len, 50);
	CHECK_INT(buf.cap, cap);
	CHECK(memcmp(buf.data, bytes + 150, 50) == 0);
	herd__buf_free(&buf);
	CHECK(buf.data == NULL && buf.len == 0 && buf.off == 0 && buf.cap == 0);
}

int main(void)
{
	TEST_RUN(test_check_accepts_every_format_that_msgpack_c_unpacks);
	TEST_RUN(test_check_refuses_every_format_cut_short);
	TEST_RUN(test_check_refuses_counts_and_lengths_the_bytes_cannot_hold);
	TEST_RUN(test_check_refuses_the_unused_type_byte);
	TEST_RUN(test_check_refuses_trailing_bytes);
	TEST_RUN(test_check_limits_nesting_depth);
	TEST_RUN(test_check_limits_the_number_of_values);
	TEST_RUN(test_check_requires_utf8_only_when_asked);
	TEST_RUN(test_utf8_validation_refuses_overlongs_and_surrogates);
	TEST_RUN(test_check_accepts_a_valid_nested_object);
	TEST_RUN(test_buf_grows_and_keeps_every_byte);
	TEST_RUN(test_buf_write_past_max_records_the_failure);
	TEST_RUN(test_buf_take_of_nothing_is_an_empty_string);
	TEST_RUN(test_buf_reserve_past_max_raises);
	TEST_RUN(test_buf_consume_reads_from_the_front);
	return TEST_DONE();
}
