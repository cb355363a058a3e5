/*
 * Hostfiles: the Open MPI / DeepSpeed "host slots=N" form with comments and
 * blank lines, duplicates merged, and malformed lines refused at
 * FILE:LINE:COLUMN.  One test reads a real file from a temporary directory.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "launch/hostfile.h"
#include "test.h"

static herd_status parse(herd__hostfile *hf, const char *text)
{
	return herd__hostfile_parse(hf, text, strlen(text), "hosts.txt");
}

static void test_hostfile_reads_hosts_slots_comments_and_blank_lines(void)
{
	herd__hostfile hf;

	CHECK_OK(parse(&hf, "# the workers\n"
			    "\n"
			    "worker-1 slots=4\n"
			    "  worker-2\tslots=8 max_slots=16   # the big one\r\n"
			    "worker-3\n"
			    "10.0.0.7 max-slots=2 slots=2"));
	CHECK_INT(hf.n, 4);
	CHECK_STR(hf.hosts[0].name, "worker-1");
	CHECK_INT(hf.hosts[0].slots, 4);
	CHECK_INT(hf.hosts[0].max_slots, 0);
	CHECK_INT(hf.hosts[0].line, 3);
	CHECK_STR(hf.hosts[1].name, "worker-2");
	CHECK_INT(hf.hosts[1].slots, 8);
	CHECK_INT(hf.hosts[1].max_slots, 16);
	CHECK_STR(hf.hosts[2].name, "worker-3");
	CHECK_INT(hf.hosts[2].slots, 1);
	CHECK_STR(hf.hosts[3].name, "10.0.0.7");
	CHECK_INT(hf.hosts[3].slots, 2);
	CHECK_INT(hf.hosts[3].max_slots, 2);
	CHECK_INT(herd__hostfile_slots(&hf), 15);
	herd__hostfile_free(&hf);
	CHECK_INT(hf.n, 0);
}

static void test_hostfile_duplicates_merge_their_slots_in_first_place(void)
{
	herd__hostfile hf;

	CHECK_OK(parse(&hf, "a slots=2\nb slots=1\na slots=3\nc\nb\n"));
	CHECK_INT(hf.n, 3);
	CHECK_STR(hf.hosts[0].name, "a");
	CHECK_INT(hf.hosts[0].slots, 5);
	CHECK_INT(hf.hosts[0].line, 1);
	CHECK_STR(hf.hosts[1].name, "b");
	CHECK_INT(hf.hosts[1].slots, 2);
	CHECK_STR(hf.hosts[2].name, "c");
	herd__hostfile_free(&hf);
}

static void test_hostfile_many_hosts_stay_in_order(void)
{
	size_t cap = 3000 * 24, len = 0;
	char *text = malloc(cap);
	herd__hostfile hf;

	for (int i = 0; i < 3000; i++)
		len += (size_t)snprintf(text + len, cap - len, "node%04d slots=%d\n", i, 1 + i % 8);
	/* Every host again, one slot more each. */
	for (int i = 0; i < 100; i++)
		len += (size_t)snprintf(text + len, cap - len, "node%04d\n", i * 7);
	CHECK_OK(herd__hostfile_parse(&hf, text, len, "big"));
	CHECK_INT(hf.n, 3000);
	CHECK_STR(hf.hosts[2999].name, "node2999");
	CHECK_INT(hf.hosts[7].slots, 8 + 1);
	CHECK_INT(hf.hosts[8].slots, 1);
	herd__hostfile_free(&hf);
	free(text);
}

static void test_hostfile_errors_name_file_line_and_column(void)
{
	herd__hostfile hf;

	CHECK_ERR(parse(&hf, "a slots=2\nb slots=x\n"), HERD_EFORMAT,
		  "hosts.txt:2:9: slots: expected a whole number from 1 to 65536, got 'x'");
	CHECK_INT(hf.n, 0);
	CHECK_ERR(parse(&hf, "a slots=0"), HERD_EFORMAT, "hosts.txt:1:9: slots: expected");
	CHECK_ERR(parse(&hf, "a slots=99999999999999999999"), HERD_EFORMAT,
		  "hosts.txt:1:9: slots: expected a whole number");
	CHECK_ERR(parse(&hf, "a slots="), HERD_EFORMAT, "got ''");
	CHECK_ERR(parse(&hf, "\n\n  a cpus=3"), HERD_EFORMAT,
		  "hosts.txt:3:5: unknown field 'cpus' (known: slots, max_slots)");
	CHECK_ERR(parse(&hf, "a 4"), HERD_EFORMAT,
		  "hosts.txt:1:3: expected slots=N or max_slots=N, got '4'");
	CHECK_ERR(parse(&hf, "ok\nno$de slots=1"), HERD_EFORMAT,
		  "hosts.txt:2:3: host name 'no$de': holds a character other than");
	CHECK_ERR(parse(&hf, "  -oProxyCommand=x"), HERD_EFORMAT,
		  "hosts.txt:1:3: host name '-oProxyCommand=x': starts with '-'");
	CHECK_ERR(parse(&hf, "a slots=4 max_slots=2"), HERD_EFORMAT,
		  "hosts.txt:1:1: host a: max_slots=2 is less than slots=4");
	CHECK_ERR(parse(&hf, "a slots=40000\na slots=40000"), HERD_EFORMAT,
		  "hosts.txt:2:1: host a: more than 65536 slots in all");
	CHECK_ERR(parse(&hf, "# nothing\n\n"), HERD_EFORMAT,
		  "hosts.txt: no hosts (expected lines of \"host slots=N\")");
	CHECK_ERR(herd__hostfile_parse(&hf, "ab\0c", 4, "nul"), HERD_EFORMAT,
		  "nul:1:3: host name 'ab\\x00c': holds a NUL byte");
	{
		/* A long name of unprintable bytes is quoted cut short. */
		char line[80];

		memset(line, 0x9b, 70);
		strcpy(line + 70, "de");
		CHECK_ERR(parse(&hf, line), HERD_EFORMAT,
			  "hosts.txt:1:1: host name '\\x9b\\x9b");
		CHECK(strstr(herd_last_error(), "...': holds a character") != NULL);
	}
}

static void test_hostfile_load_reads_a_file_and_names_missing_ones(void)
{
	char dir[] = "/tmp/herd-hostfile-XXXXXX", path[256];
	herd__hostfile hf;
	static const char text[] = "n1 slots=2\nn2 slots=2\n";

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/hosts", dir);
	CHECK_OK(herd__write_file_atomic(path, text, sizeof(text) - 1, 0644));
	CHECK_OK(herd__hostfile_load(&hf, path));
	CHECK_INT(hf.n, 2);
	CHECK_INT(herd__hostfile_slots(&hf), 4);
	herd__hostfile_free(&hf);
	CHECK_OK(herd__write_file_atomic(path, "n1 slots=2\nn2 slots=two\n", 24, 0644));
	CHECK_ERR(herd__hostfile_load(&hf, path), HERD_EFORMAT, "/hosts:2:10: slots: expected");
	unlink(path);
	CHECK_ERR(herd__hostfile_load(&hf, path), HERD_ENOTFOUND, path);
	rmdir(dir);
}

int main(void)
{
	TEST_RUN(test_hostfile_reads_hosts_slots_comments_and_blank_lines);
	TEST_RUN(test_hostfile_duplicates_merge_their_slots_in_first_place);
	TEST_RUN(test_hostfile_many_hosts_stay_in_order);
	TEST_RUN(test_hostfile_errors_name_file_line_and_column);
	TEST_RUN(test_hostfile_load_reads_a_file_and_names_missing_ones);
	return TEST_DONE();
}
