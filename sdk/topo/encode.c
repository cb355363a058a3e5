/*
 * sdk/topo/encode.c - an inventory to canonical msgpack, and through
 * mpjson to JSON.
 *
 * Canonical means that one inventory has one encoding: keys in the fixed
 * order below (that of the C structs), integers in msgpack-c's shortest
 * form, every key always present.  Equal inventories compare equal as
 * bytes, and decode(encode(x)) encodes to the same bytes again.  Key names
 * are the C field names, so the JSON reads like cluster.h.
 */
#include <string.h>

#include <openssl/evp.h>

#include "inventory.h"
#include "mpjson.h"
#include "mpwalk.h"

/* A string held in a fixed array, which is NUL-terminated within cap. */
static void pack_fixed(msgpack_packer *pk, const char *s, size_t cap)
{
	msgpack_pack_str_with_body(pk, s, strnlen(s, cap));
}


#define PACK_FIXED(pk, field) pack_fixed(pk, field, sizeof(field))

static void pack_strings(msgpack_packer *pk, const char *const *strings, size_t n)
{
	msgpack_pack_array(pk, n);
	for (size_t i = 0; i < n; i++)
		herd__mp_pack_str(pk, strings[i]);
}

static void pack_pci(msgpack_packer *pk, const herd_pci_loc *pci)
{
	size_t nswitches = pci->nswitches < 0 ? 0 : (size_t)pci->nswitches;

	if (nswitches > HERD_PCI_MAX_SWITCHES)
		nswitches = HERD_PCI_MAX_SWITCHES;
	msgpack_pack_map(pk, 4);
	herd__mp_pack_key(pk, "bus_id");
	PACK_FIXED(pk, pci->bus_id);
	herd__mp_pack_key(pk, "host_bridge");
	PACK_FIXED(pk, pci->host_bridge);
	herd__mp_pack_key(pk, "numa_node");
	msgpack_pack_int64(pk, pci->numa_node);
	herd__mp_pack_key(pk, "switches");
	msgpack_pack_array(pk, nswitches);
	for (size_t i = 0; i < nswitches; i++)
		PACK_FIXED(pk, pci->switches[i]);
}

static void pack_gpu(msgpack_packer *pk, const herd_gpu *gpu)
{
	msgpack_pack_map(pk, 13);
	herd__mp_pack_key(pk, "uuid");
	PACK_FIXED(pk, gpu->uuid);
	herd__mp_pack_key(pk, "name");
	PACK_FIXED(pk, gpu->name);
	herd__mp_pack_key(pk, "pci");
	pack_pci(pk, &gpu->pci);
	herd__mp_pack_key(pk, "memory_bytes");
	msgpack_pack_uint64(pk, gpu->memory_bytes);
	herd__mp_pack_key(pk, "cc_major");
	msgpack_pack_int64(pk, gpu->cc_major);
	herd__mp_pack_key(pk, "cc_minor");
	msgpack_pack_int64(pk, gpu->cc_minor);
	herd__mp_pack_key(pk, "nvswitch_links");
	msgpack_pack_int64(pk, gpu->nvswitch_links);
	herd__mp_pack_key(pk, "nvlinks");
	msgpack_pack_array(pk, gpu->nnvlinks);
	for (size_t i = 0; i < gpu->nnvlinks; i++) {
		msgpack_pack_map(pk, 2);
		herd__mp_pack_key(pk, "peer_bus_id");
		PACK_FIXED(pk, gpu->nvlinks[i].peer_bus_id);
		herd__mp_pack_key(pk, "links");
		msgpack_pack_int64(pk, gpu->nvlinks[i].links);
	}
	herd__mp_pack_key(pk, "ecc");
	msgpack_pack_int64(pk, gpu->ecc);
	herd__mp_pack_key(pk, "pcie_gen");
	msgpack_pack_int64(pk, gpu->pcie_gen);
	herd__mp_pack_key(pk, "pcie_width");
	msgpack_pack_int64(pk, gpu->pcie_width);
	herd__mp_pack_key(pk, "pcie_max_gen");
	msgpack_pack_int64(pk, gpu->pcie_max_gen);
	herd__mp_pack_key(pk, "pcie_max_width");
	msgpack_pack_int64(pk, gpu->pcie_max_width);
}

