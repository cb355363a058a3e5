/* The error model and the base helpers every module relies on. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "net.h"
#include "test.h"

static void test_status_names_and_descriptions_come_from_one_list(void)
{
	CHECK_STR(herd_status_name(HERD_OK), "HERD_OK");
	CHECK_STR(herd_status_name(HERD_ETIMEDOUT), "HERD_ETIMEDOUT");
	CHECK_STR(herd_status_describe(HERD_ETIMEDOUT), "deadline expired");
	CHECK_STR(herd_status_describe(HERD_EFORMAT), "malformed data");
	CHECK_STR(herd_status_name((herd_status)-999), "HERD_UNKNOWN");
	CHECK_STR(herd_status_describe((herd_status)-999), "unknown status");
	CHECK_INT(HERD_OK, 0);
}

static void test_version_matches_headers(void)
{
	CHECK_STR(herd_version(), HERD_VERSION_STRING);
	CHECK_INT(HERD_VERSION_NUMBER, HERD_VERSION_MAJOR * 10000 + HERD_VERSION_MINOR * 100 +
					       HERD_VERSION_PATCH);
}

static void *raise_in_thread(void *arg)
{
	(void)arg;
	herd__error(HERD_EPEER, "rank 3 on node7 died");
	return strcmp(herd_last_error(), "rank 3 on node7 died") == 0 ? (void *)1 : NULL;
}

static void test_last_error_is_per_thread(void)
{
	pthread_t t;
	void *ok = NULL;

	CHECK_INT(herd__error(HERD_EINVAL, "count %d is negative", -4), HERD_EINVAL);
	CHECK_STR(herd_last_error(), "count -4 is negative");
	CHECK_INT(pthread_create(&t, NULL, raise_in_thread, NULL), 0);
	CHECK_INT(pthread_join(t, &ok), 0);
	CHECK(ok != NULL);
	CHECK_STR(herd_last_error(), "count -4 is negative");
	herd_clear_error();
	CHECK_STR(herd_last_error(), "");
}

static void test_error_errno_and_wrap_compose_a_message(void)
{
	herd__error_errno(HERD_EIO, ENOENT, "cannot open %s", "/x");
	CHECK_STR(herd_last_error(), "cannot open /x: No such file or directory");
	CHECK_INT(herd__error_wrap(HERD_EIO, "loading %s: ", "inv.json"), HERD_EIO);
	CHECK_STR(herd_last_error(), "loading inv.json: cannot open /x: No such file or directory");
}

static void test_long_messages_are_truncated_not_overflowed(void)
{
	char big[4096];

	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	herd__error(HERD_EINVAL, "%s", big);
	CHECK(strlen(herd_last_error()) < sizeof(big));
	CHECK(strlen(herd_last_error()) > 512);
}

static void test_log_level_set_and_get(void)
{
	herd_log_set_level(HERD_LOG_DEBUG);
	CHECK_INT(herd_log_get_level(), HERD_LOG_DEBUG);
	herd_log_set_level((herd_log_level)42);
	CHECK_INT(herd_log_get_level(), HERD_LOG_DEBUG);
	herd_log_set_level(HERD_LOG_WARN);
	CHECK_INT(herd_log_get_level(), HERD_LOG_WARN);
}

static void test_strlcpy_truncates_and_terminates(void)
{
	char buf[4];

	herd__strlcpy(buf, "abcdef", sizeof(buf));
	CHECK_STR(buf, "abc");
	herd__strlcpy(buf, "", sizeof(buf));
	CHECK_STR(buf, "");
}

static void test_files_write_atomically_and_read_back_within_limits(void)
{
	char dir[] = "/tmp/herd-test-base-XXXXXX";
	char path[256], other[256];
	char *data = NULL;
	size_t len = 0;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/f.bin", dir);
	CHECK_OK(herd__write_file_atomic(path, "hello\0world", 11, 0600));
	{
		struct stat sb;

		/* Created with the mode asked for: owner-only. */
		CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0077) == 0);
	}
	CHECK_OK(herd__read_file(path, 11, &data, &len));
	CHECK_INT(len, 11);
	CHECK(data != NULL && memcmp(data, "hello\0world", 11) == 0 && data[11] == '\0');
	free(data);
	CHECK_ERR(herd__read_file(path, 10, &data, &len), HERD_EFORMAT, "larger than the limit");
	CHECK(data == NULL);
	snprintf(other, sizeof(other), "%s/missing", dir);
	CHECK_ERR(herd__read_file(other, 10, &data, &len), HERD_ENOTFOUND, other);
	CHECK_ERR(herd__read_file(dir, 10, &data, &len), HERD_EIO, "is a directory");
	/* A file of unknown size (procfs) is read to its end. */
	CHECK_OK(herd__read_file("/proc/self/status", 1 << 20, &data, &len));
	CHECK(len > 0 && strstr(data, "Pid:") != NULL);
	free(data);
	snprintf(other, sizeof(other), "%s/no/such/dir/f", dir);
	CHECK_ERR(herd__write_file_atomic(other, "x", 1, 0644), HERD_ENOTFOUND, "cannot create");
	unlink(path);
	rmdir(dir);
}

