/*
 * tests/unit/test_compat_formats.c - what an earlier herd wrote, this one
 * reads: golden files under tests/fixtures/compat/, written by the encoders
 * of the release before the field tables of sdk/base/schema.c, decoded here
 * with exact field values, and encoded again to the same bytes.
 *
 *   inventory-mixed.{msgpack,json,txt}   two nodes (GPUs with NVLinks and
 *                                        PCIe switches, NUMA, netdevs, RDMA
 *                                        ports with GIDs, notes, drivers)
 *                                        and two failed hosts, in the three
 *                                        encodings
 *   inventory-dgx-h100-x4.msgpack        four DGX nodes as discovery merges them
 *   topology-matrix.txt                  the matrices of those inventories
 *   comm-info.msgpack                    a communicator's info record
 *   ckpt/                                step 7 of three ranks (row, column
 *                                        and replicated tensors, two-chunk
 *                                        shards, blobs of every rule), as
 *                                        herd_ckpt_save wrote it
 *   ckpt-nosum/                          step 3 of one rank, checksum "none"
 *
 * `test_compat_formats --write DIR` writes the files again; only a
 * deliberate change of a format may do that, and then the previous files
 * must still decode.
 */
#include <sys/stat.h>

#include "comm_harness.h"
#include "inventory_check.h"

#include "buf.h"
#include "ckpt/ckpt_internal.h"
#include "topo/inventory.h"
#include "compat_files.h"

#define CKPT_STEP 7
#define CKPT_RANKS 3
#define BYTES_COLS 5000   /* a uint8 row of two 4 KiB chunks */

/* Two nodes and two failed hosts, as a discovery of four would record them. */

/* Node i of c (the test's fixtures have them all). */
static const herd_node *node_at(const herd_cluster *c, size_t i)
{
	const herd_node *node = NULL;

	(void)herd_cluster_node(c, i, &node);
	return node;
}

static const char mixed_json[] =
	"{\"v\": 1, \"nodes\": ["
	"{\"hostname\": \"gpu-a\", \"cpu_model\": \"Intel(R) Xeon(R) Platinum 8480+\", "
	"\"packages\": 2, \"cores\": 112, \"threads\": 224, \"memory_bytes\": 2164663517184, "
	"\"memory_available_bytes\": 2099540455424, \"numa\": ["
	"{\"os_index\": 0, \"memory_bytes\": 1082331758592, \"cpus\": \"0-55,112-167\"}, "
	"{\"os_index\": 1, \"memory_bytes\": 1082331758592, \"cpus\": \"56-111,168-223\"}], "
	"\"gpus\": ["
	"{\"uuid\": \"GPU-11111111-2222-3333-4444-555555555555\", \"name\": \"NVIDIA A100-SXM4-80GB\", "
	"\"pci\": {\"bus_id\": \"0000:07:00.0\", \"host_bridge\": \"0000:00\", \"numa_node\": 0, "
	"\"switches\": [\"0000:05:00.0\", \"0000:06:00.0\"]}, \"memory_bytes\": 85899345920, "
	"\"cc_major\": 8, \"cc_minor\": 0, \"nvswitch_links\": 0, \"nvlinks\": ["
	"{\"peer_bus_id\": \"0000:0f:00.0\", \"links\": 12}], \"ecc\": 1, \"pcie_gen\": 4, "
	"\"pcie_width\": 16, \"pcie_max_gen\": 4, \"pcie_max_width\": 16}, "
	"{\"uuid\": \"GPU-66666666-7777-8888-9999-aaaaaaaaaaaa\", \"name\": \"NVIDIA A100-SXM4-80GB\", "
	"\"pci\": {\"bus_id\": \"0000:0f:00.0\", \"host_bridge\": \"0000:00\", \"numa_node\": 0, "
	"\"switches\": [\"0000:05:00.0\", \"0000:0d:00.0\"]}, \"memory_bytes\": 85899345920, "
	"\"cc_major\": 8, \"cc_minor\": 0, \"nvswitch_links\": 0, \"nvlinks\": ["
	"{\"peer_bus_id\": \"0000:07:00.0\", \"links\": 12}], \"ecc\": 0, \"pcie_gen\": 3, "
	"\"pcie_width\": 8, \"pcie_max_gen\": 4, \"pcie_max_width\": 16}], "
	"\"gpu_note\": null, \"netdevs\": ["
	"{\"name\": \"lo\", \"state\": \"unknown\", \"mtu\": 65536, \"speed_mbps\": -1, "
	"\"addrs\": [\"127.0.0.1/8\"], \"pci\": {\"bus_id\": \"\", \"host_bridge\": \"\", "
	"\"numa_node\": -1, \"switches\": []}}, "
	"{\"name\": \"ibp12s0\", \"state\": \"up\", \"mtu\": 4092, \"speed_mbps\": 200000, "
	"\"addrs\": [\"192.168.7.1/24\", \"fe80::1/64\"], \"pci\": {\"bus_id\": \"0000:0c:00.0\", "
	"\"host_bridge\": \"0000:00\", \"numa_node\": 0, \"switches\": [\"0000:05:00.0\"]}}], "
	"\"rdma\": [{\"name\": \"mlx5_0\", \"netdev\": \"ibp12s0\", \"pci\": {\"bus_id\": "
	"\"0000:0c:00.0\", \"host_bridge\": \"0000:00\", \"numa_node\": 0, \"switches\": "
	"[\"0000:05:00.0\"]}, \"ports\": [{\"port\": 1, \"state\": \"active\", \"link_layer\": "
	"\"InfiniBand\", \"rate_gbps\": 200, \"gids\": [\"fe80:0000:0000:0000:0c42:a103:0065:7a10\"]}, "
	"{\"port\": 2, \"state\": \"down\", \"link_layer\": \"Ethernet\", \"rate_gbps\": 0, "
	"\"gids\": []}]}], "
	"\"rdma_note\": null, \"gpu_driver\": \"570.86.15\", \"cuda_driver\": \"12.8\", "
	"\"nccl\": \"2.21.5\"}, "
	"{\"hostname\": \"cpu-b\", \"cpu_model\": \"\", \"packages\": 1, \"cores\": 8, "
	"\"threads\": 16, \"memory_bytes\": 68719476736, \"memory_available_bytes\": 0, "
	"\"numa\": [{\"os_index\": 0, \"memory_bytes\": 68719476736, \"cpus\": \"0-15\"}], "
	"\"gpus\": [], \"gpu_note\": \"no GPU: NVIDIA driver not found\", \"netdevs\": [], "
	"\"rdma\": [], \"rdma_note\": \"no RDMA devices: libibverbs found none\", "
	"\"gpu_driver\": null, \"cuda_driver\": null, \"nccl\": null}], "
	"\"failed\": [{\"host\": \"gpu-c\", \"reason\": \"ssh: connect to host gpu-c port 22: "
	"Connection refused\"}, {\"host\": \"gpu-d\", \"reason\": \"no answer within 30 s\"}]}";

