/*
 * Hostlist expressions: Slurm's forms expanded name by name, names
 * compressed back (and expanded again to the same names), malformed
 * expressions refused with the column of the fault, and expressions too
 * large to expand refused before anything is allocated.
 */
#include <stdlib.h>
#include <string.h>

#include "herd/cluster.h"
#include "herd/hostlist.h"

#include "base.h"
#include "test.h"
#include "topo/hostlist.h"

/* The names of expr joined by spaces, or "ERROR" with the error raised. */
static const char *expand(const char *expr)
{
	static char out[8192];
	herd__hostlist hl;
	size_t len = 0;

	if (herd__hostlist_expand(&hl, expr) != HERD_OK) {
		CHECK_INT(hl.n, 0);
		return "ERROR";
	}
	out[0] = '\0';
	for (size_t i = 0; i < hl.n && len + strlen(hl.names[i]) + 2 < sizeof(out); i++)
		len += (size_t)snprintf(out + len, sizeof(out) - len, "%s%s", i ? " " : "",
					hl.names[i]);
	herd__hostlist_free(&hl);
	return out;
}

/* Compresses the space-separated names; "ERROR" with the error raised. */
static const char *compress(const char *spaced)
{
	static char out[8192];
	char buf[8192], *names[512], *save = NULL, *joined;
	size_t n = 0;

	herd__strlcpy(buf, spaced, sizeof(buf));
	for (char *t = strtok_r(buf, " ", &save); t && n < 512; t = strtok_r(NULL, " ", &save))
		names[n++] = t;
	if (herd__hostlist_compress(&joined, (const char *const *)names, n) != HERD_OK)
		return "ERROR";
	herd__strlcpy(out, joined, sizeof(out));
	free(joined);
	return out;
}

static void test_hostlist_expands_ranges_and_lists_keeping_zero_padding(void)
{
	CHECK_STR(expand("node[01-04,07]"), "node01 node02 node03 node04 node07");
	CHECK_STR(expand("n[8-10]"), "n8 n9 n10");
	CHECK_STR(expand("n[08-10]"), "n08 n09 n10");
	CHECK_STR(expand("n[098-101]"), "n098 n099 n100 n101");
	CHECK_STR(expand("gpu[7]"), "gpu7");
	CHECK_STR(expand("node1"), "node1");
	CHECK_STR(expand("127.0.0.[2-5]"), "127.0.0.2 127.0.0.3 127.0.0.4 127.0.0.5");
}

static void test_hostlist_several_groups_vary_last_fastest(void)
{
	CHECK_STR(expand("a[1-2]b[3-4]"), "a1b3 a1b4 a2b3 a2b4");
	CHECK_STR(expand("r[1-2]n[1,3]x"), "r1n1x r1n3x r2n1x r2n3x");
	CHECK_STR(expand("rack1-n[001-003]-ib"), "rack1-n001-ib rack1-n002-ib rack1-n003-ib");
	CHECK_STR(expand("[1-2][5-6]"), "15 16 25 26");
}

static void test_hostlist_comma_lists_mix_plain_and_bracketed_names(void)
{
	CHECK_STR(expand("login,gpu[1-2],db"), "login gpu1 gpu2 db");
	CHECK_STR(expand(" a , b[1-2]  c "), "a b1 b2 c");
	CHECK_STR(expand("n1,n1"), "n1 n1");
	CHECK_STR(expand("n[3,1,2]"), "n3 n1 n2");
	CHECK_STR(expand("my_host.example.com"), "my_host.example.com");
}

/* As scontrol show hostnames: empty items are dropped, not refused. */
static void test_hostlist_empty_items_are_dropped_as_slurm_does(void)
{
	CHECK_STR(expand("a,b,,c"), "a b c");
	CHECK_STR(expand("a[1-2],"), "a1 a2");
	CHECK_STR(expand(",a"), "a");
	CHECK_STR(expand(",,a,,"), "a");
	CHECK_STR(expand("a[1-2],,b[3-4]"), "a1 a2 b3 b4");
	CHECK_STR(expand("a, ,b"), "a b");
	/* Nothing but separators names no host. */
	CHECK_ERR(herd__hostlist_expand(&(herd__hostlist){ 0 }, ","), HERD_EFORMAT,
		  "hostlist \",\": no host names");
	CHECK_ERR(herd__hostlist_expand(&(herd__hostlist){ 0 }, " ,, "), HERD_EFORMAT,
		  "no host names");
}

