/*
 * tests/unit/test_metrics.c - herd_metrics (herd/metrics.h): the text of a
 * sample made by hand, exactly (DCGM's names and labels, escaping, numbers,
 * figures that are -1 left out, headers once per family and none for a
 * family without series); the collective counters of a real child process
 * through its stats file, while it lives and after it ended (kept, its file
 * removed); and what happens without a usable stats directory.
 */
#include <dirent.h>
#include <sys/wait.h>

#include "comm/stats.h"
#include "test.h"

static char *tmp;

/* The text of s, with the parts asked for. */
static char *write_text(const herd_telemetry_sample *s, unsigned parts, const char *stats_dir)
{
	herd_metrics_opts o = HERD_METRICS_OPTS_INIT;
	herd_metrics *m = NULL;
	char *text = NULL;
	size_t len = 0;

	o.parts = parts;
	o.stats_dir = stats_dir;
	CHECK_OK(herd_metrics_create(&m, &o));
	CHECK_OK(herd_metrics_write(m, s, &text, &len));
	CHECK(text != NULL && strlen(text) == len);
	herd_metrics_free(m);
	return text;
}

static int count_of(const char *text, const char *needle)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
		n++;
	return n;
}

#define CHECK_HAS(text, line)                                                   \
	do {                                                                    \
		test_checks++;                                                  \
		if (strstr((text), (line)) == NULL)                             \
			TEST_FAIL_("no \"%s\" in:\n%s", (line), (text));         \
	} while (0)

static void gpu_unknown(herd_telemetry_gpu *g)
{
	g->util_gpu = g->util_mem = g->power_w = g->power_limit_w = g->temp_c = -1;
	g->sm_clock_mhz = g->mem_clock_mhz = -1;
	g->pcie_tx_bps = g->pcie_rx_bps = g->nvlink_tx_bps = g->nvlink_rx_bps = -1;
	g->mem_used = g->mem_total = g->energy_mj = g->throttle = g->ecc_sbe = g->ecc_dbe = -1;
	g->xid = g->xid_count = -1;
}

static herd_telemetry_sample *make_sample(void)
{
	herd_telemetry_sample *s = calloc(1, sizeof(*s));
	herd_telemetry_gpu *g = &s->gpus[0];

	snprintf(s->host, sizeof(s->host), "node\"7");
	s->cpu_busy = -1;
	s->load1 = -1;
	s->mem_total = s->mem_available = -1;
	s->time_ms = 1700000000250;
	s->ngpus = 1;
	gpu_unknown(g);
	g->index = 2;
	snprintf(g->uuid, sizeof(g->uuid), "GPU-abc");
	snprintf(g->bus_id, sizeof(g->bus_id), "0000:1b:00.0");
	snprintf(g->name, sizeof(g->name), "A \"B\" \\C\nD");
	g->util_gpu = 12.5;
	g->mem_used = 3 * 1048576 + 524288;   /* 3.5 MiB */
	g->power_w = 0.1;
	g->energy_mj = 9007199254740993;     /* 2^53 + 1: exact as an integer */
	g->xid = 0;
	s->nprocs = 1;
	s->procs[0].gpu = 0;
	s->procs[0].pid = 4242;
	s->procs[0].mem_used = -1;
	s->procs[0].rank = -1;
	/* /proc's comm cut inside a character: "pé" and half of another */
	snprintf(s->procs[0].comm, sizeof(s->procs[0].comm), "p\xc3\xa9\xc3");
	return s;
}

