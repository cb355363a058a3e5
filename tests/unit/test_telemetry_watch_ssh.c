/*
 * The telemetry watch across a real OpenSSH server on loopback
 * (tests/harness/sshd.sh: 127.0.0.1 to 127.0.0.8 as hosts, 127.0.0.9
 * refused): two "nodes" stream their samples, each named by the address
 * it was reached at, while the third is reported unreachable with ssh's
 * words; free closes every ssh's stdin, and each remote `herd probe
 * --watch` ends by itself with exit status 0, its process gone.  Needs
 * root and openssh-server; skipped without them.
 */
#include <sys/wait.h>
#include <unistd.h>

#include "watch_check.h"

static void test_watch_streams_two_nodes_over_ssh_and_names_the_third_unreachable(void)
{
	herd_telemetry_watch_opts o = HERD_TELEMETRY_WATCH_OPTS_INIT;
	const herd_telemetry_node_state want[] = { HERD_TELEMETRY_NODE_STREAMING,
						   HERD_TELEMETRY_NODE_STREAMING,
						   HERD_TELEMETRY_NODE_UNREACHABLE };
	static const char *const hosts[] = { "127.0.0.2", "127.0.0.3", "127.0.0.9" };
	const char *src = getenv("HERD_SOURCE_DIR"), *herd = getenv("HERD_BIN");
	char *dir = make_tmpdir(), *cmd = NULL, *text = NULL, *program;
	herd_telemetry_watch *w = NULL;
	herd_telemetry_node info;
	watch_seen seen;
	int64_t t0;
	int rc;

	memset(&seen, 0, sizeof(seen));
	if (src == NULL || herd == NULL) {
		rm_tree(dir);
		TEST_SKIP("HERD_SOURCE_DIR and HERD_BIN name the sources and the herd program");
	}
	if (asprintf(&cmd, "bash '%s/tests/harness/sshd.sh' start '%s/sshd'", src, dir) < 0)
		exit(1);
	rc = system(cmd);
	free(cmd);
	if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
		rm_tree(dir);
		if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77)
			TEST_SKIP("no OpenSSH server here, or not root");
		TEST_FAIL_("the sshd harness did not start (%d)", rc);
		return;
	}
	/* herd on the "nodes": its pid and, once it has ended, its exit
	 * status, by the address the session came in on (its stdin is the
	 * session's, through fd 3: an & alone would give it /dev/null). */
	if (asprintf(&text, "#!/bin/sh\n"
			    "server=$(echo \"$SSH_CONNECTION\" | cut -d' ' -f3)\n"
			    "exec 3<&0\n"
			    "'%s' \"$@\" <&3 3<&- &\n"
			    "echo $! >'%s'/pid.$server\n"
			    "wait $!\n"
			    "echo $? >'%s'/exit.$server\n", herd, dir, dir) < 0)
		exit(1);
	program = watch_script(dir, "herd-node", text);
	free(text);
	if (asprintf(&text, "-F %s/sshd/ssh_config", dir) < 0)
		exit(1);
	setenv("HERD_SSH_ARGS", text, 1);
	free(text);
	unsetenv("HERD_SSH");
	o.hosts = "127.0.0.[2-3,9]";
	o.period_ms = 200;
	o.herd_program = program;
	CHECK_OK(herd_telemetry_watch_start(&w, &o));
	if (w != NULL) {
		if (!watch_until(w, &seen, want, 3, 60000)) {
			TEST_FAIL_("the nodes did not reach their states within 60 s");
			watch_print(w, &seen);
		}
		for (size_t i = 0; i < 3; i++) {
			CHECK_OK(herd_telemetry_watch_node(w, i, &info));
			CHECK_STR(info.host, hosts[i]);
			CHECK_INT(info.state, want[i]);
		}
		CHECK(strncmp(info.why, "ssh: connect to host 127.0.0.9 port ", 36) == 0 &&
		      strstr(info.why, ": Connection refused") != NULL);
		CHECK(seen.count[0] >= 3 && seen.count[1] >= 3);
		CHECK_INT(seen.first[0], 1);
		CHECK_INT(seen.first[1], 1);
		CHECK_INT(seen.count[2], 0);
		CHECK_INT(seen.bad_order + seen.bad_host + seen.bad_node, 0);
		CHECK_INT(herd_telemetry_watch_live(w), 2);
		t0 = watch_now_ms();
		herd_telemetry_watch_free(w);
		printf("     free took %lld ms\n", (long long)(watch_now_ms() - t0));
		/* Each remote herd ended by itself (exit 0) and is gone. */
		watch_check_helpers_ended(dir, hosts, 2);
	}
	if (asprintf(&cmd, "bash '%s/tests/harness/sshd.sh' stop '%s/sshd'", src, dir) < 0)
		exit(1);
	if (system(cmd) != 0)
		TEST_FAIL_("the sshd harness did not stop");
	free(cmd);
	free(program);
	rm_tree(dir);
}

int main(void)
{
	TEST_RUN(test_watch_streams_two_nodes_over_ssh_and_names_the_third_unreachable);
	return TEST_DONE();
}
