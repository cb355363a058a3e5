/*
 * sdk/topo/decode.c - an inventory from JSON or msgpack.
 *
 * Both formats meet in msgpack: JSON text is converted by mpjson, checked
 * and unpacked by msgpack-c, and one schema walker builds the cluster from
 * the msgpack object.  The walker is strict about everything it reads
 * (types, ranges, string sizes and forms, limits from inventory.h) and
 * names the offending field by its path, "nodes[0].gpus[3].pci.bus_id";
 * keys it does not know are ignored, so that a newer writer can add fields
 * within a format version.  The decoder is the one definition of a valid
 * inventory: the encoder runs it over everything it writes.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "inventory.h"
#include "mpjson.h"
#include "msgpack_check.h"
#include "mpwalk.h"

/*
 * Bounds of integer fields, far beyond real machines but low enough that
 * a value outside them is certainly corrupt.  Byte counts stop at
 * INT64_MAX so that every inventory also has a JSON form.
 */
#define MAX_CPUS (1 << 20)      /* packages, cores, threads */
#define MAX_NUMA_INDEX 65535    /* Linux allows at most 1024 NUMA nodes */
#define MAX_MTU (1 << 20)
#define MAX_RATE_GBPS (1 << 20)
#define MAX_RDMA_PORT 255       /* port numbers are a uint8_t in libibverbs */
#define MAX_CC 255
#define MAX_NVLINKS 64
#define MAX_BYTES INT64_MAX
#define MAX_PCIE_GEN 16
#define MAX_PCIE_WIDTH 64

/* ---- values: the object at the current path ---- */

/* What a string must look like beyond its length. */
typedef struct str_form {
	const char *what;                      /* for messages: "a PCI bus id ..." */
	bool (*valid)(const char *s, size_t n);
} str_form;

/* A string of at most max bytes (UTF-8, which herd__mpjson_check saw to),
 * of the form given (NULL: any). */
static herd_status str_value(herd__mpwalk *w, const msgpack_object *o, size_t max,
			     const str_form *form, const char **s, size_t *n)
{
	HERD_CHECK(herd__mpwalk_str(w, o, max, s, n));
	if (form != NULL && !form->valid(*s, *n))
		return herd__mpwalk_fail(w, HERD_EFORMAT, "expected %s, got \"%.*s\"%s", form->what,
					 (int)(*n > 64 ? 64 : *n), *s, *n > 64 ? "..." : "");
	return HERD_OK;
}

/* A string into a fixed array of cap bytes: it must fit with its NUL. */
static herd_status fixed_value(herd__mpwalk *w, const msgpack_object *o, char *dst, size_t cap,
			       const str_form *form)
{
	const char *s = NULL;
	size_t n = 0;

	HERD_CHECK(str_value(w, o, cap - 1, form, &s, &n));
	memcpy(dst, s, n);
	dst[n] = '\0';
	return HERD_OK;
}

/* A string into a heap copy that the node owns. */
static herd_status dup_value(herd__mpwalk *w, const msgpack_object *o, const str_form *form,
			     const char **dst)
{
	const char *s = NULL;
	char *copy;
	size_t n = 0;

	HERD_CHECK(str_value(w, o, HERD_INVENTORY_MAX_STRING, form, &s, &n));
	copy = malloc(n + 1);
	if (copy == NULL)
		return herd__error(HERD_ENOMEM, "out of memory decoding a string of %zu bytes", n);
	memcpy(copy, s, n);
	copy[n] = '\0';
	*dst = copy;
	return HERD_OK;
}

/* ---- fields: the value of a key in the map at the current path ---- */

/* Finds a required key and steps the path into it; herd__mpwalk_pop(w, *mark) after. */
static herd_status enter(herd__mpwalk *w, const msgpack_object *map, const char *key,
			 const msgpack_object **out, size_t *mark)
{
	HERD_CHECK(herd__mpwalk_need(w, map, key, out));
	*mark = herd__mpwalk_key(w, key);
	return HERD_OK;
}

