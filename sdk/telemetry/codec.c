/*
 * sdk/telemetry/codec.c - a sample as msgpack (the field tables below,
 * through base/schema.c), back, and as a line of JSON (base/mpjson.c).
 *
 * A packed sample is a map with a "v" key, then the sample's fields under
 * their C names in struct order; the arrays hold only the items counted
 * (gpus holds ngpus items), so the counts are not written apart.  Doubles
 * travel as msgpack float64 and the per-core figures as float32, exactly
 * as the struct holds them, and -1 ("not known") is one more number.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "buf.h"
#include "mpjson.h"
#include "schema.h"
#include "telemetry_internal.h"

/* A packed sample is some tens of KiB at most (caps of telemetry.h). */
#define HERD_TELEMETRY_PACKED_MAX (1u << 20)

/* Keys a map may have: room for fields a newer writer adds. */
#define MAX_KEYS 128

/* ---- float items: C float as msgpack float32 ---------------------------- */

static void pack_float(msgpack_packer *pk, const void *value)
{
	float f;

	memcpy(&f, value, sizeof(f));
	msgpack_pack_float(pk, f);
}

static herd_status unpack_float(herd__mpwalk *w, const msgpack_object *o, void *value)
{
	float f;

	if (o->type == MSGPACK_OBJECT_FLOAT32 || o->type == MSGPACK_OBJECT_FLOAT64)
		f = (float)o->via.f64;
	else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
		f = (float)o->via.u64;
	else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
		f = (float)o->via.i64;
	else
		return herd__mpwalk_fail(w, HERD_EFORMAT, "expected a number, got %s",
					 herd__mpwalk_kind(o));
	memcpy(value, &f, sizeof(f));
	return HERD_OK;
}

static const herd__schema_codec float_codec = { pack_float, unpack_float };

/* ---- the tables --------------------------------------------------------- */

#define I64 INT64_MAX

static const herd__schema_field gpu_fields[] = {
	{ HERD__SCHEMA_INT("index", herd_telemetry_gpu, index, -1, INT32_MAX) },
	{ HERD__SCHEMA_CHARS("uuid", herd_telemetry_gpu, uuid) },
	{ HERD__SCHEMA_CHARS("bus_id", herd_telemetry_gpu, bus_id) },
	{ HERD__SCHEMA_CHARS("name", herd_telemetry_gpu, name) },
	{ HERD__SCHEMA_DOUBLE("util_gpu", herd_telemetry_gpu, util_gpu) },
	{ HERD__SCHEMA_DOUBLE("util_mem", herd_telemetry_gpu, util_mem) },
	{ HERD__SCHEMA_INT("mem_used", herd_telemetry_gpu, mem_used, -1, I64) },
	{ HERD__SCHEMA_INT("mem_total", herd_telemetry_gpu, mem_total, -1, I64) },
	{ HERD__SCHEMA_DOUBLE("power_w", herd_telemetry_gpu, power_w) },
	{ HERD__SCHEMA_DOUBLE("power_limit_w", herd_telemetry_gpu, power_limit_w) },
	{ HERD__SCHEMA_INT("energy_mj", herd_telemetry_gpu, energy_mj, -1, I64) },
	{ HERD__SCHEMA_DOUBLE("temp_c", herd_telemetry_gpu, temp_c) },
	{ HERD__SCHEMA_DOUBLE("sm_clock_mhz", herd_telemetry_gpu, sm_clock_mhz) },
	{ HERD__SCHEMA_DOUBLE("mem_clock_mhz", herd_telemetry_gpu, mem_clock_mhz) },
	{ HERD__SCHEMA_INT("throttle", herd_telemetry_gpu, throttle, -1, I64) },
	{ HERD__SCHEMA_INT("ecc_sbe", herd_telemetry_gpu, ecc_sbe, -1, I64) },
	{ HERD__SCHEMA_INT("ecc_dbe", herd_telemetry_gpu, ecc_dbe, -1, I64) },
	{ HERD__SCHEMA_INT("xid", herd_telemetry_gpu, xid, -1, I64) },
	{ HERD__SCHEMA_INT("xid_count", herd_telemetry_gpu, xid_count, -1, I64) },
	{ HERD__SCHEMA_DOUBLE("pcie_tx_bps", herd_telemetry_gpu, pcie_tx_bps) },
	{ HERD__SCHEMA_DOUBLE("pcie_rx_bps", herd_telemetry_gpu, pcie_rx_bps) },
	{ HERD__SCHEMA_DOUBLE("nvlink_tx_bps", herd_telemetry_gpu, nvlink_tx_bps) },
	{ HERD__SCHEMA_DOUBLE("nvlink_rx_bps", herd_telemetry_gpu, nvlink_rx_bps) },
};
static const herd__schema gpu_schema = HERD__SCHEMA(herd_telemetry_gpu, gpu_fields, MAX_KEYS,
						     NULL);

