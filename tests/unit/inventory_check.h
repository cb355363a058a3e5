/*
 * tests/unit/inventory_check.h - what the inventory tests share: a file
 * of tests/fixtures, a decoding or an encoding that must succeed, and two
 * byte strings that must be equal.
 */
#ifndef HERD_TEST_INVENTORY_CHECK_H
#define HERD_TEST_INVENTORY_CHECK_H

#include "test.h"

#include "base.h"

/* The bytes of tests/fixtures/<rel> in the source tree (NUL-terminated,
 * freed with free); the test stops if the file is missing. */
static inline char *fixture_bytes(const char *rel, size_t *len)
{
	const char *root = getenv("HERD_SOURCE_DIR");
	char path[4096];
	char *data = NULL;

	snprintf(path, sizeof(path), "%s/tests/fixtures/%s", root ? root : ".", rel);
	if (herd__read_file(path, 1 << 24, &data, len) != HERD_OK) {
		fprintf(stderr, "cannot read a fixture: %s\n", herd_last_error());
		exit(1);
	}
	return data;
}

static inline herd_cluster *decode_ok(const void *data, size_t len, const char *origin)
{
	herd_cluster *c = NULL;

	CHECK_OK(herd_cluster_decode(&c, data, len, origin));
	return c;
}

static inline void *encode_ok(const herd_cluster *c, herd_cluster_format format, size_t *len)
{
	void *data = NULL;

	*len = 0;
	CHECK_OK(herd_cluster_encode(c, format, &data, len));
	return data;
}

#define CHECK_BYTES(a, alen, b, blen)                                              \
	do {                                                                       \
		test_checks++;                                                     \
		if ((alen) != (blen) || memcmp((a), (b), (alen)) != 0)             \
			TEST_FAIL_("%s (%zu bytes) differs from %s (%zu bytes)", #a, \
				   (size_t)(alen), #b, (size_t)(blen));             \
	} while (0)

#endif /* HERD_TEST_INVENTORY_CHECK_H */
