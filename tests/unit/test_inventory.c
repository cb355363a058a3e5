/*
 * tests/unit/test_inventory.c - the inventory encodings: round trips of the
 * fixtures in both formats, files, and the decoder against corrupt and
 * hostile input (every failure an exact status and a message that names
 * the data and the field, never a crash or a leak).
 */
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "inventory_check.h"
#include "topo/inventory.h"
#include "mpjson.h"

static const char *const fixtures[] = { "dgx-h100.json", "pcie-4gpu.json", "cpu-only.json" };
#define NFIXTURES (sizeof(fixtures) / sizeof(fixtures[0]))

static char tmpdir[] = "/tmp/herd-test-inventory-XXXXXX";

/* The text of tests/fixtures/inventory/<name>. */
static char *fixture_text(const char *name, size_t *len)
{
	char rel[256];

	snprintf(rel, sizeof(rel), "inventory/%s", name);
	return fixture_bytes(rel, len);
}

/* text with the first occurrence of from replaced by to (freed by caller). */
static char *edit(const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	size_t head, n;
	char *out;

	if (at == NULL) {
		fprintf(stderr, "edit: \"%s\" not found in the fixture\n", from);
		exit(1);
	}
	head = (size_t)(at - text);
	n = strlen(text) - strlen(from) + strlen(to);
	out = malloc(n + 1);
	memcpy(out, text, head);
	memcpy(out + head, to, strlen(to));
	strcpy(out + head + strlen(to), at + strlen(from));
	return out;
}

/* Decoding fails with code, and the message has the origin and needle. */
static void check_decode_fails(const void *data, size_t len, const char *origin,
			       herd_status code, const char *needle)
{
	herd_cluster *c = (herd_cluster *)&c; /* must come back NULL */

	CHECK_ERR(herd_cluster_decode(&c, data, len, origin), code, needle);
	CHECK(c == NULL);
	CHECK(strncmp(herd_last_error(), origin, strlen(origin)) == 0);
}

static void check_edit_fails(const char *text, const char *from, const char *to,
			     herd_status code, const char *needle)
{
	char *bad = edit(text, from, to);

	check_decode_fails(bad, strlen(bad), "tests/x.json", code, needle);
	free(bad);
}

static void test_fixtures_round_trip_byte_identical(void)
{
	for (size_t f = 0; f < NFIXTURES; f++) {
		size_t text_len, mp1_len, mp2_len, mp3_len, j1_len, j2_len;
		char *text = fixture_text(fixtures[f], &text_len);
		herd_cluster *c1 = decode_ok(text, text_len, fixtures[f]);
		void *mp1 = encode_ok(c1, HERD_CLUSTER_FORMAT_MSGPACK, &mp1_len);
		herd_cluster *c2 = decode_ok(mp1, mp1_len, "mp1");
		void *mp2 = encode_ok(c2, HERD_CLUSTER_FORMAT_MSGPACK, &mp2_len);
		void *j1 = encode_ok(c1, HERD_CLUSTER_FORMAT_JSON, &j1_len);
		herd_cluster *c3 = decode_ok(j1, j1_len, "j1");
		void *j2 = encode_ok(c3, HERD_CLUSTER_FORMAT_JSON, &j2_len);
		void *mp3 = encode_ok(c3, HERD_CLUSTER_FORMAT_MSGPACK, &mp3_len);

		CHECK_BYTES(mp1, mp1_len, mp2, mp2_len);
		CHECK_BYTES(mp1, mp1_len, mp3, mp3_len);
		CHECK_BYTES(j1, j1_len, j2, j2_len);
		/* The fixtures are kept in the canonical JSON form. */
		CHECK_BYTES(j1, j1_len, text, text_len);
		CHECK(j1_len > 0 && ((char *)j1)[j1_len - 1] == '\n' && ((char *)j1)[j1_len] == '\0');
		CHECK(mp1_len < j1_len);
		herd_free(mp1), herd_free(mp2), herd_free(mp3), herd_free(j1), herd_free(j2);
		herd_cluster_free(c1), herd_cluster_free(c2), herd_cluster_free(c3);
		free(text);
	}
}