static const herd__schema_field proc_fields[] = {
	{ HERD__SCHEMA_INT("gpu", herd_telemetry_proc, gpu, 0, HERD_TELEMETRY_MAX_GPUS - 1) },
	{ HERD__SCHEMA_INT("pid", herd_telemetry_proc, pid, 0, I64) },
	{ HERD__SCHEMA_INT("mem_used", herd_telemetry_proc, mem_used, -1, I64) },
	{ HERD__SCHEMA_CHARS("job", herd_telemetry_proc, job) },
	{ HERD__SCHEMA_INT("rank", herd_telemetry_proc, rank, -1, INT32_MAX) },
	{ HERD__SCHEMA_CHARS("comm", herd_telemetry_proc, comm) },
	/* Newer than the format: a sample without it (an older herd probe) reads 0. */
	{ HERD__SCHEMA_DOUBLE("late_ms", herd_telemetry_proc, late_ms),
	  .flags = HERD__SCHEMA_OPTIONAL },
};
static const herd__schema proc_schema = HERD__SCHEMA(herd_telemetry_proc, proc_fields,
						      MAX_KEYS, NULL);

static const herd__schema_field net_fields[] = {
	{ HERD__SCHEMA_CHARS("name", herd_telemetry_net, name) },
	{ HERD__SCHEMA_UINT("rx_bytes", herd_telemetry_net, rx_bytes, 0, UINT64_MAX) },
	{ HERD__SCHEMA_UINT("tx_bytes", herd_telemetry_net, tx_bytes, 0, UINT64_MAX) },
	{ HERD__SCHEMA_DOUBLE("rx_bps", herd_telemetry_net, rx_bps) },
	{ HERD__SCHEMA_DOUBLE("tx_bps", herd_telemetry_net, tx_bps) },
};
static const herd__schema net_schema = HERD__SCHEMA(herd_telemetry_net, net_fields, MAX_KEYS,
						     NULL);

static const herd__schema_field disk_fields[] = {
	{ HERD__SCHEMA_CHARS("name", herd_telemetry_disk, name) },
	{ HERD__SCHEMA_UINT("read_bytes", herd_telemetry_disk, read_bytes, 0, UINT64_MAX) },
	{ HERD__SCHEMA_UINT("write_bytes", herd_telemetry_disk, write_bytes, 0, UINT64_MAX) },
	{ HERD__SCHEMA_DOUBLE("read_bps", herd_telemetry_disk, read_bps) },
	{ HERD__SCHEMA_DOUBLE("write_bps", herd_telemetry_disk, write_bps) },
	{ HERD__SCHEMA_DOUBLE("util", herd_telemetry_disk, util) },
};
static const herd__schema disk_schema = HERD__SCHEMA(herd_telemetry_disk, disk_fields,
						      MAX_KEYS, NULL);

static const herd__schema_field core_item = {
	HERD__SCHEMA_ITEM(HERD__SCHEMA_T_VALUE, float), .codec = &float_codec
};