/* ---- files -------------------------------------------------------------- */


/* A golden file's bytes. */
static char *golden(const char *name, size_t *len)
{
	char rel[256];

	snprintf(rel, sizeof(rel), "compat/%s", name);
	return fixture_bytes(rel, len);
}

static void write_golden(const char *name, const void *data, size_t len)
{
	char path[4096];

	compat_path(name, path, sizeof(path));
	if (herd__write_file_atomic(path, data, len, 0644) != HERD_OK) {
		fprintf(stderr, "cannot write %s: %s\n", path, herd_last_error());
		exit(1);
	}
}

/* ---- inventories -------------------------------------------------------- */

/* Every node's GPU x (GPU, NIC) matrix, one line per GPU. */
static void matrix_text(const herd_cluster *c, herd__buf *out)
{
	for (size_t n = 0; n < herd_cluster_node_count(c); n++) {
		const herd_node *node = node_at(c, n);
		size_t nics = herd_node_nic_count(node);
		char line[1024], code[HERD_NODE_LINK_CODE_LEN];
		int k;

		k = snprintf(line, sizeof(line), "%s: %zu GPUs, %zu NICs\n", node->hostname,
			     node->ngpus, nics);
		herd__buf_append(out, line, (size_t)k);
		for (size_t i = 0; i < node->ngpus; i++) {
			herd_link link;

			k = snprintf(line, sizeof(line), "GPU%zu", i);
			for (size_t j = 0; j < node->ngpus; j++) {
				CHECK_OK(herd_node_gpu_link(node, i, j, &link));
				k += snprintf(line + k, sizeof(line) - (size_t)k, " %s",
					      herd_node_link_code(link, code));
			}
			k += snprintf(line + k, sizeof(line) - (size_t)k, " |");
			for (size_t j = 0; j < nics; j++) {
				CHECK_OK(herd_node_gpu_nic_link(node, i, j, &link));
				k += snprintf(line + k, sizeof(line) - (size_t)k, " %s",
					      herd_node_link_code(link, code));
			}
			line[k++] = '\n';
			herd__buf_append(out, line, (size_t)k);
		}
	}
}

static herd_cluster *x4_from_json(void)
{
	size_t len = 0;
	char *text = fixture_bytes("inventory/dgx-h100-x4.json", &len);
	herd_cluster *c = decode_ok(text, len, "dgx-h100-x4.json");

	free(text);
	return c;
}