static void test_fixture_values_decoded(void)
{
	size_t len;
	char *text = fixture_text("dgx-h100.json", &len);
	herd_cluster *c = decode_ok(text, len, "dgx");
	const herd_node *n = test_node(c, 0), *none = n;

	CHECK_INT(herd_cluster_node_count(c), 1);
	CHECK_ERR(herd_cluster_node(c, 1, &none), HERD_EINVAL,
		  "herd_cluster_node: node 1 is out of range: the cluster has 1 node");
	CHECK(none == NULL);
	CHECK_STR(n->hostname, "dgx-h100");
	CHECK_STR(n->cpu_model, "Intel(R) Xeon(R) Platinum 8480C");
	CHECK_INT(n->packages, 2);
	CHECK_INT(n->cores, 112);
	CHECK_INT(n->threads, 224);
	CHECK(n->memory_bytes == 2ull << 40);
	CHECK_INT(n->nnuma, 2);
	CHECK_STR(n->numa[1].cpus, "56-111,168-223");
	CHECK_INT(n->ngpus, 8);
	CHECK_STR(n->gpus[3].name, "NVIDIA H100 80GB HBM3");
	CHECK_STR(n->gpus[3].pci.bus_id, "0000:61:00.0");
	CHECK_INT(n->gpus[3].pci.nswitches, 1);
	CHECK(n->gpus[3].memory_bytes == 81559ull << 20);
	CHECK_INT(n->gpus[3].cc_major, 9);
	CHECK_INT(n->gpus[3].cc_minor, 0);
	CHECK_INT(n->gpus[3].nvswitch_links, 18);
	CHECK_INT(n->gpus[3].nnvlinks, 0);
	CHECK(n->gpu_note == NULL);
	CHECK(n->rdma_note == NULL);
	CHECK_INT(n->nrdma, 8);
	CHECK_STR(n->rdma[7].name, "mlx5_7");
	CHECK_STR(n->rdma[7].netdev, "ibp220s0");
	CHECK_INT(n->rdma[7].nports, 1);
	CHECK_STR(n->rdma[7].ports[0].link_layer, "infiniband");
	CHECK_INT(n->rdma[7].ports[0].rate_gbps, 400);
	CHECK_INT(n->rdma[7].ports[0].ngids, 1);
	CHECK(strncmp(n->rdma[7].ports[0].gids[0], "fe80:", 5) == 0);
	CHECK_STR(n->netdevs[0].name, "lo");
	CHECK_INT(n->netdevs[0].speed_mbps, -1);
	CHECK_STR(n->netdevs[0].addrs[1], "::1/128");
	herd_cluster_free(c);
	free(text);

	text = fixture_text("cpu-only.json", &len);
	c = decode_ok(text, len, "cpu-only");
	n = test_node(c, 0);
	CHECK_INT(n->ngpus, 0);
	CHECK(n->gpus == NULL);
	CHECK_STR(n->gpu_note, "no GPU: NVIDIA driver not found");
	CHECK_INT(n->nrdma, 0);
	CHECK(n->rdma_note != NULL);
	herd_cluster_free(c);
	free(text);

	CHECK_INT(herd_cluster_node_count(NULL), 0);
	CHECK_ERR(herd_cluster_node(NULL, 0, &none), HERD_EINVAL,
		  "herd_cluster_node: cluster and node must not be NULL");
	herd_cluster_free(NULL);
}