/* get_int into an integer field of any type; the range makes it exact. */
#define GET_INT(w, map, key, lo, hi, dst)                                    \
	do {                                                                 \
		int64_t get_int_v_ = 0;                                      \
		HERD_CHECK(herd__mpwalk_get_int(w, map, key, lo, hi, &get_int_v_));       \
		(dst) = get_int_v_;                                          \
	} while (0)

/*
 * An integer field added within format version 1: files written before it
 * lack it, and then it is def.
 */
static herd_status get_int_or(herd__mpwalk *w, const msgpack_object *map, const char *key,
			      int64_t lo, int64_t hi, int64_t def, int *dst)
{
	const msgpack_object *o;
	int64_t v = def;
	size_t mark;
	herd_status st;

	HERD_CHECK(herd__mpwalk_lookup(w, map, key, &o));
	if (o == NULL) {
		*dst = (int)def;
		return HERD_OK;
	}
	mark = herd__mpwalk_key(w, key);
	st = herd__mpwalk_int(w, o, lo, hi, &v);
	herd__mpwalk_pop(w, mark);
	*dst = (int)v;
	return st;
}

static herd_status get_fixed(herd__mpwalk *w, const msgpack_object *map, const char *key, char *dst,
			     size_t cap, const str_form *form)
{
	const msgpack_object *o;
	herd_status st;
	size_t mark = 0;

	HERD_CHECK(enter(w, map, key, &o, &mark));
	st = fixed_value(w, o, dst, cap, form);
	herd__mpwalk_pop(w, mark);
	return st;
}

#define GET_FIXED(w, map, key, field, form) get_fixed(w, map, key, field, sizeof(field), form)

static herd_status get_dup(herd__mpwalk *w, const msgpack_object *map, const char *key,
			   const str_form *form, const char **dst)
{
	const msgpack_object *o;
	herd_status st;
	size_t mark = 0;

	HERD_CHECK(enter(w, map, key, &o, &mark));
	st = dup_value(w, o, form, dst);
	herd__mpwalk_pop(w, mark);
	return st;
}

/* A note: a string, or null or absent for "nothing to say" (NULL). */
static herd_status get_note(herd__mpwalk *w, const msgpack_object *map, const char *key,
			    const char **dst)
{
	const msgpack_object *o;
	herd_status st;
	size_t mark = 0;

	HERD_CHECK(herd__mpwalk_lookup(w, map, key, &o));
	if (o == NULL || o->type == MSGPACK_OBJECT_NIL)
		return HERD_OK;
	mark = herd__mpwalk_key(w, key);
	if (o->type != MSGPACK_OBJECT_STR)
		st = herd__mpwalk_fail(w, HERD_EFORMAT, "expected a string or null, got %s",
				       herd__mpwalk_kind(o));
	else
		st = dup_value(w, o, NULL, dst);
	herd__mpwalk_pop(w, mark);
	return st;
}

/* Decodes one array item o into the zeroed item. */
typedef herd_status (*item_fn)(herd__mpwalk *w, const msgpack_object *o, void *item);

/*
 * An array field: allocates its items zeroed and stores them and their
 * count (through items and count, the owner's fields) before decoding
 * them, so that whatever a failure leaves half-built is reachable by
 * herd__node_clear and nothing leaks.
 */
static herd_status get_items(herd__mpwalk *w, const msgpack_object *map, const char *key,
			     size_t max, size_t size, void *items, size_t *count, item_fn fn)
{
	const msgpack_object *o;
	herd_status st;
	size_t mark = 0, n = 0;
	char *p = NULL;

	HERD_CHECK(enter(w, map, key, &o, &mark));
	HERD_CHECK_GOTO(herd__mpwalk_array(w, o, 0, max, &n), st, out);
	HERD_CHECK_GOTO(herd__calloc(&p, n, size, key), st, out);
	*(void **)items = p;
	*count = n;
	for (size_t i = 0; i < n; i++) {
		size_t item_mark = herd__mpwalk_index(w, i);

		st = fn(w, &o->via.array.ptr[i], p + i * size);
		herd__mpwalk_pop(w, item_mark);
		if (st != HERD_OK)
			goto out;
	}
out:
	herd__mpwalk_pop(w, mark);
	return st;
}