static void write_inventories(void)
{
	herd_cluster *mixed = decode_ok(mixed_json, strlen(mixed_json), "mixed");
	herd_cluster *x4 = x4_from_json();
	static const struct { herd_cluster_format format; const char *name; } forms[] = {
		{ HERD_CLUSTER_FORMAT_MSGPACK, "inventory-mixed.msgpack" },
		{ HERD_CLUSTER_FORMAT_JSON, "inventory-mixed.json" },
		{ HERD_CLUSTER_FORMAT_TEXT, "inventory-mixed.txt" },
	};
	herd__buf m;
	void *data;
	size_t len;

	for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
		data = encode_ok(mixed, forms[i].format, &len);
		write_golden(forms[i].name, data, len);
		herd_free(data);
	}
	data = encode_ok(x4, HERD_CLUSTER_FORMAT_MSGPACK, &len);
	write_golden("inventory-dgx-h100-x4.msgpack", data, len);
	herd_free(data);
	herd__buf_init(&m, 0);
	matrix_text(mixed, &m);
	matrix_text(x4, &m);
	write_golden("topology-matrix.txt", m.data + m.off, m.len - m.off);
	herd__buf_free(&m);
	herd_cluster_free(mixed);
	herd_cluster_free(x4);
}

static void check_mixed_values(const herd_cluster *c)
{
	const herd_node *a, *b;
	const herd_gpu *g;

	CHECK_INT(herd_cluster_node_count(c), 2);
	if (herd_cluster_node_count(c) != 2)
		return;
	a = node_at(c, 0);
	b = node_at(c, 1);
	CHECK_STR(a->hostname, "gpu-a");
	CHECK_STR(a->cpu_model, "Intel(R) Xeon(R) Platinum 8480+");
	CHECK_INT(a->packages, 2);
	CHECK_INT(a->cores, 112);
	CHECK_INT(a->threads, 224);
	CHECK(a->memory_bytes == UINT64_C(2164663517184));
	CHECK(a->memory_available_bytes == UINT64_C(2099540455424));
	CHECK_INT(a->nnuma, 2);
	CHECK_INT(a->numa[1].os_index, 1);
	CHECK(a->numa[1].memory_bytes == UINT64_C(1082331758592));
	CHECK_STR(a->numa[1].cpus, "56-111,168-223");
	CHECK_INT(a->ngpus, 2);
	g = &a->gpus[1];
	CHECK_STR(g->uuid, "GPU-66666666-7777-8888-9999-aaaaaaaaaaaa");
	CHECK_STR(g->name, "NVIDIA A100-SXM4-80GB");
	CHECK_STR(g->pci.bus_id, "0000:0f:00.0");
	CHECK_STR(g->pci.host_bridge, "0000:00");
	CHECK_INT(g->pci.numa_node, 0);
	CHECK_INT(g->pci.nswitches, 2);
	CHECK_STR(g->pci.switches[1], "0000:0d:00.0");
	CHECK(g->memory_bytes == UINT64_C(85899345920));
	CHECK_INT(g->cc_major, 8);
	CHECK_INT(g->cc_minor, 0);
	CHECK_INT(g->nvswitch_links, 0);
	CHECK_INT(g->nnvlinks, 1);
	CHECK_STR(g->nvlinks[0].peer_bus_id, "0000:07:00.0");
	CHECK_INT(g->nvlinks[0].links, 12);
	CHECK_INT(g->ecc, 0);
	CHECK_INT(a->gpus[0].ecc, 1);
	CHECK_INT(g->pcie_gen, 3);
	CHECK_INT(g->pcie_width, 8);
	CHECK_INT(g->pcie_max_gen, 4);
	CHECK_INT(g->pcie_max_width, 16);
	CHECK(a->gpu_note == NULL && a->rdma_note == NULL);
	CHECK_INT(a->nnetdevs, 2);
	CHECK_STR(a->netdevs[0].name, "lo");
	CHECK_STR(a->netdevs[0].pci.bus_id, "");
	CHECK_INT(a->netdevs[0].pci.numa_node, -1);
	CHECK_INT(a->netdevs[0].speed_mbps, -1);
	CHECK_STR(a->netdevs[1].state, "up");
	CHECK_INT(a->netdevs[1].mtu, 4092);
	CHECK_INT(a->netdevs[1].speed_mbps, 200000);
	CHECK_INT(a->netdevs[1].naddrs, 2);
	CHECK_STR(a->netdevs[1].addrs[1], "fe80::1/64");
	CHECK_INT(a->nrdma, 1);
	CHECK_STR(a->rdma[0].name, "mlx5_0");
	CHECK_STR(a->rdma[0].netdev, "ibp12s0");
	CHECK_STR(a->rdma[0].pci.switches[0], "0000:05:00.0");
	CHECK_INT(a->rdma[0].nports, 2);
	CHECK_INT(a->rdma[0].ports[0].port, 1);
	CHECK_STR(a->rdma[0].ports[0].state, "active");
	CHECK_STR(a->rdma[0].ports[0].link_layer, "InfiniBand");
	CHECK_INT(a->rdma[0].ports[0].rate_gbps, 200);
	CHECK_INT(a->rdma[0].ports[0].ngids, 1);
	CHECK_STR(a->rdma[0].ports[0].gids[0], "fe80:0000:0000:0000:0c42:a103:0065:7a10");
	CHECK_INT(a->rdma[0].ports[1].ngids, 0);
	CHECK_STR(a->rdma[0].ports[1].link_layer, "Ethernet");
	CHECK_STR(a->gpu_driver, "570.86.15");
	CHECK_STR(a->cuda_driver, "12.8");
	CHECK_STR(a->nccl, "2.21.5");

	CHECK_STR(b->hostname, "cpu-b");
	CHECK_STR(b->cpu_model, "");
	CHECK(b->memory_available_bytes == 0);
	CHECK_INT(b->ngpus, 0);
	CHECK_INT(b->nnetdevs, 0);
	CHECK_INT(b->nrdma, 0);
	CHECK_STR(b->gpu_note, "no GPU: NVIDIA driver not found");
	CHECK_STR(b->rdma_note, "no RDMA devices: libibverbs found none");
	CHECK(b->gpu_driver == NULL && b->cuda_driver == NULL && b->nccl == NULL);

	CHECK_INT(c->nfailed, 2);
	if (c->nfailed == 2) {
		CHECK_STR(c->failed[0].host, "gpu-c");
		CHECK_STR(c->failed[0].reason, "ssh: connect to host gpu-c port 22: Connection refused");
		CHECK_STR(c->failed[1].host, "gpu-d");
	}
}