static void test_save_and_load_both_formats(void)
{
	char json_path[256], mp_path[256], plain_path[256];
	size_t text_len, len, mp_len, back_len;
	char *text = fixture_text("pcie-4gpu.json", &text_len);
	herd_cluster *c = decode_ok(text, text_len, "pcie"), *from_json = NULL, *from_mp = NULL;
	char *file = NULL;
	void *mp, *back;

	snprintf(json_path, sizeof(json_path), "%s/inv.json", tmpdir);
	snprintf(mp_path, sizeof(mp_path), "%s/inv.msgpack", tmpdir);
	snprintf(plain_path, sizeof(plain_path), "%s/inv", tmpdir);
	CHECK_OK(herd_cluster_save(c, json_path, HERD_CLUSTER_FORMAT_AUTO));
	CHECK_OK(herd_cluster_save(c, mp_path, HERD_CLUSTER_FORMAT_AUTO));
	CHECK_OK(herd_cluster_save(c, plain_path, HERD_CLUSTER_FORMAT_JSON));

	/* AUTO wrote JSON for ".json", msgpack otherwise. */
	CHECK_OK(herd__read_file(json_path, 1 << 24, &file, &len));
	CHECK_BYTES(file, len, text, text_len);
	free(file);
	CHECK_OK(herd__read_file(plain_path, 1 << 24, &file, &len));
	CHECK_BYTES(file, len, text, text_len);
	free(file);
	mp = encode_ok(c, HERD_CLUSTER_FORMAT_MSGPACK, &mp_len);
	CHECK_OK(herd__read_file(mp_path, 1 << 24, &file, &len));
	CHECK_BYTES(file, len, mp, mp_len);
	CHECK_INT((unsigned char)file[0], 0x82);
	free(file);

	CHECK_OK(herd_cluster_load(&from_json, json_path));
	CHECK_OK(herd_cluster_load(&from_mp, mp_path));
	back = encode_ok(from_json, HERD_CLUSTER_FORMAT_MSGPACK, &back_len);
	CHECK_BYTES(back, back_len, mp, mp_len);
	herd_free(back);
	back = encode_ok(from_mp, HERD_CLUSTER_FORMAT_MSGPACK, &back_len);
	CHECK_BYTES(back, back_len, mp, mp_len);
	herd_free(back);
	/* No temporary file is left beside the saved ones. */
	CHECK(access(json_path, F_OK) == 0);
	unlink(json_path), unlink(mp_path), unlink(plain_path);

	CHECK_ERR(herd_cluster_save(c, "/nonexistent-dir/x.json", HERD_CLUSTER_FORMAT_AUTO),
		  HERD_ENOTFOUND, "/nonexistent-dir/x.json");
	herd_free(mp);
	herd_cluster_free(c), herd_cluster_free(from_json), herd_cluster_free(from_mp);
	free(text);
}

static void test_truncated_msgpack_at_every_length_is_eformat(void)
{
	for (size_t f = 0; f < NFIXTURES; f++) {
		size_t text_len, mp_len;
		char *text = fixture_text(fixtures[f], &text_len);
		herd_cluster *c = decode_ok(text, text_len, fixtures[f]);
		char *mp = encode_ok(c, HERD_CLUSTER_FORMAT_MSGPACK, &mp_len);
		int failures_before = test_failures;

		for (size_t n = 0; n < mp_len && test_failures == failures_before; n++) {
			/* A copy of exactly n bytes, so that ASan sees any overread. */
			char *part = malloc(n ? n : 1);

			memcpy(part, mp, n);
			check_decode_fails(part, n, "inv.msgpack", HERD_EFORMAT, "inv.msgpack: ");
			free(part);
		}
		herd_free(mp);
		herd_cluster_free(c);
		free(text);
	}
}

static void test_truncated_json_is_eformat(void)
{
	size_t text_len;
	char *text = fixture_text("pcie-4gpu.json", &text_len);
	int failures_before = test_failures;
	herd_cluster *c = NULL;

	for (size_t n = 0; n + 1 < text_len && test_failures == failures_before; n++) {
		char *part = malloc(n ? n : 1);

		memcpy(part, text, n);
		check_decode_fails(part, n, "inv.json", HERD_EFORMAT, "inv.json: ");
		free(part);
	}
	/* Without its final newline the text is still a whole document. */
	CHECK_OK(herd_cluster_decode(&c, text, text_len - 1, "inv.json"));
	herd_cluster_free(c);
	free(text);
}