static void pack_netdev(msgpack_packer *pk, const herd_netdev *dev)
{
	msgpack_pack_map(pk, 6);
	herd__mp_pack_key(pk, "name");
	PACK_FIXED(pk, dev->name);
	herd__mp_pack_key(pk, "state");
	PACK_FIXED(pk, dev->state);
	herd__mp_pack_key(pk, "mtu");
	msgpack_pack_int64(pk, dev->mtu);
	herd__mp_pack_key(pk, "speed_mbps");
	msgpack_pack_int64(pk, dev->speed_mbps);
	herd__mp_pack_key(pk, "addrs");
	pack_strings(pk, dev->addrs, dev->naddrs);
	herd__mp_pack_key(pk, "pci");
	pack_pci(pk, &dev->pci);
}

static void pack_rdma_port(msgpack_packer *pk, const herd_rdma_port *port)
{
	msgpack_pack_map(pk, 5);
	herd__mp_pack_key(pk, "port");
	msgpack_pack_int64(pk, port->port);
	herd__mp_pack_key(pk, "state");
	PACK_FIXED(pk, port->state);
	herd__mp_pack_key(pk, "link_layer");
	PACK_FIXED(pk, port->link_layer);
	herd__mp_pack_key(pk, "rate_gbps");
	msgpack_pack_int64(pk, port->rate_gbps);
	herd__mp_pack_key(pk, "gids");
	pack_strings(pk, port->gids, port->ngids);
}

static void pack_rdma(msgpack_packer *pk, const herd_rdma_device *dev)
{
	msgpack_pack_map(pk, 4);
	herd__mp_pack_key(pk, "name");
	PACK_FIXED(pk, dev->name);
	herd__mp_pack_key(pk, "netdev");
	PACK_FIXED(pk, dev->netdev);
	herd__mp_pack_key(pk, "pci");
	pack_pci(pk, &dev->pci);
	herd__mp_pack_key(pk, "ports");
	msgpack_pack_array(pk, dev->nports);
	for (size_t i = 0; i < dev->nports; i++)
		pack_rdma_port(pk, &dev->ports[i]);
}

static void pack_node(msgpack_packer *pk, const herd_node *node)
{
	msgpack_pack_map(pk, 16);
	herd__mp_pack_key(pk, "hostname");
	herd__mp_pack_str(pk, node->hostname ? node->hostname : "");
	herd__mp_pack_key(pk, "cpu_model");
	herd__mp_pack_str(pk, node->cpu_model ? node->cpu_model : "");
	herd__mp_pack_key(pk, "packages");
	msgpack_pack_int64(pk, node->packages);
	herd__mp_pack_key(pk, "cores");
	msgpack_pack_int64(pk, node->cores);
	herd__mp_pack_key(pk, "threads");
	msgpack_pack_int64(pk, node->threads);
	herd__mp_pack_key(pk, "memory_bytes");
	msgpack_pack_uint64(pk, node->memory_bytes);
	herd__mp_pack_key(pk, "memory_available_bytes");
	msgpack_pack_uint64(pk, node->memory_available_bytes);
	herd__mp_pack_key(pk, "numa");
	msgpack_pack_array(pk, node->nnuma);
	for (size_t i = 0; i < node->nnuma; i++) {
		const herd_numa_node *numa = &node->numa[i];

		msgpack_pack_map(pk, 3);
		herd__mp_pack_key(pk, "os_index");
		msgpack_pack_int64(pk, numa->os_index);
		herd__mp_pack_key(pk, "memory_bytes");
		msgpack_pack_uint64(pk, numa->memory_bytes);
		herd__mp_pack_key(pk, "cpus");
		herd__mp_pack_str(pk, numa->cpus ? numa->cpus : "");
	}
	herd__mp_pack_key(pk, "gpus");
	msgpack_pack_array(pk, node->ngpus);
	for (size_t i = 0; i < node->ngpus; i++)
		pack_gpu(pk, &node->gpus[i]);
	herd__mp_pack_key(pk, "gpu_note");
	herd__mp_pack_str(pk, node->gpu_note);
	herd__mp_pack_key(pk, "netdevs");
	msgpack_pack_array(pk, node->nnetdevs);
	for (size_t i = 0; i < node->nnetdevs; i++)
		pack_netdev(pk, &node->netdevs[i]);
	herd__mp_pack_key(pk, "rdma");
	msgpack_pack_array(pk, node->nrdma);
	for (size_t i = 0; i < node->nrdma; i++)
		pack_rdma(pk, &node->rdma[i]);
	herd__mp_pack_key(pk, "rdma_note");
	herd__mp_pack_str(pk, node->rdma_note);
	herd__mp_pack_key(pk, "gpu_driver");
	herd__mp_pack_str(pk, node->gpu_driver);
	herd__mp_pack_key(pk, "cuda_driver");
	herd__mp_pack_str(pk, node->cuda_driver);
	herd__mp_pack_key(pk, "nccl");
	herd__mp_pack_str(pk, node->nccl);
}

