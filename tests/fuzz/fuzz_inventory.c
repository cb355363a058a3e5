/*
 * tests/fuzz/fuzz_inventory.c - the inventory decoder on arbitrary bytes
 * (JSON, msgpack or the text form of herd probe --text, as sniffed; a
 * cluster inventory with the nodes a discovery could not reach among
 * them): it must never crash, leak or hang, and must fail only with
 * HERD_EFORMAT or HERD_EVERSION and a message naming the origin.  Whatever
 * it accepts must encode in every format, and each encoding must decode
 * again and encode to the very same bytes.
 *
 *   fuzz_inventory -max_total_time=60 tests/fixtures/inventory tests/fuzz/corpus/fuzz_inventory
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "herd.h"

static void die(const char *what)
{
	fprintf(stderr, "fuzz_inventory: %s: %s\n", what, herd_last_error());
	abort();
}

static void *encode(const herd_cluster *c, herd_cluster_format format, size_t *len)
{
	void *data = NULL;

	if (herd_cluster_encode(c, format, &data, len) != HERD_OK)
		die("an accepted inventory does not encode");
	return data;
}

static herd_cluster *decode(const void *data, size_t len)
{
	herd_cluster *c = NULL;

	if (herd_cluster_decode(&c, data, len, "re-encoded") != HERD_OK)
		die("an encoding does not decode");
	return c;
}

/* Encoding again gives the same bytes: the canonical form is a fixed point. */
static void check_same(const herd_cluster *c, herd_cluster_format format, const void *want,
		       size_t want_len)
{
	size_t len = 0;
	void *data = encode(c, format, &len);

	if (len != want_len || memcmp(data, want, len) != 0)
		die(format == HERD_CLUSTER_FORMAT_JSON	  ? "JSON encodings differ"
		    : format == HERD_CLUSTER_FORMAT_TEXT ? "text encodings differ"
						 : "msgpack encodings differ");
	herd_free(data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	herd_cluster *c = NULL, *from_mp, *from_json, *from_text;
	herd_status st = herd_cluster_decode(&c, data, size, "fuzz");
	size_t mp_len = 0, json_len = 0, text_len = 0;
	void *mp, *json, *text;

	if (st != HERD_OK) {
		if (c != NULL)
			die("a failed decode left a cluster");
		if (st != HERD_EFORMAT && st != HERD_EVERSION)
			die("unexpected status");
		if (strncmp(herd_last_error(), "fuzz: ", 6) != 0)
			die("the message does not name the origin");
		return 0;
	}
	mp = encode(c, HERD_CLUSTER_FORMAT_MSGPACK, &mp_len);
	json = encode(c, HERD_CLUSTER_FORMAT_JSON, &json_len);
	text = encode(c, HERD_CLUSTER_FORMAT_TEXT, &text_len);
	from_mp = decode(mp, mp_len);
	from_json = decode(json, json_len);
	from_text = decode(text, text_len);
	check_same(from_mp, HERD_CLUSTER_FORMAT_MSGPACK, mp, mp_len);
	check_same(from_json, HERD_CLUSTER_FORMAT_MSGPACK, mp, mp_len);
	check_same(from_json, HERD_CLUSTER_FORMAT_JSON, json, json_len);
	check_same(from_text, HERD_CLUSTER_FORMAT_MSGPACK, mp, mp_len);
	check_same(from_text, HERD_CLUSTER_FORMAT_TEXT, text, text_len);
	herd_free(mp);
	herd_free(json);
	herd_free(text);
	herd_cluster_free(from_mp);
	herd_cluster_free(from_json);
	herd_cluster_free(from_text);
	herd_cluster_free(c);
	return 0;
}