/* herd_file_write replaces a regular file by rename, and nothing else. */
static void test_file_write_replaces_only_a_regular_file(void)
{
	char dir[] = "/tmp/herd-test-file-XXXXXX";
	char path[256], other[256], *data = NULL;
	size_t len = 0;
	struct stat sb;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(other, sizeof(other), "%s/other", dir);
	CHECK_OK(herd_file_write(other, "keep", 4, 0600));
	/* A FIFO, a symbolic link, a directory: refused, named, left as they are. */
	snprintf(path, sizeof(path), "%s/fifo", dir);
	CHECK_INT(mkfifo(path, 0600), 0);
	CHECK_ERR(herd_file_check(path), HERD_EINVAL, "exists and is a FIFO");
	CHECK_ERR(herd_file_write(path, "x", 1, 0644), HERD_EINVAL, "exists and is a FIFO");
	CHECK(lstat(path, &sb) == 0 && S_ISFIFO(sb.st_mode));
	unlink(path);
	snprintf(path, sizeof(path), "%s/link", dir);
	CHECK_INT(symlink(other, path), 0);
	CHECK_ERR(herd_file_write(path, "x", 1, 0644), HERD_EINVAL, "is a symbolic link");
	CHECK(lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode));
	unlink(path);
	CHECK_ERR(herd_file_write(dir, "x", 1, 0644), HERD_EINVAL, "is a directory");
	/* A hard link: a new file takes the name, the other name keeps its bytes. */
	snprintf(path, sizeof(path), "%s/hard", dir);
	CHECK_INT(link(other, path), 0);
	CHECK_OK(herd_file_check(path));
	CHECK_OK(herd_file_write(path, "new", 3, 0644));
	CHECK_OK(herd__read_file(other, 16, &data, &len));
	CHECK(len == 4 && memcmp(data, "keep", 4) == 0);
	free(data);
	CHECK_OK(herd__read_file(path, 16, &data, &len));
	CHECK(len == 3 && memcmp(data, "new", 3) == 0);
	free(data);
	/* Nothing there yet is fine; no directory is HERD_ENOTFOUND; bad arguments. */
	snprintf(path, sizeof(path), "%s/none/f", dir);
	CHECK_OK(herd_file_check(path));
	CHECK_ERR(herd_file_write(path, "x", 1, 0644), HERD_ENOTFOUND, "none/f");
	CHECK_ERR(herd_file_write("", "x", 1, 0644), HERD_EINVAL, "empty path");
	CHECK_ERR(herd_file_write(other, "x", 1, 010644), HERD_EINVAL, "not a file mode");
	snprintf(path, sizeof(path), "%s/hard", dir);
	unlink(path);
	unlink(other);
	rmdir(dir);
}

/* Deadlines are on CLOCK_MONOTONIC; a condition variable waited on with
 * one must run on that clock too (on the wall clock, a deadline of "boot
 * time + 200 ms" is decades past and the wait would return at once; a
 * clock step would move it). */