static const herd__schema_field sample_fields[] = {
	{ HERD__SCHEMA_CONST_INT("v", HERD_TELEMETRY_FORMAT_VERSION) },
	{ HERD__SCHEMA_UINT("seq", herd_telemetry_sample, seq, 0, UINT64_MAX) },
	{ HERD__SCHEMA_INT("time_ms", herd_telemetry_sample, time_ms, INT64_MIN, I64) },
	{ HERD__SCHEMA_INT("period_ms", herd_telemetry_sample, period_ms, 0, I64) },
	{ HERD__SCHEMA_CHARS("host", herd_telemetry_sample, host) },
	{ HERD__SCHEMA_DOUBLE("cpu_busy", herd_telemetry_sample, cpu_busy) },
	{ HERD__SCHEMA_INLINE_ARRAY("cpu_core", herd_telemetry_sample, cpu_core, ncpus, 0),
	  .item = &core_item },
	{ HERD__SCHEMA_DOUBLE("load1", herd_telemetry_sample, load1) },
	{ HERD__SCHEMA_INT("mem_total", herd_telemetry_sample, mem_total, -1, I64) },
	{ HERD__SCHEMA_INT("mem_available", herd_telemetry_sample, mem_available, -1, I64) },
	{ HERD__SCHEMA_INLINE_ARRAY("gpus", herd_telemetry_sample, gpus, ngpus, 0),
	  .sub = &gpu_schema },
	{ HERD__SCHEMA_CHARS("gpu_note", herd_telemetry_sample, gpu_note) },
	{ HERD__SCHEMA_INLINE_ARRAY("procs", herd_telemetry_sample, procs, nprocs, 0),
	  .sub = &proc_schema },
	{ HERD__SCHEMA_INLINE_ARRAY("nets", herd_telemetry_sample, nets, nnets, 0),
	  .sub = &net_schema },
	{ HERD__SCHEMA_INLINE_ARRAY("disks", herd_telemetry_sample, disks, ndisks, 0),
	  .sub = &disk_schema },
	{ HERD__SCHEMA_INT("dropped", herd_telemetry_sample, dropped, 0, INT32_MAX) },
};
/* Each process is on one of the sample's GPUs. */
static herd_status check_procs(herd__schema_dec *d, void *obj, void *parent)
{
	const herd_telemetry_sample *s = obj;

	(void)parent;
	for (int i = 0; i < s->nprocs; i++) {
		size_t mark;
		herd_status st;

		if (s->procs[i].gpu < s->ngpus)
			continue;
		mark = herd__mpwalk_key(&d->walk, "procs");
		herd__mpwalk_index(&d->walk, (size_t)i);
		st = herd__schema_fail(d, "gpu", "%d is not the index of one of the sample's %d "
				       "GPUs", s->procs[i].gpu, s->ngpus);
		herd__mpwalk_pop(&d->walk, mark);
		return st;
	}
	return HERD_OK;
}

static const herd__schema sample_schema = HERD__SCHEMA(herd_telemetry_sample, sample_fields,
							MAX_KEYS, check_procs);

/* ---- decoding ----------------------------------------------------------- */

/* The map's "v" first: a newer format may change anything else. */
static herd_status unpack_root(herd__schema_dec *d, const msgpack_object *root,
			       herd_telemetry_sample *out)
{
	HERD_CHECK(herd__mpwalk_map(&d->walk, root, MAX_KEYS));
	HERD_CHECK(herd__schema_version(d, root, "telemetry", "a telemetry sample",
					 HERD_TELEMETRY_FORMAT_VERSION));
	return herd__schema_unpack(d, &sample_schema, root, out);
}

herd_status herd_telemetry_unpack(const void *buf, size_t len, herd_telemetry_sample *out)
{
	msgpack_unpacked u;
	herd__schema_dec d;
	herd_status st;

	if (buf == NULL || out == NULL)
		return herd__error(HERD_EINVAL, "herd_telemetry_unpack: %s is NULL",
				   buf == NULL ? "buf" : "out");
	if (len == 0)
		return herd__error(HERD_EFORMAT, "telemetry sample: empty, not a sample");
	if (len > HERD_TELEMETRY_PACKED_MAX)
		return herd__error(HERD_EFORMAT, "telemetry sample: %zu bytes is more than the %u "
				   "bytes a sample may have", len, HERD_TELEMETRY_PACKED_MAX);
	memset(out, 0, sizeof(*out));
	msgpack_unpacked_init(&u);
	st = herd__mpjson_unpack(&u, buf, len);
	if (st != HERD_OK) {
		herd__error_wrap(st, "telemetry sample: ");
	} else {
		memset(&d, 0, sizeof(d));
		d.walk.origin = "telemetry sample";
		st = unpack_root(&d, &u.data, out);
	}
	msgpack_unpacked_destroy(&u);
	if (st != HERD_OK)
		memset(out, 0, sizeof(*out));
	return st;
}

