/*
 * sdk/topo/meminfo.c - total and available memory from /proc/meminfo, the
 * figures free(1) shows (hwloc's NUMA sums can leave out memory the kernel
 * does not place in a node).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "probe.h"

/* /proc/meminfo is about 1.5 KiB; MemTotal and MemAvailable come first. */
#define HERD_MEMINFO_MAX 16384

/* "Name:   123 kB" -> bytes; false for another name or a malformed line. */
static bool meminfo_field(const char *line, const char *name, uint64_t *bytes)
{
	size_t len = strlen(name);
	unsigned long long kib;

	if (strncmp(line, name, len) != 0 || line[len] != ':' ||
	    sscanf(line + len + 1, "%llu", &kib) != 1 || kib > UINT64_MAX / 1024)
		return false;
	*bytes = (uint64_t)kib * 1024;
	return true;
}

bool herd__topo_meminfo_parse(const char *text, uint64_t *total, uint64_t *available)
{
	bool have_total = false;

	*total = 0;
	*available = 0;
	for (const char *line = text; line != NULL && *line != '\0';) {
		const char *next = strchr(line, '\n');

		if (meminfo_field(line, "MemTotal", total))
			have_total = true;
		else
			meminfo_field(line, "MemAvailable", available);
		line = next != NULL ? next + 1 : NULL;
	}
	return have_total;
}

bool herd__topo_probe_memory(herd_node *node)
{
	char text[HERD_MEMINFO_MAX];
	uint64_t total, available;
	size_t got = 0;
	ssize_t n;
	int fd;

	fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		herd__log_debug("cannot open /proc/meminfo: %s", strerror(errno));
		return false;
	}
	while (got < sizeof(text) - 1) {
		n = read(fd, text + got, sizeof(text) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	text[got] = '\0';
	if (!herd__topo_meminfo_parse(text, &total, &available)) {
		herd__log_debug("/proc/meminfo has no MemTotal line");
		return false;
	}
	node->memory_bytes = total;
	node->memory_available_bytes = available;
	return true;
}
