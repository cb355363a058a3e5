/*
 * The telemetry watch in a real two-node Slurm cluster on this machine
 * (tests/harness/slurm.sh): inside an allocation of both nodes, one srun
 * step runs `herd probe --watch --text` on each, srun labels their lines,
 * and the watch reads both streams back apart, each sample named by its
 * node as Slurm names it; free closes the step's stdin and every task's
 * herd ends by itself with exit status 0, its process gone.  The program
 * runs itself under salloc for that part.  Needs root, slurm-wlm and
 * munge; skipped without them.
 */
#include <sys/wait.h>
#include <unistd.h>

#include "watch_check.h"

static const char *dir;
static char self[4096];          /* this program */

static void test_watch_reads_each_task_of_one_srun_step(void)
{
	herd_telemetry_watch_opts o = HERD_TELEMETRY_WATCH_OPTS_INIT;
	const herd_telemetry_node_state want[] = { HERD_TELEMETRY_NODE_STREAMING,
						   HERD_TELEMETRY_NODE_STREAMING };
	static const char *const hosts[] = { "node1", "node2" };
	herd_telemetry_watch *w = NULL;
	herd_telemetry_node info;
	watch_seen seen;

	memset(&seen, 0, sizeof(seen));
	o.slurm = true;
	o.period_ms = 200;
	CHECK_OK(herd_telemetry_watch_start(&w, &o));
	if (w == NULL)
		return;
	CHECK_INT(herd_telemetry_watch_nodes(w), 2);
	if (!watch_until(w, &seen, want, 3, 60000)) {
		TEST_FAIL_("the nodes did not stream within 60 s");
		watch_print(w, &seen);
	}
	for (size_t i = 0; i < 2; i++) {
		CHECK_OK(herd_telemetry_watch_node(w, i, &info));
		CHECK_STR(info.host, hosts[i]);
		CHECK_INT(info.state, HERD_TELEMETRY_NODE_STREAMING);
		CHECK_INT(seen.first[i], 1);
	}
	CHECK_INT(seen.bad_order + seen.bad_host + seen.bad_node, 0);
	herd_telemetry_watch_free(w);
	watch_check_helpers_ended(dir, hosts, 2);
}

/* Starts the cluster and runs this program again inside an allocation. */
static void test_in_an_allocation_of_two_nodes(void)
{
	const char *src = getenv("HERD_SOURCE_DIR"), *herd = getenv("HERD_BIN");
	char *tmp = make_tmpdir(), *cmd = NULL, *text = NULL, *program;
	int rc;

	dir = tmp;
	if (src == NULL || herd == NULL) {
		rm_tree(tmp);
		TEST_SKIP("HERD_SOURCE_DIR and HERD_BIN name the sources and the herd program");
	}
	if (asprintf(&cmd, "bash '%s/tests/harness/slurm.sh' start '%s/slurm'", src, tmp) < 0)
		exit(1);
	rc = system(cmd);
	free(cmd);
	if (!WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
		rm_tree(tmp);
		if (WIFEXITED(rc) && WEXITSTATUS(rc) == 77)
			TEST_SKIP("no Slurm here (slurm-wlm, munge), or not root");
		TEST_FAIL_("the Slurm harness did not start (%d)", rc);
		return;
	}
	/* herd on the nodes: its pid and exit status by node (its stdin is
	 * the task's, through fd 3: an & alone would give it /dev/null). */
	if (asprintf(&text, "#!/bin/sh\n"
			    "exec 3<&0\n"
			    "'%s' \"$@\" <&3 3<&- &\n"
			    "echo $! >'%s'/pid.$SLURMD_NODENAME\n"
			    "wait $!\n"
			    "echo $? >'%s'/exit.$SLURMD_NODENAME\n", herd, tmp, tmp) < 0)
		exit(1);
	program = watch_script(tmp, "herd-node", text);
	free(text);
	if (asprintf(&text, "%s/slurm/slurm.conf", tmp) < 0)
		exit(1);
	setenv("SLURM_CONF", text, 1);
	free(text);
	setenv("HERD_PROGRAM", program, 1);
	setenv("WATCH_DIR", tmp, 1);
	unsetenv("SLURM_JOB_ID");
	unsetenv("SLURM_JOBID");
	unsetenv("SLURM_JOB_NODELIST");
	unsetenv("SLURM_NODELIST");
	if (asprintf(&cmd, "timeout 200 salloc -Q -N2 '%s' --in-allocation", self) < 0)
		exit(1);
	rc = system(cmd);
	free(cmd);
	CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
	if (asprintf(&cmd, "bash '%s/tests/harness/slurm.sh' stop '%s/slurm'", src, tmp) < 0)
		exit(1);
	if (system(cmd) != 0)
		TEST_FAIL_("the Slurm harness did not stop");
	free(cmd);
	free(program);
	rm_tree(tmp);
}

int main(int argc, char **argv)
{
	ssize_t n;

	if (argc == 2 && strcmp(argv[1], "--in-allocation") == 0) {
		dir = getenv("WATCH_DIR");
		TEST_RUN(test_watch_reads_each_task_of_one_srun_step);
		return TEST_DONE();
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0)
		return 1;
	self[n] = '\0';
	TEST_RUN(test_in_an_allocation_of_two_nodes);
	return TEST_DONE();
}
