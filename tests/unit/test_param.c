/* The table of HERD_* variables (sdk/base/param.h) and its readers: the
 * defaults, the bounds, malformed values and what their errors say. */
#include <limits.h>
#include <stdlib.h>

#include "base.h"
#include "comm/core.h"
#include "test.h"

/* p read by the reader of its type, as a number (a choice: its index).
 * *x is the caller's value for a default worked out at run time. */
static herd_status read_number(herd__param p, long long *x)
{
	long l = (long)*x;
	uint64_t u = (uint64_t)*x;
	int i = (int)*x;
	bool b = *x != 0;
	herd_status st;

	switch (herd__param_get(p)->type) {
	case HERD__PT_INT:
		st = herd__param_int(p, &l);
		*x = l;
		return st;
	case HERD__PT_SIZE:
		st = herd__param_size(p, &u);
		*x = (long long)u;
		return st;
	case HERD__PT_SECONDS:
		st = herd__param_ms(p, &i);
		*x = i;
		return st;
	case HERD__PT_BOOL:
		st = herd__param_bool(p, &b);
		*x = b;
		return st;
	case HERD__PT_CHOICE:
		st = herd__param_choice(p, &i);
		*x = i;
		return st;
	default:
		return herd__error(HERD_EINVAL, "%s is not a number", herd__param_get(p)->name);
	}
}

/* p set to value (NULL: unset) reads as want. */
static void check_reads(herd__param p, const char *value, long long want)
{
	const char *name = herd__param_get(p)->name;
	long long x = -7;

	if (value != NULL)
		setenv(name, value, 1);
	else
		unsetenv(name);
	CHECK_OK(read_number(p, &x));
	if (x != want)
		fprintf(stderr, "%s=%s\n", name, value != NULL ? value : "(unset)");
	CHECK_INT(x, want);
	unsetenv(name);
}

static void test_every_row_is_named_documented_and_its_default_reads(void)
{
	for (int i = 0; i < HERD__P_COUNT; i++) {
		const herd__param_info *in = herd__param_get((herd__param)i);
		long long x = 0;

		CHECK(strncmp(in->name, "HERD_", 5) == 0);
		CHECK(in->doc[0] != '\0' && strlen(in->doc) <= 47);
		for (int j = 0; j < i; j++)
			CHECK(strcmp(herd__param_get((herd__param)j)->name, in->name) != 0);
		/* A literal default of a typed row is a value of its type and bounds. */
		if (in->type == HERD__PT_STRING || in->type == HERD__PT_WORDS ||
		    in->dflt[0] == '\0' || in->dflt[0] == '(')
			continue;
		setenv(in->name, in->dflt, 1);
		CHECK_OK(read_number((herd__param)i, &x));
		unsetenv(in->name);
	}
	CHECK(herd__param_get(HERD__P_COUNT) == NULL);
	CHECK(herd__param_get((herd__param)-1) == NULL);
	/* The table's bound is the communicator's array size. */
	CHECK_INT(herd__param_get(HERD__P_SOCKET_STREAMS)->max, HERD__STREAMS_MAX);
	/* The log levels are the words of HERD_LOG, in order. */
	CHECK_INT(herd__param_choice_of(HERD__P_LOG, "error"), HERD_LOG_ERROR);
	CHECK_INT(herd__param_choice_of(HERD__P_LOG, "debug"), HERD_LOG_DEBUG);
}

static void test_unset_and_empty_read_as_the_default(void)
{
	static const struct {
		herd__param p;
		long long want;
	} cases[] = {
		{ HERD__P_SSH_TREE_MIN, 32 },
		{ HERD__P_CKPT_STAGING_BYTES, 256 << 20 },
		{ HERD__P_TIMEOUT, 300000 },
		{ HERD__P_DEVICE_CHECK, 1 },
		{ HERD__P_ALGO, 0 },
		{ HERD__P_LOG, HERD_LOG_WARN },
	};
	long n = 7;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		check_reads(cases[i].p, NULL, cases[i].want);
		check_reads(cases[i].p, "", cases[i].want);
	}
	/* A default worked out at run time is the caller's. */
	unsetenv("HERD_SSH_TREE_WIDTH");
	CHECK_OK(herd__param_int(HERD__P_SSH_TREE_WIDTH, &n));
	CHECK_INT(n, 7);
	/* Strings: NULL for unset or empty; raw tells empty apart. */
	setenv("HERD_HISTORY", "", 1);
	CHECK(herd__param_str(HERD__P_HISTORY) == NULL);
	CHECK_STR(herd__param_raw(HERD__P_HISTORY), "");
	unsetenv("HERD_HISTORY");
	CHECK(herd__param_raw(HERD__P_HISTORY) == NULL);
	setenv("HERD_PROGRAM", "/opt/herd/bin/herd", 1);
	CHECK_STR(herd__param_str(HERD__P_PROGRAM), "/opt/herd/bin/herd");
	unsetenv("HERD_PROGRAM");
}

