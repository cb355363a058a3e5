/*
 * tests/unit/test_mpjson.c - the generic msgpack <-> JSON conversion and
 * the msgpack pre-check that makes msgpack-c safe on hostile input.
 */
#include "test.h"
#include "mpjson.h"

#define MAX (1u << 20)

static char *to_msgpack(const char *json, size_t *len)
{
	char *mp = NULL;

	CHECK_OK(herd__mpjson_to_msgpack(json, strlen(json), MAX, &mp, len));
	return mp;
}

static void check_to_json(const void *mp, size_t len, const char *expected)
{
	char *json = NULL;
	size_t json_len = 0;

	CHECK_OK(herd__mpjson_to_json(mp, len, MAX, &json, &json_len));
	CHECK_STR(json, expected);
	CHECK_INT(json_len, json ? strlen(json) : 0);
	free(json);
}

static void check_bytes(const char *got, size_t got_len, const char *want, size_t want_len)
{
	test_checks++;
	if (got_len != want_len || memcmp(got, want, want_len) != 0) {
		TEST_FAIL_("msgpack bytes differ (%zu bytes, expected %zu):", got_len, want_len);
		for (size_t i = 0; i < got_len; i++)
			fprintf(stderr, " %02x", (unsigned char)got[i]);
		fputc('\n', stderr);
	}
}

static void test_every_json_type_round_trips_in_order(void)
{
	static const char json[] =
		"{\"z\": 1, \"a\": -5, \"real\": 1.5, \"s\": \"h\\u00e9llo \\u20ac\", "
		"\"nul\": \"a\\u0000b\", \"list\": [true, false, null, []], \"obj\": {}, "
		"\"max\": 9223372036854775807, \"min\": -9223372036854775808}";
	static const char expected[] =
		"{\n"
		"  \"z\": 1,\n"
		"  \"a\": -5,\n"
		"  \"real\": 1.5,\n"
		"  \"s\": \"h\xc3\xa9llo \xe2\x82\xac\",\n"
		"  \"nul\": \"a\\u0000b\",\n"
		"  \"list\": [\n"
		"    true,\n"
		"    false,\n"
		"    null,\n"
		"    []\n"
		"  ],\n"
		"  \"obj\": {},\n"
		"  \"max\": 9223372036854775807,\n"
		"  \"min\": -9223372036854775808\n"
		"}\n";
	size_t len, again_len;
	char *mp = to_msgpack(json, &len), *again;

	/* Keys stay in document order: "z" first. */
	CHECK(len > 3 && (unsigned char)mp[0] == 0x89 && mp[1] == (char)0xa1 && mp[2] == 'z');
	check_to_json(mp, len, expected);
	again = to_msgpack(expected, &again_len);
	check_bytes(again, again_len, mp, len);
	free(mp);
	free(again);
}

static void test_integers_take_their_shortest_form(void)
{
	static const char want[] = "\x9c\x00\x7f\xcc\x80\xcc\xff\xcd\x01\x00\xce\x00\x01\x00\x00"
				   "\xcf\x00\x00\x00\x01\x00\x00\x00\x00\xff\xe0\xd0\xdf\xd1\xff\x7f"
				   "\xcb\x3f\xf8\x00\x00\x00\x00\x00\x00";
	size_t len;
	char *mp = to_msgpack("[0, 127, 128, 255, 256, 65536, 4294967296, -1, -32, -33, -129, "
			      "1.5]", &len);

	check_bytes(mp, len, want, sizeof(want) - 1);
	free(mp);
}

static void test_values_without_json_form_are_refused(void)
{
	static const struct {
		const char *mp;
		size_t len;
		const char *needle;
	} cases[] = {
		{ "\xcf\x80\x00\x00\x00\x00\x00\x00\x00", 9, "9223372036854775808 is above" },
		{ "\xc4\x02\x01\x02", 4, "binary data has no JSON form" },
		{ "\xd4\x01\x00", 3, "an extension value has no JSON form" },
		{ "\x81\x01\x02", 3, "map key that is not a string" },
		{ "\x82\xa1k\x01\xa1k\x02", 7, "duplicate map key \"k\"" },
		{ "\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00", 9, "has no JSON form" },
	};
	char *json = NULL;
	size_t len = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		CHECK_ERR(herd__mpjson_to_json(cases[i].mp, cases[i].len, MAX, &json, &len),
			  HERD_EFORMAT, cases[i].needle);
		CHECK(json == NULL && len == 0);
	}
	/* A float32 becomes a JSON real. */
	check_to_json("\xca\x3f\xc0\x00\x00", 5, "1.5\n");
}

static void test_nesting_limit_in_both_directions(void)
{
	char json[2 * HERD_MPJSON_MAX_DEPTH + 8], mp[HERD_MPJSON_MAX_DEPTH + 2];
	char *out = NULL;
	size_t len, depth;

	for (depth = HERD_MPJSON_MAX_DEPTH; depth <= HERD_MPJSON_MAX_DEPTH + 1; depth++) {
		herd_status want = depth <= HERD_MPJSON_MAX_DEPTH ? HERD_OK : HERD_EFORMAT;
		herd_status st;

		memset(json, '[', depth);
		memset(json + depth, ']', depth);
		st = herd__mpjson_to_msgpack(json, 2 * depth, MAX, &out, &len);
		CHECK_INT(st, want);
		free(out);
		out = NULL;
		memset(mp, 0x91, depth);
		mp[depth - 1] = (char)0x90;
		st = herd__mpjson_to_json(mp, depth, MAX, &out, &len);
		CHECK_INT(st, want);
		free(out);
		out = NULL;
	}
	CHECK_ERR(herd__mpjson_check("\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91"
				     "\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91\x91"
				     "\x91\x91\x91\xc0", 34),
		  HERD_EFORMAT, "msgpack: containers nested deeper than 32 at offset 32");
}