/*
 * The msgpack encoding.  It is decoded once before it is handed out: the
 * decoder is the one definition of a valid inventory, and a probe that
 * recorded something the decoder would refuse (an upper-case bus id, a
 * string too long) is caught here, not when the file is loaded elsewhere.
 */
static herd_status encode_msgpack(const herd_cluster *cluster, char **out, size_t *len)
{
	herd__buf buf;
	herd_cluster *check = NULL;
	msgpack_packer pk;
	herd_status st;

	herd__buf_init(&buf, HERD_INVENTORY_MAX_BYTES);
	msgpack_packer_init(&pk, &buf, herd__buf_write);
	/* "failed" only when a discovery left some nodes out. */
	msgpack_pack_map(&pk, cluster->nfailed > 0 ? 3 : 2);
	herd__mp_pack_key(&pk, "v");
	msgpack_pack_int64(&pk, HERD_CLUSTER_INVENTORY_VERSION);
	herd__mp_pack_key(&pk, "nodes");
	msgpack_pack_array(&pk, cluster->nnodes);
	for (size_t i = 0; i < cluster->nnodes; i++)
		pack_node(&pk, &cluster->nodes[i]);
	if (cluster->nfailed > 0) {
		herd__mp_pack_key(&pk, "failed");
		msgpack_pack_array(&pk, cluster->nfailed);
		for (size_t i = 0; i < cluster->nfailed; i++) {
			msgpack_pack_map(&pk, 2);
			herd__mp_pack_key(&pk, "host");
			herd__mp_pack_str(&pk, cluster->failed[i].host);
			herd__mp_pack_key(&pk, "reason");
			herd__mp_pack_str(&pk, cluster->failed[i].reason);
		}
	}
	HERD_CHECK(herd__buf_take(&buf, "the inventory", out, len));
	st = herd_cluster_decode(&check, *out, *len, "inventory");
	herd_cluster_free(check);
	if (st == HERD_OK)
		return HERD_OK;
	herd_free(*out);
	*out = NULL;
	*len = 0;
	/* Refused by the decoder: the caller's inventory is what is wrong. */
	if (st == HERD_EFORMAT || st == HERD_EVERSION)
		st = HERD_EINVAL;
	return herd__error_wrap(st, "cannot encode: ");
}