/* ---- string forms ---- */

static bool lower_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* "dddd:bb:dd.f": domain, bus, device (00-1f), function (0-7). */
static bool valid_bus_id(const char *s, size_t n)
{
	return n == 12 && lower_hex(s, 4) && s[4] == ':' && lower_hex(s + 5, 2) &&
	       s[7] == ':' && lower_hex(s + 8, 2) && s[8] <= '1' && s[10] == '.' &&
	       s[11] >= '0' && s[11] <= '7';
}

static bool valid_bus_id_or_empty(const char *s, size_t n)
{
	return n == 0 || valid_bus_id(s, n);
}

/* "dddd:bb", the root bus of a host bridge; empty when unknown. */
static bool valid_host_bridge(const char *s, size_t n)
{
	return n == 0 || (n == 7 && lower_hex(s, 4) && s[4] == ':' && lower_hex(s + 5, 2));
}

static bool parse_cpu(const char *s, size_t n, size_t *i, uint32_t *v)
{
	size_t start = *i;

	*v = 0;
	while (*i < n && s[*i] >= '0' && s[*i] <= '9' && *i - start < 9)
		*v = *v * 10 + (uint32_t)(s[(*i)++] - '0');
	return *i > start && (*i == n || s[*i] < '0' || s[*i] > '9');
}

/* A Linux CPU list, "0-15,32-47"; empty for a NUMA node without CPUs. */
static bool valid_cpulist(const char *s, size_t n)
{
	size_t i = 0;

	if (n == 0)
		return true;
	for (;;) {
		uint32_t first, last;

		if (!parse_cpu(s, n, &i, &first))
			return false;
		if (i < n && s[i] == '-') {
			i++;
			if (!parse_cpu(s, n, &i, &last) || last < first)
				return false;
		}
		if (i == n)
			return true;
		if (s[i++] != ',')
			return false;
	}
}

static bool valid_non_empty(const char *s, size_t n)
{
	(void)s;
	return n > 0;
}

static const str_form bus_id_form = {
	"a PCI bus id like \"0000:18:00.0\" (lower-case hex)", valid_bus_id
};
static const str_form nic_bus_id_form = {
	"a PCI bus id like \"0000:18:00.0\" (lower-case hex), or \"\" for a virtual device",
	valid_bus_id_or_empty
};
static const str_form host_bridge_form = {
	"a host bridge like \"0000:17\" (lower-case hex), or \"\"", valid_host_bridge
};
static const str_form cpulist_form = { "a CPU list like \"0-15,32-47\"", valid_cpulist };
static const str_form name_form = { "a non-empty string", valid_non_empty };

/* ---- the schema ---- */

static herd_status pci_value(herd__mpwalk *w, const msgpack_object *o, const str_form *bus_form,
			     herd_pci_loc *pci)
{
	const msgpack_object *sw;
	herd_status st;
	size_t mark = 0, n = 0;

	HERD_CHECK(herd__mpwalk_map(w, o, HERD_INVENTORY_MAX_ITEMS));
	HERD_CHECK(GET_FIXED(w, o, "bus_id", pci->bus_id, bus_form));
	HERD_CHECK(GET_FIXED(w, o, "host_bridge", pci->host_bridge, &host_bridge_form));
	GET_INT(w, o, "numa_node", -1, MAX_NUMA_INDEX, pci->numa_node);
	HERD_CHECK(enter(w, o, "switches", &sw, &mark));
	st = herd__mpwalk_array(w, sw, 0, HERD_PCI_MAX_SWITCHES, &n);
	for (size_t i = 0; st == HERD_OK && i < n; i++) {
		size_t item_mark = herd__mpwalk_index(w, i);

		st = fixed_value(w, &sw->via.array.ptr[i], pci->switches[i],
				 sizeof(pci->switches[i]), &bus_id_form);
		herd__mpwalk_pop(w, item_mark);
	}
	pci->nswitches = (int)n;
	herd__mpwalk_pop(w, mark);
	return st;
}

