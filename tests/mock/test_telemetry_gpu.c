/*
 * GPU telemetry (sdk/telemetry/gpu.c) against the stand-in
 * libnvidia-ml.so.1 of tests/mock, whose figures this test writes into
 * the state file HERD_NVML_MOCK_STATE names: exact figures, counters
 * turned into rates between two reads, figures the driver refuses or
 * lacks at -1, a GPU that stops answering, the processes on each GPU named
 * from their environment or the GPU's lease, and the Xid records a kernel
 * log gains.  Run as "test_telemetry_gpu old" against the stand-in built
 * as an old driver (tests/mock-old), and as "test_telemetry_gpu nodriver"
 * with no NVML to load.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "test.h"

#include "herd/lease.h"
#include "telemetry/telemetry_internal.h"

#define CHECK_NUM(a, b)                                                          \
	do {                                                                     \
		double a_ = (double)(a), b_ = (double)(b);                       \
		test_checks++;                                                   \
		if (a_ != b_)                                                    \
			TEST_FAIL_("%s == %.17g, expected %.17g", #a, a_, b_);   \
	} while (0)

/* The stand-in's GPUs in PCI bus order: NVML's index, bus id, UUID. */
static const struct {
	int index;
	const char *bus;
	const char *uuid;
} want[3] = {
	{ 1, "0000:1b:00.0", "GPU-00000001-1111-2222-3333-444444444444" },
	{ 2, "0000:5d:00.0", "GPU-00000002-1111-2222-3333-444444444444" },
	{ 0, "0000:9a:00.0", "GPU-00000000-1111-2222-3333-444444444444" },
};

static char *tmp;
static char state_path[512], log_path[512], lease_dir[512];
static herd_telemetry_sample sample;

