/*
 * tests/unit/test.h - the small harness of herd's C unit tests.
 *
 * A test file defines static void functions and runs them from main with
 * TEST_RUN(fn); each CHECK that fails prints where and why, and the file
 * exits non-zero when any check failed.  A case that cannot run here ends
 * with TEST_SKIP(reason); a file in which every case was skipped exits 77,
 * which ctest reports as skipped, and one that checked nothing at all
 * fails.
 */
#ifndef HERD_TEST_H
#define HERD_TEST_H

#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "herd.h"

static int test_failures;
static int test_checks;
static int test_skips;          /* cases ended by TEST_SKIP */
static int test_case_skipped;   /* the running case was */

/* n bytes that depend on seed alone (xorshift64), for data to round-trip. */
static inline void test_fill_bytes(void *p, size_t n, uint64_t seed)
{
	uint8_t *b = p;
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		b[i] = (uint8_t)x;
	}
}

static inline int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	chmod(path, 0700);
	return remove(path);
}

/* A fresh temporary directory (removed with rm_tree). */
static inline char *make_tmpdir(void)
{
	char tmpl[] = "/tmp/herd-test-XXXXXX";
	char *d = mkdtemp(tmpl);

	if (d == NULL) {
		perror("mkdtemp");
		exit(1);
	}
	return strdup(d);
}

static inline void rm_tree(char *dir)
{
	if (dir == NULL)
		return;
	chmod(dir, 0700);
	nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

#define TEST_FAIL_(...)                                                 \
	do {                                                            \
		test_failures++;                                        \
		fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);         \
		fprintf(stderr, __VA_ARGS__);                           \
		fputc('\n', stderr);                                    \
	} while (0)

#define CHECK(cond)                                                     \
	do {                                                            \
		test_checks++;                                          \
		if (!(cond))                                            \
			TEST_FAIL_("check failed: %s", #cond);          \
	} while (0)

#define CHECK_INT(a, b)                                                       \
	do {                                                                  \
		long long a_ = (long long)(a), b_ = (long long)(b);           \
		test_checks++;                                                \
		if (a_ != b_)                                                 \
			TEST_FAIL_("%s == %lld, expected %s == %lld", #a, a_, #b, b_); \
	} while (0)

#define CHECK_STR(a, b)                                                         \
	do {                                                                    \
		const char *a_ = (a), *b_ = (b);                                \
		test_checks++;                                                  \
		if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0)            \
			TEST_FAIL_("%s == \"%s\", expected \"%s\"", #a,          \
				   a_ ? a_ : "(null)", b_ ? b_ : "(null)");      \
	} while (0)

/* The call must succeed; on failure print herd_last_error(). */
#define CHECK_OK(expr)                                                          \
	do {                                                                    \
		herd_status st_ = (expr);                                       \
		test_checks++;                                                  \
		if (st_ != HERD_OK)                                             \
			TEST_FAIL_("%s failed: %s: %s", #expr,                   \
				   herd_status_name(st_), herd_last_error());    \
	} while (0)

/* The call must fail with status code; the message must contain needle. */
#define CHECK_ERR(expr, code, needle)                                           \
	do {                                                                    \
		herd_status st_ = (expr);                                       \
		test_checks++;                                                  \
		if (st_ != (code))                                              \
			TEST_FAIL_("%s returned %s, expected %s (%s)", #expr,    \
				   herd_status_name(st_), herd_status_name(code), \
				   herd_last_error());                          \
		else if (strstr(herd_last_error(), (needle)) == NULL)           \
			TEST_FAIL_("%s: message \"%s\" lacks \"%s\"", #expr,     \
				   herd_last_error(), (needle));                \
	} while (0)

/*
 * Element i of an object's list through its indexed call (docs/api.md,
 * "Names"), for a test that knows the element is there: a failed call
 * fails the file at once, as what follows would read through NULL.
 */
#define TEST_ELEMENT_(name, type, obj_type, call)                               \
	static inline const type *name(const obj_type *obj, size_t i)           \
	{                                                                       \
		const type *e = NULL;                                           \
		herd_status st_ = call(obj, i, &e);                             \
		if (st_ != HERD_OK) {                                           \
			fprintf(stderr, "%s(%zu) failed: %s: %s\n", #call, i,   \
				herd_status_name(st_), herd_last_error());      \
			exit(1);                                                \
		}                                                               \
		return e;                                                       \
	}
TEST_ELEMENT_(test_node, herd_node, herd_cluster, herd_cluster_node)
TEST_ELEMENT_(test_plan_rank, herd_plan_rank_info, herd_plan, herd_plan_rank)
TEST_ELEMENT_(test_plan_gpu, herd_plan_gpu_info, herd_plan, herd_plan_gpu)
TEST_ELEMENT_(test_plan_warning, char, herd_plan, herd_plan_warning)

/* Ends the running case (a void function) as skipped, saying why. */
#define TEST_SKIP(...)                                                  \
	do {                                                            \
		printf("     skipped: ");                               \
		printf(__VA_ARGS__);                                    \
		printf("\n");                                          \
		test_case_skipped = 1;                                  \
		test_skips++;                                           \
		return;                                                 \
	} while (0)

#define TEST_RUN(fn)                                                    \
	do {                                                            \
		int before_ = test_failures;                            \
		test_case_skipped = 0;                                  \
		fn();                                                   \
		printf("%s %s\n", test_failures != before_ ? "FAIL"     \
		       : test_case_skipped ? "skip" : "ok  ", #fn);     \
	} while (0)

/* The exit status: 1 when a check failed or nothing was checked nor
 * skipped, 77 when every case was skipped, else 0. */
#define TEST_DONE()                                                             \
	(printf("%d checks, %d failed, %d cases skipped\n", test_checks,        \
		test_failures, test_skips),                                     \
	 test_failures > 0 ? 1 : test_checks > 0 ? 0 : test_skips > 0 ? 77 : 1)

#endif /* HERD_TEST_H */