static herd_status get_pci(herd__mpwalk *w, const msgpack_object *map, const str_form *bus_form,
			   herd_pci_loc *pci)
{
	const msgpack_object *o;
	herd_status st;
	size_t mark = 0;

	HERD_CHECK(enter(w, map, "pci", &o, &mark));
	st = pci_value(w, o, bus_form, pci);
	herd__mpwalk_pop(w, mark);
	return st;
}

static herd_status decode_string(herd__mpwalk *w, const msgpack_object *o, void *item)
{
	return dup_value(w, o, NULL, item);
}

static herd_status decode_numa(herd__mpwalk *w, const msgpack_object *o, void *item)
{
	herd_numa_node *numa = item;

	HERD_CHECK(herd__mpwalk_map(w, o, HERD_INVENTORY_MAX_ITEMS));
	GET_INT(w, o, "os_index", 0, MAX_NUMA_INDEX, numa->os_index);
	GET_INT(w, o, "memory_bytes", 0, MAX_BYTES, numa->memory_bytes);
	return get_dup(w, o, "cpus", &cpulist_form, &numa->cpus);
}

static herd_status decode_nvlink(herd__mpwalk *w, const msgpack_object *o, void *item)
{
	herd_nvlink *link = item;

	HERD_CHECK(herd__mpwalk_map(w, o, HERD_INVENTORY_MAX_ITEMS));
	HERD_CHECK(GET_FIXED(w, o, "peer_bus_id", link->peer_bus_id, &bus_id_form));
	GET_INT(w, o, "links", 0, MAX_NVLINKS, link->links);
	return HERD_OK;
}

static herd_status decode_gpu(herd__mpwalk *w, const msgpack_object *o, void *item)
{
	herd_gpu *gpu = item;

	HERD_CHECK(herd__mpwalk_map(w, o, HERD_INVENTORY_MAX_ITEMS));
	HERD_CHECK(GET_FIXED(w, o, "uuid", gpu->uuid, NULL));
	HERD_CHECK(GET_FIXED(w, o, "name", gpu->name, NULL));
	HERD_CHECK(get_pci(w, o, &bus_id_form, &gpu->pci));
	GET_INT(w, o, "memory_bytes", 0, MAX_BYTES, gpu->memory_bytes);
	GET_INT(w, o, "cc_major", 0, MAX_CC, gpu->cc_major);
	GET_INT(w, o, "cc_minor", 0, MAX_CC, gpu->cc_minor);
	GET_INT(w, o, "nvswitch_links", 0, MAX_NVLINKS, gpu->nvswitch_links);
	HERD_CHECK(get_int_or(w, o, "ecc", -1, 1, -1, &gpu->ecc));
	HERD_CHECK(get_int_or(w, o, "pcie_gen", 0, MAX_PCIE_GEN, 0, &gpu->pcie_gen));
	HERD_CHECK(get_int_or(w, o, "pcie_width", 0, MAX_PCIE_WIDTH, 0, &gpu->pcie_width));
	HERD_CHECK(get_int_or(w, o, "pcie_max_gen", 0, MAX_PCIE_GEN, 0, &gpu->pcie_max_gen));
	HERD_CHECK(get_int_or(w, o, "pcie_max_width", 0, MAX_PCIE_WIDTH, 0,
			      &gpu->pcie_max_width));
	return get_items(w, o, "nvlinks", HERD_INVENTORY_MAX_ITEMS, sizeof(herd_nvlink),
			 &gpu->nvlinks, &gpu->nnvlinks, decode_nvlink);
}

static herd_status decode_netdev(herd__mpwalk *w, const msgpack_object *o, void *item)
{
	herd_netdev *dev = item;

	HERD_CHECK(herd__mpwalk_map(w, o, HERD_INVENTORY_MAX_ITEMS));
	HERD_CHECK(GET_FIXED(w, o, "name", dev->name, &name_form));
	HERD_CHECK(GET_FIXED(w, o, "state", dev->state, NULL));
	GET_INT(w, o, "mtu", 0, MAX_MTU, dev->mtu);
	GET_INT(w, o, "speed_mbps", -1, INT64_MAX, dev->speed_mbps);
	HERD_CHECK(get_items(w, o, "addrs", HERD_INVENTORY_MAX_ITEMS, sizeof(char *),
			     &dev->addrs, &dev->naddrs, decode_string));
	return get_pci(w, o, &nic_bus_id_form, &dev->pci);
}

