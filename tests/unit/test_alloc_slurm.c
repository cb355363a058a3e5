/*
 * Slurm's granted GPUs (herd_alloc_slurm_gpus), from the environment values
 * Slurm gives a job or step, translated to the node's GPUs: Slurm's index
 * is the GPU's place in PCI bus order (gres.conf with AutoDetect=nvml), so
 * "4" on the DGX H100 fixture is 0000:9d:00.0, GPU-4a894db7-....  Then
 * herd_alloc inside an allocation: only granted GPUs are candidates.
 */
#include "test_alloc_util.h"

static const herd_node *dgx_node(herd_cluster **c)
{
	*c = load_fixture("dgx-h100.json");
	return test_node(*c, 0);
}

/* The granted GPUs as "i,j,..." for env, or the status name on failure. */
static const char *granted(const herd_node *node, const char *job, const char *step,
			   const char *jobgpus, const char *cvd)
{
	static char buf[256];
	herd_alloc_slurm_env env = { job, step, jobgpus, cvd };
	size_t idx[16], n = 99, len = 0;
	bool inside = false;
	herd_status st = herd_alloc_slurm_gpus(node, &env, idx, &n, &inside);

	if (st != HERD_OK)
		return herd_status_name(st);
	buf[0] = '\0';
	len += (size_t)snprintf(buf, sizeof(buf), "%s:", inside ? "in" : "out");
	for (size_t i = 0; i < n; i++)
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%zu", i ? "," : "",
					idx[i]);
	return buf;
}

static void test_alloc_slurm_outside_an_allocation_grants_everything(void)
{
	herd_cluster *c;
	const herd_node *node = dgx_node(&c);

	CHECK_STR(granted(node, NULL, "1", "2", "3"), "out:0,1,2,3,4,5,6,7");
	CHECK_STR(granted(node, "", NULL, NULL, NULL), "out:0,1,2,3,4,5,6,7");
	herd_cluster_free(c);
}

static void test_alloc_slurm_indices_are_pci_bus_order(void)
{
	herd_cluster *c;
	const herd_node *node = dgx_node(&c);
	herd_alloc_slurm_env env = { "77", "4", NULL, NULL };
	size_t idx[8], n = 0;
	bool inside = false;

	CHECK_OK(herd_alloc_slurm_gpus(node, &env, idx, &n, &inside));
	CHECK_INT(n, 1);
	CHECK_STR(node->gpus[idx[0]].pci.bus_id, "0000:9d:00.0");
	CHECK_STR(node->gpus[idx[0]].uuid, "GPU-4a894db7-e48f-42b9-aa5d-670af9a3638e");
	CHECK_STR(granted(node, "77", "0,1,4", NULL, NULL), "in:0,1,4");
	CHECK_STR(granted(node, "77", NULL, "2-3", NULL), "in:2,3");
	CHECK_STR(granted(node, "77", NULL, " 6, 1 ", NULL), "in:1,6");
	/* The step's GPUs, not the job's. */
	CHECK_STR(granted(node, "77", "5", "4,5,6,7", NULL), "in:5");
	herd_cluster_free(c);
}

static void test_alloc_slurm_cuda_visible_devices_in_either_form(void)
{
	herd_cluster *c;
	const herd_node *node = dgx_node(&c);

	/* Slurm's own values: the same indices, or 0..n-1 under ConstrainDevices. */
	CHECK_STR(granted(node, "77", "1,4,6", NULL, "1,4,6"), "in:1,4,6");
	CHECK_STR(granted(node, "77", "1,4,6", NULL, "0,1,2"), "in:1,4,6");
	CHECK_STR(granted(node, "77", NULL, "5,7", "0,1"), "in:5,7");
	/* Narrowed by hand: among Slurm's indices first, else positions. */
	CHECK_STR(granted(node, "77", "1,4", NULL, "4"), "in:4");
	CHECK_STR(granted(node, "77", "4,6", NULL, "1"), "in:6");
	CHECK_STR(granted(node, "77", "1,4", NULL, "GPU-4a894db7-e48f-42b9-aa5d-670af9a3638e"),
		  "in:4");
	/* Hidden altogether. */
	CHECK_STR(granted(node, "77", "1,4", NULL, ""), "in:");
	/* Fits neither form. */
	CHECK_STR(granted(node, "77", "1,4", NULL, "5"), "HERD_EINVAL");
	CHECK(strstr(herd_last_error(), "CUDA_VISIBLE_DEVICES=5 fits neither of Slurm's forms for "
					"SLURM_STEP_GPUS=1,4") != NULL);
	CHECK_STR(granted(node, "77", "1,4", NULL, "GPU-79c8c292-6b94-45b5-b498-82321e35049e"),
		  "HERD_EINVAL");
	CHECK(strstr(herd_last_error(), "names a GPU that SLURM_STEP_GPUS=1,4 does not grant") !=
	      NULL);
	herd_cluster_free(c);
}