static void write_text(const char *path, const char *mode, const char *fmt, ...)
{
	FILE *f = fopen(path, mode);
	va_list ap;

	if (f == NULL) {
		perror(path);
		exit(1);
	}
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

/* A sampler of this test's state file and kernel log, leases in lease_dir. */
static herd__tgpu *open_gpus(void)
{
	herd__tgpu *g = NULL;
	char why[512];

	setenv("HERD_NVML_MOCK_STATE", state_path, 1);
	setenv("HERD_KERNEL_LOG", log_path, 1);
	CHECK_OK(herd__tgpu_open(&g, lease_dir, why, sizeof(why)));
	CHECK_STR(why, "");
	if (g == NULL) {
		fprintf(stderr, "no GPU sampler: %s\n", why);
		exit(1);
	}
	return g;
}

static const herd_telemetry_sample *read_gpus(herd__tgpu *g, unsigned parts)
{
	memset(&sample, 0, sizeof(sample));
	CHECK_OK(herd__tgpu_read(g, &sample, parts));
	return &sample;
}

static void check_identity(const herd_telemetry_sample *s)
{
	CHECK_INT(s->ngpus, 3);
	for (int i = 0; i < 3 && i < s->ngpus; i++) {
		CHECK_INT(s->gpus[i].index, want[i].index);
		CHECK_STR(s->gpus[i].bus_id, want[i].bus);
		CHECK_STR(s->gpus[i].uuid, want[i].uuid);
		CHECK_STR(s->gpus[i].name, "NVIDIA H100 80GB HBM3");
	}
}

/* No state file: three idle GPUs in bus order, the stand-in's fixed
 * figures; counters give no rate on the first read and 0 on the next. */
static void test_idle_gpus_without_state(void)
{
	const herd_telemetry_sample *s;
	herd__tgpu *g;

	unlink(state_path);
	write_text(log_path, "w", "");
	g = open_gpus();
	s = read_gpus(g, HERD_TELEMETRY_GPU | HERD_TELEMETRY_PROCS);
	check_identity(s);
	for (int i = 0; i < s->ngpus; i++) {
		const herd_telemetry_gpu *x = &s->gpus[i];

		CHECK_NUM(x->util_gpu, 0);
		CHECK_NUM(x->util_mem, 0);
		CHECK_INT(x->mem_used, 0);
		CHECK_INT(x->mem_total, 85520809984);
		CHECK_NUM(x->power_w, 72);
		CHECK_NUM(x->power_limit_w, 700);
		CHECK_INT(x->energy_mj, 5000000);
		CHECK_NUM(x->temp_c, 41);
		CHECK_NUM(x->sm_clock_mhz, 345);
		CHECK_NUM(x->mem_clock_mhz, 2619);
		CHECK_INT(x->throttle, 1);
		CHECK_INT(x->ecc_sbe, 0);
		CHECK_INT(x->ecc_dbe, 0);
		CHECK_INT(x->xid, 0);
		CHECK_INT(x->xid_count, 0);
		CHECK_NUM(x->pcie_tx_bps, -1);
		CHECK_NUM(x->pcie_rx_bps, -1);
		CHECK_NUM(x->nvlink_tx_bps, -1);
		CHECK_NUM(x->nvlink_rx_bps, -1);
	}
	CHECK_INT(s->nprocs, 0);
	CHECK_INT(s->dropped, 0);
	s = read_gpus(g, HERD_TELEMETRY_GPU);
	CHECK_INT(s->nprocs, 0);
	CHECK_NUM(s->gpus[0].pcie_tx_bps, 0);
	CHECK_NUM(s->gpus[0].nvlink_rx_bps, 0);
	/* 0000:5d:00.0 has no NVLink */
	CHECK_NUM(s->gpus[1].pcie_rx_bps, 0);
	CHECK_NUM(s->gpus[1].nvlink_tx_bps, -1);
	herd__tgpu_close(g);
}

/* The figures the state file gives, exactly; rates over NVML's timestamps
 * of the counters; a counter that went back gives no rate; "na" and a
 * lost GPU leave -1 and keep the GPU's identity. */
static void test_figures_and_rates_from_state(void)
{
	const herd_telemetry_sample *s;
	const herd_telemetry_gpu *a, *b, *c;
	herd__tgpu *g;

	write_text(log_path, "w", "");
	write_text(state_path, "w",
		   "gpu 1 util 87 mem_util 40 mem_used 1073741824 power_mw 312000\n"
		   "gpu 1 power_limit_mw 650000 energy_mj 123456789 temp 55 sm_clock 1980\n"
		   "gpu 1 mem_clock 2619 throttle 0x4 ecc_sbe 3 ecc_dbe 1\n"
		   "gpu 1 pcie_tx_bytes 1000000 pcie_rx_bytes 2000000 nvlink_tx_kib 1000\n"
		   "gpu 1 nvlink_rx_kib 5000 counter_time_us 1000000\n"
		   "gpu 2 pcie_tx_bytes na pcie_rx_bytes na pcie_tx_kbps 1500 pcie_rx_kbps 250\n"
		   "gpu 2 power_mw na temp na\n"
		   "gpu 0 lost 1\n");
	g = open_gpus();
	s = read_gpus(g, HERD_TELEMETRY_GPU);
	check_identity(s);
	a = &s->gpus[0];
	b = &s->gpus[1];
	c = &s->gpus[2];
	CHECK_NUM(a->util_gpu, 87);
	CHECK_NUM(a->util_mem, 40);
	CHECK_INT(a->mem_used, 1073741824);
	CHECK_INT(a->mem_total, 85520809984);
	CHECK_NUM(a->power_w, 312);
	CHECK_NUM(a->power_limit_w, 650);
	CHECK_INT(a->energy_mj, 123456789);
	CHECK_NUM(a->temp_c, 55);
	CHECK_NUM(a->sm_clock_mhz, 1980);
	CHECK_NUM(a->mem_clock_mhz, 2619);
	CHECK_INT(a->throttle, 4);
	CHECK_INT(a->ecc_sbe, 3);
	CHECK_INT(a->ecc_dbe, 1);
	CHECK_NUM(a->pcie_tx_bps, -1);
	CHECK_NUM(a->nvlink_tx_bps, -1);
	/* no PCIe counters: NVML's own 20 ms window, KB/s, from the first read */
	CHECK_NUM(b->pcie_tx_bps, 1500 * 1024);
	CHECK_NUM(b->pcie_rx_bps, 250 * 1024);
	CHECK_NUM(b->power_w, -1);
	CHECK_NUM(b->temp_c, -1);
	CHECK_NUM(b->power_limit_w, 700);
	/* lost: identity kept, every NVML figure -1 */
	CHECK_STR(c->bus_id, "0000:9a:00.0");
	CHECK_NUM(c->util_gpu, -1);
	CHECK_INT(c->mem_used, -1);
	CHECK_INT(c->mem_total, -1);
	CHECK_NUM(c->power_w, -1);
	CHECK_INT(c->energy_mj, -1);
	CHECK_NUM(c->sm_clock_mhz, -1);
	CHECK_INT(c->throttle, -1);
	CHECK_INT(c->ecc_dbe, -1);
	CHECK_NUM(c->nvlink_tx_bps, -1);
	CHECK_INT(c->xid, 0);

	/* Two seconds later by NVML's clock. */
	write_text(state_path, "a",
		   "gpu 1 util 12 pcie_tx_bytes 5000000 nvlink_tx_kib 3000 nvlink_rx_kib 13000\n"
		   "gpu 1 counter_time_us 3000000\n");
	s = read_gpus(g, HERD_TELEMETRY_GPU);
	CHECK_NUM(a->util_gpu, 12);
	CHECK_NUM(a->pcie_tx_bps, 2000000);
	CHECK_NUM(a->pcie_rx_bps, 0);
	CHECK_NUM(a->nvlink_tx_bps, 2000 * 1024 / 2);
	CHECK_NUM(a->nvlink_rx_bps, 8000 * 1024 / 2);
	CHECK_NUM(b->pcie_tx_bps, 1500 * 1024);
	CHECK_NUM(c->util_gpu, -1);

	/* The driver reloaded: a counter went back, no rate for that one. */
	write_text(state_path, "a", "gpu 1 nvlink_tx_kib 10 counter_time_us 4000000\n");
	s = read_gpus(g, HERD_TELEMETRY_GPU);
	CHECK_NUM(a->nvlink_tx_bps, -1);
	CHECK_NUM(a->nvlink_rx_bps, 0);
	/* and the next read has one again */
	write_text(state_path, "a", "gpu 1 nvlink_tx_kib 1034 counter_time_us 5000000\n");
	s = read_gpus(g, HERD_TELEMETRY_GPU);
	CHECK_NUM(a->nvlink_tx_bps, 1024 * 1024);
	herd__tgpu_close(g);
}

/* A process started with envp, its pid once it has exec'd; -1 on failure. */
static pid_t start_child(char *const envp[])
{
	char *const argv[] = { "sleep", "60", NULL };
	int fds[2];
	char c;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) != 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		close(fds[0]);
		execve("/bin/sleep", argv, envp);
		_exit(127);
	}
	close(fds[1]);
	/* EOF when the exec closed the pipe (or the child died) */
	while (pid > 0 && read(fds[0], &c, 1) < 0 && errno == EINTR)
		;
	close(fds[0]);
	return pid;
}