static herd_status decode_rdma_port(herd__mpwalk *w, const msgpack_object *o, void *item)
{
	herd_rdma_port *port = item;

	HERD_CHECK(herd__mpwalk_map(w, o, HERD_INVENTORY_MAX_ITEMS));
	GET_INT(w, o, "port", 1, MAX_RDMA_PORT, port->port);
	HERD_CHECK(GET_FIXED(w, o, "state", port->state, NULL));
	HERD_CHECK(GET_FIXED(w, o, "link_layer", port->link_layer, NULL));
	GET_INT(w, o, "rate_gbps", 0, MAX_RATE_GBPS, port->rate_gbps);
	return get_items(w, o, "gids", HERD_INVENTORY_MAX_ITEMS, sizeof(char *), &port->gids,
			 &port->ngids, decode_string);
}

static herd_status decode_rdma(herd__mpwalk *w, const msgpack_object *o, void *item)
{
	herd_rdma_device *dev = item;

	HERD_CHECK(herd__mpwalk_map(w, o, HERD_INVENTORY_MAX_ITEMS));
	HERD_CHECK(GET_FIXED(w, o, "name", dev->name, &name_form));
	HERD_CHECK(GET_FIXED(w, o, "netdev", dev->netdev, NULL));
	HERD_CHECK(get_pci(w, o, &nic_bus_id_form, &dev->pci));
	return get_items(w, o, "ports", HERD_INVENTORY_MAX_ITEMS, sizeof(herd_rdma_port),
			 &dev->ports, &dev->nports, decode_rdma_port);
}

static herd_status decode_node(herd__mpwalk *w, const msgpack_object *o, void *item)
{
	herd_node *node = item;

	HERD_CHECK(herd__mpwalk_map(w, o, HERD_INVENTORY_MAX_ITEMS));
	HERD_CHECK(get_dup(w, o, "hostname", &name_form, &node->hostname));
	HERD_CHECK(get_dup(w, o, "cpu_model", NULL, &node->cpu_model));
	GET_INT(w, o, "packages", 0, MAX_CPUS, node->packages);
	GET_INT(w, o, "cores", 0, MAX_CPUS, node->cores);
	GET_INT(w, o, "threads", 0, MAX_CPUS, node->threads);
	GET_INT(w, o, "memory_bytes", 0, MAX_BYTES, node->memory_bytes);
	GET_INT(w, o, "memory_available_bytes", 0, MAX_BYTES, node->memory_available_bytes);
	HERD_CHECK(get_items(w, o, "numa", HERD_INVENTORY_MAX_ITEMS, sizeof(herd_numa_node),
			     &node->numa, &node->nnuma, decode_numa));
	HERD_CHECK(get_items(w, o, "gpus", HERD_INVENTORY_MAX_ITEMS, sizeof(herd_gpu),
			     &node->gpus, &node->ngpus, decode_gpu));
	HERD_CHECK(get_note(w, o, "gpu_note", &node->gpu_note));
	HERD_CHECK(get_items(w, o, "netdevs", HERD_INVENTORY_MAX_ITEMS, sizeof(herd_netdev),
			     &node->netdevs, &node->nnetdevs, decode_netdev));
	HERD_CHECK(get_items(w, o, "rdma", HERD_INVENTORY_MAX_ITEMS, sizeof(herd_rdma_device),
			     &node->rdma, &node->nrdma, decode_rdma));
	HERD_CHECK(get_note(w, o, "rdma_note", &node->rdma_note));
	/* Added within version 1: absent is unknown. */
	HERD_CHECK(get_note(w, o, "gpu_driver", &node->gpu_driver));
	HERD_CHECK(get_note(w, o, "cuda_driver", &node->cuda_driver));
	return get_note(w, o, "nccl", &node->nccl);
}