static void test_timed_wait_runs_on_the_monotonic_clock(void)
{
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cv;
	int64_t t0 = herd__net_now_ms(), waited;
	int rc;

	herd__net_cond_init(&cv);
	pthread_mutex_lock(&mu);
	do
		rc = herd__net_cond_wait_until(&cv, &mu, t0 + 200);
	while (rc == 0 && herd__net_now_ms() < t0 + 200);
	pthread_mutex_unlock(&mu);
	waited = herd__net_now_ms() - t0;
	CHECK_INT(rc, ETIMEDOUT);
	CHECK(waited >= 200 && waited < 5000);
	pthread_cond_destroy(&cv);
}

static void test_size_parse_reads_units_and_refuses_the_rest(void)
{
	static const struct {
		const char *text;
		uint64_t bytes;
	} good[] = { { "0", 0 },
		     { "8", 8 },
		     { "8B", 8 },
		     { "16k", 16384 },
		     { "16KiB", 16384 },
		     { "16kb", 16384 },
		     { "64M", 64u << 20 },
		     { "1.5G", 1610612736 },
		     { "1.5gib", 1610612736 },
		     { "2T", 2ull << 40 },
		     { "1.5", 1 },
		     { "18446744073709551615", UINT64_MAX },
		     { "16777215T", 16777215ull << 40 } };
	static const char *const bad[] = { "", "-1", "+1", "K", ".5K", "1.K", "1 K", "1KK", "1Q",
					   "0x10", "inf", "nan", "1e3", "18446744073709551616",
					   "16777216T", "1,5G" };
	uint64_t v;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		v = 7;
		CHECK_OK(herd_size_parse(good[i].text, &v));
		CHECK_INT(v, good[i].bytes);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[64];

		snprintf(want, sizeof(want), "\"%s\" is not a size", bad[i]);
		CHECK_ERR(herd_size_parse(bad[i], &v), HERD_EINVAL, want);
	}
	CHECK_ERR(herd_size_parse(NULL, &v), HERD_EINVAL, "text is NULL");
	CHECK_ERR(herd_size_parse("1", NULL), HERD_EINVAL, "bytes is NULL");
}

static void test_opts_version_check_names_the_struct_and_its_init(void)
{
	struct {
		unsigned int version;
	} o = { 0 };

#define HERD_TEST_OPTS_VERSION 2
	for (unsigned int v = 0; v < 4; v++) {
		o.version = v;
		if (v >= 1 && v <= 2)
			CHECK_OK(herd__check_version("herd_test", "herd_test_opts", o.version,
						     HERD_TEST_OPTS_VERSION, "HERD_TEST_OPTS_INIT"));
		else
			CHECK_ERR(herd__check_version("herd_test", "herd_test_opts", o.version,
						      HERD_TEST_OPTS_VERSION, "HERD_TEST_OPTS_INIT"),
				  HERD_EINVAL, "herd_test: herd_test_opts.version is");
	}
	o.version = 3;
	CHECK_ERR(herd__check_version("herd_test", "herd_test_opts", o.version, 2,
				      "HERD_TEST_OPTS_INIT"), HERD_EINVAL,
		  "version is 3; this library knows 1..2 (initialize it with HERD_TEST_OPTS_INIT)");
#undef HERD_TEST_OPTS_VERSION
}

int main(void)
{
	TEST_RUN(test_status_names_and_descriptions_come_from_one_list);
	TEST_RUN(test_size_parse_reads_units_and_refuses_the_rest);
	TEST_RUN(test_opts_version_check_names_the_struct_and_its_init);
	TEST_RUN(test_version_matches_headers);
	TEST_RUN(test_last_error_is_per_thread);
	TEST_RUN(test_error_errno_and_wrap_compose_a_message);
	TEST_RUN(test_long_messages_are_truncated_not_overflowed);
	TEST_RUN(test_log_level_set_and_get);
	TEST_RUN(test_strlcpy_truncates_and_terminates);
	TEST_RUN(test_files_write_atomically_and_read_back_within_limits);
	TEST_RUN(test_file_write_replaces_only_a_regular_file);
	TEST_RUN(test_timed_wait_runs_on_the_monotonic_clock);
	return TEST_DONE();
}
