/*
 * examples/toy_math.h - the little linear algebra of the grid examples
 * (grid_tp_dp.c, pipeline_1f1b.c): row-major float64 matrices and a
 * reproducible generator, so that every rank makes the same numbers.
 */
#ifndef HERD_EXAMPLES_TOY_MATH_H
#define HERD_EXAMPLES_TOY_MATH_H

#include <stdint.h>
#include <string.h>

/* A number in [-scale, scale) from the state (splitmix64). */
static inline double toy_rand(uint64_t *state, double scale)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return ((double)(z >> 11) / (double)(1ull << 53) * 2.0 - 1.0) * scale;
}

/*
 * c (m x n) = a (m x k, row stride lda) * b (k x n, row stride ldb), with
 * a or b read transposed when ta or tb is set (then a is k x m, b n x k,
 * their strides those of the stored matrices); c has stride ldc.
 */
static inline void toy_gemm(int m, int n, int k, const double *a, int lda, int ta,
			    const double *b, int ldb, int tb, double *c, int ldc)
{
	for (int i = 0; i < m; i++)
		for (int j = 0; j < n; j++) {
			double s = 0;

			for (int p = 0; p < k; p++)
				s += (ta ? a[p * lda + i] : a[i * lda + p]) *
				     (tb ? b[j * ldb + p] : b[p * ldb + j]);
			c[i * ldc + j] = s;
		}
}

/* The largest |a[i] - b[i]|. */
static inline double toy_max_diff(const double *a, const double *b, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++) {
		double d = a[i] > b[i] ? a[i] - b[i] : b[i] - a[i];

		m = d > m ? d : m;
	}
	return m;
}

#endif /* HERD_EXAMPLES_TOY_MATH_H */