static void test_sample_text_is_exact_with_unknown_figures_left_out(void)
{
	herd_telemetry_sample *s = make_sample();
	char *t = write_text(s, HERD_METRICS_TELEMETRY, NULL);
	const char *lbl = "{gpu=\"2\",UUID=\"GPU-abc\",pci_bus_id=\"00000000:1B:00.0\","
			  "modelName=\"A \\\"B\\\" \\\\C\\nD\",Hostname=\"node\\\"7\"}";
	char line[512];

	snprintf(line, sizeof(line), "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %%).\n"
		 "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\nDCGM_FI_DEV_GPU_UTIL%s 12.5\n", lbl);
	CHECK_HAS(t, line);
	/* Whole MiB, as DCGM gives them. */
	snprintf(line, sizeof(line), "\nDCGM_FI_DEV_FB_USED%s 3\n", lbl);
	CHECK_HAS(t, line);
	snprintf(line, sizeof(line), "\nDCGM_FI_DEV_POWER_USAGE%s 0.1\n", lbl);
	CHECK_HAS(t, line);
	snprintf(line, sizeof(line), "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
		 "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION%s 9007199254740993\n", lbl);
	CHECK_HAS(t, line);
	snprintf(line, sizeof(line), "\nDCGM_FI_DEV_XID_ERRORS%s 0\n", lbl);
	CHECK_HAS(t, line);
	/* -1: no series, and no header of a family left empty. */
	CHECK(strstr(t, "DCGM_FI_DEV_GPU_TEMP") == NULL);
	CHECK(strstr(t, "DCGM_FI_DEV_SM_CLOCK") == NULL);
	CHECK(strstr(t, "DCGM_FI_PROF_PCIE_TX_BYTES") == NULL);
	CHECK(strstr(t, "herd_gpu_xid_events_total") == NULL);
	CHECK(strstr(t, "herd_node_cpu_busy_percent") == NULL);
	CHECK(strstr(t, "herd_node_load1") == NULL);
	CHECK(strstr(t, "herd_node_memory_total_bytes") == NULL);
	/* A process whose memory is unknown: named, without a memory series. */
	/* Not UTF-8: '?' for the byte, the rest kept. */
	CHECK_HAS(t, "\nherd_gpu_process_info{gpu=\"2\",UUID=\"GPU-abc\",pid=\"4242\","
		     "command=\"p\xc3\xa9?\",herd_job=\"\"} 1\n");
	CHECK(strstr(t, "herd_gpu_process_memory_bytes") == NULL);
	CHECK_HAS(t, "\nherd_gpu_processes{gpu=\"2\",UUID=\"GPU-abc\"} 1\n");
	CHECK_HAS(t, "\nherd_node_gpus 1\n");
	CHECK_HAS(t, "\nherd_telemetry_sample_timestamp_seconds 1700000000.25\n");
	/* One header per family, before its series. */
	CHECK_INT(count_of(t, "# TYPE DCGM_FI_DEV_GPU_UTIL "), 1);
	CHECK_INT(count_of(t, "# HELP "), count_of(t, "# TYPE "));
	CHECK(t[strlen(t) - 1] == '\n');
	/* Nothing of herd's own counters was asked for. */
	CHECK(strstr(t, "herd_jobs_running") == NULL);
	CHECK(strstr(t, "herd_gpu_leases") == NULL);
	free(t);
	free(s);
}

/* Every family of a node without GPUs, and a NULL sample: herd's own only. */
static void test_parts_and_no_sample(void)
{
	herd_telemetry_sample *s = make_sample();
	char *t;

	s->ngpus = 0;
	s->nprocs = 0;
	s->cpu_busy = 3;
	s->ncpus = 2;
	s->cpu_core[0] = 1;
	s->cpu_core[1] = -1;
	t = write_text(s, HERD_METRICS_TELEMETRY, NULL);
	CHECK(strstr(t, "DCGM_") == NULL);
	CHECK_HAS(t, "\nherd_node_cpu_busy_percent 3\n");
	CHECK_HAS(t, "\nherd_node_cpu_core_busy_percent{cpu=\"0\"} 1\n");
	CHECK(strstr(t, "cpu=\"1\"") == NULL);
	CHECK_HAS(t, "\nherd_node_gpus 0\n");
	free(t);
	t = write_text(NULL, HERD_METRICS_TELEMETRY | HERD_METRICS_JOBS, NULL);
	CHECK(strstr(t, "herd_node_") == NULL);
	CHECK_HAS(t, "# TYPE herd_jobs_running gauge\nherd_jobs_running ");
	free(t);
	free(s);
}

/* A child that counts calls as a communicator of a rank of job
 * 'unit "job"' would, then waits for a byte on a pipe before it exits
 * (without closing the file: its death lets go of the lock). */
static pid_t counting_child(int *go_fd)
{
	int ready[2], go[2];
	pid_t pid;
	char c;

	if (pipe(ready) != 0 || pipe(go) != 0)
		exit(1);
	pid = fork();
	if (pid == 0) {
		herd__stats_file *f;
		int fd;

		setenv("HERD_JOB_ID", "unit \"job\"", 1);
		setenv("HERD_RANK", "5", 1);
		f = herd__stats_open(&fd);
		if (f == NULL)
			_exit(3);
		for (int i = 0; i < 7; i++)
			herd__stats_add(f, 1 /* allreduce */, 64, 1000000, HERD_OK);
		herd__stats_add(f, 12 /* barrier */, 0, 500, HERD_ETIMEDOUT);
		if (f->rank != 5 || f->pid != getpid())
			_exit(4);
		if (write(ready[1], "r", 1) != 1 || read(go[0], &c, 1) != 1)
			_exit(5);
		_exit(0);
	}
	close(ready[1]);
	close(go[0]);
	CHECK_INT(read(ready[0], &c, 1), 1);
	close(ready[0]);
	*go_fd = go[1];
	return pid;
}

