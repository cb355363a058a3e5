/*
 * tests/unit/test_telemetry_exposition.c - herd_telemetry_exposition: a
 * sample built here as the Prometheus text format, line by line (DCGM
 * names and labels, units, escaping, figures of -1 left out, jobs and
 * ranks from the GPU processes), and its refusals.  With an argument it
 * writes the text of a full sample to that file, for promtool.
 */
#include <stdio.h>

#include "test.h"

#include "herd/telemetry.h"

static herd_telemetry_sample *sample(void)
{
	herd_telemetry_sample *s = calloc(1, sizeof(*s));

	if (s == NULL)
		exit(1);
	s->seq = 2;
	snprintf(s->host, sizeof(s->host), "node\"7");
	s->cpu_busy = 12.5;
	s->ncpus = 2;
	s->cpu_core[0] = 5;
	s->cpu_core[1] = 20;
	s->load1 = 0.75;
	s->mem_total = 1048576000;
	s->mem_available = 524288000;
	s->ngpus = 2;
	for (int i = 0; i < 2; i++) {
		herd_telemetry_gpu *g = &s->gpus[i];

		g->index = i;
		snprintf(g->uuid, sizeof(g->uuid), "GPU-%d", i);
		snprintf(g->bus_id, sizeof(g->bus_id), "0000:1%d:00.0", i);
		snprintf(g->name, sizeof(g->name), "NVIDIA H100\\80GB");
		g->util_gpu = 40 + i;
		g->util_mem = 10;
		g->mem_used = (int64_t)(1000 + i) * 1048576 + 5;
		g->mem_total = (int64_t)81559 * 1048576;
		g->power_w = 312.5;
		g->power_limit_w = 700;
		g->energy_mj = 123456789;
		g->temp_c = 45;
		g->sm_clock_mhz = 1980;
		g->mem_clock_mhz = 2619;
		g->throttle = 4;
		g->ecc_sbe = 3;
		g->ecc_dbe = 0;
		g->xid = 0;
		g->xid_count = 0;
		g->pcie_tx_bps = 1000;
		g->pcie_rx_bps = 2000;
		g->nvlink_tx_bps = -1;
		g->nvlink_rx_bps = -1;
	}
	s->gpus[1].temp_c = -1;
	s->gpus[1].xid = -1;
	s->nprocs = 3;
	s->procs[0] = (herd_telemetry_proc){ .gpu = 0, .pid = 100, .rank = 0 };
	s->procs[1] = (herd_telemetry_proc){ .gpu = 1, .pid = 101, .rank = 1 };
	s->procs[2] = (herd_telemetry_proc){ .gpu = 1, .pid = 300, .rank = -1 };
	snprintf(s->procs[0].job, sizeof(s->procs[0].job), "j1");
	snprintf(s->procs[1].job, sizeof(s->procs[1].job), "j1");
	snprintf(s->procs[0].comm, sizeof(s->procs[0].comm), "train");
	snprintf(s->procs[1].comm, sizeof(s->procs[1].comm), "train");
	snprintf(s->procs[2].comm, sizeof(s->procs[2].comm), "x");
	s->nnets = 1;
	snprintf(s->nets[0].name, sizeof(s->nets[0].name), "eth0");
	s->nets[0].rx_bytes = 18446744073709551615ull;
	s->nets[0].tx_bytes = 7;
	s->ndisks = 1;
	snprintf(s->disks[0].name, sizeof(s->disks[0].name), "sda");
	s->disks[0].read_bytes = 4096;
	s->disks[0].write_bytes = 8192;
	return s;
}

#define L0 "gpu=\"0\",UUID=\"GPU-0\",device=\"nvidia0\",modelName=\"NVIDIA H100\\\\80GB\"," \
	   "Hostname=\"node\\\"7\",pciBusID=\"0000:10:00.0\""
#define L1 "gpu=\"1\",UUID=\"GPU-1\",device=\"nvidia1\",modelName=\"NVIDIA H100\\\\80GB\"," \
	   "Hostname=\"node\\\"7\",pciBusID=\"0000:11:00.0\""