/* Decodes data; a success must re-encode in both formats and decode again. */
static void decode_anything(const void *data, size_t len)
{
	herd_cluster *c = NULL, *again = NULL;
	herd_status st = herd_cluster_decode(&c, data, len, "flipped");
	size_t n;
	void *out;

	if (st != HERD_OK) {
		CHECK(st == HERD_EFORMAT || st == HERD_EVERSION);
		CHECK(c == NULL);
		if (strncmp(herd_last_error(), "flipped: ", 9) != 0)
			TEST_FAIL_("message without origin: %s", herd_last_error());
		return;
	}
	for (int format = HERD_CLUSTER_FORMAT_MSGPACK; format <= HERD_CLUSTER_FORMAT_JSON;
	     format++) {
		out = encode_ok(c, (herd_cluster_format)format, &n);
		CHECK_OK(herd_cluster_decode(&again, out, n, "again"));
		herd_cluster_free(again);
		again = NULL;
		herd_free(out);
	}
	herd_cluster_free(c);
}

static void test_flipped_bytes_never_crash(void)
{
	static const unsigned char masks[] = { 0x01, 0x80, 0xff };
	size_t text_len, mp_len;
	char *text = fixture_text("dgx-h100.json", &text_len);
	herd_cluster *c = decode_ok(text, text_len, "dgx");
	char *mp = encode_ok(c, HERD_CLUSTER_FORMAT_MSGPACK, &mp_len);
	int failures_before = test_failures;

	for (size_t i = 0; i < mp_len && test_failures == failures_before; i++) {
		for (size_t m = 0; m < sizeof(masks); m++) {
			mp[i] ^= (char)masks[m];
			decode_anything(mp, mp_len);
			mp[i] ^= (char)masks[m];
		}
	}
	for (size_t i = 0; i < text_len && test_failures == failures_before; i += 5) {
		text[i] ^= 0x01;
		decode_anything(text, text_len);
		text[i] ^= 0x01;
	}
	herd_free(mp);
	herd_cluster_free(c);
	free(text);
}