/* Each golden encoding of the mixed inventory decodes to the values above
 * and encodes again to the bytes of all three files. */
static void test_inventory_golden_files_decode_and_encode_identically(void)
{
	static const char *const names[] = { "inventory-mixed.msgpack", "inventory-mixed.json",
					     "inventory-mixed.txt" };
	static const herd_cluster_format formats[] = { HERD_CLUSTER_FORMAT_MSGPACK, HERD_CLUSTER_FORMAT_JSON,
					       HERD_CLUSTER_FORMAT_TEXT };
	size_t glen[3];
	char *gold[3];

	for (size_t i = 0; i < 3; i++)
		gold[i] = golden(names[i], &glen[i]);
	for (size_t i = 0; i < 3; i++) {
		herd_cluster *c = decode_ok(gold[i], glen[i], names[i]);

		if (c == NULL)
			continue;
		check_mixed_values(c);
		for (size_t f = 0; f < 3; f++) {
			size_t len;
			void *again = encode_ok(c, formats[f], &len);

			CHECK_BYTES(again, len, gold[f], glen[f]);
			herd_free(again);
		}
		herd_cluster_free(c);
	}
	for (size_t i = 0; i < 3; i++)
		free(gold[i]);
}

static void test_inventory_x4_golden_file_decodes_and_encodes_identically(void)
{
	size_t len, again_len, src_len;
	char *gold = golden("inventory-dgx-h100-x4.msgpack", &len);
	herd_cluster *c = decode_ok(gold, len, "x4"), *src = x4_from_json();
	void *again = NULL, *from_src = NULL;

	if (c != NULL) {
		CHECK_INT(herd_cluster_node_count(c), 4);
		CHECK_STR(node_at(c, 3)->hostname, "dgx04");
		CHECK_INT(node_at(c, 3)->ngpus, 8);
		CHECK_INT(node_at(c, 3)->gpus[7].nvswitch_links, 18);
		CHECK_INT(node_at(c, 0)->nrdma, 8);
		again = encode_ok(c, HERD_CLUSTER_FORMAT_MSGPACK, &again_len);
		CHECK_BYTES(again, again_len, gold, len);
	}
	from_src = encode_ok(src, HERD_CLUSTER_FORMAT_MSGPACK, &src_len);
	CHECK_BYTES(from_src, src_len, gold, len);
	herd_free(again);
	herd_free(from_src);
	herd_cluster_free(c);
	herd_cluster_free(src);
	free(gold);
}

static void test_topology_matrix_of_golden_inventories_is_unchanged(void)
{
	size_t mlen, xlen, want_len;
	char *mp = golden("inventory-mixed.msgpack", &mlen);
	char *x4 = golden("inventory-dgx-h100-x4.msgpack", &xlen);
	char *want = golden("topology-matrix.txt", &want_len);
	herd_cluster *a = decode_ok(mp, mlen, "mixed"), *b = decode_ok(x4, xlen, "x4");
	herd__buf m;

	herd__buf_init(&m, 0);
	if (a != NULL && b != NULL) {
		matrix_text(a, &m);
		matrix_text(b, &m);
	}
	CHECK_BYTES(m.data + m.off, m.len - m.off, want, want_len);
	CHECK(strstr(want, "gpu-a: 2 GPUs, 1 NICs\nGPU0 X NV12 | PXB\n") != NULL);
	herd__buf_free(&m);
	herd_cluster_free(a);
	herd_cluster_free(b);
	free(mp), free(x4), free(want);
}