static herd_status decode_failed(herd__mpwalk *w, const msgpack_object *o, void *item)
{
	herd__cluster_failed *f = item;

	HERD_CHECK(herd__mpwalk_map(w, o, HERD_INVENTORY_MAX_ITEMS));
	HERD_CHECK(get_dup(w, o, "host", &name_form, (const char **)&f->host));
	return get_dup(w, o, "reason", NULL, (const char **)&f->reason);
}

/*
 * The top-level map.  "v" is read first: a newer format may change
 * anything else, so its version is the one thing worth reporting.
 */
static herd_status decode_root(herd__mpwalk *w, const msgpack_object *root, herd_cluster *cluster)
{
	const msgpack_object *v;
	herd_status st;
	int64_t version = 0;
	size_t mark = 0;

	HERD_CHECK(herd__mpwalk_map(w, root, HERD_INVENTORY_MAX_ITEMS));
	HERD_CHECK(herd__mpwalk_lookup(w, root, "v", &v));
	if (v == NULL)
		return herd__mpwalk_fail(w, HERD_EFORMAT, "missing required key \"v\" (the inventory format "
					 "version): not an inventory");
	mark = herd__mpwalk_key(w, "v");
	st = herd__mpwalk_int(w, v, 1, INT64_MAX, &version);
	if (st == HERD_OK && version > HERD_CLUSTER_INVENTORY_VERSION)
		st = herd__mpwalk_fail(w, HERD_EVERSION, "inventory format version %" PRId64 " is newer than "
				       "version %d, the newest this library reads", version,
				       HERD_CLUSTER_INVENTORY_VERSION);
	herd__mpwalk_pop(w, mark);
	HERD_CHECK(st);
	HERD_CHECK(get_items(w, root, "nodes", HERD_INVENTORY_MAX_NODES, sizeof(herd_node),
			     &cluster->nodes, &cluster->nnodes, decode_node));
	/* The nodes a discovery left out, when there are any. */
	HERD_CHECK(herd__mpwalk_lookup(w, root, "failed", &v));
	if (v == NULL)
		return HERD_OK;
	return get_items(w, root, "failed", HERD_INVENTORY_MAX_NODES, sizeof(herd__cluster_failed),
			 &cluster->failed, &cluster->nfailed, decode_failed);
}

/* The start of a line, printable, for a message. */
static void quote_line(const char *line, size_t n, char *out, size_t cap)
{
	size_t k = 0;

	for (size_t i = 0; i < n && i < 60 && k + 5 < cap; i++) {
		unsigned char c = (unsigned char)line[i];

		if (c >= 0x20 && c < 0x7f && c != '"')
			out[k++] = (char)c;
		else
			k += (size_t)snprintf(out + k, cap - k, "\\x%02x", c);
	}
	herd__strlcpy(out + k, n > 60 ? "..." : "", cap - k);
}

/*
 * The msgpack inside the text form (HERD_CLUSTER_FORMAT_TEXT): *out (of at most
 * 3/4 of len bytes, freed with free).  HERD_EFORMAT naming the line.
 */