static void test_collective_counters_live_then_ended(void)
{
	char dir[4200], *t;
	herd_metrics_opts o = HERD_METRICS_OPTS_INIT;
	herd_metrics *m = NULL;
	size_t len, nfiles = 0;
	int go, status;
	pid_t pid;
	struct dirent *d;
	DIR *dd;
	FILE *junk;

	snprintf(dir, sizeof(dir), "%s/stats", tmp);
	/* No directory: a communicator does not count, and makes none. */
	setenv("HERD_STATS_DIR", dir, 1);
	CHECK(herd__stats_open(&go) == NULL);
	CHECK_INT(go, -1);
	CHECK(access(dir, F_OK) != 0);

	o.parts = HERD_METRICS_COLLECTIVES;
	CHECK_OK(herd_metrics_create(&m, &o));
	CHECK_STR(herd_metrics_stats_dir(m, NULL), dir);
	/* A file that is not a stats file is passed over. */
	snprintf(dir + strlen(dir), sizeof(dir) - strlen(dir), "/9-junk.stats");
	junk = fopen(dir, "w");
	fputs("not counters", junk);
	fclose(junk);
	dir[strlen(dir) - strlen("/9-junk.stats")] = '\0';

	pid = counting_child(&go);
	CHECK_OK(herd_metrics_write(m, NULL, &t, &len));
	CHECK_HAS(t, "# TYPE herd_collective_calls_total counter\n"
		     "herd_collective_calls_total{herd_job=\"unit \\\"job\\\"\",kind=\"allreduce\"} 7\n"
		     "herd_collective_calls_total{herd_job=\"unit \\\"job\\\"\",kind=\"barrier\"} 1\n");
	CHECK_HAS(t, "\nherd_collective_bytes_total{herd_job=\"unit \\\"job\\\"\",kind=\"allreduce\"} 448\n");
	CHECK_HAS(t, "\nherd_collective_seconds_total{herd_job=\"unit \\\"job\\\"\",kind=\"allreduce\"} 0.007\n");
	CHECK_HAS(t, "\nherd_collective_failures_total{herd_job=\"unit \\\"job\\\"\",kind=\"barrier\"} 1\n");
	CHECK_HAS(t, "\nherd_collective_errors_total{herd_job=\"unit \\\"job\\\"\",error=\"timedout\"} 1\n");
	CHECK_HAS(t, "\nherd_collective_communicators{herd_job=\"unit \\\"job\\\"\"} 1\n");
	free(t);

	/* It ends: its counts stay, its file goes. */
	CHECK_INT(write(go, "g", 1), 1);
	close(go);
	CHECK_INT(waitpid(pid, &status, 0), pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (int pass = 0; pass < 2; pass++) {
		CHECK_OK(herd_metrics_write(m, NULL, &t, &len));
		CHECK_HAS(t, "\nherd_collective_calls_total{herd_job=\"unit \\\"job\\\"\",kind=\"allreduce\"} 7\n");
		CHECK_HAS(t, "\nherd_collective_communicators{herd_job=\"unit \\\"job\\\"\"} 0\n");
		free(t);
	}
	dd = opendir(dir);
	while (dd != NULL && (d = readdir(dd)) != NULL)
		nfiles += d->d_name[0] != '.';
	if (dd != NULL)
		closedir(dd);
	CHECK_INT(nfiles, 1); /* the junk alone */
	herd_metrics_free(m);
	unsetenv("HERD_STATS_DIR");
}

static void test_no_stats_directory_says_why(void)
{
	herd_metrics_opts o = HERD_METRICS_OPTS_INIT;
	herd_metrics *m = NULL;
	const char *why = NULL;
	char dir[4200], *t;
	size_t len;

	snprintf(dir, sizeof(dir), "%s/none/deeper", tmp);
	o.stats_dir = dir;
	CHECK_OK(herd_metrics_create(&m, &o));
	CHECK(herd_metrics_stats_dir(m, &why) == NULL);
	CHECK(why != NULL && strstr(why, "cannot make the directory") != NULL &&
	      strstr(why, dir) != NULL);
	CHECK_OK(herd_metrics_write(m, NULL, &t, &len));
	CHECK(strstr(t, "herd_collective") == NULL);
	free(t);
	herd_metrics_free(m);
	o.version = 99;
	CHECK_ERR(herd_metrics_create(&m, &o), HERD_EINVAL, "HERD_METRICS_OPTS_INIT");
	CHECK(m == NULL);
	CHECK_ERR(herd_metrics_write(NULL, NULL, &t, &len), HERD_EINVAL, "m is NULL");
}

int main(void)
{
	tmp = make_tmpdir();
	TEST_RUN(test_sample_text_is_exact_with_unknown_figures_left_out);
	TEST_RUN(test_parts_and_no_sample);
	TEST_RUN(test_collective_counters_live_then_ended);
	TEST_RUN(test_no_stats_directory_says_why);
	rm_tree(tmp);
	return TEST_DONE();
}