static void test_values_read_within_their_bounds(void)
{
	static const struct {
		herd__param p;
		const char *value;
		long long want;
	} cases[] = {
		{ HERD__P_SOCKET_STREAMS, "1", 1 },
		{ HERD__P_SOCKET_STREAMS, "8", 8 },
		{ HERD__P_SSH_TREE_WIDTH, "1000000", 1000000 },
		{ HERD__P_CKPT_STAGING_BYTES, "1.5MiB", 1572864 },
		{ HERD__P_CKPT_STAGING_BYTES, "1", 1 },
		/* seconds become milliseconds, rounded up */
		{ HERD__P_TIMEOUT, "0.0001", 1 },
		{ HERD__P_TIMEOUT, "2000000", 2000000000 },
		{ HERD__P_DEVICE_CHECK, "0", 0 },
		{ HERD__P_ALGO, "hier", 3 },
		{ HERD__P_LOG, "debug", HERD_LOG_DEBUG },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_reads(cases[i].p, cases[i].value, cases[i].want);
	CHECK_INT(herd__param_choice_of(HERD__P_ALGO, "rd"), 2);
	CHECK_INT(herd__param_choice_of(HERD__P_ALGO, "r"), -1);
	CHECK_INT(herd__param_choice_of(HERD__P_ALGO, "ringx"), -1);
	CHECK_INT(herd__param_choice_of(HERD__P_ALGO, ""), -1);
	CHECK_INT(herd__param_choice_of(HERD__P_SSH, "ssh"), -1);
}

static void test_malformed_values_name_variable_value_and_bounds(void)
{
	static const struct {
		herd__param p;
		const char *value, *message;
	} cases[] = {
		{ HERD__P_SOCKET_STREAMS, "0", "HERD_SOCKET_STREAMS=0: expected a whole number "
		  "from 1 to 8" },
		{ HERD__P_SOCKET_STREAMS, "9", "from 1 to 8" },
		{ HERD__P_SOCKET_STREAMS, "-1", "from 1 to 8" },
		{ HERD__P_SOCKET_STREAMS, "two", "HERD_SOCKET_STREAMS=two: expected" },
		{ HERD__P_SOCKET_STREAMS, "4x", "from 1 to 8" },
		{ HERD__P_SOCKET_STREAMS, "1e1", "from 1 to 8" },
		{ HERD__P_SOCKET_STREAMS, "99999999999999999999", "from 1 to 8" },
		{ HERD__P_DISCOVER_FANOUT, "1000001", "HERD_DISCOVER_FANOUT=1000001: expected a "
		  "whole number from 1 to 1000000" },
		{ HERD__P_CKPT_STAGING_BYTES, "0", "HERD_CKPT_STAGING_BYTES=\"0\" is not a "
		  "positive size in bytes (as 268435456, 256M or 1.5GiB)" },
		{ HERD__P_CKPT_STAGING_BYTES, "-1", "=\"-1\" is not a positive size" },
		{ HERD__P_CKPT_STAGING_BYTES, "abc", "=\"abc\" is not a positive size" },
		{ HERD__P_CKPT_STAGING_BYTES, "1e23", "=\"1e23\" is not a positive size" },
		{ HERD__P_CKPT_STAGING_BYTES, "8X", "=\"8X\" is not a positive size" },
		{ HERD__P_TIMEOUT, "soon", "HERD_TIMEOUT=soon: expected a number of seconds "
		  "greater than 0 and at most 2000000" },
		{ HERD__P_TIMEOUT, "0", "greater than 0 and at most 2000000" },
		{ HERD__P_TIMEOUT, "-3", "greater than 0 and at most 2000000" },
		{ HERD__P_TIMEOUT, "1e99", "greater than 0 and at most 2000000" },
		{ HERD__P_TIMEOUT, "nan", "greater than 0 and at most 2000000" },
		{ HERD__P_TIMEOUT, "inf", "greater than 0 and at most 2000000" },
		{ HERD__P_TIMEOUT, "2000000.5", "greater than 0 and at most 2000000" },
		{ HERD__P_TIMEOUT, "5s", "greater than 0 and at most 2000000" },
		{ HERD__P_DEVICE_CHECK, "yes", "HERD_DEVICE_CHECK=yes: expected 1 or 0" },
		{ HERD__P_TRANSPORT, "carrier-pigeon", "HERD_TRANSPORT=carrier-pigeon: expected "
		  "auto|tcp" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const herd__param_info *in = herd__param_get(cases[i].p);
		long long x = 0, dflt = 0;

		unsetenv(in->name);
		CHECK_OK(read_number(cases[i].p, &dflt));
		setenv(in->name, cases[i].value, 1);
		CHECK_ERR(read_number(cases[i].p, &x), HERD_EINVAL, cases[i].message);
		/* ...and the default stands. */
		CHECK_INT(x, dflt);
		unsetenv(in->name);
	}
}

static void test_a_reader_of_another_type_is_refused(void)
{
	long n;
	bool b;

	CHECK_ERR(herd__param_int(HERD__P_TIMEOUT, &n), HERD_EINVAL, "HERD_TIMEOUT is not read by");
	CHECK_ERR(herd__param_bool(HERD__P_SSH, &b), HERD_EINVAL, "HERD_SSH is not read by");
}

static void test_words_split_like_a_shell_without_expansions(void)
{
	const char *w[8];
	char buf[256];
	size_t n = 9;

	unsetenv("HERD_SSH_ARGS");
	CHECK_OK(herd__param_words(HERD__P_SSH_ARGS, buf, sizeof(buf), w, 8, &n));
	CHECK_INT(n, 0);
	setenv("HERD_SSH_ARGS", "  -F '/tmp/my dir/cfg'  -o \"ProxyJump=gw\" -l$USER ", 1);
	CHECK_OK(herd__param_words(HERD__P_SSH_ARGS, buf, sizeof(buf), w, 8, &n));
	CHECK_INT(n, 5);
	CHECK_STR(w[0], "-F");
	CHECK_STR(w[1], "/tmp/my dir/cfg");
	CHECK_STR(w[3], "ProxyJump=gw");
	CHECK_STR(w[4], "-l$USER");
	setenv("HERD_SSH_ARGS", "-o 'oops", 1);
	CHECK_ERR(herd__param_words(HERD__P_SSH_ARGS, buf, sizeof(buf), w, 8, &n),
		  HERD_EINVAL, "HERD_SSH_ARGS=-o 'oops: unclosed ' quote");
	setenv("HERD_SSH_ARGS", "a b c", 1);
	CHECK_ERR(herd__param_words(HERD__P_SSH_ARGS, buf, sizeof(buf), w, 2, &n),
		  HERD_EINVAL, "HERD_SSH_ARGS has more than 2 words");
	CHECK_ERR(herd__param_words(HERD__P_SSH_ARGS, buf, 4, w, 8, &n),
		  HERD_EINVAL, "HERD_SSH_ARGS is longer than 3 bytes");
	unsetenv("HERD_SSH_ARGS");
	CHECK_ERR(herd__param_words(HERD__P_SSH, buf, sizeof(buf), w, 8, &n), HERD_EINVAL,
		  "HERD_SSH is not read by");
}

static void test_the_printed_table_has_every_variable_once(void)
{
	char *text = herd__param_table_text();

	CHECK(text != NULL);
	if (text == NULL)
		return;
	for (int i = 0; i < HERD__P_COUNT; i++) {
		const herd__param_info *in = herd__param_get((herd__param)i);
		char line[64];
		const char *at;

		snprintf(line, sizeof(line), "\n%s ", in->name);
		at = strstr(text, line);
		CHECK(at != NULL);
		if (at != NULL)
			CHECK(strstr(at + 1, line) == NULL);
	}
	CHECK(strstr(text, "integer 1..8") != NULL);
	CHECK(strstr(text, "error|warn|info|debug") != NULL);
	/* Settings first, then what herd sets. */
	CHECK(strstr(text, "\nHERD_LOG ") < strstr(text, "\nHERD_RANK "));
	for (const char *l = text; *l != '\0';) {
		size_t len = strcspn(l, "\n");

		CHECK(len <= 110);
		l += len + (l[len] != '\0');
	}
	free(text);
}

int main(void)
{
	TEST_RUN(test_every_row_is_named_documented_and_its_default_reads);
	TEST_RUN(test_unset_and_empty_read_as_the_default);
	TEST_RUN(test_values_read_within_their_bounds);
	TEST_RUN(test_malformed_values_name_variable_value_and_bounds);
	TEST_RUN(test_a_reader_of_another_type_is_refused);
	TEST_RUN(test_words_split_like_a_shell_without_expansions);
	TEST_RUN(test_the_printed_table_has_every_variable_once);
	return TEST_DONE();
}
