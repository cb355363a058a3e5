/*
 * tests/fuzz/fuzz_safetensors.c - the safetensors reader of `herd ckpt
 * import` (shell/safetensors.c) on arbitrary bytes: it must never crash,
 * leak or hang; a refusal says why, naming the file; what it accepts holds
 * what the import relies on: known dtypes, at most HERD_CKPT_MAX_DIMS
 * dimensions whose product times the element size is the entry's byte
 * range, and ranges that tile the data from 0 to its end in order.
 * Inputs whose first 8 bytes do not give a plausible header length are
 * also tried with the length fixed to the rest, so that the JSON checks
 * see most inputs.
 *
 *   fuzz_safetensors -max_total_time=60 tests/fuzz/corpus/fuzz_safetensors
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"

static void die(const struct st_file *f, const char *what)
{
	fprintf(stderr, "fuzz_safetensors: %s (%s)\n", what, f->error);
	abort();
}

static void check(const uint8_t *data, size_t size)
{
	struct st_file f;
	uint64_t at = 0;

	if (st_parse(&f, data, size, "fuzz") != 0) {
		if (strncmp(f.error, "fuzz: ", 6) != 0 || f.error[6] == '\0')
			die(&f, "a refusal that does not name the file and say why");
		st_close(&f);
		return;
	}
	if (f.data < data || f.data + f.data_len != data + size)
		die(&f, "the data does not end where the file does");
	for (size_t i = 0; i < f.n; i++) {
		const struct st_entry *e = &f.entries[i];
		uint64_t count = 1;

		if (st_dtype_name(e->dtype) == NULL)
			die(&f, "an accepted dtype has no name");
		if (e->ndim < 1 || e->ndim > HERD_CKPT_MAX_DIMS)
			die(&f, "dimensions out of range");
		for (int d = 0; d < e->ndim; d++)
			count *= e->shape[d];
		if (e->begin != at || e->end - e->begin != count * herd_dtype_size(e->dtype))
			die(&f, "entries do not tile the data");
		if (e->name == NULL || strlen(e->name) == 0 ||
		    strlen(e->name) > HERD_CKPT_NAME_MAX)
			die(&f, "a bad tensor name was accepted");
		at = e->end;
	}
	if (at != f.data_len)
		die(&f, "bytes after the last tensor were accepted");
	st_close(&f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *fixed;
	uint64_t hlen = 0;

	check(data, size);
	if (size < 9)
		return 0;
	for (int k = 7; k >= 0; k--)
		hlen = hlen << 8 | data[k];
	if (hlen <= size - 8)
		return 0;
	/* The header length as the whole rest: the JSON decides. */
	fixed = malloc(size);
	if (fixed == NULL)
		return 0;
	memcpy(fixed, data, size);
	hlen = size - 8;
	for (int k = 0; k < 8; k++)
		fixed[k] = (uint8_t)(hlen >> (8 * k));
	check(fixed, size);
	free(fixed);
	return 0;
}