static herd_status text_to_msgpack(const char *text, size_t len, char **out, size_t *out_len)
{
	const size_t max_line = (HERD__INVENTORY_TEXT_LINE + 2) / 3 * 4;
	unsigned char *mp = NULL;
	size_t at = 0, mp_len = 0, line_no = 1;
	char shown[320];
	bool ended = false;

	*out = NULL;
	*out_len = 0;
	HERD_CHECK(herd__calloc(&mp, len / 4 * 3 + 3, 1, "an inventory's text"));
	/* The first line is the header: skip it. */
	while (at < len && text[at] != '\n')
		at++;
	at++;
	while (at < len) {
		const char *line = text + at, *nl = memchr(line, '\n', len - at);
		size_t n = nl != NULL ? (size_t)(nl - line) : len - at;
		int got;

		line_no++;
		at += n + 1;
		if (n == 3 && memcmp(line, "end", 3) == 0) {
			ended = at >= len;
			if (!ended) {
				free(mp);
				return herd__error(HERD_EFORMAT, "line %zu: text after \"end\"",
						   line_no + 1);
			}
			break;
		}
		got = n > 0 && n % 4 == 0 && n <= max_line
			      ? EVP_DecodeBlock(mp + mp_len, (const unsigned char *)line, (int)n)
			      : -1;
		if (got < 0) {
			quote_line(line, n, shown, sizeof(shown));
			free(mp);
			return herd__error(HERD_EFORMAT, "line %zu: \"%s\" is not a line of base64",
					   line_no, shown);
		}
		/* EVP_DecodeBlock counts the padding as zero bytes. */
		mp_len += (size_t)got - (size_t)(line[n - 1] == '=') -
			  (size_t)(n > 1 && line[n - 2] == '=');
	}
	if (!ended) {
		free(mp);
		return herd__error(HERD_EFORMAT, "the text ends before its \"end\" line (cut short)");
	}
	*out = (char *)mp;
	*out_len = mp_len;
	return HERD_OK;
}

/* JSON starts with an object (or, wrongly, an array); msgpack never does. */
static bool looks_like_json(const char *data, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r')
			continue;
		return data[i] == '{' || data[i] == '[';
	}
	return false;
}

herd_status herd_cluster_decode(herd_cluster **out, const void *data, size_t len,
				const char *origin)
{
	herd_status st = HERD_OK;
	herd_cluster *cluster = NULL;
	const char *bytes = data;
	msgpack_unpacked unpacked;
	char *converted = NULL;
	size_t mp_len = len;
	herd__mpwalk w;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_cluster_decode: out is NULL");
	*out = NULL;
	if (origin == NULL)
		origin = "inventory";
	if (data == NULL && len > 0)
		return herd__error(HERD_EINVAL, "herd_cluster_decode: data is NULL");
	if (len == 0)
		return herd__error(HERD_EFORMAT, "%s: empty, not an inventory", origin);
	if (len > HERD_INVENTORY_MAX_BYTES)
		return herd__error(HERD_EFORMAT, "%s: %zu bytes is more than the %u bytes an "
				   "inventory may have", origin, len, HERD_INVENTORY_MAX_BYTES);
	msgpack_unpacked_init(&unpacked);
	if (len > strlen(HERD__INVENTORY_TEXT_MAGIC) &&
	    memcmp(bytes, HERD__INVENTORY_TEXT_MAGIC, strlen(HERD__INVENTORY_TEXT_MAGIC)) == 0) {
		HERD_CHECK_GOTO(text_to_msgpack(bytes, len, &converted, &mp_len), st, wrap);
		bytes = converted;
	} else if (looks_like_json(bytes, len)) {
		HERD_CHECK_GOTO(herd__mpjson_to_msgpack(bytes, len, HERD_INVENTORY_MAX_BYTES,
							&converted, &mp_len), st, wrap);
		bytes = converted;
	}
	HERD_CHECK_GOTO(herd__mpjson_unpack(&unpacked, bytes, mp_len), st, wrap);
	HERD_CHECK_GOTO(herd__cluster_new(&cluster, 0), st, out);
	memset(&w, 0, sizeof(w));
	w.origin = origin;
	HERD_CHECK_GOTO(decode_root(&w, &unpacked.data, cluster), st, out);
	*out = cluster;
	cluster = NULL;
	goto out;
wrap:
	herd__error_wrap(st, "%s: ", origin);
out:
	herd_cluster_free(cluster);
	msgpack_unpacked_destroy(&unpacked);
	free(converted);
	return st;
}

herd_status herd_cluster_load(herd_cluster **out, const char *path)
{
	herd_status st;
	char *data = NULL;
	size_t len = 0;

	if (out == NULL || path == NULL)
		return herd__error(HERD_EINVAL, "herd_cluster_load: out and path must not be NULL");
	*out = NULL;
	HERD_CHECK(herd__read_file(path, HERD_INVENTORY_MAX_BYTES, &data, &len));
	st = herd_cluster_decode(out, data, len, path);
	free(data);
	return st;
}