/* ---- the communicator's info record -------------------------------------- */

static void golden_peer(herd__peer *p)
{
	memset(p, 0, sizeof(*p));
	herd__strlcpy(p->host, "gpu-a", sizeof(p->host));
	herd__strlcpy(p->boot_id, "0b5b6cf5-95f4-4c4e-8a8f-3f1f0f4a4d3e", sizeof(p->boot_id));
	herd__strlcpy(p->addrs, "10.1.4.17:41235,192.168.7.1:41235", sizeof(p->addrs));
	p->shm_dev = 23;
	p->shm_ino = UINT64_C(0x100000001);
	p->pidns = 4026531836u;
	p->pid = 424242;
	p->transport = 2;
	p->streams = 4;
}

static void write_comm_info(void)
{
	herd__peer p;
	char *data = NULL;
	size_t len = 0;

	golden_peer(&p);
	CHECK_OK(herd__comm_info_pack(&p, 5, 8, &data, &len));
	write_golden("comm-info.msgpack", data, len);
	free(data);
}

static void test_comm_info_golden_record_parses_and_packs_identically(void)
{
	size_t len, again_len = 0;
	char *gold = golden("comm-info.msgpack", &len), *again = NULL;
	int64_t rank = -1, size = -1;
	herd__peer p;

	memset(&p, 0, sizeof(p));
	CHECK_OK(herd__comm_info_parse(&p, "golden", gold, len, &rank, &size));
	CHECK_INT(rank, 5);
	CHECK_INT(size, 8);
	CHECK_STR(p.host, "gpu-a");
	CHECK_STR(p.boot_id, "0b5b6cf5-95f4-4c4e-8a8f-3f1f0f4a4d3e");
	CHECK_STR(p.addrs, "10.1.4.17:41235,192.168.7.1:41235");
	CHECK(p.shm_dev == 23 && p.shm_ino == UINT64_C(0x100000001));
	CHECK(p.pidns == 4026531836u);
	CHECK_INT(p.pid, 424242);
	CHECK_INT(p.transport, 2);
	CHECK_INT(p.streams, 4);
	CHECK_OK(herd__comm_info_pack(&p, (int)rank, (int)size, &again, &again_len));
	CHECK_BYTES(again, again_len, gold, len);
	free(again);
	free(gold);
}

/* ---- checkpoints ---------------------------------------------------------- */

/* The values every rank saves, as functions of the global index. */
static float w_at(size_t i, size_t j) { return (float)(i * 10 + j) + 0.5f; }
static int32_t emb_at(size_t i, size_t j) { return (int32_t)(i * 100 + j) - 150; }
static double bias_at(size_t k) { return -1.25 * (double)k; }
static uint8_t bytes_at(size_t i, size_t j) { return (uint8_t)(i * 7 + j * 13); }
static uint16_t half_at(size_t k) { return (uint16_t)(0x3c00 + k); }

typedef struct ckpt_arg {
	char dir[2048];
	char scope[64];
} ckpt_arg;

/*
 * Rank r of three: "w" float32 [6,4] by rows, "emb" int32 [4,6] by
 * columns, "bias" float64 [4] and "half" float16 [8] replicated, "bytes"
 * uint8 [3,5000] by rows (two chunks a shard); blobs of every rule.
 */