/* The text form (HERD_CLUSTER_FORMAT_TEXT) of the msgpack encoding mp. */
static herd_status encode_text(const herd_cluster *cluster, const char *mp, size_t mp_len,
			       char **out, size_t *len)
{
	const char *name = cluster->nnodes > 0 && cluster->nodes[0].hostname != NULL
				   ? cluster->nodes[0].hostname
				   : "-";
	unsigned char line[HERD__INVENTORY_TEXT_LINE * 4 / 3 + 4];
	herd__buf buf;
	herd_status st;

	herd__buf_init(&buf, 0);
	st = herd__buf_append(&buf, HERD__INVENTORY_TEXT_MAGIC, strlen(HERD__INVENTORY_TEXT_MAGIC));
	if (st == HERD_OK)
		st = herd__buf_append(&buf, name, strlen(name));
	if (st == HERD_OK)
		st = herd__buf_append(&buf, "\n", 1);
	for (size_t at = 0; at < mp_len && st == HERD_OK; at += HERD__INVENTORY_TEXT_LINE) {
		size_t n = mp_len - at < HERD__INVENTORY_TEXT_LINE ? mp_len - at
								  : HERD__INVENTORY_TEXT_LINE;
		int k = EVP_EncodeBlock(line, (const unsigned char *)mp + at, (int)n);

		line[k] = '\n';
		st = herd__buf_append(&buf, line, (size_t)k + 1);
	}
	if (st == HERD_OK)
		st = herd__buf_append(&buf, "end\n", 4);
	if (st != HERD_OK) {
		herd__buf_free(&buf);
		return st;
	}
	return herd__buf_take(&buf, "the inventory's text", out, len);
}

herd_status herd_cluster_encode(const herd_cluster *cluster, herd_cluster_format format,
				void **data, size_t *len)
{
	herd_status st = HERD_OK;
	char *mp = NULL, *json = NULL;
	size_t mp_len = 0, json_len = 0;

	if (data == NULL || len == NULL)
		return herd__error(HERD_EINVAL, "herd_cluster_encode: data and len must not be NULL");
	*data = NULL;
	*len = 0;
	if (cluster == NULL)
		return herd__error(HERD_EINVAL, "herd_cluster_encode: cluster is NULL");
	if (format != HERD_CLUSTER_FORMAT_AUTO && format != HERD_CLUSTER_FORMAT_MSGPACK &&
	    format != HERD_CLUSTER_FORMAT_JSON && format != HERD_CLUSTER_FORMAT_TEXT)
		return herd__error(HERD_EINVAL, "herd_cluster_encode: unknown format %d",
				   (int)format);
	HERD_CHECK_GOTO(encode_msgpack(cluster, &mp, &mp_len), st, out);
	if (format == HERD_CLUSTER_FORMAT_JSON) {
		HERD_CHECK_GOTO(herd__mpjson_to_json(mp, mp_len, HERD_INVENTORY_MAX_BYTES,
						     &json, &json_len), st, out);
		*data = json;
		*len = json_len;
	} else if (format == HERD_CLUSTER_FORMAT_TEXT) {
		HERD_CHECK_GOTO(encode_text(cluster, mp, mp_len, &json, &json_len), st, out);
		*data = json;
		*len = json_len;
	} else {
		*data = mp;
		*len = mp_len;
		mp = NULL;
	}
out:
	herd_free(mp);
	return st;
}

herd_status herd_cluster_save(const herd_cluster *cluster, const char *path,
			      herd_cluster_format format)
{
	herd_status st;
	size_t len = 0, n;
	void *data = NULL;

	if (path == NULL)
		return herd__error(HERD_EINVAL, "herd_cluster_save: path is NULL");
	n = strlen(path);
	if (format == HERD_CLUSTER_FORMAT_AUTO)
		format = n >= 5 && strcmp(path + n - 5, ".json") == 0
				 ? HERD_CLUSTER_FORMAT_JSON
				 : HERD_CLUSTER_FORMAT_MSGPACK;
	HERD_CHECK_GOTO(herd_cluster_encode(cluster, format, &data, &len), st, out);
	HERD_CHECK_GOTO(herd__write_file_atomic(path, data, len, 0644), st, out);
out:
	if (st != HERD_OK)
		herd__error_wrap(st, "saving %s: ", path);
	herd_free(data);
	return st;
}
