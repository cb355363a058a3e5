/*
 * sdk/topo/decode.c - an inventory from JSON, msgpack or the text form.
 *
 * All three meet in msgpack: JSON text is converted by mpjson, the text
 * form's base64 decoded, the msgpack checked and unpacked by msgpack-c,
 * and the decoder of base/schema.c builds the cluster from the msgpack
 * object with the tables of fields.c.  It is strict about everything it
 * reads (types, ranges, string sizes and forms, limits from inventory.h)
 * and names the offending field by its path, "nodes[0].gpus[3].pci.bus_id";
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
#include "schema.h"

/*
 * The top-level map.  "v" is read first: a newer format may change
 * anything else, so its version is the one thing worth reporting.
 */
static herd_status decode_root(herd__schema_dec *d, const msgpack_object *root,
			       herd_cluster *cluster)
{
	HERD_CHECK(herd__mpwalk_map(&d->walk, root, HERD_INVENTORY_MAX_ITEMS));
	HERD_CHECK(herd__schema_version(d, root, "inventory", "an inventory",
					 HERD_CLUSTER_INVENTORY_VERSION));
	return herd__schema_unpack(d, &herd__inventory_schema, root, cluster);
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
	herd__schema_dec d;

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
	memset(&d, 0, sizeof(d));
	d.walk.origin = origin;
	HERD_CHECK_GOTO(decode_root(&d, &unpacked.data, cluster), st, out);
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