static void stop_child(pid_t pid)
{
	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static const herd_telemetry_proc *find_proc(const herd_telemetry_sample *s, pid_t pid)
{
	for (int i = 0; i < s->nprocs; i++)
		if (s->procs[i].pid == pid)
			return &s->procs[i];
	TEST_FAIL_("pid %d is not among the sample's processes", (int)pid);
	return NULL;
}

/* The processes of test_processes_named_by_environment_and_lease, named. */
static void check_named(const herd_telemetry_sample *s, const pid_t pids[6])
{
	const herd_telemetry_proc *p;

	if ((p = find_proc(s, pids[0])) != NULL) {
		CHECK_INT(p->gpu, 0);
		CHECK_INT(p->mem_used, -1);
		CHECK_STR(p->job, "job-42");
		CHECK_INT(p->rank, 3);
		CHECK_STR(p->comm, "sleep");
	}
	if ((p = find_proc(s, pids[1])) != NULL) {
		CHECK_INT(p->gpu, 1);
		CHECK_INT(p->mem_used, 1000);
		CHECK_STR(p->job, "777");
		CHECK_INT(p->rank, 5);
	}
	if ((p = find_proc(s, pids[2])) != NULL) {
		CHECK_INT(p->gpu, 1);
		CHECK_INT(p->mem_used, 3000);
		CHECK_STR(p->job, "");
		CHECK_INT(p->rank, 2);
	}
	if ((p = find_proc(s, pids[3])) != NULL) {
		CHECK_INT(p->gpu, 0);
		CHECK_INT(p->mem_used, 2147483648);
		CHECK_STR(p->job, "lease-job-9");
		CHECK_INT(p->rank, -1);
		CHECK_STR(p->comm, "sleep");
	}
	if ((p = find_proc(s, pids[4])) != NULL) {
		CHECK_STR(p->job, "");
		CHECK_INT(p->rank, -1);
	}
	if ((p = find_proc(s, pids[5])) != NULL) {
		CHECK_INT(p->gpu, 2);
		CHECK_STR(p->job, "");
		CHECK_INT(p->rank, 4);
	}
}

/* Whether this /proc numbers pids as NVML does (the initial pid namespace);
 * elsewhere processes are named from leases alone. */
static bool host_pids(void)
{
	struct stat sb;

	return stat("/proc/self/ns/pid", &sb) == 0 && sb.st_ino == 0xEFFFFFFCu;
}

/* Each process named with its job and rank from its own environment
 * (herd's names first, then Slurm's, then torchrun's RANK), else from the
 * lease record of its GPU (rank -1), else none; a process in both of
 * NVML's lists once; an environment read no further than 64 KiB.  In a
 * pid namespace of its own (a container), from the lease alone. */
static void test_processes_named_by_environment_and_lease(void)
{
	static char pad[70 * 1024];
	char *const env_herd[] = { "SLURM_JOB_ID=999", "SLURM_PROCID=7", "HERD_JOB_ID=job-42",
				   "HERD_RANK=3", NULL };
	char *const env_slurm[] = { "SLURM_JOB_ID=777", "SLURM_PROCID=5", NULL };
	char *const env_torch[] = { "RANK=2", "PATH=/usr/bin", NULL };
	char *const env_none[] = { "PATH=/usr/bin", NULL };
	char *const env_big[] = { "RANK=4", pad, "HERD_JOB_ID=late", "HERD_RANK=1", NULL };
	static const int order[6] = { 0, 3, 1, 4, 2, 5 };
	herd_lease_opts lo = HERD_LEASE_OPTS_INIT;
	const char *uuid = want[0].uuid;
	const herd_telemetry_sample *s;
	const herd_telemetry_proc *p;
	herd_lease *lease = NULL;
	pid_t pids[6];
	herd__tgpu *g;
	int status;

	memset(pad, 'x', sizeof(pad) - 1);
	memcpy(pad, "PAD=", 4);
	pids[0] = start_child(env_herd);
	pids[1] = start_child(env_slurm);
	pids[2] = start_child(env_torch);
	pids[3] = start_child(env_none);
	pids[4] = start_child(env_none);
	pids[5] = start_child(env_big);
	for (int i = 0; i < 6; i++)
		CHECK(pids[i] > 0 && waitpid(pids[i], &status, WNOHANG) == 0);
	/* The GPU at 0000:1b:00.0 is leased by this process for job lease-job-9. */
	lo.dir = lease_dir;
	lo.job_id = "lease-job-9";
	CHECK_OK(herd_lease_acquire(&lease, &uuid, 1, false, &lo));
	write_text(log_path, "w", "");
	write_text(state_path, "w",
		   "proc 1 %d na\n"
		   "proc 1 %d 2147483648\n"
		   "proc 1 %d 2147483648 graphics\n"
		   "proc 2 %d 1000\n"
		   "proc 2 %d 2000\n"
		   "proc 2 %d 3000 graphics\n"
		   "proc 0 %d 4000\n",
		   (int)pids[0], (int)pids[3], (int)pids[3], (int)pids[1], (int)pids[4],
		   (int)pids[2], (int)pids[5]);
	g = open_gpus();
	s = read_gpus(g, HERD_TELEMETRY_GPU | HERD_TELEMETRY_PROCS);
	CHECK_INT(s->nprocs, 6);
	CHECK_INT(s->dropped, 0);
	/* per GPU in bus order, compute processes then graphics ones */
	for (int i = 0; i < 6 && i < s->nprocs; i++)
		CHECK_INT(s->procs[i].pid, pids[order[i]]);
	if (!host_pids()) {
		printf("     in a pid namespace of its own: processes named by lease only\n");
		for (int i = 0; i < s->nprocs; i++) {
			CHECK_STR(s->procs[i].comm, "");
			CHECK_STR(s->procs[i].job, s->procs[i].gpu == 0 ? "lease-job-9" : "");
			CHECK_INT(s->procs[i].rank, -1);
		}
	} else {
		check_named(s, pids);
	}
	/* The lease released: the process left without a job. */
	herd_lease_free(lease);
	s = read_gpus(g, HERD_TELEMETRY_PROCS);
	CHECK_INT(s->ngpus, 3);
	CHECK_NUM(s->gpus[0].util_gpu, -1);
	if ((p = find_proc(s, pids[3])) != NULL) {
		CHECK_STR(p->job, "");
		CHECK_INT(p->rank, -1);
	}
	CHECK(find_proc(s, pids[0]) != NULL);
	herd__tgpu_close(g);
	for (int i = 0; i < 6; i++)
		stop_child(pids[i]);
}

/* More processes than NVML was first asked for and than a sample holds:
 * the list is asked again, the first HERD_TELEMETRY_MAX_PROCS are kept,
 * the rest counted in dropped.  Pids past the kernel's PID_MAX_LIMIT
 * name no process: no command, no job. */
static void test_processes_past_the_cap(void)
{
	const herd_telemetry_sample *s;
	herd__tgpu *g;

	write_text(log_path, "w", "");
	write_text(state_path, "w", "");
	for (int i = 0; i < 70; i++)
		write_text(state_path, "a", "proc 1 %d %d\n", 4194400 + i, i * 4096);
	g = open_gpus();
	s = read_gpus(g, HERD_TELEMETRY_GPU | HERD_TELEMETRY_PROCS);
	CHECK_INT(s->nprocs, HERD_TELEMETRY_MAX_PROCS);
	CHECK_INT(s->dropped, 70 - HERD_TELEMETRY_MAX_PROCS);
	CHECK_INT(s->procs[0].pid, 4194400);
	CHECK_INT(s->procs[63].pid, 4194463);
	CHECK_INT(s->procs[63].mem_used, 63 * 4096);
	CHECK_STR(s->procs[63].comm, "");
	CHECK_STR(s->procs[63].job, "");
	CHECK_INT(s->procs[63].rank, -1);
	herd__tgpu_close(g);
}

static void append_xid(const char *bus, int code, const char *end)
{
	write_text(log_path, "a", "[ 812.000001] NVRM: Xid (PCI:%s): %d, pid=4242, name=python%s",
		   bus, code, end);
}

/* The last Xid of each GPU, its history included, and the records counted
 * from the open on; a line still being written waits for its newline. */
static void test_xid_events_counted_since_open(void)
{
	const herd_telemetry_sample *s;
	herd__tgpu *g;

	write_text(state_path, "w", "");
	write_text(log_path, "w", "[    3.141592] nvidia: loading out-of-tree module taints kernel.\n");
	append_xid("0000:1b:00", 13, "\n");
	g = open_gpus();
	s = read_gpus(g, HERD_TELEMETRY_GPU);
	CHECK_INT(s->gpus[0].xid, 13);
	CHECK_INT(s->gpus[0].xid_count, 0);
	CHECK_INT(s->gpus[1].xid, 0);
	CHECK_INT(s->gpus[2].xid_count, 0);

	append_xid("0000:9a:00", 79, "\n");
	append_xid("0000:1b:00", 31, "\n");
	append_xid("0000:1b:00", 31, "\n");
	append_xid("0000:5d:000", 48, "\n");       /* not a bus id of this node */
	append_xid("0000:5d:00", 48, "");         /* not finished */
	s = read_gpus(g, HERD_TELEMETRY_GPU);
	CHECK_INT(s->gpus[0].xid, 31);
	CHECK_INT(s->gpus[0].xid_count, 2);
	CHECK_INT(s->gpus[1].xid, 0);
	CHECK_INT(s->gpus[1].xid_count, 0);
	CHECK_INT(s->gpus[2].xid, 79);
	CHECK_INT(s->gpus[2].xid_count, 1);

	write_text(log_path, "a", ", Graphics Exception\n");
	s = read_gpus(g, HERD_TELEMETRY_GPU);
	CHECK_INT(s->gpus[1].xid, 48);
	CHECK_INT(s->gpus[1].xid_count, 1);
	CHECK_INT(s->gpus[0].xid_count, 2);
	s = read_gpus(g, HERD_TELEMETRY_GPU);
	CHECK_INT(s->gpus[1].xid_count, 1);
	herd__tgpu_close(g);

	/* A log that cannot be read: Xid unknown, the rest as ever. */
	unlink(log_path);
	g = open_gpus();
	s = read_gpus(g, HERD_TELEMETRY_GPU);
	CHECK_INT(s->gpus[0].xid, -1);
	CHECK_INT(s->gpus[0].xid_count, -1);
	CHECK_NUM(s->gpus[0].temp_c, 41);
	herd__tgpu_close(g);
}

/* The stand-in as an old driver: the throttle reasons under their old
 * name, the _v2 process lists; no energy counter, no PCIe throughput, no
 * field values: those figures -1 on every read. */
static void test_old_driver_lacks_entry_points(void)
{
	const herd_telemetry_sample *s;
	herd__tgpu *g;
	pid_t pid = start_child((char *const[]){ "HERD_JOB_ID=old-1", "HERD_RANK=0", NULL });

	CHECK(pid > 0);
	write_text(log_path, "w", "");
	write_text(state_path, "w",
		   "gpu 1 util 50 throttle 0x20 energy_mj 7 pcie_tx_kbps 100 nvlink_tx_kib 5\n"
		   "proc 1 %d 8192\n", (int)pid);
	g = open_gpus();
	for (int round = 0; round < 2; round++) {
		s = read_gpus(g, HERD_TELEMETRY_GPU | HERD_TELEMETRY_PROCS);
		check_identity(s);
		CHECK_NUM(s->gpus[0].util_gpu, 50);
		CHECK_INT(s->gpus[0].throttle, 0x20);
		CHECK_INT(s->gpus[0].energy_mj, -1);
		CHECK_NUM(s->gpus[0].pcie_tx_bps, -1);
		CHECK_NUM(s->gpus[0].pcie_rx_bps, -1);
		CHECK_NUM(s->gpus[0].nvlink_tx_bps, -1);
		CHECK_NUM(s->gpus[0].temp_c, 41);
		CHECK_INT(s->nprocs, 1);
		CHECK_INT(s->procs[0].pid, pid);
		CHECK_INT(s->procs[0].mem_used, 8192);
		CHECK_STR(s->procs[0].job, host_pids() ? "old-1" : "");
		CHECK_INT(s->procs[0].rank, host_pids() ? 0 : -1);
		write_text(state_path, "a", "gpu 1 nvlink_tx_kib 50\n");
	}
	herd__tgpu_close(g);
	stop_child(pid);
}

/* No NVML on the library path: HERD_EUNAVAIL saying so as discovery does. */
static void test_no_driver_is_unavailable(void)
{
	herd__tgpu *g = (herd__tgpu *)(uintptr_t)1;
	void *real = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	char why[512];

	if (real != NULL) {
		dlclose(real);
		TEST_SKIP("a libnvidia-ml.so.1 is installed here");
	}
	CHECK_ERR(herd__tgpu_open(&g, NULL, why, sizeof(why)), HERD_EUNAVAIL,
		  "NVIDIA driver not found: ");
	CHECK(g == NULL);
	CHECK(strncmp(why, "NVIDIA driver not found: libnvidia-ml.so.1", 42) == 0);
	herd__tgpu_close(NULL);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * A started sampler whose driver call does not return (the stand-in's
 * utilization query sleeping 30 s, as on a GPU fallen off the bus): free
 * waits its 5 s for the thread and returns, leaving the thread to free
 * the sampler when the call returns.  Run last: the thread outlives it.
 */
static void test_free_gives_up_on_a_stalled_driver_call(void)
{
	herd_telemetry_opts o = HERD_TELEMETRY_OPTS_INIT;
	herd_log_level level = herd_log_get_level();
	herd_telemetry *t = NULL;
	struct timespec in_call = { 1, 0 };
	int64_t t0, ms;

	setenv("HERD_NVML_MOCK_STATE", state_path, 1);
	setenv("HERD_KERNEL_LOG", log_path, 1);
	write_text(state_path, "w", "gpu 0 stall_ms 30000\n");
	o.period_ms = 10;
	o.parts = HERD_TELEMETRY_GPU;
	o.lease_dir = lease_dir;
	CHECK_OK(herd_telemetry_create(&t, &o));
	CHECK_OK(herd_telemetry_start(t));
	/* The thread's first sample starts at once and stalls. */
	nanosleep(&in_call, NULL);
	herd_log_set_level(HERD_LOG_ERROR);   /* free's warning is expected */
	t0 = now_ms();
	herd_telemetry_free(t);
	ms = now_ms() - t0;
	herd_log_set_level(level);
	if (ms < 4500 || ms >= 10000)
		TEST_FAIL_("herd_telemetry_free took %lld ms; expected its 5 s bound, "
			   "not the stall's 30 s", (long long)ms);
	test_checks++;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";

	tmp = make_tmpdir();
	snprintf(state_path, sizeof(state_path), "%s/nvml-state", tmp);
	snprintf(log_path, sizeof(log_path), "%s/kernel.log", tmp);
	snprintf(lease_dir, sizeof(lease_dir), "%s/leases", tmp);
	if (strcmp(mode, "nodriver") == 0) {
		TEST_RUN(test_no_driver_is_unavailable);
	} else if (strcmp(mode, "old") == 0) {
		TEST_RUN(test_old_driver_lacks_entry_points);
	} else {
		TEST_RUN(test_idle_gpus_without_state);
		TEST_RUN(test_figures_and_rates_from_state);
		TEST_RUN(test_processes_named_by_environment_and_lease);
		TEST_RUN(test_processes_past_the_cap);
		TEST_RUN(test_xid_events_counted_since_open);
		TEST_RUN(test_free_gives_up_on_a_stalled_driver_call);
	}
	rm_tree(tmp);
	return TEST_DONE();
}