static void test_alloc_slurm_without_gpu_variables(void)
{
	herd_cluster *c;
	const herd_node *node = dgx_node(&c);

	/* CUDA_VISIBLE_DEVICES alone: Slurm's indices, or UUIDs. */
	CHECK_STR(granted(node, "77", NULL, NULL, "3,5"), "in:3,5");
	CHECK_STR(granted(node, "77", NULL, NULL,
			  "GPU-da60fb1c-eb7a-4995-9588-532d4242aadb,"
			  "GPU-f2adcc0e-e683-4cdf-a060-d7c4400cb70f"),
		  "in:1,7");
	/* An allocation without GPUs grants none. */
	CHECK_STR(granted(node, "77", NULL, NULL, NULL), "in:");
	/* Flags=env_uuid (Slurm 26.05+) lists UUIDs. */
	CHECK_STR(granted(node, "77", "GPU-5625871B-82B9-4FBC-91BA-7257DABE22CA", NULL, NULL),
		  "in:5");
	herd_cluster_free(c);
}

/*
 * Probed inside the job's device cgroup (ConstrainDevices), a node shows
 * only the granted GPUs: Slurm's 4,6 on a node that shows two GPUs, with
 * CUDA_VISIBLE_DEVICES=0,1, are those two.  Anything less certain is an
 * error, not a guess.
 */
static void test_alloc_slurm_inventory_seen_through_a_device_cgroup(void)
{
	herd_cluster *c = load_fixture("pcie-4gpu.json");
	const herd_node *node = test_node(c, 0);
	herd_node two = *node;

	two.ngpus = 2; /* what a probe inside the cgroup would have listed */
	CHECK_STR(granted(&two, "77", "2,3", NULL, "0,1"), "in:0,1");
	CHECK_STR(granted(&two, "77", "1,3", NULL, "0,1"), "in:0,1");
	CHECK_STR(granted(&two, "77", "2,3", NULL, NULL), "HERD_EINVAL");
	CHECK(strstr(herd_last_error(), "SLURM_STEP_GPUS=2,3 names GPU 2, but node pcie-4gpu has 2 "
					"GPUs") != NULL);
	CHECK_STR(granted(&two, "77", "2,3", NULL, "1,0"), "HERD_EINVAL");
	CHECK_STR(granted(&two, "77", "1,2,3", NULL, "0,1,2"), "HERD_EINVAL");
	herd_cluster_free(c);
}

static void test_alloc_slurm_bad_values_say_which_variable(void)
{
	herd_cluster *c;
	const herd_node *node = dgx_node(&c);
	herd_alloc_slurm_env env = { "77", NULL, NULL, NULL };
	size_t idx[8], n;
	bool inside;

	CHECK_STR(granted(node, "77", NULL, "NoDevFiles", NULL), "HERD_EINVAL");
	CHECK(strstr(herd_last_error(), "SLURM_JOB_GPUS=NoDevFiles: gres.conf names no device "
					"files") != NULL);
	CHECK_STR(granted(node, "77", "0,9", NULL, NULL), "HERD_EINVAL");
	CHECK(strstr(herd_last_error(),
		     "SLURM_STEP_GPUS=0,9 names GPU 9, but node dgx-h100 has 8 "
		     "GPUs (Slurm's index is read as the place in PCI bus order") != NULL);
	CHECK_STR(granted(node, "77", "GPU-00000000-0000-0000-0000-000000000000", NULL, NULL),
		  "HERD_ENOTFOUND");
	CHECK(strstr(herd_last_error(), "which node dgx-h100 does not have") != NULL);
	CHECK_STR(granted(node, "77", "MIG-3f0a1c2d-aaaa-bbbb-cccc-000000000000", NULL, NULL),
		  "HERD_EINVAL");
	CHECK(strstr(herd_last_error(), "MIG devices") != NULL);
	CHECK_STR(granted(node, "77", "zero", NULL, NULL), "HERD_EINVAL");
	CHECK(strstr(herd_last_error(), "'zero' is neither a GPU index nor a GPU UUID") != NULL);
	CHECK_STR(granted(node, "77", "1,,2", NULL, NULL), "HERD_EINVAL");
	CHECK_STR(granted(node, "77", "3-1", NULL, NULL), "HERD_EINVAL");
	CHECK_STR(granted(node, "77", "-1", NULL, NULL), "HERD_EINVAL");
	CHECK_STR(granted(node, "77", "99999999999999999999", NULL, NULL), "HERD_EINVAL");
	CHECK_STR(granted(node, "77", "0-4000000", NULL, NULL), "HERD_EINVAL");
	CHECK_STR(granted(node, "77", "1,4", NULL, "0,GPU-4a894db7-e48f-42b9-aa5d-670af9a3638e"),
		  "HERD_EINVAL");
	CHECK_ERR(herd_alloc_slurm_gpus(node, &env, NULL, &n, &inside), HERD_EINVAL,
		  "must not be NULL");
	CHECK_ERR(herd_alloc_slurm_gpus(node, NULL, idx, &n, &inside), HERD_EINVAL,
		  "must not be NULL");
	herd_cluster_free(c);
}