static void test_hostlist_errors_name_the_column(void)
{
	CHECK_STR(expand("node[01-"), "ERROR");
	CHECK_ERR(herd__hostlist_expand(&(herd__hostlist){ 0 }, "node[01-"), HERD_EFORMAT,
		  "hostlist \"node[01-\": column 9: expected a number after '-', got end of text");
	CHECK_ERR(herd__hostlist_expand(&(herd__hostlist){ 0 }, "node[01"), HERD_EFORMAT,
		  "column 8: expected ']' to close the '[' at column 5");
	CHECK_ERR(herd__hostlist_expand(&(herd__hostlist){ 0 }, "node[01;02]"), HERD_EFORMAT,
		  "column 8: expected ',' or ']', got ';'");
	CHECK_ERR(herd__hostlist_expand(&(herd__hostlist){ 0 }, "node[]"), HERD_EFORMAT,
		  "column 6: expected a number, got ']'");
	CHECK_ERR(herd__hostlist_expand(&(herd__hostlist){ 0 }, "n[5-3]"), HERD_EFORMAT,
		  "column 5: range 5-3 goes backwards");
	/* Cut short, it is unclosed rather than backwards. */
	CHECK_ERR(herd__hostlist_expand(&(herd__hostlist){ 0 }, "node[01-0"), HERD_EFORMAT,
		  "column 10: expected ']' to close the '[' at column 5");
	CHECK_ERR(herd__hostlist_expand(&(herd__hostlist){ 0 }, "a[1-2,,4]"), HERD_EFORMAT,
		  "column 7: expected a number, got ','");
	CHECK_ERR(herd__hostlist_expand(&(herd__hostlist){ 0 }, "a[1,]"), HERD_EFORMAT,
		  "column 5: expected a number, got ']'");
	CHECK_ERR(herd__hostlist_expand(&(herd__hostlist){ 0 }, "a,-oProxyCommand=x"),
		  HERD_EFORMAT, "column 3: a host name cannot start with '-'");
	CHECK_ERR(herd__hostlist_expand(&(herd__hostlist){ 0 }, "n1]"), HERD_EFORMAT,
		  "column 3: ']' without a '[' before it");
	CHECK_ERR(herd__hostlist_expand(&(herd__hostlist){ 0 }, "ho$t"), HERD_EFORMAT,
		  "column 3: '$' cannot be part of a host name");
	CHECK_ERR(herd__hostlist_expand(&(herd__hostlist){ 0 }, "n[1-1234567890123456789]"),
		  HERD_EFORMAT, "column 5: number longer than 18 digits");
	CHECK_ERR(herd__hostlist_expand(&(herd__hostlist){ 0 }, "   "), HERD_EFORMAT,
		  "no host names");
	CHECK_ERR(herd__hostlist_expand(&(herd__hostlist){ 0 }, NULL), HERD_EINVAL,
		  "no expression");
}

static void test_hostlist_refuses_huge_expansions_before_allocating(void)
{
	herd__hostlist hl;

	CHECK_ERR(herd__hostlist_expand(&hl, "n[0-999999999]"), HERD_EFORMAT,
		  "column 2: group expands to more than 65536 names");
	CHECK_INT(hl.n, 0);
	/* Each group is small; their product is not. */
	CHECK_ERR(herd__hostlist_expand(&hl, "a[0-999]b[0-999]"), HERD_EFORMAT,
		  "column 1: expands to more than 65536 names");
	CHECK_ERR(herd__hostlist_expand(&hl, "a[0-9]b[0-9]c[0-9]d[0-9]e[0-9]"), HERD_EFORMAT,
		  "expands to more than 65536 names");
	/* Items are counted together. */
	CHECK_ERR(herd__hostlist_expand(&hl, "a[0-40000],b[0-40000]"), HERD_EFORMAT,
		  "column 12: expands to more than 65536 names");
	CHECK_ERR(herd__hostlist_expand(&hl, "a[1][1][1][1][1][1][1][1][1]"), HERD_EFORMAT,
		  "column 26: more than 8 bracket groups in one name");
	{
		char name[300];

		/* 252 + 2 digits of "10"; "1" alone would fit. */
		memset(name, 'x', 252);
		strcpy(name + 252, "[1-10]");
		CHECK_ERR(herd__hostlist_expand(&hl, name), HERD_EFORMAT,
			  "makes names longer than 253 characters");
		CHECK(strstr(herd_last_error(), "...\" (258 bytes): column 1:") != NULL);
	}
	/* At the limit it works. */
	CHECK_OK(herd__hostlist_expand(&hl, "n[1-65536]"));
	CHECK_INT(hl.n, 65536);
	CHECK_STR(hl.names[65535], "n65536");
	herd__hostlist_free(&hl);
	CHECK_INT(hl.n, 0);
}