static void ckpt_saver(int rank, int size, void *arg)
{
	ckpt_arg *a = arg;
	uint64_t wg[2] = { 6, 4 }, wo[2] = { 2 * (uint64_t)rank, 0 }, ws[2] = { 2, 4 };
	uint64_t eg[2] = { 4, 6 }, eo[2] = { 0, 2 * (uint64_t)rank }, es[2] = { 4, 2 };
	uint64_t bg[1] = { 4 }, hg[1] = { 8 };
	uint64_t yg[2] = { 3, BYTES_COLS }, yo[2] = { (uint64_t)rank, 0 }, ys[2] = { 1, BYTES_COLS };
	uint64_t rng = 1000 + (uint64_t)rank, pos = 50 + (uint64_t)rank, cfg = 77;
	herd_ckpt_opts o = HERD_CKPT_OPTS_INIT;
	static uint8_t bytes[BYTES_COLS];
	float w[8];
	int32_t emb[8];
	double bias[4];
	uint16_t half[8];
	herd_comm *comm = NULL;
	herd_ckpt *ck = NULL;

	for (size_t i = 0; i < 2; i++)
		for (size_t j = 0; j < 4; j++)
			w[i * 4 + j] = w_at(2 * (size_t)rank + i, j);
	for (size_t i = 0; i < 4; i++)
		for (size_t j = 0; j < 2; j++)
			emb[i * 2 + j] = emb_at(i, 2 * (size_t)rank + j);
	for (size_t k = 0; k < 4; k++)
		bias[k] = bias_at(k);
	for (size_t k = 0; k < 8; k++)
		half[k] = half_at(k);
	for (size_t j = 0; j < BYTES_COLS; j++)
		bytes[j] = bytes_at((size_t)rank, j);
	o.chunk_bytes = 4096;
	CHECK_OK(harness_comm(&comm, a->scope, rank, size, NULL, 20000));
	CHECK_OK(herd_ckpt_open(&ck, a->dir, comm, &o));
	CHECK_OK(herd_ckpt_add_tensor(ck, "w", w, HERD_FLOAT32, 2, wg, wo, ws));
	CHECK_OK(herd_ckpt_add_tensor(ck, "emb", emb, HERD_INT32, 2, eg, eo, es));
	CHECK_OK(herd_ckpt_add_tensor(ck, "bias", bias, HERD_FLOAT64, 1, bg, NULL, NULL));
	CHECK_OK(herd_ckpt_add_tensor(ck, "bytes", bytes, HERD_UINT8, 2, yg, yo, ys));
	CHECK_OK(herd_ckpt_add_tensor(ck, "half", half, HERD_FLOAT16, 1, hg, NULL, NULL));
	CHECK_OK(herd_ckpt_add_blob(ck, "rng", &rng, sizeof(rng), HERD_CKPT_BLOB_SAME_RANK));
	CHECK_OK(herd_ckpt_add_blob(ck, "loader", &pos, sizeof(pos), HERD_CKPT_BLOB_RANK0));
	CHECK_OK(herd_ckpt_add_blob(ck, "cfg", &cfg, sizeof(cfg), HERD_CKPT_BLOB_STRICT));
	CHECK_OK(herd_ckpt_save(ck, CKPT_STEP));
	CHECK_OK(herd_ckpt_wait(ck));
	herd_ckpt_free(ck);
	CHECK_OK(herd_comm_finalize(comm));
	herd_comm_free(comm);
}

static void write_checkpoints(void)
{
	herd_ckpt_opts o = HERD_CKPT_OPTS_INIT;
	uint64_t g[2] = { 2, 3 };
	int64_t x[6] = { 1, -2, 3, -4, 5, INT64_MIN };
	herd_ckpt *ck = NULL;
	char dir[4096];
	ckpt_arg a;

	memset(&a, 0, sizeof(a));
	compat_path("ckpt", a.dir, sizeof(a.dir));
	harness_scope(a.scope, sizeof(a.scope), "compat");
	harness_start();
	CHECK_INT(run_ranks(CKPT_RANKS, ckpt_saver, &a, 60000, NULL, NULL, 0, NULL), 0);
	harness_stop();

	compat_path("ckpt-nosum", dir, sizeof(dir));
	o.checksum = HERD_CKPT_CHECKSUM_NONE;
	CHECK_OK(herd_ckpt_open(&ck, dir, NULL, &o));
	CHECK_OK(herd_ckpt_add_tensor(ck, "x", x, HERD_INT64, 2, g, NULL, NULL));
	CHECK_OK(herd_ckpt_save(ck, 3));
	herd_ckpt_free(ck);
	/* The locks name this machine; the files are for every reader. */
	for (int i = 0; i < 2; i++) {
		char lock[4200], cmd[9000];

		compat_path(i == 0 ? "ckpt" : "ckpt-nosum", dir, sizeof(dir));
		snprintf(lock, sizeof(lock), "%s/.lock", dir);
		CHECK_INT(unlink(lock), 0);
		snprintf(cmd, sizeof(cmd), "chmod -R u=rwX,go=rX '%s'", dir);
		CHECK_INT(system(cmd), 0);
	}
}

static herd__ckpt_manifest *load_manifest(const char *step_dir, char **bytes, size_t *len)
{
	herd__ckpt_manifest *m = NULL;
	char name[256];

	snprintf(name, sizeof(name), "%s/%s", step_dir, HERD__CKPT_MANIFEST);
	*bytes = golden(name, len);
	CHECK_OK(herd__ckpt_manifest_decode(&m, *bytes, *len, name));
	return m;
}

/* A shard of the golden step, as its manifest must describe it. */
typedef struct want_shard {
	const char *tensor;
	herd_dtype dtype;
	int ndim;
	size_t nshards;        /* of the tensor */
	size_t index;          /* of the shard */
	uint64_t offset[2], shape[2];
	uint32_t file;
	uint64_t at, len;
	size_t nsums;
} want_shard;