static void set_env(const char *name, const char *value)
{
	if (value != NULL)
		setenv(name, value, 1);
	else
		unsetenv(name);
}

static void slurm_env(const char *job, const char *step, const char *jobgpus, const char *cvd)
{
	set_env("SLURM_JOB_ID", job);
	set_env("SLURM_STEP_GPUS", step);
	set_env("SLURM_JOB_GPUS", jobgpus);
	set_env("CUDA_VISIBLE_DEVICES", cvd);
}

/* herd_alloc reads the variables and plans over the granted GPUs only. */
static void test_alloc_inside_slurm_uses_only_granted_gpus(void)
{
	herd_cluster *c;
	herd_alloc_request req = HERD_ALLOC_REQUEST_INIT;
	herd_alloc_opts opts = HERD_ALLOC_OPTS_INIT;
	char *dir = make_tmpdir();
	herd_plan *p = NULL;

	dgx_node(&c);
	opts.lease_dir = dir;
	opts.plan_only = 1;
	req.gpus = 2;
	slurm_env("77", "1,4", "0,1,4,5", "0,1");
	CHECK_OK(herd_alloc(&p, c, &req, &opts));
	CHECK_STR(plan_gpus(p), "1,4");
	herd_plan_free(p);
	p = NULL;
	req.gpus = 3;
	CHECK_ERR(herd_alloc(&p, c, &req, &opts), HERD_ENORESOURCE,
		  "need 3 GPUs; the inventory has 2 free: node dgx-h100 has 2 free of 8; not "
		  "available: GPU0 not granted");
	/* Ignoring Slurm: every GPU again. */
	opts.ignore_slurm = 1;
	CHECK_OK(herd_alloc(&p, c, &req, &opts));
	CHECK_STR(plan_gpus(p), "0,1,2");
	herd_plan_free(p);
	p = NULL;
	opts.ignore_slurm = 0;
	/* An allocation without GPUs. */
	slurm_env("78", NULL, NULL, NULL);
	req.gpus = 1;
	CHECK_ERR(herd_alloc(&p, c, &req, &opts), HERD_ENORESOURCE,
		  "Slurm job 78 granted no GPU on this node (no SLURM_STEP_GPUS, SLURM_JOB_GPUS or "
		  "CUDA_VISIBLE_DEVICES): ask for GPUs with --gpus or --gres=gpu:N");
	slurm_env("79", "NoDevFiles", NULL, NULL);
	CHECK_ERR(herd_alloc(&p, c, &req, &opts), HERD_EINVAL, "NoDevFiles");
	CHECK(p == NULL);
	slurm_env(NULL, NULL, NULL, NULL);
	herd_cluster_free(c);
	rm_tree(dir);
}

int main(void)
{
	unsetenv("HERD_INVENTORY");
	slurm_env(NULL, NULL, NULL, NULL);
	TEST_RUN(test_alloc_slurm_outside_an_allocation_grants_everything);
	TEST_RUN(test_alloc_slurm_indices_are_pci_bus_order);
	TEST_RUN(test_alloc_slurm_cuda_visible_devices_in_either_form);
	TEST_RUN(test_alloc_slurm_without_gpu_variables);
	TEST_RUN(test_alloc_slurm_inventory_seen_through_a_device_cgroup);
	TEST_RUN(test_alloc_slurm_bad_values_say_which_variable);
	TEST_RUN(test_alloc_inside_slurm_uses_only_granted_gpus);
	return TEST_DONE();
}