static void test_check_refuses_what_msgpack_c_would_trust(void)
{
	CHECK_OK(herd__mpjson_check("\xc0", 1));
	CHECK_OK(herd__mpjson_check("\xd8\x01" "0123456789abcdef", 18)); /* fixext 16 */
	CHECK_ERR(herd__mpjson_check("", 0), HERD_EFORMAT, "no data");
	CHECK_ERR(herd__mpjson_check("\xc0\xc0", 2), HERD_EFORMAT,
		  "1 bytes of trailing data after the object at offset 1");
	CHECK_ERR(herd__mpjson_check("\x92\xc0", 2), HERD_EFORMAT,
		  "the array at offset 0 claims 2 values, only 1 bytes remain");
	CHECK_ERR(herd__mpjson_check("\x91\x92\xc0\xc0\xc0", 5), HERD_EFORMAT, "trailing");
	CHECK_ERR(herd__mpjson_check("\x92\x81\xc0", 3), HERD_EFORMAT,
		  "the map at offset 1 claims 2 values, only 1 bytes remain");
	CHECK_ERR(herd__mpjson_check("\xda\x00", 2), HERD_EFORMAT,
		  "the header at offset 0 needs 3 bytes, 2 remain");
	CHECK_ERR(herd__mpjson_check("\xc6\xff\xff\xff\xff\x00", 6), HERD_EFORMAT,
		  "the binary value at offset 0 claims 4294967295 bytes, 1 remain");
	CHECK_ERR(herd__mpjson_check("\xc9\xff\xff\xff\xff\x01", 6), HERD_EFORMAT, "claims");
	CHECK_ERR(herd__mpjson_check("\xcb\x00\x00", 3), HERD_EFORMAT, "claims 8 bytes, 2 remain");
	CHECK_ERR(herd__mpjson_check("\xa2\xc3\x28", 3), HERD_EFORMAT, "not valid UTF-8");
	CHECK_ERR(herd__mpjson_check("\x91", 1), HERD_EFORMAT, "claims 1 values, only 0");
}

static void test_utf8_validation(void)
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

static void test_size_limits(void)
{
	char *out = NULL;
	size_t len = 0;

	CHECK_ERR(herd__mpjson_to_msgpack("[1, 2, 3]", 9, 8, &out, &len), HERD_EFORMAT,
		  "JSON text of 9 bytes exceeds the limit of 8 bytes");
	/* Three reals of 3 characters are 28 bytes of msgpack. */
	CHECK_ERR(herd__mpjson_to_msgpack("[1.5,2.5,3.5]", 13, 20, &out, &len), HERD_EFORMAT,
		  "msgpack would exceed the limit of 20 bytes");
	CHECK_ERR(herd__mpjson_to_json("\x93\x01\x02\x03", 4, 8, &out, &len), HERD_EFORMAT,
		  "JSON text would exceed the limit of 8 bytes");
	CHECK_ERR(herd__mpjson_to_json("\x93\x01\x02\x03", 4, 3, &out, &len), HERD_EFORMAT,
		  "msgpack data of 4 bytes exceeds the limit of 3 bytes");
	CHECK(out == NULL && len == 0);
	CHECK_ERR(herd__mpjson_to_msgpack("{\"a\": 1, \"a\": 2}", 16, MAX, &out, &len),
		  HERD_EFORMAT, "duplicate object key");
	CHECK_ERR(herd__mpjson_to_msgpack("[1] [2]", 7, MAX, &out, &len), HERD_EFORMAT,
		  "JSON: line 1, column");
	CHECK_OK(herd__mpjson_to_msgpack("7", 1, MAX, &out, &len));
	CHECK(len == 1 && out[0] == 7 && out[1] == '\0');
	free(out);
}

static void test_unpack_points_into_the_data(void)
{
	static const char data[] = "\x81\xa3key\xa5value";
	msgpack_unpacked u;

	msgpack_unpacked_init(&u);
	CHECK_OK(herd__mpjson_unpack(&u, data, sizeof(data) - 1));
	CHECK_INT(u.data.type, MSGPACK_OBJECT_MAP);
	CHECK(u.data.via.map.ptr[0].val.via.str.ptr == data + 6);
	msgpack_unpacked_destroy(&u);
	msgpack_unpacked_init(&u);
	CHECK_ERR(herd__mpjson_unpack(&u, data, sizeof(data) - 2), HERD_EFORMAT, "truncated");
	msgpack_unpacked_destroy(&u);
}

int main(void)
{
	TEST_RUN(test_every_json_type_round_trips_in_order);
	TEST_RUN(test_integers_take_their_shortest_form);
	TEST_RUN(test_values_without_json_form_are_refused);
	TEST_RUN(test_nesting_limit_in_both_directions);
	TEST_RUN(test_check_refuses_what_msgpack_c_would_trust);
	TEST_RUN(test_utf8_validation);
	TEST_RUN(test_size_limits);
	TEST_RUN(test_unpack_points_into_the_data);
	return TEST_DONE();
}