static void test_exposition_lines(void)
{
	herd_telemetry_sample *s = sample();
	char *text = NULL;
	size_t len = 0;

	CHECK_OK(herd_telemetry_exposition(s, &text, &len));
	CHECK(text != NULL);
	if (text == NULL) {
		free(s);
		return;
	}
	CHECK_INT(len, strlen(text));
	static const char *const want[] = {
		"# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n"
		"# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
		"DCGM_FI_DEV_GPU_UTIL{" L0 "} 40\n"
		"DCGM_FI_DEV_GPU_UTIL{" L1 "} 41\n",
		"DCGM_FI_DEV_FB_USED{" L0 "} 1000\n",
		"DCGM_FI_DEV_FB_USED{" L1 "} 1001\n",
		"DCGM_FI_DEV_FB_FREE{" L0 "} 80558\n",
		"DCGM_FI_DEV_POWER_USAGE{" L1 "} 312.5\n",
		"# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
		"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{" L0 "} 123456789\n",
		"# TYPE DCGM_FI_DEV_GPU_TEMP gauge\nDCGM_FI_DEV_GPU_TEMP{" L0 "} 45\n# HELP",
		"DCGM_FI_DEV_XID_ERRORS{" L0 "} 0\n# HELP",
		"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{" L1 "} 4\n",
		"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL{" L1 "} 3\n",
		"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{" L1 "} 0\n",
		"DCGM_FI_PROF_PCIE_RX_BYTES{" L0 "} 2000\n",
		"DCGM_FI_DEV_SM_CLOCK{" L0 "} 1980\n",
		"herd_gpu_processes{gpu=\"0\",UUID=\"GPU-0\"} 1\n",
		"herd_gpu_processes{gpu=\"1\",UUID=\"GPU-1\"} 2\n",
		"herd_gpu_process{gpu=\"0\",UUID=\"GPU-0\",pid=\"100\",comm=\"train\",job=\"j1\",rank=\"0\"} 1\n",
		"herd_gpu_process{gpu=\"1\",UUID=\"GPU-1\",pid=\"300\",comm=\"x\",job=\"\",rank=\"-1\"} 1\n",
		"# TYPE herd_job_ranks gauge\nherd_job_ranks{job=\"j1\"} 2\n",
		"herd_node_cpu_busy_percent 12.5\n",
		"herd_node_cpu_core_busy_percent{cpu=\"1\"} 20\n",
		"herd_node_load1 0.75\n",
		"herd_node_memory_total_bytes 1048576000\n",
		"herd_node_memory_available_bytes 524288000\n",
		"# TYPE herd_node_network_receive_bytes_total counter\n"
		"herd_node_network_receive_bytes_total{device=\"eth0\"} 18446744073709551615\n",
		"herd_node_network_transmit_bytes_total{device=\"eth0\"} 7\n",
		"herd_node_disk_read_bytes_total{device=\"sda\"} 4096\n",
		"herd_node_disk_written_bytes_total{device=\"sda\"} 8192\n",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		test_checks++;
		if (strstr(text, want[i]) == NULL)
			TEST_FAIL_("exposition lacks:\n%s\n--- it is:\n%s", want[i], text);
	}
	/* -1 is not known: no series; a family no GPU knows is not written. */
	CHECK(strstr(text, "DCGM_FI_DEV_GPU_TEMP{" L1) == NULL);
	CHECK(strstr(text, "DCGM_FI_DEV_XID_ERRORS{" L1) == NULL);
	CHECK(strstr(text, "NVLINK") == NULL);
	/* Each family has exactly one HELP and one TYPE. */
	int helps = 0, types = 0;
	for (const char *p = text; (p = strstr(p, "# HELP ")) != NULL; p++)
		helps++;
	for (const char *p = text; (p = strstr(p, "# TYPE ")) != NULL; p++)
		types++;
	CHECK_INT(helps, types);
	/* 16 GPU families (NVLink's two unknown), 3 of processes and jobs, 9 of the node. */
	CHECK_INT(helps, 16 + 3 + 9);
	CHECK(text[len - 1] == '\n');
	free(text);

	/* The first sample: no CPU figures yet; no GPUs: no GPU families. */
	s->cpu_busy = -1;
	s->ngpus = 0;
	s->nprocs = 0;
	CHECK_OK(herd_telemetry_exposition(s, &text, NULL));
	CHECK(strstr(text, "DCGM_") == NULL);
	CHECK(strstr(text, "herd_node_cpu") == NULL);
	CHECK(strstr(text, "herd_gpu_processes") == NULL);
	CHECK(strstr(text, "herd_node_load1 0.75\n") != NULL);
	free(text);
	free(s);
}

static void test_exposition_refusals(void)
{
	herd_telemetry_sample *s = sample();
	char *text = (char *)"untouched";

	CHECK_ERR(herd_telemetry_exposition(NULL, &text, NULL), HERD_EINVAL, "required");
	CHECK_ERR(herd_telemetry_exposition(s, NULL, NULL), HERD_EINVAL, "required");
	s->ngpus = HERD_TELEMETRY_MAX_GPUS + 1;
	CHECK_ERR(herd_telemetry_exposition(s, &text, NULL), HERD_EINVAL,
		  "sample 2: a count is outside");
	CHECK(text == NULL);
	s->ngpus = 2;
	s->nprocs = -1;
	CHECK_ERR(herd_telemetry_exposition(s, &text, NULL), HERD_EINVAL, "outside");
	free(s);
}

int main(int argc, char **argv)
{
	if (argc > 1) {
		/* The text of the sample above into argv[1], for promtool check metrics. */
		herd_telemetry_sample *s = sample();
		char *text = NULL;
		size_t len = 0;
		FILE *f;

		if (herd_telemetry_exposition(s, &text, &len) != HERD_OK ||
		    (f = fopen(argv[1], "w")) == NULL) {
			fprintf(stderr, "%s\n", herd_last_error());
			return 1;
		}
		fwrite(text, 1, len, f);
		free(text);
		free(s);
		return fclose(f) == 0 ? 0 : 1;
	}
	TEST_RUN(test_exposition_lines);
	TEST_RUN(test_exposition_refusals);
	return TEST_DONE();
}
