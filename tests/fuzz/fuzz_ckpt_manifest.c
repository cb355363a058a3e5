/*
 * tests/fuzz/fuzz_ckpt_manifest.c - the checkpoint manifest decoder on
 * arbitrary bytes: it must never crash, leak or hang, and must fail only
 * with HERD_EFORMAT or HERD_EVERSION and a message naming the origin.
 * Every input is decoded twice: as it is (which mostly tests the
 * self-checksum) and with its last 16 bytes replaced by the right checksum,
 * so that the structural checks see mutated manifests.  What is accepted
 * must encode, decode again, and encode to the very same bytes.
 *
 *   fuzz_ckpt_manifest -max_total_time=60 tests/fuzz/corpus/fuzz_ckpt_manifest
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt_internal.h"

static void die(const char *what)
{
	fprintf(stderr, "fuzz_ckpt_manifest: %s: %s\n", what, herd_last_error());
	abort();
}

static void check(const uint8_t *data, size_t size)
{
	herd__ckpt_manifest *m = NULL, *again = NULL;
	char *enc = NULL, *enc2 = NULL;
	size_t len = 0, len2 = 0;
	herd_status st = herd__ckpt_manifest_decode(&m, data, size, "fuzz");

	if (st != HERD_OK) {
		if (m != NULL)
			die("a failed decode left a manifest");
		if (st != HERD_EFORMAT && st != HERD_EVERSION)
			die("unexpected status");
		if (strncmp(herd_last_error(), "fuzz: ", 6) != 0)
			die("the message does not name the origin");
		return;
	}
	if (herd__ckpt_manifest_encode(m, &enc, &len) != HERD_OK)
		die("an accepted manifest does not encode");
	if (herd__ckpt_manifest_decode(&again, enc, len, "re-encoded") != HERD_OK)
		die("an encoding does not decode");
	if (herd__ckpt_manifest_encode(again, &enc2, &len2) != HERD_OK)
		die("a decoded encoding does not encode");
	if (len != len2 || memcmp(enc, enc2, len) != 0)
		die("encodings differ");
	free(enc);
	free(enc2);
	herd__ckpt_manifest_free(again);
	herd__ckpt_manifest_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *fixed;

	check(data, size);
	if (size < 16)
		return 0;
	fixed = malloc(size);
	if (fixed == NULL)
		return 0;
	memcpy(fixed, data, size);
	{
		char hex[17];

		herd__ckpt_sum_hex(hex, herd__ckpt_sum(fixed, size - 16));
		memcpy(fixed + size - 16, hex, 16);
	}
	check(fixed, size);
	free(fixed);
	return 0;
}
