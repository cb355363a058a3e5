/*
 * sdk/topo/kernel_log.c - the kernel log and the Xid records of the NVIDIA
 * driver in it, for herd health (health.c) and telemetry's GPU figures
 * (sdk/telemetry/gpu.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "kernel_log.h"

#define XID_TAG "NVRM: Xid (PCI:"

bool herd__klog_open(herd__klog *k, char *why, size_t cap)
{
	const char *path = herd__param_str(HERD__P_KERNEL_LOG);

	k->kmsg = path == NULL;
	k->have = 0;
	if (k->kmsg)
		path = "/dev/kmsg";
	herd__strlcpy(k->path, path, sizeof(k->path));
	k->fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (k->fd < 0) {
		snprintf(why, cap, "%s: %s", path, strerror(errno));
		return false;
	}
	return true;
}

/* A file that shrank (rewritten, truncated) is read again from its start. */
static void klog_rewind_if_shrunk(herd__klog *k)
{
	struct stat sb;
	off_t pos = lseek(k->fd, 0, SEEK_CUR);

	if (pos > 0 && fstat(k->fd, &sb) == 0 && S_ISREG(sb.st_mode) && pos > sb.st_size) {
		(void)lseek(k->fd, 0, SEEK_SET);
		k->have = 0;
	}
}

void herd__klog_read(herd__klog *k, void (*fn)(const char *line, void *arg), void *arg,
		     bool final, long max_reads)
{
	if (k->fd < 0)
		return;
	if (!k->kmsg)
		klog_rewind_if_shrunk(k);
	for (long reads = 0; reads < max_reads; reads++) {
		ssize_t r = read(k->fd, k->buf + k->have, sizeof(k->buf) - 1 - k->have);
		char *line;

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EPIPE)
			continue;   /* /dev/kmsg: records overwritten since; go on */
		if (r <= 0)
			break;      /* the end for now (EAGAIN), or a failure */
		k->have += (size_t)r;
		k->buf[k->have] = '\0';
		if (k->kmsg) {
			/* one record per read: "prio,seq,usec,flags;text\n" */
			char *text = strchr(k->buf, ';');

			fn(text != NULL ? text + 1 : k->buf, arg);
			k->have = 0;
			continue;
		}
		line = k->buf;
		for (char *nl; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
			*nl = '\0';
			fn(line, arg);
		}
		k->have = strlen(line);
		memmove(k->buf, line, k->have);
		if (k->have == sizeof(k->buf) - 1)
			k->have = 0;   /* a line longer than the buffer: dropped */
	}
	if (final && !k->kmsg && k->have > 0) {
		k->buf[k->have] = '\0';
		fn(k->buf, arg);
		k->have = 0;
	}
}

void herd__klog_close(herd__klog *k)
{
	if (k->fd >= 0)
		close(k->fd);
	k->fd = -1;
	k->have = 0;
}

bool herd__xid_line(const char *line)
{
	return strstr(line, XID_TAG) != NULL;
}

int herd__xid_of(const char *line, const char *bus_id)
{
	const char *p = strstr(line, XID_TAG);
	size_t n = 0;
	char *end;
	long code;

	if (p == NULL || bus_id[0] == '\0')
		return -1;
	p += strlen(XID_TAG);
	while (p[n] != '\0' && p[n] != ')')
		n++;
	/* the log names domain:bus:device; bus_id adds ".function" */
	if (n == 0 || strncasecmp(p, bus_id, n) != 0 || (bus_id[n] != '.' && bus_id[n] != '\0') ||
	    strncmp(p + n, "): ", 3) != 0)
		return -1;
	code = strtol(p + n + 3, &end, 10);
	return end != p + n + 3 && code > 0 && code < 100000 ? (int)code : -1;
}