/* Rank 0's file holds w, emb, bias, bytes and half's shards in that order,
 * rank 1's w and emb and bytes. */
static const want_shard want_shards[] = {
	{ "w", HERD_FLOAT32, 2, 3, 0, { 0, 0 }, { 2, 4 }, 0, 0, 32, 1 },
	{ "w", HERD_FLOAT32, 2, 3, 2, { 4, 0 }, { 2, 4 }, 2, 0, 32, 1 },
	{ "emb", HERD_INT32, 2, 3, 1, { 0, 2 }, { 4, 2 }, 1, 32, 32, 1 },
	{ "bias", HERD_FLOAT64, 1, 1, 0, { 0 }, { 4 }, 0, 64, 32, 1 },
	{ "bytes", HERD_UINT8, 2, 3, 1, { 1, 0 }, { 1, BYTES_COLS }, 1, 64, BYTES_COLS, 2 },
	{ "half", HERD_FLOAT16, 1, 1, 0, { 0 }, { 8 }, 0, 96 + BYTES_COLS, 16, 1 },
};

static void check_shard(const herd__ckpt_manifest *m, const want_shard *w)
{
	const herd__ckpt_tensor *t = herd__ckpt_manifest_tensor(m, w->tensor);
	const herd__ckpt_shard *s;

	test_checks++;
	if (t == NULL || t->dtype != w->dtype || t->ndim != w->ndim || t->nshards != w->nshards) {
		TEST_FAIL_("tensor %s: not %d-d %s in %zu shards", w->tensor, w->ndim,
			   herd_dtype_name(w->dtype), w->nshards);
		return;
	}
	s = &t->shards[w->index];
	CHECK_INT(s->box.ndim, w->ndim);
	for (int i = 0; i < w->ndim; i++)
		CHECK(s->box.offset[i] == w->offset[i] && s->box.shape[i] == w->shape[i]);
	CHECK_INT(s->file, w->file);
	CHECK_INT(s->at, w->at);
	CHECK_INT(s->len, w->len);
	CHECK_INT(s->nsums, w->nsums);
}

static void test_ckpt_golden_manifest_decodes_and_encodes_identically(void)
{
	herd__ckpt_manifest *m;
	const herd__ckpt_tensor *t;
	const herd__ckpt_blob *b;
	char *gold = NULL, *again = NULL;
	size_t len = 0, again_len = 0;

	m = load_manifest("ckpt/step-000000000007", &gold, &len);
	if (m == NULL) {
		free(gold);
		return;
	}
	CHECK_INT(m->step, CKPT_STEP);
	CHECK_INT(m->ranks, CKPT_RANKS);
	CHECK_INT(m->time, 1795868856);
	CHECK_INT(m->checksum, HERD_CKPT_CHECKSUM_XXH3);
	CHECK_INT(m->chunk_bytes, 4096);
	CHECK_INT(m->nfiles, 3);
	for (size_t i = 0; i < m->nfiles && i < 3; i++) {
		char want[32];

		herd__ckpt_rank_file_name(want, sizeof(want), (int)i);
		CHECK_STR(m->files[i].name, want);
		CHECK_INT(m->files[i].rank, (int)i);
	}
	/* Rank 0 also owns the replicated tensors and writes every blob's part. */
	CHECK_INT(m->files[0].size, 32 + 32 + 32 + BYTES_COLS + 16 + 24);
	CHECK_INT(m->files[1].size, 32 + 32 + BYTES_COLS + 24);
	CHECK_INT(m->ntensors, 5);
	CHECK_INT(m->nblobs, 3);

	t = herd__ckpt_manifest_tensor(m, "w");
	CHECK(t != NULL && t == &m->tensors[0]);
	if (t != NULL) {
		CHECK(t->shape[0] == 6 && t->shape[1] == 4);
		CHECK_INT(t->bytes, 96);
	}
	for (size_t i = 0; i < sizeof(want_shards) / sizeof(want_shards[0]); i++)
		check_shard(m, &want_shards[i]);

	b = herd__ckpt_manifest_blob(m, "rng");
	if (b != NULL && b->nparts == 3) {
		CHECK_INT(b->rule, HERD_CKPT_BLOB_SAME_RANK);
		CHECK_INT(b->parts[2].rank, 2);
		CHECK_INT(b->parts[2].file, 2);
		CHECK_INT(b->parts[2].len, 8);
		CHECK(b->parts[2].sum != 0);
	} else {
		CHECK(!"blob rng of three parts");
	}
	b = herd__ckpt_manifest_blob(m, "loader");
	CHECK(b != NULL && b->rule == HERD_CKPT_BLOB_RANK0);
	b = herd__ckpt_manifest_blob(m, "cfg");
	CHECK(b != NULL && b->rule == HERD_CKPT_BLOB_STRICT);

	CHECK_OK(herd__ckpt_manifest_encode(m, &again, &again_len));
	CHECK_BYTES(again, again_len, gold, len);
	free(again);
	herd__ckpt_manifest_free(m);
	free(gold);

	/* Without checksums: no chunk sums, blob sums of zero. */
	m = load_manifest("ckpt-nosum/step-000000000003", &gold, &len);
	if (m != NULL) {
		CHECK_INT(m->checksum, HERD_CKPT_CHECKSUM_NONE);
		CHECK_INT(m->ranks, 1);
		CHECK_INT(m->ntensors, 1);
		CHECK_INT(m->tensors[0].dtype, HERD_INT64);
		CHECK_INT(m->tensors[0].shards[0].nsums, 0);
		CHECK_INT(m->tensors[0].shards[0].len, 48);
		CHECK_INT(m->nblobs, 0);
		again = NULL;
		CHECK_OK(herd__ckpt_manifest_encode(m, &again, &again_len));
		CHECK_BYTES(again, again_len, gold, len);
		free(again);
	}
	herd__ckpt_manifest_free(m);
	free(gold);
}