static void test_wrong_field_names_the_path(void)
{
	size_t len;
	char *text = fixture_text("dgx-h100.json", &len);
	char *bad = edit(text, "\"bus_id\": \"0000:61:00.0\"", "\"bus_id\": 97");

	check_decode_fails(bad, strlen(bad), "tests/x.json", HERD_EFORMAT, "");
	CHECK_STR(herd_last_error(), "tests/x.json: nodes[0].gpus[3].pci.bus_id: expected a "
		  "string of at most 15 bytes, got an integer");
	free(bad);

	/* Malformed and out-of-range values, each with the path it names. */
	check_edit_fails(text, "\"0000:61:00.0\"", "\"0000:61:00.9\"", HERD_EFORMAT,
			 "nodes[0].gpus[3].pci.bus_id: expected a PCI bus id");
	check_edit_fails(text, "\"0000:61:00.0\"", "\"0000:6A:00.0\"", HERD_EFORMAT,
			 "nodes[0].gpus[3].pci.bus_id: expected a PCI bus id");
	check_edit_fails(text, "\"0000:61:00.0\"", "\"0000:61:20.0\"", HERD_EFORMAT,
			 "nodes[0].gpus[3].pci.bus_id");
	check_edit_fails(text, "\"0000:61:00.0\"", "\"\"", HERD_EFORMAT,
			 "nodes[0].gpus[3].pci.bus_id: expected a PCI bus id");
	check_edit_fails(text, "\"0000:16:00.0\"", "\"0000:16:00\"", HERD_EFORMAT,
			 "nodes[0].gpus[0].pci.switches[0]: expected a PCI bus id");
	check_edit_fails(text, "\"host_bridge\": \"0000:15\"", "\"host_bridge\": \"15\"",
			 HERD_EFORMAT, "nodes[0].gpus[0].pci.host_bridge: expected a host bridge");
	check_edit_fails(text, "\"nvswitch_links\": 18", "\"nvswitch_links\": 65", HERD_EFORMAT,
			 "nodes[0].gpus[0].nvswitch_links: expected an integer in 0..64, got 65");
	check_edit_fails(text, "\"cores\": 112", "\"cores\": -1", HERD_EFORMAT,
			 "nodes[0].cores: expected an integer in 0..1048576, got -1");
	check_edit_fails(text, "\"numa_node\": 0", "\"numa_node\": -2", HERD_EFORMAT,
			 "nodes[0].gpus[0].pci.numa_node: expected an integer in -1..65535, got -2");
	check_edit_fails(text, "\"mtu\": 65536", "\"mtu\": 1500.0", HERD_EFORMAT,
			 "nodes[0].netdevs[0].mtu: expected an integer, got a float");
	check_edit_fails(text, "\"port\": 1", "\"port\": 0", HERD_EFORMAT,
			 "nodes[0].rdma[0].ports[0].port: expected an integer in 1..255, got 0");
	check_edit_fails(text, "\"name\": \"NVIDIA H100 80GB HBM3\"",
			 "\"name\": \"NVIDIA H100 80GB HBM3 with a name far longer than the ninety-"
			 "five bytes a GPU name may have in an inventory\"", HERD_EFORMAT,
			 "nodes[0].gpus[0].name: expected a string of at most 95 bytes, got one of");
	check_edit_fails(text, "\"state\": \"active\"", "\"state\": \"active-and-very-long\"",
			 HERD_EFORMAT, "nodes[0].rdma[0].ports[0].state: expected a string of at "
			 "most 15 bytes");
	check_edit_fails(text, "\"cpus\": \"0-55,112-167\"", "\"cpus\": \"55-0\"", HERD_EFORMAT,
			 "nodes[0].numa[0].cpus: expected a CPU list");
	check_edit_fails(text, "\"cc_major\": 9,", "", HERD_EFORMAT,
			 "nodes[0].gpus[0]: missing required key \"cc_major\"");
	check_edit_fails(text, "\"gpus\": [", "\"gpus\": {\"x\": [", HERD_EFORMAT,
			 "tests/x.json: JSON: line");
	check_edit_fails(text, "\"nvlinks\": []", "\"nvlinks\": {}", HERD_EFORMAT,
			 "nodes[0].gpus[0].nvlinks: expected an array, got a map");
	check_edit_fails(text, "\"nvlinks\": []", "\"nvlinks\": [{\"peer_bus_id\": \"0000:43:00.0\","
			 " \"links\": 65}]", HERD_EFORMAT,
			 "nodes[0].gpus[0].nvlinks[0].links: expected an integer in 0..64, got 65");
	check_edit_fails(text, "\"gids\": [", "\"gids\": [7, ", HERD_EFORMAT,
			 "nodes[0].rdma[0].ports[0].gids[0]: expected a string");
	check_edit_fails(text, "\"hostname\": \"dgx-h100\"", "\"hostname\": \"\"", HERD_EFORMAT,
			 "nodes[0].hostname: expected a non-empty string");
	check_edit_fails(text, "\"hostname\": \"dgx-h100\"", "\"hostname\": \"dgx\\u0000h100\"",
			 HERD_EFORMAT, "nodes[0].hostname: the string contains a NUL byte");
	check_edit_fails(text, "\"gpu_note\": null", "\"gpu_note\": 3", HERD_EFORMAT,
			 "nodes[0].gpu_note: expected a string or null, got an integer");
	check_edit_fails(text, "\"memory_bytes\": 2199023255552",
			 "\"memory_bytes\": 2199023255552, \"memory_bytes\": 1", HERD_EFORMAT,
			 "duplicate object key");
	check_edit_fails(text, "\"nodes\": [", "\"nodes\": [7, ", HERD_EFORMAT,
			 "tests/x.json: nodes[0]: expected a map, got an integer");
	check_edit_fails(text, "\"nodes\": [", "\"nodes\": [[], ", HERD_EFORMAT,
			 "tests/x.json: nodes[0]: expected a map, got an array");
	/* JSON syntax: trailing text, invalid UTF-8. */
	check_edit_fails(text, "\n}\n", "\n}\nx", HERD_EFORMAT, "tests/x.json: JSON: line");
	check_edit_fails(text, "dgx-h100", "dgx-\xff", HERD_EFORMAT, "tests/x.json: JSON:");
	free(text);
}

