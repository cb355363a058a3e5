/*
 * tests/unit/test_alloc_util.h - what the allocation tests share: the
 * fixtures, inventories of several nodes built from them, GPU states,
 * the chosen GPUs of a plan as text, and temporary lease directories.
 */
#ifndef HERD_TEST_ALLOC_UTIL_H
#define HERD_TEST_ALLOC_UTIL_H

#include <errno.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

static inline char *read_text(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long len;

	if (f == NULL)
		return NULL;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, (size_t)len + 1);
	if (buf != NULL && fread(buf, 1, (size_t)len, f) != (size_t)len) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

static inline void fixture_path(const char *name, char *path, size_t cap)
{
	const char *root = getenv("HERD_SOURCE_DIR");

	snprintf(path, cap, "%s/tests/fixtures/inventory/%s", root ? root : ".", name);
}

static inline herd_cluster *load_fixture(const char *name)
{
	char path[4096];
	herd_cluster *c = NULL;

	fixture_path(name, path, sizeof(path));
	if (herd_cluster_load(&c, path) != HERD_OK) {
		fprintf(stderr, "cannot load fixture: %s\n", herd_last_error());
		exit(1);
	}
	return c;
}

/* Replaces every `from` in s by `to`; a new string. */
static inline char *replace_all(const char *s, const char *from, const char *to)
{
	size_t lf = strlen(from), lt = strlen(to), n = 0;
	const char *p;
	char *out, *o;

	for (p = s; (p = strstr(p, from)) != NULL; p += lf)
		n++;
	out = malloc(strlen(s) + n * (lt + 1) + 1);
	for (o = out, p = s;;) {
		const char *q = strstr(p, from);

		if (q == NULL) {
			strcpy(o, p);
			break;
		}
		memcpy(o, p, (size_t)(q - p));
		o += q - p;
		memcpy(o, to, lt);
		o += lt;
		p = q + lf;
	}
	return out;
}

/*
 * An inventory of n copies of a fixture's node, named "<prefix>-a",
 * "<prefix>-b", ..., each with UUIDs of its own ("GPU-a...", "GPU-b...").
 */
static inline herd_cluster *multi_node(const char *fixture, const char *hostname,
				       const char *prefix, int n)
{
	char path[4096], from[128], to[128];
	char *text, *body, *json;
	const char *start, *end;
	herd_cluster *c = NULL;
	size_t cap, len = 0;

	fixture_path(fixture, path, sizeof(path));
	text = read_text(path);
	if (text == NULL)
		exit(1);
	start = strchr(strstr(text, "\"nodes\""), '[') + 1;
	end = strrchr(text, ']');
	body = strndup(start, (size_t)(end - start));
	cap = strlen(body) * (size_t)n * 2 + 64;
	json = malloc(cap);
	len += (size_t)snprintf(json, cap, "{\"v\": 1, \"nodes\": [");
	for (int i = 0; i < n; i++) {
		char *a, *b;

		snprintf(from, sizeof(from), "\"hostname\": \"%s\"", hostname);
		snprintf(to, sizeof(to), "\"hostname\": \"%s-%c\"", prefix, 'a' + i);
		a = replace_all(body, from, to);
		snprintf(to, sizeof(to), "\"uuid\": \"GPU-%c", 'a' + i);
		b = replace_all(a, "\"uuid\": \"GPU-", to);
		len += (size_t)snprintf(json + len, cap - len, "%s%s", i ? "," : "", b);
		free(a);
		free(b);
	}
	snprintf(json + len, cap - len, "]}");
	if (herd_cluster_decode(&c, json, strlen(json), "multi-node test inventory") != HERD_OK) {
		fprintf(stderr, "cannot build inventory: %s\n", herd_last_error());
		exit(1);
	}
	free(json);
	free(body);
	free(text);
	return c;
}

/* States for every GPU of a node: all free, nothing known of use. */
static inline herd_alloc_gpu_status *free_states(const herd_node *node)
{
	herd_alloc_gpu_status *s = calloc(node->ngpus + 1, sizeof(*s));

	for (size_t i = 0; i < node->ngpus; i++) {
		snprintf(s[i].uuid, sizeof(s[i].uuid), "%s", node->gpus[i].uuid);
		s[i].processes = -1;
		s[i].free_memory_bytes = -1;
	}
	return s;
}

/* Marks GPU i held by job (pid 4242, user ann). */
static inline void hold_state(herd_alloc_gpu_status *s, size_t i, const char *job)
{
	s[i].state = HERD_LEASE_EXCLUSIVE;
	snprintf(s[i].job, sizeof(s[i].job), "%s", job);
	s[i].pid = 4242;
	snprintf(s[i].user, sizeof(s[i].user), "ann");
}

/* The plan's GPUs as "host:index,..." (host left out for one node). */
static inline const char *plan_gpus(const herd_plan *plan)
{
	static char buf[2048];
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; plan != NULL && i < herd_plan_gpu_count(plan); i++) {
		const herd_plan_gpu_info *g = test_plan_gpu(plan, i);

		if (herd_plan_node_count(plan) > 1)
			len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s:%zu",
						i ? "," : "", g->hostname, g->index);
		else
			len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%zu", i ? "," : "",
						g->index);
	}
	return buf;
}


#endif /* HERD_TEST_ALLOC_UTIL_H */