/* The golden step reads back whole, every chunk verified. */
static void test_ckpt_golden_step_reads_back_verified(void)
{
	static uint8_t bytes[3 * BYTES_COLS];
	herd_ckpt_reader *r = NULL;
	uint64_t blob = 0;
	int32_t emb[24];
	double bias[4];
	uint16_t half[8];
	float w[24];
	size_t len = 0;
	char dir[4096];
	int bad = 0;

	compat_path("ckpt", dir, sizeof(dir));
	CHECK_OK(herd_ckpt_reader_open(&r, dir, HERD_CKPT_LATEST));
	if (r == NULL)
		return;
	CHECK_INT(herd_ckpt_reader_step(r), CKPT_STEP);
	CHECK_INT(herd_ckpt_reader_ranks(r), CKPT_RANKS);
	CHECK_OK(herd_ckpt_reader_read(r, "w", w, sizeof(w)));
	CHECK_OK(herd_ckpt_reader_read(r, "emb", emb, sizeof(emb)));
	CHECK_OK(herd_ckpt_reader_read(r, "bias", bias, sizeof(bias)));
	CHECK_OK(herd_ckpt_reader_read(r, "bytes", bytes, sizeof(bytes)));
	CHECK_OK(herd_ckpt_reader_read(r, "half", half, sizeof(half)));
	for (size_t i = 0; i < 6; i++)
		for (size_t j = 0; j < 4; j++)
			bad += w[i * 4 + j] != w_at(i, j);
	for (size_t i = 0; i < 4; i++)
		for (size_t j = 0; j < 6; j++)
			bad += emb[i * 6 + j] != emb_at(i, j);
	for (size_t k = 0; k < 4; k++)
		bad += bias[k] != bias_at(k);
	for (size_t k = 0; k < 8; k++)
		bad += half[k] != half_at(k);
	for (size_t i = 0; i < 3; i++)
		for (size_t j = 0; j < BYTES_COLS; j++)
			bad += bytes[i * BYTES_COLS + j] != bytes_at(i, j);
	CHECK_INT(bad, 0);
	for (int rank = 0; rank < CKPT_RANKS; rank++) {
		CHECK_OK(herd_ckpt_reader_read_blob(r, "rng", rank, &blob, sizeof(blob), &len));
		CHECK_INT(blob, 1000 + rank);
		CHECK_OK(herd_ckpt_reader_read_blob(r, "loader", rank, &blob, sizeof(blob), &len));
		CHECK_INT(blob, 50 + rank);
	}
	CHECK_OK(herd_ckpt_reader_read_blob(r, "cfg", 1, &blob, sizeof(blob), &len));
	CHECK_INT(blob, 77);
	herd_ckpt_reader_free(r);
}

int main(int argc, char **argv)
{
	bool write;

	if (!compat_write_mode(argc, argv, &write))
		return 1;
	if (write) {
		write_inventories();
		write_comm_info();
		write_checkpoints();
		return test_failures == 0 ? 0 : 1;
	}
	TEST_RUN(test_inventory_golden_files_decode_and_encode_identically);
	TEST_RUN(test_inventory_x4_golden_file_decodes_and_encodes_identically);
	TEST_RUN(test_topology_matrix_of_golden_inventories_is_unchanged);
	TEST_RUN(test_comm_info_golden_record_parses_and_packs_identically);
	TEST_RUN(test_ckpt_golden_manifest_decodes_and_encodes_identically);
	TEST_RUN(test_ckpt_golden_step_reads_back_verified);
	return TEST_DONE();
}