static void test_unknown_keys_ignored_and_notes_optional(void)
{
	size_t len, out_len;
	char *text = fixture_text("dgx-h100.json", &len);
	char *a = edit(text, "\"v\": 1,", "\"v\": 1, \"written_by\": {\"tool\": [1, 2.5, null, "
		       "true, \"x\"]},");
	char *b = edit(a, "\"cc_major\": 9,", "\"cc_major\": 9, \"future\": -12345678901,");
	char *d = edit(b, "\"gpu_note\": null,", "");
	herd_cluster *c = decode_ok(d, strlen(d), "future.json");
	void *out = encode_ok(c, HERD_CLUSTER_FORMAT_JSON, &out_len);

	CHECK_BYTES(out, out_len, text, len);
	CHECK(test_node(c, 0)->gpu_note == NULL);
	herd_free(out);
	herd_cluster_free(c);
	free(a), free(b), free(d), free(text);
}

static void test_version_missing_is_eformat_newer_is_eversion(void)
{
	size_t len;
	char *text = fixture_text("cpu-only.json", &len);

	check_edit_fails(text, "\"v\": 1,", "\"w\": 1,", HERD_EFORMAT,
			 "tests/x.json: top level: missing required key \"v\"");
	check_edit_fails(text, "\"v\": 1,", "\"v\": 99,", HERD_EVERSION,
			 "tests/x.json: v: inventory format version 99 is newer than version 1");
	check_edit_fails(text, "\"v\": 1,", "\"v\": 0,", HERD_EFORMAT,
			 "tests/x.json: v: expected an integer in 1..");
	check_edit_fails(text, "\"v\": 1,", "\"v\": \"1\",", HERD_EFORMAT,
			 "tests/x.json: v: expected an integer, got a string");
	/* The version is judged before anything else in the file. */
	check_decode_fails("{\"nodes\": 5, \"v\": 2}", 20, "v2.json", HERD_EVERSION, "version 2");
	check_decode_fails("[1, 2]", 6, "arr.json", HERD_EFORMAT,
			   "arr.json: top level: expected a map, got an array");
	free(text);
}

/* The msgpack of JSON text, for building hostile msgpack inputs. */
static char *mp_of(const char *json, size_t *len)
{
	char *mp = NULL;

	CHECK_OK(herd__mpjson_to_msgpack(json, strlen(json), 1 << 26, &mp, len));
	return mp;
}

