/*
 * The derived store of ranks that an engine started without naming one
 * (sdk/comm/bootstrap.c): the same ports and secret on every rank, the
 * user's secret file and its permissions, ports held by another program
 * or by another job's store passed over, and a deadline when rank 0
 * never comes.  Real sockets on 127.0.0.1, a real store server, files in
 * a scratch HOME.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "comm/bootstrap.h"
#include "net.h"
#include "test.h"

static char home[] = "/tmp/herd-boot-XXXXXX";

static void boot_for(herd__boot *b, const char *tag)
{
	memset(b, 0, sizeof(*b));
	herd__strlcpy(b->host, "127.0.0.1", sizeof(b->host));
	herd__strlcpy(b->tag, tag, sizeof(b->tag));
	CHECK_OK(herd__boot_secret(NULL, tag, b->secret, sizeof(b->secret)));
}

static void test_secret_file_is_created_private_and_reused(void)
{
	char a[65], b[65], c[65], path[512];
	struct stat sb;

	CHECK_OK(herd__boot_secret(NULL, "slurm:7.0", a, sizeof(a)));
	snprintf(path, sizeof(path), "%s/.herd/secret", home);
	CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600);
	snprintf(path, sizeof(path), "%s/.herd", home);
	CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0700);
	CHECK_OK(herd__boot_secret(NULL, "slurm:7.0", b, sizeof(b)));
	CHECK_STR(a, b);
	CHECK_INT((int)strlen(a), 64);
	/* Another job, another secret; an engine's key wins over the file. */
	CHECK_OK(herd__boot_secret(NULL, "slurm:7.1", c, sizeof(c)));
	CHECK(strcmp(a, c) != 0);
	CHECK_OK(herd__boot_secret("4bde098f8f08b4c6-c32d70906a00f496", "slurm:7.0", c, sizeof(c)));
	CHECK(strcmp(a, c) != 0);
}

static void test_secret_file_readable_by_others_is_refused(void)
{
	char out[65], path[512];

	snprintf(path, sizeof(path), "%s/.herd/secret", home);
	CHECK_OK(herd__boot_secret(NULL, "x", out, sizeof(out)));
	CHECK(chmod(path, 0644) == 0);
	CHECK_ERR(herd__boot_secret(NULL, "x", out, sizeof(out)), HERD_EINVAL, "chmod 600");
	CHECK(chmod(path, 0600) == 0);
}

static void test_ports_are_the_same_for_a_tag_and_in_range(void)
{
	for (int k = 0; k < HERD__BOOT_PORTS; k++) {
		int p = herd__boot_port("ompi:2004353025", k);

		CHECK(p >= 20000 && p < 60000);
		CHECK_INT(p, herd__boot_port("ompi:2004353025", k));
	}
	CHECK(herd__boot_port("ompi:2004353025", 0) != herd__boot_port("ompi:2004353026", 0));
}

/*
 * Port 0 held by a plain listener, port 1 by another job's store: rank 0
 * serves on a later port and a rank finds it there.  The ports of a tag
 * are fixed, and other tests running beside this one (servers on
 * ephemeral or random ports) may hold one: the tag is this process's own,
 * and another is tried while port 0 or 1 cannot be taken here.
 */
static void test_held_ports_are_passed_over(void)
{
	herd_store_server_opts other = HERD_STORE_SERVER_OPTS_INIT;
	herd_store_server *theirs = NULL, *ours = NULL;
	herd_store *s = NULL;
	char addr[300], want[64], tag[64];
	void *val = NULL;
	size_t len = 0;
	herd__boot b;
	int fd = -1;

	for (int i = 0; i < 20 && theirs == NULL; i++) {
		snprintf(tag, sizeof(tag), "test:held-ports:%ld:%d", (long)getpid(), i);
		boot_for(&b, tag);
		if (herd__net_listen(&fd, "127.0.0.1", herd__boot_port(b.tag, 0)) != HERD_OK)
			continue;
		other.host = "127.0.0.1";
		other.port = herd__boot_port(b.tag, 1);
		other.secret = "another job's secret";
		if (herd_store_server_start(&theirs, &other) != HERD_OK) {
			close(fd);
			fd = -1;
		}
	}
	CHECK(theirs != NULL);
	if (theirs == NULL)
		return;
	CHECK_OK(herd__boot_serve(&ours, &b));
	/* One of the tag's ports after the two held: port 2, unless something
	 * beside this test holds that one too. */
	{
		int port = ours != NULL ? herd_store_server_port(ours) : -1, k = 2;

		while (k < HERD__BOOT_PORTS && herd__boot_port(b.tag, k) != port)
			k++;
		CHECK(k < HERD__BOOT_PORTS);
	}
	CHECK_OK(herd__boot_connect(&s, &b, 10000, addr, sizeof(addr)));
	snprintf(want, sizeof(want), "127.0.0.1:%d", herd_store_server_port(ours));
	CHECK_STR(addr, want);
	if (s != NULL) {
		CHECK_OK(herd_store_set(s, "k", "v", 1));
		CHECK_OK(herd_store_get(s, "k", 1000, &val, &len));
		CHECK_INT((int)len, 1);
		free(val);
	}
	herd_store_free(s);
	herd_store_server_free(ours);
	herd_store_server_free(theirs);
	close(fd);
}

/* No rank 0: the connect gives up at its deadline and says where it looked. */
static void test_connect_without_rank_0_times_out_naming_the_ports(void)
{
	herd_store *s = NULL;
	char addr[300], ports[64];
	herd__boot b;
	int64_t t0;

	boot_for(&b, "test:no-rank-0");
	snprintf(ports, sizeof(ports), "ports %d to %d", herd__boot_port(b.tag, 0),
		 herd__boot_port(b.tag, HERD__BOOT_PORTS - 1));
	t0 = herd__net_now_ms();
	CHECK_ERR(herd__boot_connect(&s, &b, 1500, addr, sizeof(addr)), HERD_ETIMEDOUT, ports);
	CHECK(herd__net_now_ms() - t0 >= 1500 && herd__net_now_ms() - t0 < 4000);
	CHECK(s == NULL);
}

int main(void)
{
	char cmd[600];
	int rc;

	if (mkdtemp(home) == NULL)
		return 1;
	setenv("HOME", home, 1);
	TEST_RUN(test_secret_file_is_created_private_and_reused);
	TEST_RUN(test_secret_file_readable_by_others_is_refused);
	TEST_RUN(test_ports_are_the_same_for_a_tag_and_in_range);
	TEST_RUN(test_held_ports_are_passed_over);
	TEST_RUN(test_connect_without_rank_0_times_out_naming_the_ports);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", home);
	rc = system(cmd);
	(void)rc;
	return TEST_DONE();
}
