/*
 * tests/fuzz/fuzz_telemetry.c - the two readers of telemetry on arbitrary
 * bytes.  The first byte picks one: 0 to 5 put the rest in place of one of
 * the /proc files sdk/telemetry/node.c reads (stat, loadavg, meminfo,
 * net/dev, diskstats, sys/kernel/hostname) under a root of its own, read
 * twice so that the rates are computed too; anything else gives the rest
 * to herd_telemetry_unpack.  Neither may crash, leak or hang; the node
 * fails only with HERD_EFORMAT naming the file, the decoder only with
 * HERD_EFORMAT or HERD_EVERSION naming the sample.  A sample the decoder
 * accepts packs again, and that packing decodes and packs to the same
 * bytes.
 *
 *   fuzz_telemetry -max_total_time=60 tests/fuzz/corpus/fuzz_telemetry
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "herd.h"
#include "telemetry/telemetry_internal.h"

static const char *const files[] = {
	"proc/stat", "proc/loadavg", "proc/meminfo", "proc/net/dev", "proc/diskstats",
	"proc/sys/kernel/hostname",
};

static void die(const char *what)
{
	fprintf(stderr, "fuzz_telemetry: %s: %s\n", what, herd_last_error());
	abort();
}

/* mkdtemp fills in the six X of this template with the root of the run. */
static char dir[] = "/tmp/herd-fuzz-telemetry-XXXXXX";
static const char *const dirs[] = { "proc", "proc/net", "proc/sys", "proc/sys/kernel",
				    "sys", "sys/block", "sys/block/sda" };

/* The root's directories, deepest first (each input removes its file). */
static void remove_root(void)
{
	char path[256];

	for (size_t i = sizeof(dirs) / sizeof(dirs[0]); i-- > 0;) {
		snprintf(path, sizeof(path), "%s/%s", dir, dirs[i]);
		rmdir(path);
	}
	rmdir(dir);
}

/* A root with the directories of the files and one whole disk, sda. */
static const char *root(void)
{
	static bool made;
	char path[256];

	if (made)
		return dir;
	if (mkdtemp(dir) == NULL)
		die("mkdtemp");
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, dirs[i]);
		if (mkdir(path, 0755) != 0)
			die("mkdir");
	}
	atexit(remove_root);
	made = true;
	return dir;
}

static void node_file(const char *rel, const uint8_t *data, size_t size)
{
	herd_telemetry_sample *s = calloc(1, sizeof(*s));
	herd__tnode *n = NULL;
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root(), rel);
	f = fopen(path, "wb");
	if (s == NULL || f == NULL || fwrite(data, 1, size, f) != size || fclose(f) != 0)
		die("writing the file");
	if (herd__tnode_open(&n, root()) != HERD_OK)
		die("opening the node");
	for (int i = 0; i < 2; i++) {
		herd_status st;

		s->period_ms = i * 1000;
		st = herd__tnode_read(n, s, 0);
		if (st != HERD_OK && st != HERD_EFORMAT)
			die("unexpected status");
		if (st == HERD_EFORMAT && strstr(herd_last_error(), rel) == NULL)
			die("the message does not name the file");
		if (s->ncpus < 0 || s->ncpus > HERD_TELEMETRY_MAX_CPUS || s->nnets < 0 ||
		    s->nnets > HERD_TELEMETRY_MAX_NETS || s->ndisks < 0 ||
		    s->ndisks > HERD_TELEMETRY_MAX_DISKS)
			die("a count beyond its array");
		if (st == HERD_OK && (s->cpu_busy > 100 || (s->cpu_busy < 0 && s->cpu_busy != -1)))
			die("CPU busy out of range");
	}
	herd__tnode_close(n);
	unlink(path);
	free(s);
}

static void sample_bytes(const uint8_t *data, size_t size)
{
	herd_telemetry_sample *s = calloc(1, sizeof(*s)), *again = calloc(1, sizeof(*s));
	void *packed = NULL, *repacked = NULL;
	size_t len = 0, relen = 0;
	herd_status st;

	if (s == NULL || again == NULL)
		die("out of memory");
	st = herd_telemetry_unpack(data, size, s);
	if (st != HERD_OK) {
		if (st != HERD_EFORMAT && st != HERD_EVERSION)
			die("unexpected status");
		if (strncmp(herd_last_error(), "telemetry sample: ", 18) != 0)
			die("the message does not name the sample");
	} else {
		if (herd_telemetry_pack(s, &packed, &len) != HERD_OK)
			die("an accepted sample does not pack");
		if (herd_telemetry_unpack(packed, len, again) != HERD_OK)
			die("a packed sample does not unpack");
		if (herd_telemetry_pack(again, &repacked, &relen) != HERD_OK)
			die("an unpacked sample does not pack");
		if (len != relen || memcmp(packed, repacked, len) != 0)
			die("packings differ");
	}
	herd_free(packed);
	herd_free(repacked);
	free(s);
	free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] < sizeof(files) / sizeof(files[0]))
		node_file(files[data[0]], data + 1, size - 1);
	else
		sample_bytes(data + 1, size - 1);
	return 0;
}
