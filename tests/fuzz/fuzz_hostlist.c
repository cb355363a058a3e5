/*
 * tests/fuzz/fuzz_hostlist.c - hostlist expressions and hostfiles on
 * arbitrary bytes: nothing may crash, leak, or allocate beyond the limits;
 * failures are HERD_EFORMAT with a message naming the column (or the
 * line); and whatever expands must compress to an expression that expands
 * to the very same names.
 *
 *   fuzz_hostlist -max_total_time=60 tests/fuzz/corpus/fuzz_hostlist
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "launch/hostfile.h"
#include "topo/hostlist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void die(const char *what)
{
	fprintf(stderr, "fuzz_hostlist: %s: %s\n", what, herd_last_error());
	abort();
}

static void check_roundtrip(const herd__hostlist *hl)
{
	herd__hostlist again;
	char *expr = NULL;

	if (herd__hostlist_compress(&expr, (const char *const *)hl->names, hl->n) != HERD_OK)
		die("expanded names do not compress");
	if (herd__hostlist_expand(&again, expr) != HERD_OK)
		die("a compressed list does not expand");
	if (again.n != hl->n)
		die("the round trip changed the number of names");
	for (size_t i = 0; i < hl->n; i++)
		if (strcmp(again.names[i], hl->names[i]) != 0)
			die("the round trip changed a name");
	herd__hostlist_free(&again);
	free(expr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	herd__hostlist hl;
	herd__hostfile hf;
	herd_status st;

	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	herd_log_set_level(HERD_LOG_ERROR);
	st = herd__hostlist_expand(&hl, text);
	if (st == HERD_OK) {
		if (hl.n == 0 || hl.n > HERD__HOSTLIST_MAX_NAMES)
			die("an expansion out of bounds");
		/* Large expansions are right by construction; keep the fuzzer fast. */
		if (hl.n <= 4096)
			check_roundtrip(&hl);
	} else if (st != HERD_EFORMAT || strncmp(herd_last_error(), "hostlist \"", 10) != 0) {
		die("unexpected failure");
	} else if (hl.n != 0) {
		die("a failed expansion left names");
	}
	herd__hostlist_free(&hl);

	st = herd__hostfile_parse(&hf, (const char *)data, size, "fuzz");
	if (st == HERD_OK) {
		if (hf.n == 0 || herd__hostfile_slots(&hf) == 0)
			die("an accepted hostfile without slots");
	} else if (st != HERD_EFORMAT || strncmp(herd_last_error(), "fuzz:", 5) != 0) {
		die("unexpected hostfile failure");
	}
	herd__hostfile_free(&hf);
	free(text);
	return 0;
}
