/*
 * tests/unit/watch_check.h - what the telemetry watch tests share: taking
 * the samples of a watch as they come, counted per node with their order
 * and hosts checked, until the nodes are in the states a test waits for
 * (bounded), and scripts written for the "remote" side.
 */
#ifndef HERD_WATCH_CHECK_H
#define HERD_WATCH_CHECK_H

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "herd.h"
#include "test.h"

#define WATCH_MAX_NODES 16

/* The samples taken so far, per node. */
typedef struct watch_seen {
	uint64_t count[WATCH_MAX_NODES];
	uint64_t first[WATCH_MAX_NODES], last[WATCH_MAX_NODES];  /* seq */
	int bad_order;            /* samples whose seq did not grow */
	int bad_host;             /* samples whose host is not their node's */
	int bad_node;             /* samples of a node index out of range */
} watch_seen;

static inline int64_t watch_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Takes every waiting sample into seen. */
static inline void watch_drain(herd_telemetry_watch *w, watch_seen *seen,
			       herd_telemetry_sample *s)
{
	size_t node;

	while (herd_telemetry_watch_next(w, &node, s) == HERD_OK) {
		herd_telemetry_node info;

		if (node >= WATCH_MAX_NODES || herd_telemetry_watch_node(w, node, &info) != HERD_OK) {
			seen->bad_node++;
			continue;
		}
		if (strcmp(s->host, info.host) != 0)
			seen->bad_host++;
		if (seen->count[node] > 0 && s->seq <= seen->last[node])
			seen->bad_order++;
		if (seen->count[node]++ == 0)
			seen->first[node] = s->seq;
		seen->last[node] = s->seq;
	}
}

/* Node i's state. */
static inline herd_telemetry_node_state watch_state(herd_telemetry_watch *w, size_t i)
{
	herd_telemetry_node info;

	if (herd_telemetry_watch_node(w, i, &info) != HERD_OK)
		return (herd_telemetry_node_state)-1;
	return info.state;
}

/*
 * Takes samples (waiting on the watch's descriptor) until each node i has
 * state want[i] and, when streaming, at least min_samples samples; false
 * after timeout_ms.
 */
static inline bool watch_until(herd_telemetry_watch *w, watch_seen *seen,
			       const herd_telemetry_node_state *want, uint64_t min_samples,
			       int timeout_ms)
{
	herd_telemetry_sample *s = malloc(sizeof(*s));
	int64_t end = watch_now_ms() + timeout_ms;
	bool done = false;

	while (s != NULL && !done && watch_now_ms() < end) {
		int left = (int)(end - watch_now_ms());

		(void)herd_telemetry_watch_wait(w, left > 0 ? left : 0);
		watch_drain(w, seen, s);
		done = true;
		for (size_t i = 0; i < herd_telemetry_watch_nodes(w); i++)
			if (watch_state(w, i) != want[i] ||
			    (want[i] == HERD_TELEMETRY_NODE_STREAMING && seen->count[i] < min_samples))
				done = false;
	}
	free(s);
	return done;
}

/* Prints every node's state, for a failed wait. */
static inline void watch_print(herd_telemetry_watch *w, const watch_seen *seen)
{
	for (size_t i = 0; i < herd_telemetry_watch_nodes(w); i++) {
		herd_telemetry_node info;

		if (herd_telemetry_watch_node(w, i, &info) == HERD_OK)
			fprintf(stderr, "  node %zu %s: %s (%s), %llu samples taken, %llu lost\n", i,
				info.host, herd_telemetry_node_state_name(info.state), info.why,
				(unsigned long long)(i < WATCH_MAX_NODES ? seen->count[i] : 0),
				(unsigned long long)info.lost);
	}
}

/* Writes an executable script dir/name. */
static inline char *watch_script(const char *dir, const char *name, const char *text)
{
	char *path = NULL;
	FILE *f;

	if (asprintf(&path, "%s/%s", dir, name) < 0)
		exit(1);
	f = fopen(path, "w");
	if (f == NULL || fputs(text, f) < 0 || fclose(f) != 0 || chmod(path, 0755) != 0) {
		perror(path);
		exit(1);
	}
	return path;
}

/* The number (a pid, an exit status) written in dir/name; -1 when there is none. */
static inline long watch_number(const char *dir, const char *name)
{
	char path[512];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (f == NULL)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* Whether process pid (> 0) is gone (or a zombie its parent has yet to
 * reap), within 5 s. */
static inline bool watch_gone(long pid)
{
	if (pid <= 0)
		return false;
	for (int k = 0; k < 100; k++) {
		char path[64], state = '?';
		FILE *f;

		if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
			return true;
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		f = fopen(path, "r");
		if (f != NULL) {
			if (fscanf(f, "%*d (%*[^)]) %c", &state) != 1)
				state = '?';
			fclose(f);
		}
		if (state == 'Z')
			return true;
		struct timespec ts = { 0, 50 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	return false;
}

/*
 * After a watch's free: the node-side herd of each of hosts[0..n), whose
 * script wrote pid.HOST and, once it ended, exit.HOST in dir, is gone
 * and ended by itself with exit 0 (waited for up to 5 s).
 */
static inline void watch_check_helpers_ended(const char *dir, const char *const *hosts,
					     size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char name[64];
		long pid, status = -1;

		snprintf(name, sizeof(name), "pid.%s", hosts[i]);
		pid = watch_number(dir, name);
		CHECK(pid > 0);
		if (pid > 0 && !watch_gone(pid))
			TEST_FAIL_("%s: herd probe --watch (pid %ld) is still there", hosts[i], pid);
		snprintf(name, sizeof(name), "exit.%s", hosts[i]);
		for (int k = 0; k < 100 && status < 0; k++) {
			status = watch_number(dir, name);
			if (status < 0) {
				struct timespec ts = { 0, 50 * 1000 * 1000 };
				nanosleep(&ts, NULL);
			}
		}
		CHECK_INT(status, 0);
	}
}

#endif /* HERD_WATCH_CHECK_H */
