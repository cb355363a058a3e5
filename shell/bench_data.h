/*
 * shell/bench_data.h - the data side of `herd bench`, free of libherd calls:
 * the values each rank puts in its buffers, the exact results a collective
 * must produce from them, and the sizes of the command line.
 *
 * Values are small positive integers that depend on the rank and the
 * element's index, chosen per reduction so that every result is exactly
 * representable and independent of the order of the reduction:
 *
 *   copies (no reduction)   1 + (index + 13 * rank) % 97
 *   sum, avg                1 + (index + 3 * rank) % 5     (sums <= 5 * ranks)
 *   prod                    1 + (index + rank) % 2         (powers of two)
 *   min, max                1 + (index + 13 * rank) % 97
 *
 * Sums stay exact in float16 up to 409 ranks, bfloat16 and int8 up to 25.
 * Results are compared bit for bit with the expected value written in the
 * buffer's type.  No expected value is 0, so a receive buffer cleared to 0
 * shows every element a collective failed to write.
 */
#ifndef HERD_SHELL_BENCH_DATA_H
#define HERD_SHELL_BENCH_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "herd/comm.h"

/* Which value pattern: a copy (no reduction) or one reduction. */
typedef enum bench_pattern {
	BENCH_COPY,
	BENCH_REDUCE_SUM, /* sum and avg */
	BENCH_REDUCE_PROD,
	BENCH_REDUCE_MINMAX
} bench_pattern;

/* The pattern for a reduction op, or BENCH_COPY when reduces is 0. */
bench_pattern bench_pattern_for(int reduces, herd_redop op);

/* Writes rank's values for elements index0 .. index0 + count - 1. */
void bench_fill(void *buf, size_t count, herd_dtype dtype, bench_pattern pat, int rank,
		size_t index0);

/* Sets count elements to 0. */
void bench_clear(void *buf, size_t count, herd_dtype dtype);

/*
 * Counts the elements of buf (elements index0 .. index0 + count - 1) that
 * differ from rank src's values: the result of a copy.
 */
size_t bench_check_copy(const void *buf, size_t count, herd_dtype dtype, bench_pattern pat,
			int src, size_t index0);

/*
 * Counts the elements of buf that differ from op over the values of ranks
 * 0 .. nranks-1: the result of a reduction.
 */
size_t bench_check_reduce(const void *buf, size_t count, herd_dtype dtype, herd_redop op,
			  int nranks, size_t index0);

/* Parses a byte size as herd_size_parse does ("16M", "1.5GiB"); 0 on
 * success, -1 on a malformed value or one beyond size_t. */
int bench_parse_size(const char *s, size_t *out);

/* Writes one element converted from an integer-valued double. */
void bench_store(void *buf, size_t i, herd_dtype dtype, double v);

#endif /* HERD_SHELL_BENCH_DATA_H */
