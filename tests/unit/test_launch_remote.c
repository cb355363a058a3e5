/*
 * The remote backends' node lists and command lines: Slurm's nodes and
 * slots from the allocation's variables ("2(x3),1"), a hostlist with a
 * host twice, a hostfile through the ssh backend, HERD_SSH_ARGS-style
 * word splitting and the quoting of the remote command.  Pure: the
 * environment and one temporary file.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "launch/remote.h"
#include "test.h"

static herd_job_spec spec_for(herd_job_where where, const char *hosts)
{
	herd_job_spec s = HERD_JOB_SPEC_INIT;

	s.where = where;
	s.hosts = hosts;
	return s;
}

static void clear_slurm(void)
{
	unsetenv("SLURM_JOB_ID");
	unsetenv("SLURM_JOB_NODELIST");
	unsetenv("SLURM_NODELIST");
	unsetenv("SLURM_TASKS_PER_NODE");
	unsetenv("SLURM_JOB_CPUS_PER_NODE");
}

static void test_slurm_nodes_and_slots_come_from_the_allocation(void)
{
	herd_job_spec s = spec_for(HERD_JOB_SLURM, NULL);
	herd__launch_node *nodes = NULL;
	size_t n = 0;

	clear_slurm();
	setenv("SLURM_JOB_ID", "42", 1);
	setenv("SLURM_JOB_NODELIST", "gpu[07-09],login1", 1);
	setenv("SLURM_TASKS_PER_NODE", "2(x3),1", 1);
	setenv("SLURM_JOB_CPUS_PER_NODE", "64(x4)", 1);
	CHECK_OK(herd__launch_backend_slurm.resolve(&s, &nodes, &n));
	CHECK_INT(n, 4);
	CHECK_STR(nodes[0].host, "gpu07");
	CHECK_STR(nodes[2].host, "gpu09");
	CHECK_STR(nodes[3].host, "login1");
	CHECK_INT(nodes[0].slots, 2);
	CHECK_INT(nodes[2].slots, 2);
	CHECK_INT(nodes[3].slots, 1);
	herd__launch_nodes_free(nodes, n);

	/* Without tasks per node, the CPUs per node are the slots. */
	unsetenv("SLURM_TASKS_PER_NODE");
	CHECK_OK(herd__launch_backend_slurm.resolve(&s, &nodes, &n));
	CHECK_INT(nodes[3].slots, 64);
	herd__launch_nodes_free(nodes, n);
	clear_slurm();
}

static void test_slurm_refuses_outside_an_allocation_and_bad_variables(void)
{
	herd_job_spec s = spec_for(HERD_JOB_SLURM, NULL);
	herd__launch_node *nodes = NULL;
	size_t n = 7;

	clear_slurm();
	CHECK_ERR(herd__launch_backend_slurm.resolve(&s, &nodes, &n), HERD_EUNAVAIL,
		  "not inside a Slurm allocation (SLURM_JOB_ID is not set); run it under salloc");
	CHECK(nodes == NULL);
	CHECK_INT(n, 0);
	setenv("SLURM_JOB_ID", "42", 1);
	CHECK_ERR(herd__launch_backend_slurm.resolve(&s, &nodes, &n), HERD_EUNAVAIL,
		  "Slurm job 42: neither SLURM_JOB_NODELIST nor SLURM_NODELIST is set");
	setenv("SLURM_NODELIST", "n[1-", 1);
	CHECK_ERR(herd__launch_backend_slurm.resolve(&s, &nodes, &n), HERD_EFORMAT,
		  "SLURM_JOB_NODELIST: hostlist \"n[1-\": column 5");
	setenv("SLURM_NODELIST", "n[1-3]", 1);
	setenv("SLURM_TASKS_PER_NODE", "2(x2)", 1);
	CHECK_ERR(herd__launch_backend_slurm.resolve(&s, &nodes, &n), HERD_EFORMAT,
		  "SLURM_TASKS_PER_NODE=2(x2) gives 2 counts for the 3 nodes");
	setenv("SLURM_TASKS_PER_NODE", "2(x2),1,1", 1);
	CHECK_ERR(herd__launch_backend_slurm.resolve(&s, &nodes, &n), HERD_EFORMAT,
		  "gives more counts than the 3 nodes");
	setenv("SLURM_TASKS_PER_NODE", "2(y2),1", 1);
	CHECK_ERR(herd__launch_backend_slurm.resolve(&s, &nodes, &n), HERD_EFORMAT,
		  "SLURM_TASKS_PER_NODE=2(y2),1: column 2: expected a count");
	CHECK(nodes == NULL);
	clear_slurm();
}

static void test_ssh_hostlist_with_a_host_twice_is_refused(void)
{
	herd_job_spec s = spec_for(HERD_JOB_HOSTS, "n[1-3],n2");
	herd__launch_node *nodes = NULL;
	size_t n = 0;

	CHECK_ERR(herd__launch_backend_ssh.resolve(&s, &nodes, &n), HERD_EFORMAT,
		  "hostlist \"n[1-3],n2\": host n2 is listed more than once");
	s.hosts = "n[1-3]";
	CHECK_OK(herd__launch_backend_ssh.resolve(&s, &nodes, &n));
	CHECK_INT(n, 3);
	CHECK_STR(nodes[1].host, "n2");
	CHECK_INT(nodes[1].slots, 0);
	herd__launch_nodes_free(nodes, n);
	s.hosts = NULL;
	CHECK_ERR(herd__launch_backend_ssh.resolve(&s, &nodes, &n), HERD_EINVAL,
		  "herd_job_spec.hosts: a hostlist expression is required");
}

static void test_ssh_hostfile_gives_nodes_with_slots(void)
{
	char path[] = "/tmp/herd-remote-XXXXXX";
	int fd = mkstemp(path);
	static const char text[] = "a slots=4\nb\n";
	herd_job_spec s = spec_for(HERD_JOB_HOSTFILE, path);
	herd__launch_node *nodes = NULL;
	size_t n = 0;

	CHECK(fd >= 0);
	CHECK(write(fd, text, sizeof(text) - 1) == (ssize_t)(sizeof(text) - 1));
	close(fd);
	CHECK_OK(herd__launch_backend_ssh.resolve(&s, &nodes, &n));
	CHECK_INT(n, 2);
	CHECK_STR(nodes[0].host, "a");
	CHECK_INT(nodes[0].slots, 4);
	CHECK_INT(nodes[1].slots, 1);
	herd__launch_nodes_free(nodes, n);
	unlink(path);
	CHECK_ERR(herd__launch_backend_ssh.resolve(&s, &nodes, &n), HERD_ENOTFOUND, path);
}

static void test_shell_quote_survives_quotes_and_spaces(void)
{
	char out[64];

	CHECK(herd__remote_shell_quote("/opt/herd/bin/herd", out, sizeof(out)));
	CHECK_STR(out, "'/opt/herd/bin/herd'");
	CHECK(herd__remote_shell_quote("/my dir/it's", out, sizeof(out)));
	CHECK_STR(out, "'/my dir/it'\\''s'");
	CHECK(!herd__remote_shell_quote("/a/very/long/path/that/does/not/fit", out, 10));
}

int main(void)
{
	TEST_RUN(test_slurm_nodes_and_slots_come_from_the_allocation);
	TEST_RUN(test_slurm_refuses_outside_an_allocation_and_bad_variables);
	TEST_RUN(test_ssh_hostlist_with_a_host_twice_is_refused);
	TEST_RUN(test_ssh_hostfile_gives_nodes_with_slots);
	TEST_RUN(test_shell_quote_survives_quotes_and_spaces);
	return TEST_DONE();
}