static void test_hostlist_compress_writes_slurm_form(void)
{
	CHECK_STR(compress("node01 node02 node03 node04 node07"), "node[01-04,07]");
	CHECK_STR(compress("n8 n9 n10"), "n[8-10]");
	CHECK_STR(compress("n08 n09 n10"), "n[08-10]");
	/* text after the last number: taken whole, as Slurm takes it */
	CHECK_STR(compress("rack1-n001-ib rack1-n002-ib rack1-n003-ib"),
		  "rack1-n001-ib,rack1-n002-ib,rack1-n003-ib");
	CHECK_STR(compress("login gpu1 gpu2 db"), "login,gpu[1-2],db");
	CHECK_STR(compress("n1"), "n1");
	CHECK_STR(compress("n3 n1 n2"), "n[3,1-2]");
	CHECK_STR(compress("n1 n1"), "n[1,1]");
	/* Different widths share the bracket, not a range (as Slurm writes). */
	CHECK_STR(compress("n1 n01 n2"), "n[1,01,2]");
	CHECK_STR(compress("n09 n010 n099 n100"), "n[09,010,099-100]");
	CHECK_STR(compress("127.0.0.2 127.0.0.3 127.0.0.4"), "127.0.0.[2-4]");
	CHECK_STR(compress(""), "");
	CHECK_STR(compress("a -b"), "ERROR");
	CHECK(strstr(herd_last_error(), "host name \"-b\": starts with '-'") != NULL);
	CHECK_STR(compress("a[1]"), "ERROR");
}

static void test_hostlist_compress_then_expand_gives_the_names_back(void)
{
	static const char *const cases[] = {
		"node01 node02 node03 node04 node07",
		"a1b3 a1b4 a2b3 a2b4",
		"x9 x10 x11 x011 x012 y z1",
		"n0 n00 n000 n1 n01 n001",
		"h h h1 h1",
		"10 11 12 a",
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char expr[8192];

		herd__strlcpy(expr, compress(cases[i]), sizeof(expr));
		CHECK_STR(expand(expr), cases[i]);
	}
}

static void test_hostlist_push_checks_names(void)
{
	herd__hostlist hl = { 0 };

	CHECK_OK(herd__hostlist_push(&hl, "node1"));
	CHECK_ERR(herd__hostlist_push(&hl, "bad name"), HERD_EINVAL, "host name \"bad name\"");
	CHECK_ERR(herd__hostlist_push(&hl, ""), HERD_EINVAL, "an empty name");
	CHECK_INT(hl.n, 1);
	CHECK_STR(hl.names[0], "node1");
	herd__hostlist_free(&hl);
}

/* The public calls: one block of names freed with herd_free, the same
 * errors as the internal ones, and NULL arguments refused. */
static void test_hostlist_public_calls_expand_and_compress(void)
{
	const char *const back[] = { "gpu01", "gpu02", "gpu03", "login" };
	char **names = NULL, *expr = NULL;
	size_t n = 0;

	CHECK_OK(herd_hostlist_expand("gpu[01-03],login", &names, &n));
	CHECK_INT(n, 4);
	for (size_t i = 0; names != NULL && i < n && i < 4; i++)
		CHECK_STR(names[i], back[i]);
	CHECK_OK(herd_hostlist_compress((const char *const *)names, n, &expr));
	CHECK_STR(expr, "gpu[01-03],login");
	herd_free(names);
	herd_free(expr);
	CHECK_ERR(herd_hostlist_expand("gpu[01-", &names, &n), HERD_EFORMAT, "column 8");
	CHECK(names == NULL && n == 0);
	CHECK_ERR(herd_hostlist_expand(NULL, &names, &n), HERD_EINVAL, "expr is NULL");
	CHECK_ERR(herd_hostlist_expand("a", NULL, &n), HERD_EINVAL, "names and n");
	CHECK_ERR(herd_hostlist_compress(back, 4, NULL), HERD_EINVAL, "expr is NULL");
	CHECK_ERR(herd_hostlist_compress(NULL, 1, &expr), HERD_EINVAL, "names is NULL");
}

int main(void)
{
	TEST_RUN(test_hostlist_expands_ranges_and_lists_keeping_zero_padding);
	TEST_RUN(test_hostlist_several_groups_vary_last_fastest);
	TEST_RUN(test_hostlist_comma_lists_mix_plain_and_bracketed_names);
	TEST_RUN(test_hostlist_empty_items_are_dropped_as_slurm_does);
	TEST_RUN(test_hostlist_errors_name_the_column);
	TEST_RUN(test_hostlist_refuses_huge_expansions_before_allocating);
	TEST_RUN(test_hostlist_compress_writes_slurm_form);
	TEST_RUN(test_hostlist_compress_then_expand_gives_the_names_back);
	TEST_RUN(test_hostlist_push_checks_names);
	TEST_RUN(test_hostlist_public_calls_expand_and_compress);
	return TEST_DONE();
}
