/*
 * sdk/topo/encode.c - an inventory to canonical msgpack (the tables of
 * fields.c), through mpjson to JSON, and to the text form.
 *
 * Canonical means that one inventory has one encoding: keys in the fixed
 * order of the tables (that of the C structs), integers in msgpack-c's
 * shortest form, every key always present ("failed" when there are
 * some).  Equal inventories compare equal as bytes, and decode(encode(x))
 * encodes to the same bytes again.
 */
#include <string.h>

#include <openssl/evp.h>

#include "inventory.h"
#include "mpjson.h"
#include "schema.h"

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
	herd__schema_pack(&pk, &herd__inventory_schema, cluster, 0);
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