/* ---- encoding ----------------------------------------------------------- */

/* The counts within the arrays and every string ended inside its field:
 * what the encoder would otherwise cut silently. */
static herd_status check_sample(const herd_telemetry_sample *s)
{
	static const struct {
		const char *name;
		size_t offset;
		int cap;
	} counts[] = {
		{ "ncpus", offsetof(herd_telemetry_sample, ncpus), HERD_TELEMETRY_MAX_CPUS },
		{ "ngpus", offsetof(herd_telemetry_sample, ngpus), HERD_TELEMETRY_MAX_GPUS },
		{ "nprocs", offsetof(herd_telemetry_sample, nprocs), HERD_TELEMETRY_MAX_PROCS },
		{ "nnets", offsetof(herd_telemetry_sample, nnets), HERD_TELEMETRY_MAX_NETS },
		{ "ndisks", offsetof(herd_telemetry_sample, ndisks), HERD_TELEMETRY_MAX_DISKS },
	};

	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		int n;

		memcpy(&n, (const char *)s + counts[i].offset, sizeof(n));
		if (n < 0 || n > counts[i].cap)
			return herd__error(HERD_EINVAL, "herd_telemetry_pack: %s is %d, not within "
					   "0..%d", counts[i].name, n, counts[i].cap);
	}
	return HERD_OK;
}

herd_status herd_telemetry_pack(const herd_telemetry_sample *s, void **buf, size_t *len)
{
	herd_telemetry_sample *check = NULL;
	msgpack_packer pk;
	herd__buf b;
	herd_status st;
	char *out = NULL;
	size_t n = 0;

	if (buf == NULL || len == NULL)
		return herd__error(HERD_EINVAL, "herd_telemetry_pack: buf and len must not be NULL");
	*buf = NULL;
	*len = 0;
	if (s == NULL)
		return herd__error(HERD_EINVAL, "herd_telemetry_pack: s is NULL");
	HERD_CHECK(check_sample(s));
	herd__buf_init(&b, HERD_TELEMETRY_PACKED_MAX);
	msgpack_packer_init(&pk, &b, herd__buf_write);
	herd__schema_pack(&pk, &sample_schema, s, 0);
	HERD_CHECK(herd__buf_take(&b, "a telemetry sample", &out, &n));
	/* The decoder is the one definition of a valid sample: what it would
	 * refuse (a string without its NUL, a process on no GPU) is the
	 * caller's sample to mend, not the receiver's to discover. */
	st = herd__calloc(&check, 1, sizeof(*check), "a telemetry sample");
	if (st == HERD_OK)
		st = herd_telemetry_unpack(out, n, check);
	free(check);
	if (st != HERD_OK) {
		free(out);
		if (st == HERD_EFORMAT || st == HERD_EVERSION)
			st = HERD_EINVAL;
		return herd__error_wrap(st, "telemetry sample: cannot pack: ");
	}
	*buf = out;
	*len = n;
	return HERD_OK;
}

herd_status herd_telemetry_json(const herd_telemetry_sample *s, char **out)
{
	void *mp = NULL;
	size_t mp_len = 0, json_len = 0;
	herd_status st;

	if (out == NULL)
		return herd__error(HERD_EINVAL, "herd_telemetry_json: out is NULL");
	*out = NULL;
	if (s == NULL)
		return herd__error(HERD_EINVAL, "herd_telemetry_json: s is NULL");
	HERD_CHECK(herd_telemetry_pack(s, &mp, &mp_len));
	st = herd__mpjson_to_json_line(mp, mp_len, 4 * HERD_TELEMETRY_PACKED_MAX, out, &json_len);
	free(mp);
	return st;
}