static void test_hostile_msgpack(void)
{
	static const char deep_json[] = "{\"v\": 1, \"x\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
		"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]], \"nodes\": []}";
	size_t n, len;
	char *mp, *buf;

	/* Claims of sizes the data cannot hold, refused before any allocation. */
	check_decode_fails("\xdb\x05\xf5\xe1\x00" "abcde", 10, "claim", HERD_EFORMAT,
			   "claims 100000000 bytes, 5 remain");
	check_decode_fails("\xdd\x05\xf5\xe1\x00" "\xc0\xc0\xc0\xc0\xc0", 10, "claim",
			   HERD_EFORMAT, "claims 100000000 values, only 5 bytes remain");
	check_decode_fails("\xdf\xff\xff\xff\xff" "\xc0\xc0\xc0\xc0\xc0", 10, "claim",
			   HERD_EFORMAT, "only 5 bytes remain");
	check_decode_fails("\x82\xa1v\x01\xa5nodes\xdd\xff\xff\xff\xff", 15, "claim",
			   HERD_EFORMAT, "claims 4294967295 values");

	/* Trailing bytes, a reserved type byte, invalid UTF-8. */
	mp = mp_of("{\"v\": 1, \"nodes\": []}", &len);
	buf = malloc(len + 1);
	memcpy(buf, mp, len);
	buf[len] = '\xc0';
	check_decode_fails(buf, len + 1, "tail", HERD_EFORMAT, "1 bytes of trailing data");
	buf[len - 1] = '\xc1';
	check_decode_fails(buf, len, "c1", HERD_EFORMAT, "byte 0xc1 at offset");
	free(buf);
	herd_free(mp);
	check_decode_fails("\x82\xa1v\x01\xa5nodes\x91\x81\xa8hostname\xa2\xff\x41", 24, "utf8",
			   HERD_EFORMAT, "utf8: msgpack: the string at offset 21 is not valid UTF-8");

	/* Nesting: deeper than msgpack-c unpacks, and deeper than jansson parses. */
	buf = malloc(100001);
	memset(buf, 0x91, 100000);
	buf[100000] = '\xc0';
	check_decode_fails(buf, 100001, "deep", HERD_EFORMAT, "nested deeper than 32");
	memset(buf, '[', 100000);
	check_decode_fails(buf, 100000, "deep.json", HERD_EFORMAT, "deep.json: JSON: line 1");
	free(buf);
	check_decode_fails(deep_json, strlen(deep_json), "deep.json", HERD_EFORMAT,
			   "nested deeper than 32 levels");

	/* More nodes, items, or bytes than the limits. */
	n = HERD_INVENTORY_MAX_NODES + 1;
	buf = malloc(n + 15);
	memcpy(buf, "\x82\xa1v\x01\xa5nodes\xdd", 11);
	buf[11] = (char)(n >> 24), buf[12] = (char)(n >> 16), buf[13] = (char)(n >> 8);
	buf[14] = (char)n;
	memset(buf + 15, 0xc0, n);
	check_decode_fails(buf, n + 15, "many", HERD_EFORMAT,
			   "many: nodes: expected an array of at most 65536 items, got 65537 items");
	free(buf);
	check_decode_fails("x", (size_t)HERD_INVENTORY_MAX_BYTES + 1, "huge", HERD_EFORMAT,
			   "huge: 67108865 bytes is more than");
	check_decode_fails("", 0, "empty", HERD_EFORMAT, "empty: empty");

	/* An integer beyond int64 in a byte count. */
	mp = mp_of("{\"v\": 1, \"nodes\": [{\"hostname\": \"h\", \"cpu_model\": \"\", \"packages\": "
		   "1, \"cores\": 1, \"threads\": 1, \"memory_bytes\": 1}]}", &len);
	buf = malloc(len + 8);
	memcpy(buf, mp, len);
	CHECK_INT((unsigned char)buf[len - 1], 0x01);
	memcpy(buf + len - 1, "\xcf\xff\xff\xff\xff\xff\xff\xff\xff", 9);
	check_decode_fails(buf, len + 8, "u64", HERD_EFORMAT,
			   "u64: nodes[0].memory_bytes: expected an integer in "
			   "0..9223372036854775807, got 18446744073709551615");
	free(buf);
	herd_free(mp);
}

static void test_too_many_items(void)
{
	size_t len, cap = 64 + 8 * (HERD_INVENTORY_MAX_ITEMS + 1);
	char *text = fixture_text("cpu-only.json", &len);
	char *many = malloc(cap), *p = many;

	p += sprintf(p, "\"addrs\": [");
	for (int i = 0; i <= HERD_INVENTORY_MAX_ITEMS; i++)
		p += sprintf(p, "%s\"a\"", i ? "," : "");
	strcpy(p, "]");
	check_edit_fails(text, "\"addrs\": []", many, HERD_EFORMAT,
			 "nodes[0].netdevs[2].addrs: expected an array of at most 4096 items, got 4097");
	free(many);
	free(text);
}

static void test_load_errors_name_the_file(void)
{
	char path[256];
	herd_cluster *c = NULL;
	int fd;

	CHECK_ERR(herd_cluster_load(&c, "/nonexistent/inv.json"), HERD_ENOTFOUND,
		  "/nonexistent/inv.json");
	CHECK_ERR(herd_cluster_load(&c, tmpdir), HERD_EIO, tmpdir);

	/* A sparse file beyond the limit is refused by size, not by content. */
	snprintf(path, sizeof(path), "%s/big.msgpack", tmpdir);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	CHECK(fd >= 0 && ftruncate(fd, (off_t)HERD_INVENTORY_MAX_BYTES + 1) == 0);
	close(fd);
	CHECK_ERR(herd_cluster_load(&c, path), HERD_EFORMAT, "big.msgpack is larger than the limit");
	unlink(path);

	/* A 10-byte file whose one string claims 100 MB. */
	snprintf(path, sizeof(path), "%s/claim.msgpack", tmpdir);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	CHECK(write(fd, "\xdb\x05\xf5\xe1\x00" "abcde", 10) == 10);
	close(fd);
	CHECK_ERR(herd_cluster_load(&c, path), HERD_EFORMAT, "claim.msgpack: msgpack: truncated");
	unlink(path);
	CHECK(c == NULL);
	CHECK_ERR(herd_cluster_load(NULL, path), HERD_EINVAL, "herd_cluster_load");
}

static void test_encode_refuses_invalid_inventories(void)
{
	herd_cluster *c = NULL;
	herd_gpu *gpu = NULL;
	void *data = NULL;
	size_t len = 0;

	CHECK_OK(herd__cluster_new(&c, 1));
	CHECK_INT(herd_cluster_node_count(c), 1);
	/* No hostname. */
	CHECK_ERR(herd_cluster_encode(c, HERD_CLUSTER_FORMAT_MSGPACK, &data, &len), HERD_EINVAL,
		  "cannot encode: inventory: nodes[0].hostname: expected a non-empty string");
	CHECK(data == NULL && len == 0);
	CHECK_OK(herd__strdup(&HERD_MUT(char *, c->nodes[0].hostname), "n1"));
	CHECK_OK(herd_cluster_encode(c, HERD_CLUSTER_FORMAT_JSON, &data, &len));
	herd_free(data);

	/* A probe that recorded an upper-case bus id is caught at encode time. */
	CHECK_OK(herd__calloc(&gpu, 1, sizeof(*gpu), "gpu"));
	herd__strlcpy(gpu->pci.bus_id, "0000:1B:00.0", sizeof(gpu->pci.bus_id));
	c->nodes[0].gpus = gpu;
	c->nodes[0].ngpus = 1;
	CHECK_ERR(herd_cluster_encode(c, HERD_CLUSTER_FORMAT_JSON, &data, &len), HERD_EINVAL,
		  "nodes[0].gpus[0].pci.bus_id: expected a PCI bus id");
	CHECK_ERR(herd_cluster_save(c, "/tmp/never-written.json", HERD_CLUSTER_FORMAT_AUTO),
		  HERD_EINVAL, "saving /tmp/never-written.json: cannot encode");
	CHECK(access("/tmp/never-written.json", F_OK) != 0);

	CHECK_ERR(herd_cluster_encode(NULL, HERD_CLUSTER_FORMAT_JSON, &data, &len), HERD_EINVAL,
		  "NULL");
	CHECK_ERR(herd_cluster_encode(c, (herd_cluster_format)7, &data, &len), HERD_EINVAL,
		  "format 7");
	CHECK_ERR(herd_cluster_decode(NULL, "{}", 2, "x"), HERD_EINVAL, "out");
	herd_cluster_free(c);
}

int main(void)
{
	if (mkdtemp(tmpdir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	TEST_RUN(test_fixtures_round_trip_byte_identical);
	TEST_RUN(test_fixture_values_decoded);
	TEST_RUN(test_save_and_load_both_formats);
	TEST_RUN(test_truncated_msgpack_at_every_length_is_eformat);
	TEST_RUN(test_truncated_json_is_eformat);
	TEST_RUN(test_flipped_bytes_never_crash);
	TEST_RUN(test_wrong_field_names_the_path);
	TEST_RUN(test_unknown_keys_ignored_and_notes_optional);
	TEST_RUN(test_version_missing_is_eformat_newer_is_eversion);
	TEST_RUN(test_hostile_msgpack);
	TEST_RUN(test_too_many_items);
	TEST_RUN(test_load_errors_name_the_file);
	TEST_RUN(test_encode_refuses_invalid_inventories);
	rmdir(tmpdir);
	return TEST_DONE();
}
